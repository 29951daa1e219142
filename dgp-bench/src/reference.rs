//! The seed papers' published numbers (Lindinger et al. 2020, Table 1; Salimbeni & Deisenroth 2017; Jankowiak et al. 2020, Table 9; Vafa 2016, Fig. 5.9) as data, and their
//! comparison with a run's records (`dgp-bench vs-paper`).
//!
//! The table is `data/reference.csv`, embedded with `include_str!`: one row per published
//! cell, naming its source (paper), table, protocol and units, the metric, the data set,
//! the paper's column and the dgp-bench model that corresponds to it (backend, layers and
//! an optional setting such as `rule=qr1`). Cells the papers do not print are absent;
//! nothing is filled in.
//!
//! Comparison rules:
//! * Protocols are matched ([`matches`](fn@matches)): a run under one paper's protocol
//!   (`--protocol lindinger`, `--protocol dspp`) is set next to that paper's cells only;
//!   a run of the default protocol (published splits) next to every cell of its model,
//!   and the report states the protocol it ran.
//! * Units are never mixed (the `units` module of dgp-bench). Records hold original units; rows in
//!   original units are compared directly, with `tll = −nll` per split (exact: the record's
//!   `nll` is the mean negative log density). Rows in standardised units (DSPP) are
//!   compared in standardised units, each record converted exactly with its own split's
//!   training-target std `s_y` ([`crate::units::standardised`]: `NLL_std = NLL − log s_y`,
//!   `RMSE_std = RMSE/s_y`, `CRPS_std = CRPS/s_y`). When any record of the group lacks
//!   `s_y` (records written before it was recorded) the row is shown as "units differ"
//!   with no number: a standardised cell is never compared with original units.
//! * Ours is the mean ± s.e. over the records' splits (sd with ddof = 1, [`MeanSe`]); the
//!   papers' s.e. are as printed (Lindinger et al.'s code uses ddof = 0). The difference
//!   is expressed in units of the combined s.e. `√(se_ours² + se_paper²)` (a missing s.e.
//!   counts as 0; neither → no ratio), signed so that positive = ours better.
//! * A row is marked worse when ours is worse than the paper by more than one combined
//!   s.e.

use std::collections::BTreeSet;

use crate::error::{BenchError, Result};
use crate::experiment::{SplitRecord, model_label};
use crate::summary::MeanSe;

/// The embedded table (see the module docs).
pub const REFERENCE_CSV: &str = include_str!("../data/reference.csv");

/// Units of a published number (the `units` module of dgp-bench).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Units {
    /// The data set's own units (DSVI, Structured, SGHMC, DGPS).
    Original,
    /// Targets standardised with the training split (DSPP).
    Standardised,
}

/// A metric of the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Mean test log-likelihood per point (higher is better).
    Tll,
    /// Mean negative test log-likelihood (lower is better).
    Nll,
    /// Root mean squared error (lower is better).
    Rmse,
    /// Continuous ranked probability score (lower is better).
    Crps,
}

impl Metric {
    fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "tll" => Metric::Tll,
            "nll" => Metric::Nll,
            "rmse" => Metric::Rmse,
            "crps" => Metric::Crps,
            _ => return None,
        })
    }

    /// Name as in the table.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Tll => "tll",
            Metric::Nll => "nll",
            Metric::Rmse => "rmse",
            Metric::Crps => "crps",
        }
    }

    /// +1 when higher is better, −1 when lower is.
    pub fn better_sign(self) -> f64 {
        if self == Metric::Tll { 1.0 } else { -1.0 }
    }

    /// The metric of one record in `units`: original units directly, standardised units
    /// through the record's training-target std ([`crate::units::standardised`]; `None`
    /// when the record has none, or the metric cannot be converted).
    pub fn in_units(self, r: &SplitRecord, units: Units) -> Option<f64> {
        if units == Units::Original {
            return Some(self.of(r));
        }
        let m = crate::units::standardised(r)?;
        match self {
            Metric::Tll => Some(-m.nll),
            Metric::Nll => Some(m.nll),
            Metric::Rmse => m.rmse,
            Metric::Crps => m.crps,
        }
    }

    /// The metric of one record in original units (`tll = −nll`).
    pub fn of(self, r: &SplitRecord) -> f64 {
        match self {
            Metric::Tll => -r.nll,
            Metric::Nll => r.nll,
            Metric::Rmse => r.rmse,
            Metric::Crps => r.crps,
        }
    }
}

