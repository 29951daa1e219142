//! Evaluation protocols of `dgp-bench run --protocol` (the `protocol` module of dgp-bench).
//!
//! * [`Protocol::Published`] (the default): the data set's own splits (the published
//!   Hernández-Lobato & Adams splits of a UCI folder) and each backend's defaults.
//! * [`Protocol::Lindinger`]: Lindinger et al. (2020) Table 1 — 10 random 90:10
//!   permutations seeded 0..9 ([`SplitKind::Random`]), the early-stopping rule of
//!   Lindinger et al. 2020, §4, and their reference code, Structured_DGP on a 10 % holdout drawn with replacement from the
//!   training rows ([`HeldOutRule::Lindinger`]), and the reference's settings
//!   ([`LINDINGER`]): at most 20 000 iterations, batch 512, 5 training samples, Adam 0.005
//!   with staircase decay ×0.98 every 1000 steps, 100 test samples, M = 128, hidden width
//!   τ = 5; the backends' own convergence stops are off
//!   ([`Protocol::setting_defaults`]). Flags given on the command line override these
//!   defaults.
//!
//! * [`Protocol::Dspp`]: Jankowiak et al. (2020) App. A.2/A.4 — random 15:3:2
//!   train/test/validation splits (75/15/10 %), [`DSPP_SPLITS`] of them seeded 0..9, or
//!   [`DSPP_SPLITS_DEEP`] when any requested layer count is 3 or more
//!   ([`dspp_split_count`]); split k is a permutation seeded with `seed + k` whose first
//!   `floor(0.15·N)` rows are the test set ([`SplitKind::Dspp`]). The other 85 % is what
//!   `fit` gets; dspp/ppgpr then hold out `floor(2/17 · n_fit)` of those rows for choosing
//!   β_reg and the width (`dgp_dspp::VALIDATION_FRACTION`), which is the paper's 10 %
//!   validation part: 85 % · 2/17 = 10 %, 85 % · 15/17 = 75 % ([`DsppPartition`]).
//!   Backends without such a selection train on all 85 %. No training settings are
//!   imposed (each backend's defaults). The run's table shows the metrics in standardised
//!   units (the `units` module of dgp-bench, [`crate::units`]) beside the original ones.
//!
//! The extrapolation split ([`SplitKind::Extrapolate`]) always trains with the same
//! held-out rule (protocol §1 step 4), under either protocol.

use dgp_traits::optim::LrSchedule;
use dgp_traits::train::HeldOutRule;

use crate::error::{BenchError, Result};
use crate::spec::ExperimentSpec;
use crate::splits::SplitKind;
pub use crate::splits::{DSPP_MIN_TRAIN_ROWS, DSPP_TEST_FRACTION, DsppPartition};

/// An evaluation protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// The data set's own splits and the backends' defaults.
    Published,
    /// Lindinger et al. (2020): random 90:10 splits, held-out early stopping, their settings.
    Lindinger,
    /// Jankowiak et al. (2020, DSPP): random 15:3:2 splits, selection on the validation
    /// part, metrics in standardised units.
    Dspp,
}

/// Splits of the DSPP protocol for models of at most two layers (App. A.4: 10).
pub const DSPP_SPLITS: usize = 10;
/// Splits of the DSPP protocol when any requested model has three or more layers
/// (App. A.4: 5 for 3-layer models).
pub const DSPP_SPLITS_DEEP: usize = 5;

/// The number of DSPP-protocol splits for the requested layer counts: [`DSPP_SPLITS_DEEP`]
/// when any is 3 or more, [`DSPP_SPLITS`] otherwise (App. A.4).
pub fn dspp_split_count(layers: &[usize]) -> usize {
    if layers.iter().any(|&l| l >= 3) {
        DSPP_SPLITS_DEEP
    } else {
        DSPP_SPLITS
    }
}

