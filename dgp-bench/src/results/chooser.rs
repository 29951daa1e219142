//! The first table of `RESULTS.md`: "which backend for my data".
//!
//! `results/INDEX.md` declares, in a table `| records | models | use |`, which record files
//! hold each backend's current records ([`ChooserEntry`]): a file `FOLDER/NAME` (or
//! `FOLDER/SUB/NAME`, without `.jsonl`), or every file whose name starts with a prefix
//! (`FOLDER/SUB/magic-svi-*`); the models taken from it (`svi DGP2, ppgpr SGP`, or
//! `nested DGP2 on step` for one data set only); and what they are used for ([`Use`]):
//! `all`, `accuracy` (the seconds were taken under a load that says nothing about speed)
//! or `seconds` (a re-timing of a run whose accuracy is recorded elsewhere). Only folders
//! of status headline or current may be named.
//!
//! Only records of the data sets the project ships are taken ([`shipped_data`]). The
//! records of one data set, protocol and model form one row ([`Row`]): a split recorded
//! twice counts once, the record read later (entries in order, files by name, lines in
//! order) replacing the earlier, for accuracy and for seconds each, so a re-timing of the
//! same run is listed after it. All records of a row must share the run configuration
//! that fixes what is trained ([`row_config`]): declaring two configurations of one model
//! on one data set is an error, so that every row is one thing a user can run.
//!
//! Each row shows the test NLL (classification: error rate and log loss), mean ± standard
//! error over its splits, and the mean seconds per split over its timed splits (a record's
//! whole-split wall seconds where it has them, else its training plus prediction seconds).
//! The reading ([`rank`]) is derived from those numbers by one rule, [`RULE`].

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::classification::{ClassSplitRecord, holds_class_records, read_class_records};
use crate::error::{BenchError, Result};
use crate::experiment::{SplitRecord, model_label};
use crate::report::{fmt_mean_se, read_json_lines};
use crate::summary::MeanSe;

use super::{Section, Status};

/// Fewest splits a row needs to be ranked (a standard error from fewer is not worth
/// comparing).
pub const MIN_SPLITS: usize = 3;

/// The rule behind the reading column, printed under the table.
pub const RULE: &str = "Reading, per data set and protocol: among the models with at least 3 split records, take \
the lowest mean test NLL (classification: log loss) and every model within one combined standard error of it \
(mean − best ≤ √(s.e.² + s.e.²_best)); of those, the **pick** is the fastest (lowest mean seconds per split). \
Means are over each model's own splits (the splits column), so rows of different splits compare less tightly. \
Models with fewer splits are shown, not ranked; a model without timed records counts as the slowest.";

/// What a declared file's records are used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Accuracy and seconds.
    All,
    /// Accuracy only: the seconds were measured under a load that says nothing about speed.
    Accuracy,
    /// Seconds only: a re-timing of runs whose accuracy is recorded elsewhere.
    Seconds,
}

impl Use {
    fn parse(s: &str) -> Option<Use> {
        Some(match s {
            "all" => Use::All,
            "accuracy" => Use::Accuracy,
            "seconds" => Use::Seconds,
            _ => return None,
        })
    }

    fn accuracy(self) -> bool {
        self != Use::Seconds
    }

    fn seconds(self) -> bool {
        self != Use::Accuracy
    }
}

/// A model named in the declaration: backend, layers and optionally the one data set its
/// records are taken for.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// Backend.
    pub backend: String,
    /// Layers.
    pub layers: usize,
    /// `Some(data set)` for `BACKEND MODEL on DATA`.
    pub dataset: Option<String>,
}

/// One row of the declaration table: a record file (or a prefix), the models taken from
/// it and what for.
#[derive(Clone, Debug, PartialEq)]
pub struct ChooserEntry {
    /// `FOLDER/NAME`, `FOLDER/SUB/NAME`, or a prefix ending in `*`.
    pub records: String,
    /// The models named.
    pub models: Vec<ModelSpec>,
    /// What the records are used for.
    pub used_for: Use,
    /// Line of the index (for messages).
    pub line: usize,
}

