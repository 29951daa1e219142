//! Metrics in standardised units, derived exactly from a record in original units and
//! its training split's target statistics (the `units` module of dgp-bench).
//!
//! A run standardises the targets with the training split's mean `m_y` and population
//! std `s_y` and reports metrics in original units ([`SplitRecord`]). Since
//! `y = m_y + s_y · y_std`, per test point
//!
//! * `log p_std(y_std) = log p(y) + Σ_p log s_y,p` (the Jacobian of the affine map, one
//!   term per output; mixtures included), so `NLL_std = NLL − Σ_p log s_y,p`;
//! * `RMSE_std = RMSE / s_y` and `CRPS_std = CRPS / s_y` (both scale linearly with the
//!   units), exact when every output has the same scale (always for one output); `None`
//!   otherwise, as the record pools the outputs.
//!
//! The DSPP paper reports standardised units; records carry `y_mean` and `y_std` per
//! split (written by every run since `--protocol dspp` existed), older records have none
//! and are never converted.

use serde::{Deserialize, Serialize};

use crate::experiment::{SplitRecord, model_label};
use crate::report::fmt_mean_se;
use crate::summary::{MeanSe, SummaryRow};

/// One split's metrics in standardised units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StdMetrics {
    /// Mean negative log predictive density of the standardised targets.
    pub nll: f64,
    /// RMSE in standardised units (`None` for outputs with different scales).
    pub rmse: Option<f64>,
    /// Mean CRPS in standardised units (`None` for outputs with different scales).
    pub crps: Option<f64>,
}

/// The common scale of the outputs (`None` when they differ or there are none).
fn common_scale(y_std: &[f64]) -> Option<f64> {
    let s = *y_std.first()?;
    y_std.iter().all(|&t| t == s).then_some(s)
}

/// The record's metrics in standardised units (see the module docs); `None` when the
/// record carries no training-target std or one that is not finite and positive.
pub fn standardised(r: &SplitRecord) -> Option<StdMetrics> {
    if r.y_std.is_empty() || !r.y_std.iter().all(|s| s.is_finite() && *s > 0.0) {
        return None;
    }
    let log_jacobian: f64 = r.y_std.iter().map(|s| s.ln()).sum();
    let scale = common_scale(&r.y_std);
    Some(StdMetrics {
        nll: r.nll - log_jacobian,
        rmse: scale.map(|s| r.rmse / s),
        crps: scale.map(|s| r.crps / s),
    })
}

/// One (data set, backend, layers) group in standardised units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StdSummaryRow {
    /// The group's summary in original units.
    pub original: SummaryRow,
    /// Splits of the group whose records could be converted.
    pub n_converted: usize,
    /// NLL in standardised units over the converted splits.
    pub nll: MeanSe,
    /// RMSE in standardised units (`None` unless every converted split has it).
    pub rmse: Option<MeanSe>,
    /// CRPS in standardised units (`None` unless every converted split has it).
    pub crps: Option<MeanSe>,
}

/// The standardised-unit summary of every group of `rows` (from
/// [`crate::summary::summarise`] on the same `records`).
pub fn summarise_standardised(records: &[SplitRecord], rows: &[SummaryRow]) -> Vec<StdSummaryRow> {
    rows.iter()
        .map(|row| {
            let conv: Vec<StdMetrics> = records
                .iter()
                .filter(|r| {
                    r.dataset == row.dataset
                        && r.backend == row.backend
                        && r.layers == row.layers
                        && crate::summary::run_config(r) == row.config
                })
                .filter_map(standardised)
                .collect();
            let all = |f: fn(&StdMetrics) -> Option<f64>| -> Option<MeanSe> {
                let v: Option<Vec<f64>> = conv.iter().map(f).collect();
                v.filter(|v| !v.is_empty()).map(|v| MeanSe::of(&v))
            };
            StdSummaryRow {
                original: row.clone(),
                n_converted: conv.len(),
                nll: MeanSe::of(&conv.iter().map(|m| m.nll).collect::<Vec<_>>()),
                rmse: all(|m| m.rmse),
                crps: all(|m| m.crps),
            }
        })
        .collect()
}

fn fmt_opt(m: &Option<MeanSe>) -> String {
    m.as_ref().map_or("—".to_string(), fmt_mean_se)
}