/// One published cell.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceRow {
    /// Paper.
    pub source: String,
    /// Table (or figure) in the paper.
    pub table: String,
    /// The paper's split protocol.
    pub protocol: String,
    /// Units.
    pub units: Units,
    /// Metric.
    pub metric: Metric,
    /// Data set (dgp-bench name).
    pub dataset: String,
    /// The paper's column name.
    pub paper_model: String,
    /// The dgp-bench backend of that column (empty: none corresponds).
    pub backend: String,
    /// Layers (0 when no backend corresponds).
    pub layers: usize,
    /// A backend setting the records must have (`rule=qr1`), empty for none.
    pub variant: String,
    /// Published mean.
    pub mean: f64,
    /// Published standard error (`None` when not printed).
    pub se: Option<f64>,
}

fn parse_row(line: &str, lineno: usize) -> Result<ReferenceRow> {
    let bad = |what: &str| {
        BenchError::Usage(format!(
            "internal reference table, line {lineno}: {what}: {line}"
        ))
    };
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() != 12 {
        return Err(bad("expected 12 fields"));
    }
    let units = match f[3] {
        "original" => Units::Original,
        "standardised" => Units::Standardised,
        _ => return Err(bad("units")),
    };
    let num = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite());
    Ok(ReferenceRow {
        source: f[0].into(),
        table: f[1].into(),
        protocol: f[2].into(),
        units,
        metric: Metric::parse(f[4]).ok_or_else(|| bad("metric"))?,
        dataset: f[5].into(),
        paper_model: f[6].into(),
        backend: f[7].into(),
        layers: if f[8].is_empty() {
            0
        } else {
            f[8].parse().map_err(|_| bad("layers"))?
        },
        variant: f[9].into(),
        mean: num(f[10]).ok_or_else(|| bad("mean"))?,
        se: if f[11].is_empty() {
            None
        } else {
            Some(num(f[11]).ok_or_else(|| bad("se"))?)
        },
    })
}

/// Every row of the embedded table.
///
/// # Errors
/// A malformed line (a bug in the embedded data; a test parses it).
pub fn reference_rows() -> Result<Vec<ReferenceRow>> {
    let mut rows = Vec::new();
    let mut header = false;
    for (i, line) in REFERENCE_CSV.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if !header {
            header = true;
            continue;
        }
        rows.push(parse_row(t, i + 1)?);
    }
    Ok(rows)
}