/// `svi DGP2` → (`svi`, 2), `ppgpr SGP` → (`ppgpr`, 1) (the inverse of
/// [`model_label`] after the backend's name).
pub fn parse_model(s: &str) -> Option<(String, usize)> {
    let mut words = s.split_whitespace();
    let (backend, model) = (words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let layers = if model == "SGP" {
        1
    } else {
        model
            .strip_prefix("DGP")?
            .parse::<usize>()
            .ok()
            .filter(|&l| l >= 2)?
    };
    Some((backend.to_string(), layers))
}

/// The declaration row `| records | models | use |` at index line `line`.
///
/// # Errors
/// [`BenchError::Usage`] for an empty records cell, a path that leaves the folder, a
/// model that is not `BACKEND SGP` / `BACKEND DGPn` (optionally `on DATA`), or a use that
/// is not `all`, `accuracy` or `seconds`.
pub fn parse_entry(
    records: &str,
    models: &str,
    used_for: &str,
    line: usize,
) -> Result<ChooserEntry> {
    let bad = |what: String| BenchError::Usage(format!("results/INDEX.md, line {line}: {what}"));
    let records = records.trim().trim_matches('`').to_string();
    if records.is_empty()
        || !records.contains('/')
        || records.split('/').any(|p| p.is_empty() || p == "..")
        || records[..records.len() - 1].contains('*')
    {
        return Err(bad(format!(
            "records '{records}': FOLDER/NAME (without .jsonl), or a name prefix ending in *"
        )));
    }
    let mut out = Vec::new();
    for m in models.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let (model, dataset) = match m.split_once(" on ") {
            Some((model, d)) if !d.trim().is_empty() => (model, Some(d.trim().to_string())),
            Some(_) => return Err(bad(format!("model '{m}': a data set after 'on'"))),
            None => (m, None),
        };
        let (backend, layers) = parse_model(model).ok_or_else(|| {
            bad(format!(
                "model '{m}': BACKEND SGP or BACKEND DGPn, optionally followed by 'on DATA'"
            ))
        })?;
        let spec = ModelSpec {
            backend,
            layers,
            dataset,
        };
        if !out.contains(&spec) {
            out.push(spec);
        }
    }
    if out.is_empty() {
        return Err(bad(format!("records {records}: no model named")));
    }
    let used_for = Use::parse(used_for.trim())
        .ok_or_else(|| bad(format!("use '{used_for}': all, accuracy or seconds")))?;
    Ok(ChooserEntry {
        records,
        models: out,
        used_for,
        line,
    })
}

/// The record files an entry names, in name order.
fn entry_files(dir: &Path, sections: &[Section], e: &ChooserEntry) -> Result<Vec<PathBuf>> {
    let bad =
        |what: String| BenchError::Usage(format!("results/INDEX.md, line {}: {what}", e.line));
    let folder = e.records.split('/').next().unwrap_or("");
    let sec = sections
        .iter()
        .find(|s| s.folder == folder)
        .ok_or_else(|| {
            bad(format!(
                "{}: {folder} is not a folder of the index",
                e.records
            ))
        })?;
    if sec.status == Status::Ablation {
        return Err(bad(format!(
            "{}: {folder} holds ablations, not current records",
            e.records
        )));
    }
    let files: Vec<PathBuf> = if let Some(prefix) = e.records.strip_suffix('*') {
        let (parent, start) = prefix.rsplit_once('/').unwrap_or(("", prefix));
        let pdir = dir.join(parent);
        let rd = fs::read_dir(&pdir).map_err(|err| {
            bad(format!(
                "{}: cannot read {}: {err}",
                e.records,
                pdir.display()
            ))
        })?;
        let mut v: Vec<PathBuf> = rd
            .filter_map(|x| x.ok().map(|x| x.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension().is_some_and(|x| x == "jsonl")
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(start))
            })
            .collect();
        v.sort();
        v
    } else {
        let p = dir.join(format!("{}.jsonl", e.records));
        if p.is_file() { vec![p] } else { Vec::new() }
    };
    if files.is_empty() {
        return Err(bad(format!("{}: no such record file", e.records)));
    }
    Ok(files)
}

/// What must be equal in every record of one row: for regression the protocol, inducing
/// points, minibatch (`full` when it covers the training rows), learning rate and training
/// and predictive samples (not the step cap, the hidden width or backend settings, which
/// record per-split outcomes of held-out rules and tuning); for classification also the
/// likelihood, hidden width, backend settings and the `--steps` of the command.
pub type RowConfig = Vec<(&'static str, String)>;

fn reg_config(r: &SplitRecord) -> RowConfig {
    vec![
        ("protocol", protocol_name(&r.protocol)),
        ("M", r.num_inducing.to_string()),
        (
            "batch",
            if r.batch_size >= r.n_train {
                "full".into()
            } else {
                r.batch_size.to_string()
            },
        ),
        (
            "lr",
            r.learning_rate
                .map_or_else(|| "unused".into(), |v| v.to_string()),
        ),
        ("S_train", r.train_samples.to_string()),
        ("S_test", r.predict_samples.to_string()),
    ]
}

fn class_config(r: &ClassSplitRecord) -> RowConfig {
    vec![
        ("protocol", protocol_name(&r.protocol)),
        ("likelihood", r.likelihood.name().into()),
        ("M", r.num_inducing.to_string()),
        (
            "hidden",
            r.hidden_width
                .map_or_else(|| "default".into(), |w| w.to_string()),
        ),
        (
            "batch",
            if r.batch_size >= r.n_train {
                "full".into()
            } else {
                r.batch_size.to_string()
            },
        ),
        ("lr", r.learning_rate.to_string()),
        ("S_test", r.predict_samples.to_string()),
        (
            "settings",
            serde_json::to_string(&r.settings).unwrap_or_default(),
        ),
        (
            "--steps",
            flag_value(&r.command, "--steps").unwrap_or_default(),
        ),
    ]
}

/// The configuration of a row's records ([`RowConfig`]).
pub fn row_config(m: &Measured) -> RowConfig {
    match m {
        Measured::Reg(r) => reg_config(r),
        Measured::Class(r) => class_config(r),
    }
}

fn protocol_name(p: &str) -> String {
    if p.is_empty() {
        "published".into()
    } else {
        p.to_string()
    }
}

/// The value of `flag` in a command (`--flag V` or `--flag=V`).
fn flag_value(command: &str, flag: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        if *w == flag {
            return words.get(i + 1).map(|v| v.to_string());
        }
        if let Some(v) = w.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
            return Some(v.to_string());
        }
    }
    None
}

