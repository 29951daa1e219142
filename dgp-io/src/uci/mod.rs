//! Loader for the UCI benchmark folder format (`shared/data/uci/<name>/`).
//!
//! A folder holds `data.txt` (whitespace-separated numbers, one row per example; blank lines
//! are ignored anywhere, including trailing ones), `index_features.txt` and
//! `index_target.txt` (0-based column indices of `data.txt`, whitespace separated, usually
//! one per line), `n_splits.txt` (the number of published splits) and
//! `splits/index_train_K.txt`, `splits/index_test_K.txt` (0-based row indices of split K,
//! Hernández-Lobato & Adams 2015). Classification folders are the same format with a label
//! column `0..K`: [`ClassDataset`] validates the labels and checks that every class occurs in
//! each training split.

mod classes;

pub use classes::{ClassDataset, ClassSplit};

use std::path::{Path, PathBuf};

use faer::Mat;

use dgp_traits::data::{Dataset, quote_field, strip_bom};
use dgp_traits::error::{Error, Result};

/// A UCI benchmark data set with its published train/test splits.
#[derive(Clone, Debug)]
pub struct UciDataset {
    /// Data set name (the folder name, or the name given to [`load_uci_from_str`]).
    pub name: String,
    /// All N rows: inputs are the `index_features` columns, targets the `index_target`
    /// columns (P = 1 for the standard benchmarks).
    pub data: Dataset,
    /// Number of published splits (`n_splits.txt`).
    pub n_splits: usize,
    /// Suspicious but loadable contents, one sentence each (e.g. a target column that is
    /// also listed as a feature: the target would be an input). Empty for the published
    /// data sets.
    pub warnings: Vec<String>,
    splits: SplitSource,
}

#[derive(Clone, Debug)]
enum SplitSource {
    /// Read `splits/index_{train,test}_K.txt` from this folder on demand.
    Dir(PathBuf),
    /// Split contents given as text, parsed on demand; `(train, test)` per split.
    Embedded(Vec<(String, String)>),
}

/// The contents of a UCI folder as strings, e.g. embedded with `include_str!`.
///
/// ```
/// use dgp_io::uci::{UciSources, load_uci_from_str};
/// let src = UciSources {
///     name: "tiny",
///     data: "1 2 3\n4 5 6\n7 8 9\n\n",
///     index_features: "0\n1\n",
///     index_target: "2\n",
///     n_splits: "1\n",
///     splits: &[("0\n1\n", "2\n")],
/// };
/// let uci = load_uci_from_str(&src).unwrap();
/// assert_eq!((uci.data.n(), uci.data.input_dim()), (3, 2));
/// assert_eq!(uci.split(0).unwrap(), (vec![0, 1], vec![2]));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct UciSources<'a> {
    /// Data set name; error messages use the pseudo-path `embedded:<name>/<file>`.
    pub name: &'a str,
    /// Contents of `data.txt`.
    pub data: &'a str,
    /// Contents of `index_features.txt`.
    pub index_features: &'a str,
    /// Contents of `index_target.txt`.
    pub index_target: &'a str,
    /// Contents of `n_splits.txt`.
    pub n_splits: &'a str,
    /// `(index_train_K.txt, index_test_K.txt)` contents for K = 0, 1, …; may hold fewer
    /// than `n_splits` splits (the missing ones give [`Error::Config`] from
    /// [`UciDataset::split`]) but not more.
    pub splits: &'a [(&'a str, &'a str)],
}

/// A file of the folder, every line at most [`dgp_traits::data::MAX_LINE_BYTES`] long.
fn read(path: &Path) -> Result<String> {
    dgp_traits::data::read_text_bounded(path)
}

fn parse_err(path: &Path, line: usize, column: usize, message: String) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// Parses whitespace-separated numbers, one row per non-blank line, into an N×D matrix.
///
/// `path` only labels errors. Blank (whitespace-only) lines are skipped anywhere; a
/// byte-order mark at the start of the text is ignored, one elsewhere is named in the
/// error ([`dgp_traits::data::quote_field`]).
///
/// # Errors
/// [`Error::Parse`] with the 1-based line and field number for a token that is not a finite
/// number or a row whose field count differs from the first row's; [`Error::Empty`] if there
/// are no rows.
pub fn parse_matrix(text: &str, path: &Path) -> Result<Mat<f64>> {
    let mut values: Vec<f64> = Vec::new();
    let mut ncols: Option<usize> = None;
    let mut nrows = 0usize;
    for (li, line) in strip_bom(text).lines().enumerate() {
        let lineno = li + 1;
        let start = values.len();
        for (fi, tok) in line.split_whitespace().enumerate() {
            let v: f64 = tok.parse().map_err(|_| {
                parse_err(
                    path,
                    lineno,
                    fi + 1,
                    format!("{} is not a number", quote_field(tok)),
                )
            })?;
            if !v.is_finite() {
                return Err(parse_err(
                    path,
                    lineno,
                    fi + 1,
                    format!("{} is not a finite number", quote_field(tok)),
                ));
            }
            values.push(v);
        }
        let got = values.len() - start;
        if got == 0 {
            continue;
        }
        match ncols {
            None => ncols = Some(got),
            Some(d) if d != got => {
                return Err(parse_err(
                    path,
                    lineno,
                    d.min(got) + 1,
                    format!("row has {got} fields, the first row has {d}"),
                ));
            }
            Some(_) => {}
        }
        nrows += 1;
    }
    let d = match ncols {
        Some(d) => d,
        None => {
            return Err(Error::Empty(format!("{}: no data rows", path.display())));
        }
    };
    Ok(Mat::from_fn(nrows, d, |i, j| values[i * d + j]))
}