/// The Markdown table of a run under `--protocol dspp`: standardised units first, original
/// units beside them (never mixed in one column). Groups without the statistics show "—".
pub fn markdown_table_standardised(rows: &[StdSummaryRow]) -> String {
    let mut s = String::from(
        "| data | backend | model | splits | NLL (std) | RMSE (std) | CRPS (std) | NLL (orig) | RMSE (orig) | CRPS (orig) | 95 % coverage |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let o = &r.original;
        let nll = if r.n_converted > 0 {
            fmt_mean_se(&r.nll)
        } else {
            "—".to_string()
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {nll} | {} | {} | {} | {} | {} | {} |\n",
            o.dataset,
            o.backend,
            model_label(o.layers),
            o.n_splits,
            fmt_opt(&r.rmse),
            fmt_opt(&r.crps),
            fmt_mean_se(&o.nll),
            fmt_mean_se(&o.rmse),
            fmt_mean_se(&o.crps),
            fmt_mean_se(&o.cov95),
        ));
    }
    s
}

/// The sentence under the standardised table.
pub const STD_TABLE_NOTE: &str = "(std) = standardised units as the DSPP paper reports them: targets \
standardised with each split's training mean and population std s_y; NLL_std = NLL − log s_y, \
RMSE_std = RMSE/s_y, CRPS_std = CRPS/s_y (the `units` module of dgp-bench). (orig) = the data's original units. \
Mean ± s.e. over splits, s.e. = sd/√n with ddof = 1.";

/// The notes a run prints under its table: under a protocol that reports standardised
/// units (dspp) the table in standardised units beside the original ones and its note;
/// nothing otherwise.
pub fn run_notes(
    protocol: crate::protocol::Protocol,
    records: &[SplitRecord],
    summary: &[SummaryRow],
) -> Vec<String> {
    if !protocol.standardised_units() {
        return Vec::new();
    }
    let rows = summarise_standardised(records, summary);
    vec![
        format!(
            "Standardised units (DSPP paper):\n\n{}",
            markdown_table_standardised(&rows)
        ),
        STD_TABLE_NOTE.to_string(),
    ]
}

/// The per-split addition to the run's progress line: ` | std: NLL … RMSE … CRPS …`
/// (empty when the record cannot be converted).
pub fn split_line(r: &SplitRecord) -> String {
    match standardised(r) {
        Some(m) => format!(
            " | std units: NLL {:.4}  RMSE {}  CRPS {}",
            m.nll,
            m.rmse.map_or("—".into(), |v| format!("{v:.4}")),
            m.crps.map_or("—".into(), |v| format!("{v:.4}"))
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::record;
    use crate::summary::summarise;

    #[test]
    fn conversion_follows_the_change_of_variables() {
        let mut r = record("boston", 2, 0, 2.5);
        assert_eq!(standardised(&r), None, "no statistics, no conversion");
        r.y_mean = vec![22.5];
        r.y_std = vec![9.2];
        let m = standardised(&r).unwrap();
        assert!((m.nll - (2.5 - 9.2f64.ln())).abs() < 1e-15);
        assert_eq!(m.rmse, Some(1.0 / 9.2));
        assert_eq!(m.crps, Some(0.5 / 9.2));
        // Two outputs with different scales: the NLL has both Jacobian terms; the pooled
        // RMSE/CRPS cannot be converted.
        r.y_std = vec![2.0, 3.0];
        let m = standardised(&r).unwrap();
        assert!((m.nll - (2.5 - 6.0f64.ln())).abs() < 1e-15);
        assert_eq!((m.rmse, m.crps), (None, None));
        r.y_std = vec![0.0];
        assert_eq!(standardised(&r), None);
    }

    #[test]
    fn the_table_shows_both_units_and_dashes_without_statistics() {
        let mut a = record("boston", 2, 0, 2.0);
        let mut b = record("boston", 2, 1, 3.0);
        a.y_std = vec![1.0];
        b.y_std = vec![1.0];
        let old = SplitRecord {
            backend: "dspp".into(),
            ..record("boston", 2, 0, 1.0)
        };
        let recs = vec![a, b, old];
        let rows = summarise_standardised(&recs, &summarise(&recs));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].nll.mean, 2.5);
        assert_eq!(rows[1].n_converted, 0);
        let t = markdown_table_standardised(&rows);
        assert!(
            t.contains("| boston | svi | DGP2 | 2 | 2.50 ± 0.50 | 1.00 ± 0.00 | 0.500 ± 0.000 |"),
            "{t}"
        );
        assert!(
            t.contains("| boston | dspp | DGP2 | 1 | — | — | — | 1.00 |"),
            "{t}"
        );
    }
}