/// Training settings a protocol imposes (unless a flag overrides them).
#[derive(Clone, Debug, PartialEq)]
pub struct ProtocolSettings {
    /// Step cap.
    pub steps: usize,
    /// Minibatch size.
    pub batch: usize,
    /// Training samples (Monte Carlo samples of the objective).
    pub train_samples: usize,
    /// Adam base learning rate.
    pub learning_rate: f64,
    /// Learning-rate schedule.
    pub lr_schedule: LrSchedule,
    /// Predictive samples.
    pub predict_samples: usize,
    /// Inducing points per layer.
    pub num_inducing: usize,
    /// Hidden-layer width.
    pub hidden_width: usize,
}

/// Lindinger et al.'s settings (Lindinger et al. 2020, §4, and their reference code, Structured_DGP).
pub const LINDINGER: ProtocolSettings = ProtocolSettings {
    steps: 20_000,
    batch: 512,
    train_samples: 5,
    learning_rate: 0.005,
    lr_schedule: LrSchedule::Exponential {
        gamma: 0.98,
        every: 1000,
        staircase: true,
    },
    predict_samples: 100,
    num_inducing: 128,
    hidden_width: 5,
};

impl Protocol {
    /// Parses `published`, `lindinger` or `dspp`.
    ///
    /// # Errors
    /// [`BenchError::Usage`] naming the allowed values.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "published" => Ok(Protocol::Published),
            "lindinger" => Ok(Protocol::Lindinger),
            "dspp" => Ok(Protocol::Dspp),
            other => Err(BenchError::Usage(format!(
                "--protocol must be published, lindinger or dspp, got '{other}'"
            ))),
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Published => "published",
            Protocol::Lindinger => "lindinger",
            Protocol::Dspp => "dspp",
        }
    }

    /// The split kind used when `--split-kind` is not given, for models with the
    /// requested `layers` (the DSPP protocol's number of splits depends on them).
    pub fn default_split_kind(self, layers: &[usize]) -> SplitKind {
        match self {
            Protocol::Published => SplitKind::Published,
            Protocol::Lindinger => SplitKind::Random,
            Protocol::Dspp => SplitKind::Dspp {
                splits: dspp_split_count(layers),
            },
        }
    }

    /// The split kind of the command line: `given` (`--split-kind`) or the protocol's.
    ///
    /// # Errors
    /// [`BenchError::Usage`] when `--split-kind` is given with `--protocol dspp` (its
    /// 15:3:2 splits are part of the protocol).
    pub fn split_kind(self, given: Option<SplitKind>, layers: &[usize]) -> Result<SplitKind> {
        match (self, given) {
            (Protocol::Dspp, Some(k)) => Err(BenchError::Usage(format!(
                "--protocol dspp brings its own 15:3:2 splits; leave out --split-kind {}",
                k.name()
            ))),
            (_, Some(k)) => Ok(k),
            (p, None) => Ok(p.default_split_kind(layers)),
        }
    }

    /// Whether the run's tables show standardised units (the `units` module of dgp-bench) beside the
    /// original ones: the DSPP paper reports standardised units.
    pub fn standardised_units(self) -> bool {
        self == Protocol::Dspp
    }

    /// Backend settings the protocol gives every backend whose configuration has the key,
    /// unless the command line sets it: Lindinger et al.'s protocol ends a run by its
    /// held-out rule or its step cap only, so a backend's own convergence stop on the
    /// training objective (svi, star, mf, fc) is off.
    pub fn setting_defaults(self) -> &'static [(&'static str, serde_json::Value)] {
        const NO_CONVERGENCE_STOP: &[(&str, serde_json::Value)] =
            &[("convergence", serde_json::Value::Null)];
        match self {
            Protocol::Lindinger => NO_CONVERGENCE_STOP,
            Protocol::Published | Protocol::Dspp => &[],
        }
    }

    /// The settings the protocol imposes (`None`: the backends' defaults).
    pub fn settings(self) -> Option<&'static ProtocolSettings> {
        match self {
            Protocol::Published | Protocol::Dspp => None,
            Protocol::Lindinger => Some(&LINDINGER),
        }
    }

    /// The held-out early stopping of a run with split kind `kind`: Lindinger's rule for
    /// the Lindinger protocol and for the extrapolation split (protocol §1 step 4).
    pub fn early_stopping(self, kind: SplitKind) -> Option<HeldOutRule> {
        (self == Protocol::Lindinger || kind == SplitKind::Extrapolate).then(HeldOutRule::lindinger)
    }

    /// The label stored in records (`lindinger/random`, ...); empty for the default.
    pub fn label(self, kind: SplitKind) -> String {
        if self == Protocol::Published && kind == SplitKind::Published {
            String::new()
        } else {
            format!("{}/{}", self.name(), kind.name())
        }
    }
}

