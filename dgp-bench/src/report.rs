//! Report writers: the Markdown table, `report.md`, `results.json` and JSON-lines records.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::experiment::SplitRecord;
use crate::summary::{MeanSe, SummaryRow};

/// Formats `mean ± se` with the standard error to two significant digits (at least two
/// and at most eight decimals); without a standard error the mean gets three significant
/// digits.
pub fn fmt_mean_se(m: &MeanSe) -> String {
    if !m.mean.is_finite() {
        return "—".to_string();
    }
    let (reference, digits) = match m.se {
        Some(se) if se > 0.0 => (se, 2),
        _ => (m.mean.abs(), 3),
    };
    let decimals = if reference > 0.0 {
        (digits as f64 - 1.0 - reference.log10().floor()).clamp(2.0, 8.0) as usize
    } else {
        2
    };
    m.format(decimals)
}

/// The results table in GitHub Markdown: one row per (data set, backend, layers, run
/// configuration), metrics as mean ± standard error over splits.
pub fn markdown_table(rows: &[SummaryRow]) -> String {
    let mut s = String::from(
        "| data | backend | model | splits | steps | NLL | RMSE | CRPS | 95 % coverage | train s |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.dataset,
            r.backend,
            r.model,
            r.n_splits,
            r.steps,
            fmt_mean_se(&r.nll),
            fmt_mean_se(&r.rmse),
            fmt_mean_se(&r.crps),
            fmt_mean_se(&r.cov95),
            fmt_mean_se(&r.train_seconds),
        ));
    }
    s
}

/// The sentence stating units and the standard-error convention, printed under tables.
pub const TABLE_NOTE: &str = "NLL = mean negative test log-likelihood (−tll), RMSE and CRPS in the data's ORIGINAL \
target units; mean ± standard error over splits, s.e. = sd/√n with ddof = 1 (no ± with one split).";

fn create_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| BenchError::output(dir, e))
}

/// Writes `contents` to `path`, never leaving half a file and never replacing something
/// that is not a regular file:
///
/// * a new path or an existing regular file: a sibling temporary file (unique name,
///   created exclusively, synced, with the old file's permissions) renamed over the target;
/// * a symlink: the same, on the file it resolves to (the link stays a link); a dangling
///   symlink is refused;
/// * a device, FIFO or socket (e.g. `/dev/null`): written through in place (a rename
///   would replace the device with a regular file);
/// * a directory: refused.
fn write_file(path: &Path, contents: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir(parent)?;
    }
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return write_atomic(path, contents),
        Err(e) => return Err(BenchError::output(path, e)),
    };
    if meta.file_type().is_symlink() {
        let target = fs::canonicalize(path).map_err(|e| {
            BenchError::output(path, format!("a symlink that does not resolve ({e})"))
        })?;
        if fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
            return Err(BenchError::output(path, "a symlink to a directory"));
        }
        return write_atomic(&target, contents);
    }
    if meta.is_dir() {
        return Err(BenchError::output(path, "it is a directory"));
    }
    if meta.is_file() {
        return write_atomic(path, contents);
    }
    // A device, FIFO or socket: write through.
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| BenchError::output(path, e))?;
    f.write_all(contents)
        .and_then(|_| f.flush())
        .map_err(|e| BenchError::output(path, e))
}

/// Temporary sibling + rename (see [`write_file`]); `path` is a regular file or absent.
fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tmp, mut file) = create_temp(dir, &name).map_err(|e| BenchError::output(path, e))?;
    let written = fill_temp(&mut file, contents, path).and_then(|()| {
        drop(file);
        fs::rename(&tmp, path)
    });
    written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        BenchError::output(path, e)
    })
}

/// Writes `contents` into the temporary `file`, gives it the permissions of the file it
/// replaces (if any) and syncs it.
fn fill_temp(file: &mut fs::File, contents: &[u8], replaces: &Path) -> std::io::Result<()> {
    file.write_all(contents)?;
    if let Ok(m) = fs::metadata(replaces) {
        file.set_permissions(m.permissions())?;
    }
    file.sync_all()
}

