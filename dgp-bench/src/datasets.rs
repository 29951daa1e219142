//! Data sources of the benchmark and their train/test splits.
//!
//! * UCI folders (`shared/data/uci` format) with their published Hernández-Lobato & Adams
//!   splits (protocol §1);
//! * CSV files with a header and Parquet files (`.parquet`, numeric columns), split by
//!   seeded random 90/10 splits (Structured's `prepare_dataset`: a permutation whose first
//!   10 % are the test set);
//! * two built-ins, addressable on the command line as `builtin:concrete` and
//!   `builtin:step`: the concrete data set with its 20 published splits, embedded in the
//!   binary with `include_str!`, and the noisy step function of the DGPS thesis (Vafa 2016,
//!   §5.1) generated in code.

use std::path::Path;

use dgp_io::parquet_reader::{load_parquet, parquet_column_names};
use dgp_io::uci::{UciDataset, UciSources, load_uci, load_uci_from_str};
use dgp_traits::data::{Dataset, StandardizeOptions, extrapolation_split, load_csv, random_split};
use dgp_traits::rng::{seeded, standard_normal};
use faer::Mat;
use rand::Rng as _;

use crate::error::{BenchError, Result};

/// Fraction of rows held out by the random splits of CSV files (protocol §1: 90/10).
pub const CSV_TEST_FRACTION: f64 = 0.1;
/// Number of random splits a CSV file offers (`--splits all`), as the 20 published UCI
/// splits.
pub const CSV_SPLITS: usize = 20;

pub use crate::splits::{LINDINGER_SPLITS, LINDINGER_TEST_FRACTION, SplitKind};

/// Size of the step-function data set (DGPS thesis §5.1 uses N ∈ {50, 100, 200}).
pub const STEP_N: usize = 200;
/// Standard deviation of the step function's noise. The thesis writes
/// "y_i = sign(x_i) + ε_i, where ε_i ~ N(0, σ²) … and ε = .01"; we read ".01" as the noise
/// scale σ (the thesis never writes σ² = .01), so the variance is 1e-4.
pub const STEP_NOISE_STD: f64 = 0.01;
/// Test fraction of the step function (thesis: 80/20 split).
pub const STEP_TEST_FRACTION: f64 = 0.2;
/// Number of random splits of the step function (thesis: 10 trials).
pub const STEP_SPLITS: usize = 10;
/// Input range of the step function: x ~ U(−2, 2).
pub const STEP_RANGE: (f64, f64) = (-2.0, 2.0);

macro_rules! concrete_split {
    ($k:literal) => {
        (
            include_str!(concat!("../data/concrete/splits/index_train_", $k, ".txt")),
            include_str!(concat!("../data/concrete/splits/index_test_", $k, ".txt")),
        )
    };
}

static CONCRETE_SPLITS: [(&str, &str); 20] = [
    concrete_split!("0"),
    concrete_split!("1"),
    concrete_split!("2"),
    concrete_split!("3"),
    concrete_split!("4"),
    concrete_split!("5"),
    concrete_split!("6"),
    concrete_split!("7"),
    concrete_split!("8"),
    concrete_split!("9"),
    concrete_split!("10"),
    concrete_split!("11"),
    concrete_split!("12"),
    concrete_split!("13"),
    concrete_split!("14"),
    concrete_split!("15"),
    concrete_split!("16"),
    concrete_split!("17"),
    concrete_split!("18"),
    concrete_split!("19"),
];

/// The embedded concrete compressive-strength data (Yeh 1998; N = 1030, D = 8) with its 20
/// published splits, as committed in `dgp-bench/data/concrete/`.
pub fn concrete_sources() -> UciSources<'static> {
    UciSources {
        name: "concrete",
        data: include_str!("../data/concrete/data.txt"),
        index_features: include_str!("../data/concrete/index_features.txt"),
        index_target: include_str!("../data/concrete/index_target.txt"),
        n_splits: include_str!("../data/concrete/n_splits.txt"),
        splits: &CONCRETE_SPLITS,
    }
}