/// Whether a record's command ran on a data set the project ships: a UCI or
/// classification folder of the shared data (`--data` containing `data/uci/` or
/// `data/classification/`), a data set embedded in dgp-bench (`dgp-bench/data/`) or a
/// built-in one (`builtin:`). Records without a command, and data a user cannot get from
/// the project (a CSV written for one study), are left out of the table.
pub fn shipped_data(command: &str) -> bool {
    flag_value(command, "--data").is_some_and(|d| {
        d.starts_with("builtin:")
            || ["data/uci/", "data/classification/", "dgp-bench/data/"]
                .iter()
                .any(|p| d.contains(p))
    })
}

/// Flags of `dgp-bench run` that name the data, the model, the splits or where the output
/// goes: they are the row itself, not how it was run.
const ROW_FLAGS: &[&str] = &[
    "--data",
    "--backend",
    "--layers",
    "--splits",
    "--json",
    "--out",
    "--threads",
];
/// Flags without a value that change no number.
const QUIET_FLAGS: &[&str] = &["--quiet", "--per-point"];

/// What a command sets beyond its data, model, splits and outputs (`--steps 2000 --batch
/// 1000`); empty for a run of the defaults.
pub fn run_flags(command: &str) -> String {
    let mut words = command.split_whitespace().peekable();
    let mut out: Vec<&str> = Vec::new();
    // The program and subcommand.
    while let Some(w) = words.peek() {
        if w.starts_with("--") {
            break;
        }
        words.next();
    }
    while let Some(w) = words.next() {
        let name = w.split('=').next().unwrap_or(w);
        if ROW_FLAGS.contains(&name) {
            if !w.contains('=') && words.peek().is_some_and(|v| !v.starts_with("--")) {
                words.next();
            }
        } else if !QUIET_FLAGS.contains(&name) {
            out.push(w);
        }
    }
    out.join(" ")
}

/// One split's measurement in a row.
#[derive(Clone, Debug)]
pub enum Measured {
    /// A regression record.
    Reg(Box<SplitRecord>),
    /// A classification record.
    Class(Box<ClassSplitRecord>),
}

impl Measured {
    fn key(&self) -> (String, String, String, usize) {
        match self {
            Measured::Reg(r) => (
                r.dataset.clone(),
                protocol_name(&r.protocol),
                r.backend.clone(),
                r.layers,
            ),
            Measured::Class(r) => (
                r.dataset.clone(),
                protocol_name(&r.protocol),
                r.backend.clone(),
                r.layers,
            ),
        }
    }

    fn split(&self) -> usize {
        match self {
            Measured::Reg(r) => r.split,
            Measured::Class(r) => r.split,
        }
    }

    fn command(&self) -> &str {
        match self {
            Measured::Reg(r) => &r.command,
            Measured::Class(r) => &r.command,
        }
    }

    /// Seconds of the whole split: wall seconds where recorded, else train + predict.
    pub fn seconds(&self) -> f64 {
        match self {
            Measured::Reg(r) => r
                .resources
                .wall_seconds
                .unwrap_or(r.train_seconds + r.predict_seconds),
            Measured::Class(r) => r.train_seconds + r.predict_seconds,
        }
    }

    /// The ranked metric: test NLL (classification: log loss).
    pub fn nll(&self) -> f64 {
        match self {
            Measured::Reg(r) => r.nll,
            Measured::Class(r) => r.metrics.log_loss,
        }
    }

    /// The other accuracy column: RMSE (classification: error rate), shown after the ranked
    /// one.
    pub fn second(&self) -> f64 {
        match self {
            Measured::Reg(r) => r.rmse,
            Measured::Class(r) => r.metrics.error_rate,
        }
    }

    fn is_class(&self) -> bool {
        matches!(self, Measured::Class(_))
    }
}