/// Parses whitespace-separated non-negative integers (typically one per line, blank lines
/// ignored; a byte-order mark at the start ignored), each required to be `< bound`.
///
/// # Errors
/// [`Error::Parse`] with the 1-based line and field number for a token that is not a
/// non-negative integer or is `≥ bound` (an out-of-range row or column index).
pub fn parse_indices(text: &str, path: &Path, bound: usize) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for (li, line) in strip_bom(text).lines().enumerate() {
        for (fi, tok) in line.split_whitespace().enumerate() {
            let v: usize = tok.parse().map_err(|_| {
                parse_err(
                    path,
                    li + 1,
                    fi + 1,
                    format!("{} is not a non-negative integer", quote_field(tok)),
                )
            })?;
            if v >= bound {
                return Err(parse_err(
                    path,
                    li + 1,
                    fi + 1,
                    format!("index {v} out of range (must be < {bound})"),
                ));
            }
            out.push(v);
        }
    }
    Ok(out)
}

fn parse_count(text: &str, path: &Path) -> Result<usize> {
    let v = parse_indices(text, path, usize::MAX)?;
    match v.as_slice() {
        [k] => Ok(*k),
        _ => Err(parse_err(
            path,
            1,
            0,
            format!("expected exactly one integer, found {}", v.len()),
        )),
    }
}

/// Builds the data set from the parsed pieces. `paths` = (data, features, target, n_splits).
fn assemble(
    name: String,
    texts: [&str; 4],
    paths: [&Path; 4],
    splits: SplitSource,
) -> Result<UciDataset> {
    let raw = parse_matrix(texts[0], paths[0])?;
    let ncols = raw.ncols();
    let feats = parse_indices(texts[1], paths[1], ncols)?;
    let targets = parse_indices(texts[2], paths[2], ncols)?;
    if feats.is_empty() {
        return Err(Error::Empty(format!(
            "{}: no feature indices",
            paths[1].display()
        )));
    }
    if targets.is_empty() {
        return Err(Error::Empty(format!(
            "{}: no target index",
            paths[2].display()
        )));
    }
    let n_splits = parse_count(texts[3], paths[3])?;
    if let SplitSource::Embedded(s) = &splits
        && s.len() > n_splits
    {
        return Err(Error::config(
            "n_splits",
            format!(
                "{name}: {} embedded splits but n_splits = {n_splits}",
                s.len()
            ),
        ));
    }
    let mut warnings = Vec::new();
    let leaked: Vec<usize> = targets
        .iter()
        .copied()
        .filter(|t| feats.contains(t))
        .collect();
    if !leaked.is_empty() {
        warnings.push(format!(
            "{name}: target column(s) {leaked:?} ({}) are also listed as features ({}): the \
             target is an input of the model (leakage)",
            paths[2].display(),
            paths[1].display()
        ));
    }
    let n = raw.nrows();
    let x = Mat::from_fn(n, feats.len(), |i, j| raw[(i, feats[j])]);
    let y = Mat::from_fn(n, targets.len(), |i, j| raw[(i, targets[j])]);
    Ok(UciDataset {
        name,
        data: Dataset::new(x, y)?,
        n_splits,
        warnings,
        splits,
    })
}

/// Loads a UCI folder (see the module docs). Split files are read by [`UciDataset::split`].
///
/// # Errors
/// [`Error::Io`] naming the file that cannot be read; [`Error::Parse`] (path, line, field)
/// for malformed contents, out-of-range column indices or a line longer than
/// [`dgp_traits::data::MAX_LINE_BYTES`] (found before the rest of the file is read);
/// [`Error::Empty`] for empty files.
pub fn load_uci(dir: impl AsRef<Path>) -> Result<UciDataset> {
    let dir = dir.as_ref();
    let files = [
        "data.txt",
        "index_features.txt",
        "index_target.txt",
        "n_splits.txt",
    ];
    let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(f)).collect();
    let texts = [
        read(&paths[0])?,
        read(&paths[1])?,
        read(&paths[2])?,
        read(&paths[3])?,
    ];
    let name = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    assemble(
        name,
        [&texts[0], &texts[1], &texts[2], &texts[3]],
        [&paths[0], &paths[1], &paths[2], &paths[3]],
        SplitSource::Dir(dir.to_path_buf()),
    )
}