/// An exclusively created temporary file `.NAME.PID.K.tmp-dgp-bench` in `dir` (K counts
/// up past names that exist, so no existing file is ever truncated).
fn create_temp(dir: &Path, name: &str) -> std::io::Result<(PathBuf, fs::File)> {
    let pid = std::process::id();
    let mut k = 0u32;
    loop {
        let tmp = dir.join(format!(".{name}.{pid}.{k}.tmp-dgp-bench"));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && k < 1000 => k += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Contents of `report.md`.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Title (first heading).
    pub title: String,
    /// Paragraphs printed before the table (what ran, protocol, settings).
    pub intro: Vec<String>,
    /// Summary rows.
    pub rows: Vec<SummaryRow>,
    /// `(caption, file name relative to report.md)` of the plots.
    pub plots: Vec<(String, String)>,
    /// Paragraphs printed after the table.
    pub notes: Vec<String>,
}

impl Report {
    /// The report as Markdown.
    pub fn to_markdown(&self) -> String {
        let mut s = format!("# {}\n\n", self.title);
        for p in &self.intro {
            s.push_str(p);
            s.push_str("\n\n");
        }
        s.push_str("## Results\n\n");
        s.push_str(&markdown_table(&self.rows));
        s.push('\n');
        s.push_str(TABLE_NOTE);
        s.push_str("\n\n");
        for p in &self.notes {
            s.push_str(p);
            s.push_str("\n\n");
        }
        if !self.plots.is_empty() {
            s.push_str("## Plots\n\n");
            for (caption, file) in &self.plots {
                s.push_str(&format!("### {caption}\n\n![{caption}]({file})\n\n"));
            }
        }
        s
    }

    /// Writes `dir/report.md` (creating `dir`) and returns its path.
    ///
    /// # Errors
    /// [`BenchError::Output`] if the directory or file cannot be written.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join("report.md");
        write_file(&path, self.to_markdown().as_bytes())?;
        Ok(path)
    }
}

/// The document written to `results.json`.
#[derive(Clone, Debug, Serialize)]
pub struct ResultsDoc<'a, S: Serialize> {
    /// Always `"dgp-bench"`.
    pub tool: &'static str,
    /// Crate version.
    pub version: &'static str,
    /// What ran (`"default"` or `"run"`) and with which settings.
    pub settings: S,
    /// One record per split.
    pub records: &'a [SplitRecord],
    /// Mean ± s.e. per (data set, backend, layers, run configuration).
    pub summary: &'a [SummaryRow],
    /// The standard-error convention.
    pub standard_error: &'static str,
}

/// Writes `dir/results.json`: `{tool, version, settings, records: [...], summary: [...],
/// standard_error}` (pretty-printed; non-finite numbers become `null`). Returns the path.
///
/// # Errors
/// [`BenchError::Output`] if the file cannot be written.
pub fn write_results_json<S: Serialize>(
    dir: &Path,
    settings: S,
    records: &[SplitRecord],
    summary: &[SummaryRow],
) -> Result<PathBuf> {
    let path = dir.join("results.json");
    let doc = ResultsDoc {
        tool: "dgp-bench",
        version: env!("CARGO_PKG_VERSION"),
        settings,
        records,
        summary,
        standard_error: "sd/sqrt(n), sd with ddof = 1",
    };
    let text = serde_json::to_string_pretty(&doc).map_err(|e| BenchError::output(&path, e))?;
    write_file(&path, text.as_bytes())?;
    Ok(path)
}

/// Writes a run's report files into `dir`: `report.md` ([`Report::write`]) and
/// `results.json` ([`write_results_json`], with the report's rows as the summary). Returns
/// their paths. The one place where `run` and the default job assemble their output.
///
/// # Errors
/// [`BenchError::Output`] if a file cannot be written.
pub fn write_report_files<S: Serialize>(
    dir: &Path,
    report: &Report,
    settings: S,
    records: &[SplitRecord],
) -> Result<Vec<PathBuf>> {
    let md = report.write(dir)?;
    let json = write_results_json(dir, settings, records, &report.rows)?;
    Ok(vec![md, json])
}