/// The noisy step function of the DGPS thesis (Vafa 2016, §5.1):
/// y = sign(x) + ε, x ~ U(−2, 2), ε ~ N(0, `noise_std`²), `n` points, all from `seed`.
///
/// # Errors
/// [`dgp_traits::Error::Empty`] for `n = 0`; [`dgp_traits::Error::Config`] for a negative
/// or non-finite noise level.
pub fn step_function(n: usize, noise_std: f64, seed: u64) -> dgp_traits::Result<Dataset> {
    if !(noise_std >= 0.0 && noise_std.is_finite()) {
        return Err(dgp_traits::Error::config(
            "noise_std",
            format!("step function noise std must be finite and ≥ 0, got {noise_std}"),
        ));
    }
    let mut rng = seeded(seed);
    let (lo, hi) = STEP_RANGE;
    let x = Mat::from_fn(n, 1, |_, _| {
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        lo + (hi - lo) * u
    });
    let eps = standard_normal(&mut rng, n, 1);
    let y = Mat::from_fn(n, 1, |i, _| {
        let s = if x[(i, 0)] > 0.0 {
            1.0
        } else if x[(i, 0)] < 0.0 {
            -1.0
        } else {
            0.0
        };
        s + noise_std * eps[(i, 0)]
    });
    Dataset::new(x, y)
}

#[derive(Clone, Debug)]
enum Source {
    Uci(UciDataset),
    Random {
        data: Dataset,
        test_fraction: f64,
        n_splits: usize,
        seed: u64,
    },
    Extrapolate {
        data: Dataset,
        n_splits: usize,
        seed: u64,
    },
    Dspp {
        data: Dataset,
        n_splits: usize,
        seed: u64,
    },
}

/// A data set with its train/test splits: published splits (UCI folders) or seeded random
/// ones (CSV files, the step function).
#[derive(Clone, Debug)]
pub struct BenchData {
    /// Name used in reports (folder or file stem, `concrete`, `step`).
    pub name: String,
    /// Where the data came from (a path, or `embedded`/`generated`).
    pub origin: String,
    source: Source,
    /// Suspicious but loadable contents (a headerless-looking CSV file, a target also
    /// listed as a feature), one sentence each; see [`BenchData::warnings`].
    warnings: Vec<String>,
}

impl BenchData {
    /// Wraps a loaded UCI data set (published splits).
    pub fn from_uci(uci: UciDataset, origin: impl Into<String>) -> Self {
        BenchData {
            name: uci.name.clone(),
            origin: origin.into(),
            warnings: uci.warnings.clone(),
            source: Source::Uci(uci),
        }
    }

    /// A data set with `n_splits` seeded random splits: split k holds out
    /// `floor(test_fraction·N)` rows chosen by `random_split(N, test_fraction, seed + k)`.
    ///
    /// # Errors
    /// [`BenchError::Usage`] for a test fraction outside (0, 1) or zero splits.
    pub fn with_random_splits(
        name: impl Into<String>,
        origin: impl Into<String>,
        data: Dataset,
        test_fraction: f64,
        n_splits: usize,
        seed: u64,
    ) -> Result<Self> {
        if !(test_fraction > 0.0 && test_fraction < 1.0) || n_splits == 0 {
            return Err(BenchError::Usage(format!(
                "random splits need a test fraction in (0, 1) and at least one split, got {test_fraction} and {n_splits}"
            )));
        }
        Ok(BenchData {
            name: name.into(),
            origin: origin.into(),
            source: Source::Random {
                data,
                test_fraction,
                n_splits,
                seed,
            },
            warnings: Vec::new(),
        })
    }