/// Parses a UCI data set from in-memory file contents (e.g. `include_str!`).
///
/// # Errors
/// As [`load_uci`] (paths are the pseudo-paths `embedded:<name>/<file>`), plus
/// [`Error::Config`] if more splits are given than `n_splits`.
pub fn load_uci_from_str(src: &UciSources<'_>) -> Result<UciDataset> {
    let p = |f: &str| PathBuf::from(format!("embedded:{}/{f}", src.name));
    let paths = [
        p("data.txt"),
        p("index_features.txt"),
        p("index_target.txt"),
        p("n_splits.txt"),
    ];
    let splits = src
        .splits
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assemble(
        src.name.to_string(),
        [src.data, src.index_features, src.index_target, src.n_splits],
        [&paths[0], &paths[1], &paths[2], &paths[3]],
        SplitSource::Embedded(splits),
    )
}

impl UciDataset {
    /// Loads a UCI folder; same as [`load_uci`].
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        load_uci(dir)
    }

    /// Published split `k`: `(train, test)` row indices in file order.
    ///
    /// Validated: every index `< N` and no index repeated within a file ([`Error::Parse`]
    /// with the file, line and field), train and test disjoint ([`Error::Config`]).
    ///
    /// # Errors
    /// [`Error::Config`] if `k ≥ n_splits` (or the split was not embedded); [`Error::Io`]
    /// if a split file cannot be read; the validation errors above.
    pub fn split(&self, k: usize) -> Result<(Vec<usize>, Vec<usize>)> {
        if k >= self.n_splits {
            return Err(Error::config(
                "split",
                format!(
                    "{}: split {k} requested but there are {} splits",
                    self.name, self.n_splits
                ),
            ));
        }
        let train_name = format!("index_train_{k}.txt");
        let test_name = format!("index_test_{k}.txt");
        let (train_path, test_path, train_text, test_text) = match &self.splits {
            SplitSource::Dir(dir) => {
                let a = dir.join("splits").join(&train_name);
                let b = dir.join("splits").join(&test_name);
                let ta = read(&a)?;
                let tb = read(&b)?;
                (a, b, ta, tb)
            }
            SplitSource::Embedded(s) => {
                let (ta, tb) = s.get(k).ok_or_else(|| {
                    Error::config(
                        "split",
                        format!("{}: split {k} was not embedded", self.name),
                    )
                })?;
                let p = |f: &str| PathBuf::from(format!("embedded:{}/splits/{f}", self.name));
                (p(&train_name), p(&test_name), ta.clone(), tb.clone())
            }
        };
        let n = self.data.n();
        let train = parse_split_file(&train_text, &train_path, n)?;
        let test = parse_split_file(&test_text, &test_path, n)?;
        for (idx, path) in [(&train, &train_path), (&test, &test_path)] {
            if idx.is_empty() {
                return Err(Error::Empty(format!(
                    "{}: no row indices (split {k} needs a non-empty train and test set)",
                    path.display()
                )));
            }
        }
        let mut in_train = vec![false; n];
        for &i in &train {
            in_train[i] = true;
        }
        if let Some(&i) = test.iter().find(|&&i| in_train[i]) {
            return Err(Error::config(
                "split",
                format!(
                    "{}: split {k}: row {i} is in both the train and the test set",
                    self.name
                ),
            ));
        }
        Ok((train, test))
    }
}

/// Row indices of one split file, checked for range and repeats.
fn parse_split_file(text: &str, path: &Path, n: usize) -> Result<Vec<usize>> {
    let idx = parse_indices(text, path, n)?;
    let mut seen = vec![false; n];
    for &i in &idx {
        if seen[i] {
            return Err(repeat_error(text, path, i));
        }
        seen[i] = true;
    }
    Ok(idx)
}

/// The error of a row index `i` that `text` holds twice, at the second occurrence (found
/// as `parse_indices` reads the text: a byte-order mark at the start skipped).
fn repeat_error(text: &str, path: &Path, i: usize) -> Error {
    let message = format!("row index {i} repeated");
    let mut count = 0;
    for (li, line) in strip_bom(text).lines().enumerate() {
        for (fi, tok) in line.split_whitespace().enumerate() {
            if tok.parse::<usize>().ok() == Some(i) {
                count += 1;
                if count == 2 {
                    return parse_err(path, li + 1, fi + 1, message);
                }
            }
        }
    }
    parse_err(path, 0, 0, message)
}