/// The value of setting `key` in a record: as recorded, else the default of the record's
/// backend ([`dgp_traits::backend::Backend::default_setting`]), else empty.
fn setting(r: &SplitRecord, key: &str) -> String {
    let default = || {
        crate::backends::find_backend(&r.backend)
            .ok()
            .and_then(|b| b.backend.default_setting(key))
    };
    match r.settings.get(key).cloned().or_else(default) {
        Some(serde_json::Value::String(s)) => s,
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

/// The `--protocol` of dgp-bench that reproduces `row`'s paper protocol (`lindinger`,
/// `dspp`), `None` for a protocol dgp-bench has no switch for (a single split, the step
/// function).
pub fn bench_protocol(row: &ReferenceRow) -> Option<&'static str> {
    if row.protocol.contains("(lindinger)") {
        Some("lindinger")
    } else if row.protocol.contains("(dspp") {
        Some("dspp")
    } else {
        None
    }
}

/// Whether a record of protocol `record_protocol` (as recorded: `lindinger/random`,
/// `dspp/15:3:2`, empty or `published/...` for the default) may be set next to `row`: a
/// record made under one paper's protocol is compared with that paper's cells only;
/// records of the default protocol are compared with every cell, and the report states
/// their protocol.
fn protocol_comparable(row: &ReferenceRow, record_protocol: &str) -> bool {
    match record_protocol.split('/').next().unwrap_or("") {
        "" | "published" => true,
        family => bench_protocol(row) == Some(family),
    }
}

/// Whether `row` describes the model of record `r` (data set, backend, layers, variant)
/// under a comparable protocol (a record of `--protocol dspp` is never set next to
/// Lindinger et al.'s 90:10 table, nor one of `--protocol lindinger` next to the DSPP's).
pub fn matches(row: &ReferenceRow, r: &SplitRecord) -> bool {
    protocol_comparable(row, &r.protocol)
        && row.dataset == r.dataset
        && row.backend == r.backend
        && row.layers == r.layers
        && (row.variant.is_empty()
            || row
                .variant
                .split_once('=')
                .is_some_and(|(k, v)| setting(r, k) == v))
}

/// One line of the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct VsPaperRow {
    /// The published cell.
    pub reference: ReferenceRow,
    /// Ours over the records' splits, in the row's metric and units; `None` when a record
    /// cannot be converted to the row's units.
    pub ours: Option<MeanSe>,
    /// (ours − paper) · better_sign / combined s.e.; `None` without any s.e. or units.
    pub z: Option<f64>,
    /// Ours worse than the paper by more than one combined s.e.
    pub worse: bool,
}

/// What a group of records (one data set, model and run configuration) was run with.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordGroup {
    /// Data set.
    pub dataset: String,
    /// Backend.
    pub backend: String,
    /// Layers.
    pub layers: usize,
    /// What sets this group's run configuration apart from other groups of the same data
    /// set, backend and layers ([`crate::summary::variant_labels`]; empty when none).
    pub variant: String,
    /// Protocols of the records (`published` for the default).
    pub protocols: BTreeSet<String>,
    /// Split indices.
    pub splits: BTreeSet<usize>,
    /// Steps actually run.
    pub steps: BTreeSet<usize>,
    /// Seeds.
    pub seeds: BTreeSet<u64>,
    /// The comparisons with every published cell of this model (empty: no reference).
    pub rows: Vec<VsPaperRow>,
}

/// Compares `records` with `table`: one [`RecordGroup`] per (data set, backend, layers,
/// run configuration) in order of first appearance (see the module docs for the rules).
pub fn vs_paper(records: &[SplitRecord], table: &[ReferenceRow]) -> Vec<RecordGroup> {
    let groups = crate::summary::group_records(records);
    let labels = crate::summary::variant_labels(&groups.iter().map(|(k, _)| k).collect::<Vec<_>>());
    groups
        .into_iter()
        .zip(labels)
        .map(|((key, group), variant)| {
            let (dataset, backend, layers) = (key.dataset, key.backend, key.layers);
            let rows = compare_cells(&group, table);
            RecordGroup {
                protocols: group
                    .iter()
                    .map(|r| {
                        if r.protocol.is_empty() {
                            "published".to_string()
                        } else {
                            r.protocol.clone()
                        }
                    })
                    .collect(),
                splits: group.iter().map(|r| r.split).collect(),
                steps: group.iter().map(|r| r.steps).collect(),
                seeds: group.iter().map(|r| r.seed).collect(),
                dataset,
                backend,
                layers,
                variant,
                rows,
            }
        })
        .collect()
}

/// The comparison of `records` (one model and run configuration) with every cell of
/// `table` that describes their model ([`matches`](fn@matches)); each cell is compared with
/// the records it matches. The per-group step of [`vs_paper`], also used by the headline
/// table of `RESULTS.md` ([`crate::results`]).
pub fn compare_cells(records: &[&SplitRecord], table: &[ReferenceRow]) -> Vec<VsPaperRow> {
    table
        .iter()
        .filter_map(|row| {
            let own: Vec<&SplitRecord> = records
                .iter()
                .copied()
                .filter(|r| matches(row, r))
                .collect();
            (!own.is_empty()).then(|| compare_row(row, &own))
        })
        .collect()
}