/// Streams split records to a file as JSON Lines: one JSON object per line, written and
/// flushed as each split finishes, so an interrupted run keeps its finished splits. The
/// file is truncated when opened.
pub struct JsonLinesWriter {
    path: PathBuf,
    file: fs::File,
}

impl JsonLinesWriter {
    /// Creates (truncates) `path`, creating parent directories.
    ///
    /// # Errors
    /// [`BenchError::Output`] if it cannot be created.
    pub fn create(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_dir(parent)?;
        }
        let file = fs::File::create(path).map_err(|e| BenchError::output(path, e))?;
        Ok(JsonLinesWriter {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one record as a line and flushes.
    ///
    /// # Errors
    /// [`BenchError::Output`] if writing fails.
    pub fn write(&mut self, record: &SplitRecord) -> Result<()> {
        let line = serde_json::to_string(record).map_err(|e| BenchError::output(&self.path, e))?;
        writeln!(self.file, "{line}")
            .and_then(|_| self.file.flush())
            .map_err(|e| BenchError::output(&self.path, e))
    }
}

/// Reads a JSON-lines file of records (as written by [`JsonLinesWriter`]).
///
/// # Errors
/// [`BenchError::Usage`] if the file cannot be read or a line is not a record.
pub fn read_json_lines(path: &Path) -> Result<Vec<SplitRecord>> {
    let text = fs::read_to_string(path)
        .map_err(|e| BenchError::Usage(format!("cannot read {}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                BenchError::Usage(format!(
                    "{}:{}: not a split record: {e}",
                    path.display(),
                    i + 1
                ))
            })
        })
        .collect()
}

/// Writes any serialisable value as pretty JSON to `path`.
///
/// # Errors
/// [`BenchError::Output`] if it cannot be written.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| BenchError::output(path, e))?;
    write_file(path, text.as_bytes())
}

/// Writes text to `path` (atomically, creating parent directories).
///
/// # Errors
/// [`BenchError::Output`] if it cannot be written.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    write_file(path, text.as_bytes())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::summary::summarise;

    pub(crate) fn record(dataset: &str, layers: usize, split: usize, nll: f64) -> SplitRecord {
        SplitRecord {
            backend: "svi".into(),
            layers,
            dataset: dataset.into(),
            split,
            nll,
            rmse: 1.0,
            crps: 0.5,
            cov95: 0.95,
            train_seconds: 2.0,
            steps: 10,
            cov50: 0.5,
            cov90: 0.9,
            predict_seconds: 0.1,
            num_inducing: 5,
            hidden_width: None,
            batch_size: 10,
            learning_rate: Some(0.01),
            train_samples: 1,
            predict_samples: 10,
            seed: 0,
            n_train: 9,
            n_test: 1,
            final_objective: -1.0,
            model: "svi L=2".into(),
            settings: Default::default(),
            command: String::new(),
            protocol: String::new(),
            max_steps: 0,
            log_density: Vec::new(),
            resources: Default::default(),
            diagnostics: Default::default(),
            warnings: Vec::new(),
            y_mean: Vec::new(),
            y_std: Vec::new(),
            validation_rows: 0,
        }
    }

    #[test]
    fn formatting_follows_the_standard_error() {
        let f = |mean, se| fmt_mean_se(&MeanSe { mean, se });
        assert_eq!(f(3.0912, Some(0.0213)), "3.091 ± 0.021");
        assert_eq!(f(2.5, Some(0.645)), "2.50 ± 0.65");
        assert_eq!(f(0.00123, None), "0.00123");
        assert_eq!(f(f64::NAN, None), "—");
    }

    #[test]
    fn table_groups_and_reports_mean_se() {
        let recs = vec![
            record("a", 1, 0, 1.0),
            record("a", 2, 0, 3.0),
            record("a", 1, 1, 2.0),
        ];
        let rows = summarise(&recs);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].n_splits, 2);
        let t = markdown_table(&rows);
        assert_eq!(t.lines().count(), 4);
        assert!(
            t.contains("| a | svi | SGP | 2 | 10 | 1.50 ± 0.50 |"),
            "{t}"
        );
        assert!(t.contains("| a | svi | DGP2 | 1 | 10 | 3.00 |"), "{t}");
    }
}
