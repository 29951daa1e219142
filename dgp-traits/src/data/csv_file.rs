//! CSV loader: a header row, numeric fields, named target column(s).

use std::path::{Path, PathBuf};

use faer::Mat;

use crate::data::dataset::Dataset;
use crate::data::text::{narrow_header, quote_field, strip_bom_bytes};
use crate::error::{Error, Result};

/// Loads a CSV file with a header; the column named `target` becomes `y` (N×1) and all other
/// columns, in file order, become `x`. Feature and target names are taken from the header.
///
/// Fields are trimmed; every field must be a finite number (no missing values). A
/// byte-order mark at the start of the file is ignored; a header of fewer than two
/// columns is explained ([`crate::data::narrow_header`]: an empty file, or the separator
/// the line seems to use instead of the comma).
///
/// # Errors
/// [`Error::Io`] if the file cannot be read; [`Error::Parse`] with the 1-based line and
/// field number for a bad number, a ragged row, a missing or repeated target column
/// (reported on line 1), or a line longer than [`crate::data::MAX_LINE_BYTES`] (found
/// before the rest of the file is read); [`Error::Empty`] for no data rows or no feature
/// columns.
pub fn load_csv(path: impl AsRef<Path>, target: &str) -> Result<Dataset> {
    load_csv_targets(path, &[target])
}

/// Like [`load_csv`] with several target columns (`y` is N×P, columns in the order given).
///
/// # Errors
/// As [`load_csv`].
pub fn load_csv_targets(path: impl AsRef<Path>, targets: &[&str]) -> Result<Dataset> {
    let path = path.as_ref();
    let bytes = crate::data::read_bounded(path, crate::data::line_limit())?;
    parse_csv_bytes(&bytes, targets, path)
}

/// Parses CSV text (see [`load_csv_targets`]); `path` only labels errors.
///
/// ```
/// use dgp_traits::data::parse_csv_str;
/// use std::path::Path;
/// let d = parse_csv_str("a,y,b\n1,2,3\n4,5,6\n", &["y"], Path::new("t.csv")).unwrap();
/// assert_eq!((d.n(), d.input_dim(), d.y()[(1, 0)]), (2, 2, 5.0));
/// assert_eq!(d.feature_names().unwrap(), &["a".to_string(), "b".to_string()]);
/// ```
///
/// # Errors
/// As [`load_csv`].
pub fn parse_csv_str(text: &str, targets: &[&str], path: &Path) -> Result<Dataset> {
    parse_csv_bytes(text.as_bytes(), targets, path)
}

fn perr(path: &Path, line: usize, column: usize, message: String) -> Error {
    Error::Parse {
        path: PathBuf::from(path),
        line,
        column,
        message,
    }
}

fn csv_err(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map(|p| p.line() as usize).unwrap_or(0);
    let column = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => (*expected_len.min(len) as usize) + 1,
        csv::ErrorKind::Utf8 { err, .. } => err.field() + 1,
        _ => 0,
    };
    perr(path, line, column, e.to_string())
}

fn parse_csv_bytes(bytes: &[u8], targets: &[&str], path: &Path) -> Result<Dataset> {
    if targets.is_empty() {
        return Err(Error::config("target", "no target column given"));
    }
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(bytes);
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| csv_err(path, e))?
        .iter()
        .map(str::to_string)
        .collect();
    if header.len() < 2 {
        let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        let empty = strip_bom_bytes(bytes).iter().all(u8::is_ascii_whitespace);
        return Err(perr(
            path,
            1,
            0,
            narrow_header(&String::from_utf8_lossy(first), empty),
        ));
    }
    let mut target_cols = Vec::with_capacity(targets.len());
    for &t in targets {
        let hits: Vec<usize> = (0..header.len()).filter(|&j| header[j] == t).collect();
        match hits.as_slice() {
            [j] => target_cols.push(*j),
            [] => {
                return Err(perr(
                    path,
                    1,
                    0,
                    format!("no column named '{t}' in the header {header:?}"),
                ));
            }
            _ => {
                return Err(perr(
                    path,
                    1,
                    hits[1] + 1,
                    format!("column name '{t}' appears more than once"),
                ));
            }
        }
    }
    let feature_cols: Vec<usize> = (0..header.len())
        .filter(|j| !target_cols.contains(j))
        .collect();
    if feature_cols.is_empty() {
        return Err(Error::Empty(format!(
            "{}: no feature columns besides the target(s)",
            path.display()
        )));
    }
    let ncols = header.len();
    let mut values: Vec<f64> = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(csv_err(path, e)),
        }
        let line = record.position().map(|p| p.line() as usize).unwrap_or(0);
        for (j, field) in record.iter().enumerate() {
            let v: f64 = field.parse().map_err(|_| {
                perr(
                    path,
                    line,
                    j + 1,
                    format!("{} is not a number", quote_field(field)),
                )
            })?;
            if !v.is_finite() {
                return Err(perr(
                    path,
                    line,
                    j + 1,
                    format!("{} is not a finite number", quote_field(field)),
                ));
            }
            values.push(v);
        }
    }
    let n = values.len() / ncols;
    if n == 0 {
        return Err(Error::Empty(format!("{}: no data rows", path.display())));
    }
    let x = Mat::from_fn(n, feature_cols.len(), |i, j| {
        values[i * ncols + feature_cols[j]]
    });
    let y = Mat::from_fn(n, target_cols.len(), |i, j| {
        values[i * ncols + target_cols[j]]
    });
    Dataset::new(x, y)?
        .with_feature_names(feature_cols.iter().map(|&j| header[j].clone()).collect())?
        .with_target_names(targets.iter().map(|t| t.to_string()).collect())
}