fn compare_row(row: &ReferenceRow, own: &[&SplitRecord]) -> VsPaperRow {
    let values: Option<Vec<f64>> = own
        .iter()
        .map(|r| row.metric.in_units(r, row.units))
        .collect();
    let Some(values) = values else {
        return VsPaperRow {
            reference: row.clone(),
            ours: None,
            z: None,
            worse: false,
        };
    };
    let ours = MeanSe::of(&values);
    let diff = (ours.mean - row.mean) * row.metric.better_sign();
    let se = match (ours.se, row.se) {
        (None, None) => None,
        (a, b) => Some((a.unwrap_or(0.0).powi(2) + b.unwrap_or(0.0).powi(2)).sqrt()),
    };
    let z = se.map(|s| {
        if s > 0.0 {
            diff / s
        } else if diff == 0.0 {
            0.0
        } else {
            diff.signum() * f64::INFINITY
        }
    });
    VsPaperRow {
        reference: row.clone(),
        ours: Some(ours),
        z,
        worse: z.is_some_and(|z| z < -1.0),
    }
}

pub(crate) fn fmt_opt_se(mean: f64, se: Option<f64>) -> String {
    match se {
        Some(s) => format!("{mean:.3} ± {s:.3}"),
        None => format!("{mean:.3} (no s.e.)"),
    }
}

fn join<T: ToString>(set: &BTreeSet<T>) -> String {
    set.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

/// The comparison as Markdown: per group the records' protocol, splits, steps and seeds,
/// then one table row per published cell (see the module docs).
pub fn render(groups: &[RecordGroup]) -> String {
    let mut s = String::from(
        "Ours: mean ± s.e. over the records' splits (sd with ddof = 1), in the row's units, tll = −nll. \
         Paper: as printed. Δ/s.e. = (ours − paper)/√(se_ours² + se_paper²), positive = ours better; \
         ✗ = ours worse by more than 1 combined s.e. Rows in standardised units (DSPP) are compared \
         in standardised units, each split converted with its own training-target std s_y \
         (NLL_std = NLL − log s_y, RMSE_std = RMSE/s_y, CRPS_std = CRPS/s_y); records without \
         s_y show \"units differ\" (the `units` module of dgp-bench).\n",
    );
    for g in groups {
        s.push_str(&format!(
            "\n### {} {} {}{}\n\nRecords: protocol {}; splits {}; steps {}; seeds {}.\n\n",
            g.dataset,
            g.backend,
            model_label(g.layers),
            if g.variant.is_empty() {
                String::new()
            } else {
                format!(" [{}]", g.variant)
            },
            join(&g.protocols),
            join(&g.splits),
            join(&g.steps),
            join(&g.seeds)
        ));
        if g.rows.is_empty() {
            s.push_str("No published reference for this data set and model.\n");
            continue;
        }
        s.push_str("| paper column | metric (units) | ours | paper | Δ/s.e. | | source, table, protocol |\n|---|---|---:|---:|---:|---|---|\n");
        for r in &g.rows {
            let p = &r.reference;
            let units = if p.units == Units::Original {
                "original"
            } else {
                "standardised"
            };
            let (ours, z) = match (&r.ours, r.z) {
                (None, _) => ("units differ".to_string(), "—".to_string()),
                (Some(o), z) => (
                    fmt_opt_se(o.mean, o.se),
                    z.map_or("—".to_string(), |z| format!("{z:+.2}")),
                ),
            };
            s.push_str(&format!(
                "| {} | {} ({units}) | {ours} | {} | {z} | {} | {}, {}, {} |\n",
                p.paper_model,
                p.metric.name(),
                fmt_opt_se(p.mean, p.se),
                if r.worse { "✗" } else { "" },
                p.source,
                p.table,
                p.protocol
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests;