    /// Warnings about the data found while loading (printed by the command line and
    /// recorded in the JSON records): a CSV header that looks like a data row, a target
    /// column also listed as a feature.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The embedded concrete data set with its published splits (`builtin:concrete`).
    pub fn embedded_concrete() -> Result<Self> {
        let uci = load_uci_from_str(&concrete_sources()).map_err(BenchError::data)?;
        Ok(Self::from_uci(uci, "embedded (dgp-bench/data/concrete)"))
    }

    /// The DGPS step function (`builtin:step`): [`STEP_N`] points with noise std
    /// [`STEP_NOISE_STD`] generated from `seed`, and [`STEP_SPLITS`] random 80/20 splits
    /// (split k uses seed `seed + k`).
    pub fn step(seed: u64) -> Result<Self> {
        let data = step_function(STEP_N, STEP_NOISE_STD, seed).map_err(BenchError::data)?;
        Self::with_random_splits(
            "step",
            format!(
                "generated: y = sign(x) + N(0, {STEP_NOISE_STD}²), x ~ U(−2, 2), N = {STEP_N}, seed {seed}"
            ),
            data,
            STEP_TEST_FRACTION,
            STEP_SPLITS,
            seed,
        )
    }

    /// Loads `spec`: `builtin:concrete`, `builtin:step`, a UCI folder (a directory), a
    /// Parquet file (extension `.parquet`, numeric columns) or a CSV file with a header (any
    /// other file). For a file, `target` names the target column (default the last column),
    /// every other column is an input, and the splits are random 90/10 seeded by `seed`.
    ///
    /// # Errors
    /// [`BenchError::Usage`] for an unknown built-in, a missing path or `target` given for a
    /// UCI folder; [`BenchError::Data`] for unreadable or malformed files.
    pub fn load(spec: &str, target: Option<&str>, seed: u64) -> Result<Self> {
        if let Some(name) = spec.strip_prefix("builtin:") {
            if target.is_some() {
                return Err(BenchError::Usage(
                    "--target applies to CSV and Parquet files only".into(),
                ));
            }
            return match name {
                "concrete" => Self::embedded_concrete(),
                "step" => Self::step(seed),
                _ => Err(BenchError::Usage(format!(
                    "unknown built-in data set '{spec}' (available: builtin:concrete, builtin:step)"
                ))),
            };
        }
        let path = Path::new(spec);
        if path.is_dir() {
            if target.is_some() {
                return Err(BenchError::Usage(format!(
                    "--target applies to CSV and Parquet files only; {spec} is a UCI folder (its target is index_target.txt)"
                )));
            }
            let uci = load_uci(path).map_err(BenchError::data)?;
            return Ok(Self::from_uci(uci, spec));
        }
        if !path.exists() {
            return Err(BenchError::Usage(format!(
                "--data {spec}: no such file or directory (give a UCI folder, a CSV file, builtin:concrete or builtin:step)"
            )));
        }
        let parquet = is_parquet(path);
        let header = if parquet {
            parquet_column_names(path).map_err(BenchError::data)?
        } else {
            csv_header(path)?
        };
        let target = match target {
            Some(t) => t.to_string(),
            None => header.last().cloned().unwrap_or_default(),
        };
        let data = if parquet {
            load_parquet(path, &target)
        } else {
            load_csv(path, &target)
        }
        .map_err(BenchError::data)?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| spec.to_string());
        let mut out =
            Self::with_random_splits(name, spec, data, CSV_TEST_FRACTION, CSV_SPLITS, seed)?;
        if !parquet && header.iter().all(|h| h.parse::<f64>().is_ok()) {
            out.warnings.push(format!(
                "{spec}: every field of the first row ({}) is a number: is the header \
                 missing? The first row is used as the column names, not as data",
                header.join(",")
            ));
        }
        Ok(out)
    }

    /// The same rows split another way (`--split-kind`): [`SplitKind::Published`] keeps
    /// the data set's own splits; the others replace them, seeded with `seed + k`.
    ///
    /// # Errors
    /// [`BenchError::Usage`] when the data are too small for the split.
    pub fn with_split_kind(self, kind: SplitKind, seed: u64) -> Result<Self> {
        let data = self.data().clone();
        let source = match kind {
            SplitKind::Published => return Ok(self),
            SplitKind::Random => {
                if (LINDINGER_TEST_FRACTION * data.n() as f64).floor() < 1.0 {
                    return Err(BenchError::Usage(format!(
                        "--split-kind random: {} has {} rows, too few for a 90:10 split",
                        self.name,
                        data.n()
                    )));
                }
                Source::Random {
                    data,
                    test_fraction: LINDINGER_TEST_FRACTION,
                    n_splits: LINDINGER_SPLITS,
                    seed,
                }
            }
            SplitKind::Extrapolate => {
                if data.n() < 4 {
                    return Err(BenchError::Usage(format!(
                        "--split-kind extrapolate: {} has {} rows, too few to split in halves",
                        self.name,
                        data.n()
                    )));
                }
                Source::Extrapolate {
                    data,
                    n_splits: LINDINGER_SPLITS,
                    seed,
                }
            }
            SplitKind::Dspp { splits } => {
                crate::splits::DsppPartition::of(data.n(), &self.name)?;
                if splits == 0 {
                    return Err(BenchError::Usage(
                        "--protocol dspp: zero splits requested".into(),
                    ));
                }
                Source::Dspp {
                    data,
                    n_splits: splits,
                    seed,
                }
            }
        };
        Ok(BenchData { source, ..self })
    }

    /// How the training split is standardised: the extrapolation split drops features
    /// whose train std is ≤ 1e-3 (protocol §1 step 3); every other split keeps them.
    pub fn standardize_options(&self) -> StandardizeOptions {
        match self.source {
            Source::Extrapolate { .. } => StandardizeOptions::drop_near_constant(),
            _ => StandardizeOptions::default(),
        }
    }

    /// All rows (inputs and targets in original units).
    pub fn data(&self) -> &Dataset {
        match &self.source {
            Source::Uci(u) => &u.data,
            Source::Random { data, .. }
            | Source::Extrapolate { data, .. }
            | Source::Dspp { data, .. } => data,
        }
    }

    /// Number of available splits.
    pub fn n_splits(&self) -> usize {
        match &self.source {
            Source::Uci(u) => u.n_splits,
            Source::Random { n_splits, .. }
            | Source::Extrapolate { n_splits, .. }
            | Source::Dspp { n_splits, .. } => *n_splits,
        }
    }

    /// True for published splits, false for seeded random ones.
    pub fn has_published_splits(&self) -> bool {
        matches!(self.source, Source::Uci(_))
    }

    /// One-line description of the split protocol.
    pub fn split_protocol(&self) -> String {
        match &self.source {
            Source::Uci(u) => format!(
                "published Hernández-Lobato & Adams splits ({} available)",
                u.n_splits
            ),
            Source::Random {
                test_fraction,
                n_splits,
                seed,
                ..
            } => format!(
                "random {:.0}/{:.0} splits, split k seeded with {seed} + k ({n_splits} available)",
                100.0 * (1.0 - test_fraction),
                100.0 * test_fraction
            ),
            Source::Extrapolate { n_splits, seed, .. } => format!(
                "extrapolation splits (Lindinger et al. §4.1: the half with the smaller projection on a random direction is the test set), split k seeded with {seed} + k ({n_splits} available)"
            ),
            Source::Dspp {
                data,
                n_splits,
                seed,
            } => {
                let part = crate::splits::DsppPartition::of(data.n(), &self.name)
                    .map(|p| format!("; {}", p.describe()))
                    .unwrap_or_default();
                format!(
                    "random 15:3:2 train/test/validation splits (Jankowiak et al. 2020 App. A.4), split k seeded with {seed} + k ({n_splits} available){part}"
                )
            }
        }
    }

    /// `(train, test)` row indices of split `k`.
    ///
    /// # Errors
    /// [`BenchError::Usage`] if `k` is out of range; [`BenchError::Data`] for unreadable or
    /// malformed split files.
    pub fn split(&self, k: usize) -> Result<(Vec<usize>, Vec<usize>)> {
        if k >= self.n_splits() {
            return Err(BenchError::Usage(format!(
                "split {k} requested but {} has {} splits (0..{})",
                self.name,
                self.n_splits(),
                self.n_splits().saturating_sub(1)
            )));
        }
        match &self.source {
            Source::Uci(u) => u.split(k).map_err(BenchError::data),
            Source::Random {
                data,
                test_fraction,
                seed,
                ..
            } => random_split(data.n(), *test_fraction, seed.wrapping_add(k as u64))
                .map_err(BenchError::data),
            Source::Dspp { data, seed, .. } => random_split(
                data.n(),
                crate::splits::DSPP_TEST_FRACTION,
                seed.wrapping_add(k as u64),
            )
            .map_err(BenchError::data),
            Source::Extrapolate { data, seed, .. } => {
                // The training half is `train ∪ holdout`: the early-stopping holdout is
                // drawn inside `fit` by the rule (`FitConfig::early_stopping`).
                let s = extrapolation_split(data.x(), seed.wrapping_add(k as u64))
                    .map_err(BenchError::data)?;
                let mut train = s.train;
                train.extend(s.holdout);
                train.sort_unstable();
                Ok((train, s.test))
            }
        }
    }

    /// `(train, test)` data sets of split `k` in original units.
    ///
    /// # Errors
    /// As [`BenchData::split`].
    pub fn split_data(&self, k: usize) -> Result<(Dataset, Dataset)> {
        let (tr, te) = self.split(k)?;
        let train = self.data().select_rows(&tr).map_err(BenchError::data)?;
        let test = self.data().select_rows(&te).map_err(BenchError::data)?;
        Ok((train, test))
    }
}