/// Rows of `n_train` that the backend of `spec` holds out for its choice of
/// hyper-parameters, as the backend itself states
/// ([`dgp_traits::backend::Backend::validation_rows`]; 0 when it chooses nothing). Stored in
/// [`crate::experiment::SplitRecord::validation_rows`].
pub fn selection_rows(spec: &ExperimentSpec<'_>, n_train: usize) -> usize {
    spec.backend
        .backend
        .validation_rows(&spec.arch.common(), &spec.arch.settings, n_train)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_and_imply_their_splits_and_stopping() {
        assert_eq!(Protocol::parse("published").unwrap(), Protocol::Published);
        let l = Protocol::parse("lindinger").unwrap();
        assert_eq!(l.default_split_kind(&[2]), SplitKind::Random);
        assert_eq!(
            l.early_stopping(SplitKind::Random),
            Some(HeldOutRule::lindinger())
        );
        assert_eq!(l.settings().unwrap().steps, 20_000);
        assert_eq!(l.label(SplitKind::Random), "lindinger/random");
        let p = Protocol::Published;
        assert_eq!(p.early_stopping(SplitKind::Published), None);
        assert!(p.early_stopping(SplitKind::Extrapolate).is_some());
        assert_eq!(p.label(SplitKind::Published), "");
        for bad in ["", "DSPP", "Lindinger"] {
            assert_eq!(Protocol::parse(bad).unwrap_err().exit_code(), 2);
        }
        let d = Protocol::parse("dspp").unwrap();
        assert_eq!(d.label(d.default_split_kind(&[2])), "dspp/15:3:2");
        assert_eq!(d.default_split_kind(&[1, 3]), SplitKind::Dspp { splits: 5 });
        assert_eq!(
            (
                d.settings(),
                d.early_stopping(SplitKind::Dspp { splits: 10 })
            ),
            (None, None)
        );
        assert!(d.standardised_units() && !l.standardised_units());
        assert!((LINDINGER.lr_schedule.factor(1999) - 0.98).abs() < 1e-15);
        assert_eq!(LINDINGER.lr_schedule.factor(999), 1.0);
    }

    #[test]
    fn selection_rows_follow_dspps_tuning_rule() {
        use crate::backends::find_backend;
        let data = crate::datasets::BenchData::embedded_concrete().unwrap();
        let spec = |b: &str, layers: usize| {
            ExperimentSpec::with_defaults(&data, find_backend(b).unwrap(), layers)
        };
        // floor(2/17 · 876) = 103: the 10 % validation part of concrete's 15:3:2 split.
        assert_eq!(selection_rows(&spec("dspp", 2), 876), 103);
        assert_eq!(selection_rows(&spec("ppgpr", 1), 876), 103);
        assert_eq!(selection_rows(&spec("svi", 2), 876), 0);
        let mut s = spec("dspp", 2);
        s.arch.tune = false;
        assert_eq!(selection_rows(&s, 876), 0, "--no-tune");
        let mut s = spec("ppgpr", 1);
        s.arch
            .settings
            .insert("beta".into(), serde_json::json!(0.05));
        assert_eq!(
            selection_rows(&s, 876),
            0,
            "β given, one layer: nothing to choose"
        );
        let mut s = spec("dspp", 2);
        s.arch
            .settings
            .insert("beta".into(), serde_json::json!(0.05));
        assert_eq!(selection_rows(&s, 876), 103, "the width is still chosen");
        s.arch.hidden_width = Some(3);
        assert_eq!(selection_rows(&s, 876), 0);
    }
}