/// One row of the table: a data set, protocol and model with its records, one per split.
#[derive(Clone, Debug)]
pub struct Row {
    /// Data set.
    pub dataset: String,
    /// Protocol (`published` for the default).
    pub protocol: String,
    /// Backend.
    pub backend: String,
    /// Layers.
    pub layers: usize,
    /// Split → (measurement, the folder it was read from): the accuracy columns.
    pub splits: BTreeMap<usize, (Measured, String)>,
    /// Split → (measurement, folder): the seconds column.
    pub timed: BTreeMap<usize, (Measured, String)>,
    /// The run configuration shared by the records ([`row_config`]).
    pub config: RowConfig,
}

impl Row {
    fn values(&self, f: impl Fn(&Measured) -> f64) -> MeanSe {
        MeanSe::of(&self.splits.values().map(|(m, _)| f(m)).collect::<Vec<_>>())
    }

    /// Test NLL (classification: log loss), mean ± s.e. over the splits.
    pub fn nll(&self) -> MeanSe {
        self.values(Measured::nll)
    }

    /// Mean seconds per timed split; NaN when no split is timed.
    pub fn seconds(&self) -> f64 {
        MeanSe::of(
            &self
                .timed
                .values()
                .map(|(m, _)| m.seconds())
                .collect::<Vec<_>>(),
        )
        .mean
    }

    /// [`Row::seconds`], with a row without timed splits as the slowest.
    fn seconds_or_inf(&self) -> f64 {
        let s = self.seconds();
        if s.is_nan() { f64::INFINITY } else { s }
    }

    /// `svi DGP2`.
    pub fn model(&self) -> String {
        format!("{} {}", self.backend, model_label(self.layers))
    }

    fn is_class(&self) -> bool {
        self.splits
            .values()
            .chain(self.timed.values())
            .next()
            .is_some_and(|(m, _)| m.is_class())
    }
}

/// Reads the records the entries declare and pools them into rows (see the module docs),
/// in order of first appearance.
///
/// # Errors
/// [`BenchError::Usage`] for a file that cannot be read, an entry that names an ablation
/// folder, a file that does not exist, a model the entry's files hold no record of, or two
/// run configurations of one model on one data set.
pub fn rows(dir: &Path, sections: &[Section], entries: &[ChooserEntry]) -> Result<Vec<Row>> {
    let mut rows: Vec<Row> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    for e in entries {
        let mut seen = vec![false; e.models.len()];
        for f in entry_files(dir, sections, e)? {
            let rel = f
                .strip_prefix(dir)
                .unwrap_or(&f)
                .with_extension("")
                .to_string_lossy()
                .replace('\\', "/");
            let folder = rel.split('/').next().unwrap_or("").to_string();
            let measured: Vec<Measured> = if holds_class_records(&f)? {
                read_class_records(&f)?
                    .into_iter()
                    .map(|r| Measured::Class(Box::new(r)))
                    .collect()
            } else {
                read_json_lines(&f)?
                    .into_iter()
                    .map(|r| Measured::Reg(Box::new(r)))
                    .collect()
            };
            for m in measured {
                if !shipped_data(m.command()) {
                    continue;
                }
                let (dataset, protocol, backend, layers) = m.key();
                let Some(i) = e.models.iter().position(|spec| {
                    spec.backend == backend
                        && spec.layers == layers
                        && spec.dataset.as_ref().is_none_or(|d| *d == dataset)
                }) else {
                    continue;
                };
                seen[i] = true;
                let config = row_config(&m);
                let idx = match rows.iter().position(|r| {
                    (&r.dataset, &r.protocol, &r.backend, r.layers)
                        == (&dataset, &protocol, &backend, layers)
                }) {
                    Some(idx) => idx,
                    None => {
                        rows.push(Row {
                            dataset,
                            protocol,
                            backend,
                            layers,
                            splits: BTreeMap::new(),
                            timed: BTreeMap::new(),
                            config: config.clone(),
                        });
                        sources.push(rel.clone());
                        rows.len() - 1
                    }
                };
                let row = &mut rows[idx];
                if row.config != config {
                    let differ: Vec<String> = row
                        .config
                        .iter()
                        .zip(&config)
                        .filter(|(a, b)| a != b)
                        .map(|((k, a), (_, b))| format!("{k} {a} against {b}"))
                        .collect();
                    return Err(BenchError::Usage(format!(
                        "results/INDEX.md, line {}: {} on {} has two run configurations ({} in {}, {}): \
                         declare one configuration per model and data set",
                        e.line,
                        row.model(),
                        row.dataset,
                        sources[idx],
                        rel,
                        differ.join(", ")
                    )));
                }
                if e.used_for.seconds() {
                    row.timed.insert(m.split(), (m.clone(), folder.clone()));
                }
                if e.used_for.accuracy() {
                    row.splits.insert(m.split(), (m, folder.clone()));
                }
            }
        }
        if let Some(i) = seen.iter().position(|s| !s) {
            let spec = &e.models[i];
            return Err(BenchError::Usage(format!(
                "results/INDEX.md, line {}: {} holds no record of {} {}{} on a shipped data set",
                e.line,
                e.records,
                spec.backend,
                model_label(spec.layers),
                spec.dataset
                    .as_ref()
                    .map_or(String::new(), |d| format!(" on {d}"))
            )));
        }
    }
    if let Some(r) = rows.iter().find(|r| r.splits.is_empty()) {
        return Err(BenchError::Usage(format!(
            "results/INDEX.md: {} on {} has seconds but no accuracy records (declare a file with use all or accuracy)",
            r.model(),
            r.dataset
        )));
    }
    Ok(rows)
}