/// Whether `path` names a Parquet file (extension `parquet`, any case).
fn is_parquet(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// The column names of a CSV file's header (at least two; fewer is explained by
/// [`dgp_traits::data::narrow_header`]: an empty file, or the separator it seems to use).
fn csv_header(path: &Path) -> Result<Vec<String>> {
    let first_line = {
        use std::io::{BufRead, Read};
        let parse = |message: String| {
            BenchError::Data(dgp_traits::Error::Parse {
                path: path.to_path_buf(),
                line: 1,
                column: 0,
                message,
            })
        };
        let f = std::fs::File::open(path).map_err(|e| parse(format!("I/O error: {e}")))?;
        // The header is read with the bound of every data line
        // (`dgp_traits::data::line_limit`): reading `/dev/zero` or a binary file as a CSV
        // stops there instead of exhausting memory.
        let limit = dgp_traits::data::line_limit();
        let mut line = Vec::new();
        std::io::BufReader::new(f)
            .take(limit as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| parse(format!("I/O error: {e}")))?;
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        if body.len() > limit {
            return Err(parse(dgp_traits::data::long_line_message(
                1,
                limit,
                &body[..limit],
            )));
        }
        if line.contains(&0) {
            return Err(parse(
                "the header line holds NUL bytes: a binary file, not a CSV file".into(),
            ));
        }
        line
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| {
            BenchError::Data(dgp_traits::Error::Parse {
                path: path.to_path_buf(),
                line: 1,
                column: 0,
                message: e.to_string(),
            })
        })?;
    let header = rdr.headers().map_err(|e| {
        BenchError::Data(dgp_traits::Error::Parse {
            path: path.to_path_buf(),
            line: 1,
            column: 0,
            message: e.to_string(),
        })
    })?;
    match header.len() {
        2.. => Ok(header.iter().map(str::to_string).collect()),
        _ => {
            // Empty: nothing but white space (a few lines at most; a large file is not).
            let empty = std::fs::metadata(path).is_ok_and(|m| m.len() <= 1 << 16)
                && std::fs::read(path).is_ok_and(|b| {
                    dgp_traits::data::strip_bom_bytes(&b)
                        .iter()
                        .all(u8::is_ascii_whitespace)
                });
            Err(BenchError::Data(dgp_traits::Error::Parse {
                path: path.to_path_buf(),
                line: 1,
                column: 0,
                message: dgp_traits::data::narrow_header(
                    &String::from_utf8_lossy(&first_line),
                    empty,
                ),
            }))
        }
    }
}

/// Parses a `--splits` value: `all`, or a comma-separated list of indices and ranges
/// (`0,1,2`, `0-4` and `0..=4` inclusive, `0..5` half-open as in Rust, `0-4,7`), checked
/// against `n_splits`. Order is kept, repeats removed.
///
/// # Errors
/// [`BenchError::Usage`] naming the bad token or the out-of-range split.
pub fn parse_splits(text: &str, n_splits: usize) -> Result<Vec<usize>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("all") {
        return Ok((0..n_splits).collect());
    }
    let bad = |tok: &str| {
        BenchError::Usage(format!(
            "--splits: '{tok}' is not a split index, a range a-b, a..b (b excluded), a..=b, or 'all'"
        ))
    };
    let mut out = Vec::new();
    for tok in text.split(',').map(str::trim) {
        if tok.is_empty() {
            return Err(bad(tok));
        }
        let num = |t: &str| t.trim().parse::<usize>().map_err(|_| bad(tok));
        let (a, b) = if let Some((a, b)) = tok.split_once("..=") {
            (num(a)?, num(b)?)
        } else if let Some((a, b)) = tok.split_once("..") {
            // Rust's half-open range: `0..3` is 0, 1, 2.
            let (a, b) = (num(a)?, num(b)?);
            if b <= a {
                return Err(bad(tok));
            }
            (a, b - 1)
        } else {
            match tok.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse::<usize>().map_err(|_| bad(tok))?,
                    b.trim().parse::<usize>().map_err(|_| bad(tok))?,
                ),
                None => {
                    let k = tok.parse::<usize>().map_err(|_| bad(tok))?;
                    (k, k)
                }
            }
        };
        if a > b {
            return Err(bad(tok));
        }
        for k in a..=b {
            if k >= n_splits {
                return Err(BenchError::Usage(format!(
                    "--splits: split {k} does not exist (the data set has {n_splits} splits, 0..{})",
                    n_splits.saturating_sub(1)
                )));
            }
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_function_is_seeded_and_has_the_thesis_shape() {
        let a = step_function(200, STEP_NOISE_STD, 7).unwrap();
        let b = step_function(200, STEP_NOISE_STD, 7).unwrap();
        let c = step_function(200, STEP_NOISE_STD, 8).unwrap();
        assert_eq!(a.x(), b.x());
        assert_eq!(a.y(), b.y());
        assert_ne!(a.x(), c.x());
        for i in 0..a.n() {
            let (x, y) = (a.x()[(i, 0)], a.y()[(i, 0)]);
            assert!((-2.0..2.0).contains(&x));
            // |noise| < 6σ for all 200 points (probability of failure ~ 4e-7).
            assert!((y - x.signum()).abs() < 6.0 * STEP_NOISE_STD, "x {x} y {y}");
        }
        // Residual std within 20 % of 0.01 (χ² with 200 dof: sd of the estimate ≈ 5 %).
        let sd = ((0..a.n())
            .map(|i| (a.y()[(i, 0)] - a.x()[(i, 0)].signum()).powi(2))
            .sum::<f64>()
            / a.n() as f64)
            .sqrt();
        assert!((sd / STEP_NOISE_STD - 1.0).abs() < 0.2, "sd {sd}");
        // Both halves of the input range are populated.
        let neg = (0..a.n()).filter(|&i| a.x()[(i, 0)] < 0.0).count();
        assert!((70..=130).contains(&neg), "{neg} negative inputs");
    }

    #[test]
    fn step_splits_are_80_20_and_seeded() {
        let d = BenchData::step(3).unwrap();
        let (tr, te) = d.split(0).unwrap();
        assert_eq!((tr.len(), te.len()), (160, 40));
        assert_eq!(d.split(0).unwrap(), (tr.clone(), te.clone()));
        assert_ne!(d.split(1).unwrap().1, te);
        assert!(d.split(STEP_SPLITS).is_err());
    }

    #[test]
    fn embedded_concrete_matches_the_shared_copy_shape() {
        let d = BenchData::embedded_concrete().unwrap();
        assert_eq!((d.data().n(), d.data().input_dim()), (1030, 8));
        assert_eq!(d.n_splits(), 20);
        let (tr, te) = d.split(19).unwrap();
        assert_eq!(tr.len() + te.len(), 1030);
        assert_eq!(te.len(), 103);
    }

    #[test]
    fn split_kinds_replace_the_published_splits() {
        let d = BenchData::embedded_concrete().unwrap();
        let r = d.clone().with_split_kind(SplitKind::Random, 0).unwrap();
        assert_eq!(r.n_splits(), 10);
        let (tr, te) = r.split(3).unwrap();
        assert_eq!((tr.len(), te.len()), (927, 103));
        assert_eq!((tr, te), random_split(1030, 0.1, 3).unwrap());
        assert_eq!(r.standardize_options(), StandardizeOptions::default());
        let e = d
            .clone()
            .with_split_kind(SplitKind::Extrapolate, 0)
            .unwrap();
        assert_eq!(e.n_splits(), 10);
        let (tr, te) = e.split(2).unwrap();
        assert_eq!((tr.len(), te.len()), (515, 515));
        let s = extrapolation_split(d.data().x(), 2).unwrap();
        assert_eq!(te, s.test);
        let z = |i: usize| s.projection[i];
        let max_test = te.iter().map(|&i| z(i)).fold(f64::MIN, f64::max);
        assert!(
            tr.iter().all(|&i| z(i) >= max_test),
            "test = smallest projections"
        );
        assert_eq!(e.split(2).unwrap(), (tr, te), "deterministic per seed");
        assert_ne!(e.split(3).unwrap().1, s.test);
        assert_eq!(
            e.standardize_options(),
            StandardizeOptions::drop_near_constant()
        );
        assert!(e.split_protocol().contains("extrapolation"));
        let p = d.clone().with_split_kind(SplitKind::Published, 0).unwrap();
        assert_eq!(p.n_splits(), 20);
        for bad in ["", "extrapolation", "Published"] {
            assert_eq!(SplitKind::parse(bad).unwrap_err().exit_code(), 2);
        }
    }

    #[test]
    fn splits_parse() {
        assert_eq!(parse_splits("all", 3).unwrap(), vec![0, 1, 2]);
        assert_eq!(parse_splits("0,2", 3).unwrap(), vec![0, 2]);
        assert_eq!(parse_splits("1-3,0,2", 5).unwrap(), vec![1, 2, 3, 0]);
        assert_eq!(parse_splits("0..3", 5).unwrap(), vec![0, 1, 2]);
        assert_eq!(parse_splits("1..=3", 5).unwrap(), vec![1, 2, 3]);
        for bad in ["", "x", "3", "2-1", "0,,1", "-1", "2..2", "0..9", "a..b"] {
            let e = parse_splits(bad, 3).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
        }
    }

    #[test]
    fn unknown_builtin_and_missing_path_are_usage_errors() {
        assert_eq!(
            BenchData::load("builtin:nope", None, 0)
                .unwrap_err()
                .exit_code(),
            2
        );
        let e = BenchData::load("/definitely/not/here.csv", None, 0).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("/definitely/not/here.csv"));
    }
}
