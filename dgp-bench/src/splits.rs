//! How a data set is split into train and test rows: the split kinds of
//! `dgp-bench run --split-kind` and the DSPP protocol's 15:3:2 partition
//! (the `protocol` module of dgp-bench). A leaf module: the data sources
//! ([`crate::datasets`]) and the protocols ([`crate::protocol`]) both build on it.

use crate::error::{BenchError, Result};

/// Number of seeds of the extrapolation split and of Lindinger et al.'s random 90:10
/// splits (protocol §1: seeds 0..9).
pub const LINDINGER_SPLITS: usize = 10;
/// Test fraction of Lindinger et al.'s random splits (Table 1: 90:10).
pub const LINDINGER_TEST_FRACTION: f64 = 0.1;

/// How a data set is split into train and test rows (`dgp-bench run --split-kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitKind {
    /// The data set's own splits: the published ones of a UCI folder, the seeded random
    /// 90/10 splits of a CSV file, the 80/20 splits of the step function.
    Published,
    /// [`LINDINGER_SPLITS`] random 90:10 splits, split k a permutation seeded with
    /// `seed + k` whose first `floor(0.1·N)` rows are the test set (Structured_DGP's
    /// `prepare_dataset`, Lindinger et al. Table 1).
    Random,
    /// The extrapolation split of protocol §1 (Lindinger et al. §4.1), seeds `seed + k`
    /// for k = 0..9: the `floor(N/2)` rows with the smallest projection on a random
    /// direction are the test set ([`dgp_data::extrapolation_split`]); features with train std ≤
    /// 1e-3 are dropped when standardising.
    Extrapolate,
    /// The DSPP protocol's random 15:3:2 splits (`crate::protocol::Protocol::Dspp`):
    /// `splits` of them (10, or 5 for 3-layer models), split k a permutation seeded with
    /// `seed + k` whose first `floor(0.15·N)` rows are the test set; the validation part
    /// is drawn inside the other 85 % by the backends that select on it
    /// ([`DsppPartition`]). Only `--protocol dspp` makes it.
    Dspp {
        /// Number of splits.
        splits: usize,
    },
}

impl SplitKind {
    /// Parses `published`, `random` or `extrapolate`.
    ///
    /// # Errors
    /// [`BenchError::Usage`] naming the allowed values.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "published" => Ok(SplitKind::Published),
            "random" => Ok(SplitKind::Random),
            "extrapolate" => Ok(SplitKind::Extrapolate),
            other => Err(BenchError::Usage(format!(
                "--split-kind must be published, random or extrapolate, got '{other}'"
            ))),
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SplitKind::Published => "published",
            SplitKind::Random => "random",
            SplitKind::Extrapolate => "extrapolate",
            SplitKind::Dspp { .. } => "15:3:2",
        }
    }
}

/// Test share of the DSPP protocol's splits: 3 of 15:3:2 (App. A.4).
pub const DSPP_TEST_FRACTION: f64 = 0.15;
/// Smallest training part (75 %) the DSPP protocol accepts: the early-stopping minimum
/// of the core ([`dgp_traits::train::MIN_ROWS_FOR_EARLY_STOPPING`]), so that the
/// selection's candidates, trained on it, can still hold out rows for early stopping.
pub const DSPP_MIN_TRAIN_ROWS: usize = dgp_traits::train::MIN_ROWS_FOR_EARLY_STOPPING;

/// How the DSPP protocol partitions `n` rows (App. A.4, 15:3:2). The counts use NumPy's
/// `int(fraction · n)` (floor) as the core's splits do: `test = floor(0.15·n)`,
/// `fit = n − test` (what `Model::fit` gets), `validation = floor(2/17 · fit)` (drawn
/// inside the fit rows by dspp/ppgpr's selection, `dgp_dspp::VALIDATION_FRACTION`),
/// `train = fit − validation` (what the selection's candidates train on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DsppPartition {
    /// All rows.
    pub n: usize,
    /// Test rows (≈ 15 %).
    pub test: usize,
    /// Rows given to `fit` (≈ 85 %: train + validation).
    pub fit: usize,
    /// Validation rows of the selection (≈ 10 %).
    pub validation: usize,
    /// Training rows of the selection's candidates (≈ 75 %).
    pub train: usize,
}

impl DsppPartition {
    /// The partition of `n` rows.
    ///
    /// # Errors
    /// [`BenchError::Usage`] when the data cannot support 15:3:2: an empty test or
    /// validation part, or a training part below [`DSPP_MIN_TRAIN_ROWS`] (at least 25
    /// rows are needed).
    pub fn of(n: usize, name: &str) -> Result<Self> {
        let test = (DSPP_TEST_FRACTION * n as f64).floor() as usize;
        let fit = n - test.min(n);
        let validation = (dgp_dspp::VALIDATION_FRACTION * fit as f64).floor() as usize;
        let train = fit - validation.min(fit);
        if test == 0 || validation == 0 || train < DSPP_MIN_TRAIN_ROWS {
            return Err(BenchError::Usage(format!(
                "--protocol dspp: {name} has {n} rows, too few for 15:3:2 train/test/validation \
                 splits (test {test}, validation {validation}, train {train}; the training part \
                 needs at least {DSPP_MIN_TRAIN_ROWS} rows, the early-stopping minimum)"
            )));
        }
        Ok(DsppPartition {
            n,
            test,
            fit,
            validation,
            train,
        })
    }

    /// One sentence: the counts and their shares of `n`, and what dspp's default
    /// held-out early stopping (`dgp_dspp::DsppConfig::default().early_stopping`) takes
    /// out of the final fit's rows.
    pub fn describe(&self) -> String {
        let pct = |k: usize| 100.0 * k as f64 / self.n as f64;
        let stop = dgp_dspp::DsppConfig::default()
            .early_stopping
            .map(|e| (e.fraction * self.fit as f64).floor() as usize)
            .filter(|_| self.fit >= dgp_traits::train::MIN_ROWS_FOR_EARLY_STOPPING)
            .map_or(String::new(), |h| {
                format!(
                    " (dspp's default early stopping then holds out {h} of them, {:.1} %, and \
                     trains on {}, {:.1} %)",
                    pct(h),
                    self.fit - h,
                    pct(self.fit - h)
                )
            });
        format!(
            "15:3:2 of N = {}: test {} ({:.1} %); fit gets the other {} ({:.1} %), of which \
             dspp/ppgpr's selection holds out {} for validation ({:.1} %) and trains its \
             candidates on {} ({:.1} %) before the final fit on all {}{stop}; backends \
             without selection train on all {}",
            self.n,
            self.test,
            pct(self.test),
            self.fit,
            pct(self.fit),
            self.validation,
            pct(self.validation),
            self.train,
            pct(self.train),
            self.fit,
            self.fit
        )
    }
}