/// The reading of one group of rows (one data set and protocol), indices into it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    /// The row with the lowest mean NLL among the ranked ones.
    pub best: usize,
    /// The ranked rows within one combined s.e. of the best (the best included).
    pub tied: Vec<usize>,
    /// The fastest of `tied`.
    pub pick: usize,
}

/// [`RULE`] applied to `rows` (one data set and protocol); `None` when no row has
/// [`MIN_SPLITS`] splits.
pub fn rank(rows: &[&Row]) -> Option<Reading> {
    let ranked: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].splits.len() >= MIN_SPLITS && rows[i].nll().mean.is_finite())
        .collect();
    let best = *ranked.iter().min_by(|&&a, &&b| {
        rows[a]
            .nll()
            .mean
            .total_cmp(&rows[b].nll().mean)
            .then(a.cmp(&b))
    })?;
    let b = rows[best].nll();
    let tied: Vec<usize> = ranked
        .iter()
        .copied()
        .filter(|&i| {
            let m = rows[i].nll();
            let se = (m.se.unwrap_or(0.0).powi(2) + b.se.unwrap_or(0.0).powi(2)).sqrt();
            m.mean - b.mean <= se
        })
        .collect();
    let pick = *tied.iter().min_by(|&&x, &&y| {
        rows[x]
            .seconds_or_inf()
            .total_cmp(&rows[y].seconds_or_inf())
            .then(rows[x].nll().mean.total_cmp(&rows[y].nll().mean))
            .then(x.cmp(&y))
    })?;
    Some(Reading { best, tied, pick })
}

/// `5 (0–4)`.
fn splits_cell(row: &Row) -> String {
    let splits: Vec<usize> = row.splits.keys().copied().collect();
    format!("{} ({})", splits.len(), super::split_ranges(&splits))
}

fn fmt_seconds(s: f64) -> String {
    if s.is_nan() {
        "—".into()
    } else if s >= 10.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

/// Mean seconds, with the timed splits when they are not the accuracy splits.
fn seconds_cell(row: &Row) -> String {
    let timed: Vec<usize> = row.timed.keys().copied().collect();
    if timed.is_empty() || row.splits.keys().eq(row.timed.keys()) {
        fmt_seconds(row.seconds())
    } else {
        format!(
            "{} (split{} {})",
            fmt_seconds(row.seconds()),
            if timed.len() == 1 { "" } else { "s" },
            super::split_ranges(&timed)
        )
    }
}

fn run_cell(row: &Row) -> String {
    let mut flags: Vec<String> = Vec::new();
    for (m, _) in row.splits.values().chain(row.timed.values()) {
        let f = run_flags(m.command());
        let f = if m.command().is_empty() {
            "not recorded".to_string()
        } else if f.is_empty() {
            "defaults".to_string()
        } else {
            format!("`{f}`")
        };
        if !flags.contains(&f) {
            flags.push(f);
        }
    }
    let mut folders: Vec<&str> = Vec::new();
    for (_, folder) in row.splits.values().chain(row.timed.values()) {
        if !folders.contains(&folder.as_str()) {
            folders.push(folder);
        }
    }
    format!(
        "{} ({})",
        flags.join("; "),
        folders
            .iter()
            .map(|f| format!("[{f}](results/{f}/)"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The group's rows ordered by mean NLL (unranked rows after the ranked ones).
fn ordered<'a>(group: &[&'a Row]) -> Vec<&'a Row> {
    let mut v: Vec<&Row> = group.to_vec();
    v.sort_by(|a, b| {
        let ka = (a.splits.len() < MIN_SPLITS, a.nll().mean);
        let kb = (b.splits.len() < MIN_SPLITS, b.nll().mean);
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    v
}

fn reading_line(name: &str, group: &[&Row]) -> String {
    let Some(r) = rank(group) else {
        return format!("- **{name}**: no model has {MIN_SPLITS} splits of current records.\n");
    };
    let desc = |i: usize| {
        let secs = group[i].seconds();
        format!(
            "{} ({}, {})",
            group[i].model(),
            fmt_mean_se(&group[i].nll()),
            if secs.is_nan() {
                "not timed".to_string()
            } else {
                format!("{} s", fmt_seconds(secs))
            }
        )
    };
    let mut s = format!("- **{name}**: pick **{}**", desc(r.pick));
    if r.best != r.pick {
        s.push_str(&format!("; lowest NLL {}", desc(r.best)));
    }
    let others: Vec<String> = r
        .tied
        .iter()
        .filter(|&&i| i != r.pick && i != r.best)
        .map(|&i| desc(i))
        .collect();
    if !others.is_empty() {
        s.push_str(&format!("; also within 1 s.e.: {}", others.join(", ")));
    }
    s.push_str(".\n");
    s
}

/// What the rows of one reading share: classification or not, data set, protocol.
type GroupOf = (bool, String, String);

/// The section: the regression table, the classification table, the reading per data set
/// and the rule.
pub fn render(rows: &[Row]) -> String {
    let mut groups: Vec<(GroupOf, Vec<&Row>)> = Vec::new();
    for r in rows {
        let key = (r.is_class(), r.dataset.clone(), r.protocol.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    // Published splits first within a data set, then the papers' protocols.
    groups.sort_by(|(a, _), (b, _)| {
        (a.0, &a.1, a.2 != "published", &a.2).cmp(&(b.0, &b.1, b.2 != "published", &b.2))
    });
    let name = |k: &GroupOf| {
        if k.2 == "published" {
            k.1.clone()
        } else {
            format!("{} ({})", k.1, k.2)
        }
    };
    let mut s = String::new();
    let mut readings = String::new();
    for class in [false, true] {
        let these: Vec<&(GroupOf, Vec<&Row>)> =
            groups.iter().filter(|(k, _)| k.0 == class).collect();
        if these.is_empty() {
            continue;
        }
        s.push_str(if class {
            "\n| classification data | model | log loss | error | s / split | splits | run (records) | reading |\n\
             |---|---|---:|---:|---:|---|---|---|\n"
        } else {
            "| data | model | test NLL | RMSE | s / split | splits | run (records) | reading |\n\
             |---|---|---:|---:|---:|---|---|---|\n"
        });
        for (k, group) in these {
            let reading = rank(group);
            let rows = ordered(group);
            for row in &rows {
                let i = group
                    .iter()
                    .position(|g| std::ptr::eq(*g, *row))
                    .unwrap_or(0);
                let mark = match &reading {
                    _ if row.splits.len() < MIN_SPLITS => "not ranked".to_string(),
                    Some(r) if r.pick == i => "**pick**".to_string(),
                    Some(r) if r.tied.contains(&i) => "within 1 s.e.".to_string(),
                    _ => String::new(),
                };
                s.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} | {} | {mark} |\n",
                    name(k),
                    row.model(),
                    fmt_mean_se(&row.nll()),
                    fmt_mean_se(&row.values(Measured::second)),
                    seconds_cell(row),
                    splits_cell(row),
                    run_cell(row),
                ));
            }
            readings.push_str(&reading_line(&name(k), group));
        }
    }
    s.push('\n');
    s.push_str(&readings);
    s.push('\n');
    s.push_str(RULE);
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_and_entries_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_model("svi DGP2"), Some(("svi".into(), 2)));
        assert_eq!(parse_model("ppgpr SGP"), Some(("ppgpr".into(), 1)));
        assert_eq!(parse_model("svi DGP1"), None);
        assert_eq!(parse_model("svi"), None);
        assert_eq!(parse_model("svi DGP2 x"), None);
        let spec = |b: &str, layers: usize, d: Option<&str>| ModelSpec {
            backend: b.into(),
            layers,
            dataset: d.map(String::from),
        };
        let e = parse_entry(
            "`a/b`",
            "svi SGP, svi DGP2, svi SGP, nested DGP2 on step",
            "all",
            7,
        )
        .unwrap();
        assert_eq!(e.records, "a/b");
        assert_eq!(
            e.models,
            vec![
                spec("svi", 1, None),
                spec("svi", 2, None),
                spec("nested", 2, Some("step"))
            ]
        );
        assert_eq!((e.used_for, e.line), (Use::All, 7));
        assert_eq!(
            parse_entry("a/b*", "svi SGP", "seconds", 1)
                .unwrap()
                .used_for,
            Use::Seconds
        );
        for bad in ["ab", "a/../b", "a/*b", "/b", ""] {
            assert!(parse_entry(bad, "svi SGP", "all", 3).is_err(), "{bad}");
        }
        let err = parse_entry("a/b", "svi DGP", "all", 9)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 9") && err.contains("svi DGP"), "{err}");
        assert!(parse_entry("a/b", " ", "all", 9).is_err());
        assert!(parse_entry("a/b", "svi SGP on ", "all", 9).is_err());
        let err = parse_entry("a/b", "svi SGP", "speed", 9)
            .unwrap_err()
            .to_string();
        assert!(err.contains("speed"), "{err}");
    }

    #[test]
    fn run_flags_keep_what_changes_the_run() {
        assert_eq!(
            run_flags(
                "dgp-bench run --data <uci>/boston --backend svi --layers 2 --splits 0 --quiet --json results/x.jsonl"
            ),
            ""
        );
        assert_eq!(
            run_flags(
                "dgp-bench run --data=x --protocol lindinger --layers 1,2 --steps 2000 --per-point --out out/a"
            ),
            "--protocol lindinger --steps 2000"
        );
        assert_eq!(
            flag_value("run --steps 300 --x", "--steps").as_deref(),
            Some("300")
        );
        assert_eq!(
            flag_value("run --steps=30", "--steps").as_deref(),
            Some("30")
        );
        assert_eq!(flag_value("run --stepsx 3", "--steps"), None);
        for (command, shipped) in [
            (
                "dgp-bench run --data ../shared/data/uci/boston --backend svi",
                true,
            ),
            (
                "dgp-bench run --data=/work/shared/data/classification/magic",
                true,
            ),
            ("dgp-bench run --data builtin:step", true),
            ("dgp-bench run --data dgp-bench/data/magic-small", true),
            ("dgp-bench run --data additive6.csv --backend dspp", false),
            (
                "dgp-bench run --data results/time-to-model/data/hetero1d.csv",
                false,
            ),
            ("", false),
        ] {
            assert_eq!(shipped_data(command), shipped, "{command}");
        }
    }

    fn write(path: &Path, records: &[SplitRecord]) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text: String = records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        fs::write(path, text).unwrap();
    }

    fn rec(backend: &str, layers: usize, split: usize, nll: f64, wall: f64) -> SplitRecord {
        let mut r = crate::report::tests::record("boston", layers, split, nll);
        r.backend = backend.into();
        r.resources.wall_seconds = Some(wall);
        r.command = format!(
            "dgp-bench run --data ../shared/data/uci/boston --backend {backend} --layers {layers} --splits {split} --quiet"
        );
        r
    }

    fn sections() -> Vec<Section> {
        vec![
            Section {
                folder: "cur".into(),
                status: Status::Current,
                question: "q".into(),
            },
            Section {
                folder: "abl".into(),
                status: Status::Ablation,
                question: "q".into(),
            },
        ]
    }

    #[test]
    fn rows_pool_declared_files_and_refuse_what_is_not_one_run() {
        let dir = std::env::temp_dir().join(format!("dgp-bench-chooser-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // A data set the project does not ship is left out.
        let mut unshipped = rec("svi", 2, 0, 1.0, 1.0);
        unshipped.dataset = "additive6".into();
        unshipped.command = "dgp-bench run --data additive6.csv --backend svi --layers 2".into();
        write(
            &dir.join("cur/a.jsonl"),
            &[
                rec("svi", 2, 0, 2.0, 100.0),
                rec("svi", 2, 1, 2.2, 100.0),
                rec("mf", 2, 0, 9.0, 1.0),
                unshipped,
            ],
        );
        // A re-timing of split 1, listed later, replaces it; split 2 is added.
        write(
            &dir.join("cur/sub/t-1.jsonl"),
            &[rec("svi", 2, 1, 2.2, 50.0), rec("svi", 2, 2, 2.4, 60.0)],
        );
        write(&dir.join("abl/z.jsonl"), &[rec("svi", 2, 0, 1.0, 1.0)]);
        let entry = |records: &str, models: &str| parse_entry(records, models, "all", 1).unwrap();
        let rows_of = |entries: &[ChooserEntry]| rows(&dir, &sections(), entries).unwrap();
        let got = rows_of(&[entry("cur/a", "svi DGP2"), entry("cur/sub/t-*", "svi DGP2")]);
        assert_eq!(got.len(), 1, "mf is not declared, additive6 not shipped");
        let r = &got[0];
        assert_eq!((r.model(), r.splits.len()), ("svi DGP2".to_string(), 3));
        assert_eq!(r.splits[&1].0.seconds(), 50.0);
        assert!((r.seconds() - 70.0).abs() < 1e-12);
        assert!((r.nll().mean - 2.2).abs() < 1e-12);
        assert_eq!(seconds_cell(r), "70");
        assert_eq!(run_cell(r), "defaults ([cur](results/cur/))");
        // Accuracy from one file, seconds from another: the seconds cell names its splits.
        let use_ = |records: &str, u: &str| parse_entry(records, "svi DGP2", u, 1).unwrap();
        let got = rows_of(&[use_("cur/a", "accuracy"), use_("cur/sub/t-1", "seconds")]);
        let r = &got[0];
        assert_eq!(r.splits.keys().copied().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(r.timed.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert!((r.nll().mean - 2.1).abs() < 1e-12);
        assert_eq!(seconds_cell(r), "55 (splits 1–2)");
        let got = rows_of(&[use_("cur/a", "accuracy")]);
        assert!(got[0].seconds().is_nan());
        assert_eq!(seconds_cell(&got[0]), "—");
        // A data set filter: `on DATA`.
        let on = |d: &str| parse_entry("cur/a", &format!("svi DGP2 on {d}"), "all", 1).unwrap();
        assert_eq!(rows_of(&[on("boston")]).len(), 1);
        // Errors: an ablation folder, a file that does not exist, a model without records,
        // two run configurations of one model.
        let err =
            |entries: &[ChooserEntry]| rows(&dir, &sections(), entries).unwrap_err().to_string();
        assert!(err(&[on("energy")]).contains("no record of svi DGP2 on energy"));
        assert!(err(&[use_("cur/a", "seconds")]).contains("no accuracy records"));
        assert!(err(&[entry("abl/z", "svi DGP2")]).contains("ablations"));
        assert!(err(&[entry("cur/none", "svi DGP2")]).contains("no such record file"));
        assert!(err(&[entry("cur/q*", "svi DGP2")]).contains("no such record file"));
        assert!(err(&[entry("cur/a", "svi DGP3")]).contains("no record of svi DGP3"));
        let mut other = rec("svi", 2, 3, 2.0, 1.0);
        other.learning_rate = Some(0.5);
        write(&dir.join("cur/lr.jsonl"), &[other]);
        let e = err(&[entry("cur/a", "svi DGP2"), entry("cur/lr", "svi DGP2")]);
        assert!(
            e.contains("two run configurations") && e.contains("lr 0.01 against 0.5"),
            "{e}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_pick_is_the_fastest_within_one_standard_error_of_the_best() {
        let row = |backend: &str, nlls: &[f64], wall: f64| {
            let mut splits = BTreeMap::new();
            for (i, &v) in nlls.iter().enumerate() {
                splits.insert(
                    i,
                    (
                        Measured::Reg(Box::new(rec(backend, 2, i, v, wall))),
                        "cur".to_string(),
                    ),
                );
            }
            Row {
                dataset: "boston".into(),
                protocol: "published".into(),
                backend: backend.into(),
                layers: 2,
                timed: splits.clone(),
                splits,
                config: Vec::new(),
            }
        };
        // s.e. of three values m − 0.2, m, m + 0.2: 0.2/√3; combined with another such:
        // 0.2·√(2/3) = 0.16330. best: mean 1.0; b: 1.05, tied; c: 2.0, out; d: one split,
        // not ranked however good.
        let best = row("best", &[0.8, 1.0, 1.2], 100.0);
        let b = row("b", &[0.85, 1.05, 1.25], 10.0);
        let c = row("c", &[1.8, 2.0, 2.2], 1.0);
        let d = row("d", &[0.1], 0.5);
        let group = [&best, &b, &c, &d];
        assert_eq!(
            rank(&group),
            Some(Reading {
                best: 0,
                tied: vec![0, 1],
                pick: 1
            })
        );
        // Just inside and just outside one combined s.e.
        let near = row("near", &[0.9632, 1.1632, 1.3632], 10.0);
        assert_eq!(rank(&[&best, &near]).unwrap().tied, vec![0, 1]);
        let far = row("far", &[0.9634, 1.1634, 1.3634], 10.0);
        assert_eq!(rank(&[&best, &far]).unwrap().tied, vec![0]);
        assert_eq!(rank(&[&d]), None);
        // A row without timed splits counts as the slowest.
        let mut untimed = b.clone();
        untimed.timed.clear();
        assert_eq!(rank(&[&best, &untimed]).unwrap().pick, 0);
        assert_eq!(rank(&[&untimed, &best]).unwrap().pick, 1);
        let text = render(&[best.clone(), b.clone(), c.clone(), d.clone()]);
        assert!(
            text.contains("| boston | b DGP2 | 1.05 ± 0.12 | 1.00 ± 0.00 | 10 | 3 (0–2) | defaults ([cur](results/cur/)) | **pick** |"),
            "{text}"
        );
        assert!(
            text.contains("| boston | best DGP2 | 1.00 ± 0.12 |"),
            "{text}"
        );
        assert!(text.contains("| within 1 s.e. |\n"), "{text}");
        assert!(
            text.contains("| 1 (0) | defaults ([cur](results/cur/)) | not ranked |"),
            "{text}"
        );
        // Order: ranked rows by NLL, then the unranked.
        let (pb, pc, pd) = (
            text.find("best DGP2").unwrap(),
            text.find("c DGP2").unwrap(),
            text.find("d DGP2").unwrap(),
        );
        assert!(pb < pc && pc < pd, "{text}");
        assert!(
            text.contains("- **boston**: pick **b DGP2 (1.05 ± 0.12, 10 s)**; lowest NLL best DGP2 (1.00 ± 0.12, 100 s).\n"),
            "{text}"
        );
        assert!(text.contains(RULE));
    }
}
