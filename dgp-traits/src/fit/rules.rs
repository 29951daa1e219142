//! Settings of held-out early stopping, plain data that [`crate::fit::FitConfig`] carries:
//!
//! * [`EarlyStopping`] — the patience rule (the best held-out score is kept; stop after
//!   `patience` evaluations without improvement, or, when set, once the score has risen
//!   `rises` evaluations in a row);
//! * [`LindingerStopping`] — the rule of Lindinger et al. (2020)'s reference code
//!   (`optimise.py::run_adam`: smoothed held-out test log-likelihood), decided by
//!   `crate::train`'s trace of the logged scores;
//! * [`HeldOutRule`] — one of the two, as `FitConfig::early_stopping` holds it;
//! * [`Convergence`] — the stop on the smoothed training objective
//!   (`FitConfig::convergence`), which needs no held-out rows.

use dgp_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Early stopping on held-out training rows: the patience rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EarlyStopping {
    /// Fraction of the rows passed to `fit` that are held out (drawn with the fit seed);
    /// default 2/17, the validation share of the paper's 15:3:2 partition.
    pub fraction: f64,
    /// Held-out score is evaluated every this many steps; 0 = automatically
    /// `max(1, steps / 100)`.
    pub every: usize,
    /// Stop after this many evaluations without improvement; 0 = run all steps (the best
    /// parameters are restored either way).
    pub patience: usize,
    /// The rule runs only on at least this many rows (those passed to `fit`); on fewer,
    /// the fit trains on every row for all its steps, as without the rule. 0 (the
    /// default) = only the core's minimum
    /// ([`crate::train::MIN_ROWS_FOR_EARLY_STOPPING`]). A held-out NLL over k rows has
    /// a standard error ∝ 1/√k, so on small data the score can favour an early step the
    /// test rows do not.
    pub min_rows: usize,
    /// Also stop once each of the last `rises` evaluations scored worse than the one
    /// before it: the held-out score has turned, not wandered (under exchangeable noise
    /// `rises` consecutive increases have probability 1/`rises`!). Such a run has passed
    /// its best score at least `rises` evaluations earlier, so it stops at or before the
    /// patience rule would. 0 (the default): only the patience rule.
    pub rises: usize,
}

impl Default for EarlyStopping {
    fn default() -> Self {
        EarlyStopping {
            fraction: 2.0 / 17.0,
            every: 0,
            patience: 20,
            min_rows: 0,
            rises: 0,
        }
    }
}

impl EarlyStopping {
    /// Checks the ranges: `fraction` in (0, 1).
    pub fn validate(&self) -> Result<()> {
        if !(self.fraction > 0.0 && self.fraction < 1.0) {
            return Err(Error::config(
                "early_stopping.fraction",
                format!("must be in (0, 1), got {}", self.fraction),
            ));
        }
        Ok(())
    }

    /// The evaluation period for a run of `steps` steps (`every`, or `max(1, steps/100)`).
    pub fn period(&self, steps: usize) -> usize {
        if self.every > 0 {
            self.every
        } else {
            (steps / 100).max(1)
        }
    }
}

/// Which parameters a run stopped by [`LindingerStopping`] ends with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restore {
    /// The parameters of the last step (the reference: `run_adam` breaks out of the loop
    /// and keeps the current values). The default.
    #[default]
    Last,
    /// The logged parameters with the best single held-out score.
    Best,
}

/// The early-stopping rule of Lindinger et al. 2020, §4, and their reference code, Structured_DGP
/// (Structured_DGP `optimise.py::run_adam` with `filtersize = 50`, holdout of
/// `prepare_data.py`). Defaults are the reference's.
///
/// * Holdout: `floor(holdout_fraction · N)` row indices drawn uniformly WITH replacement;
///   the distinct drawn rows are held out and removed from training
///   ([`dgp_data::holdout_with_replacement`]).
/// * Score: held-out mean log-likelihood (tll), predicted with `samples` Monte Carlo
///   samples, logged at iterations 0, `every`, 2·`every`, … (before the step of that
///   iteration, i.e. with the parameters after that many steps).
/// * After the step of iteration `it`, `smoothed[it]` = mean of the last `window` logged
///   scores; when `it > min_steps` and `smoothed[it − k·lag] < smoothed[it − (k+1)·lag]`
///   for every k = 0..checks−1, training stops (`it + 1` steps taken).
/// * The run ends with the parameters chosen by `restore` (default: the last, as the
///   reference; a numerical failure always falls back to the last logged parameters).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LindingerStopping {
    /// Fraction of the training rows drawn (with replacement) for the holdout; 0.1.
    pub holdout_fraction: f64,
    /// Log the held-out score every this many iterations; 10.
    pub every: usize,
    /// Monte Carlo samples of each held-out prediction; 5 (`optimise.py:157`).
    pub samples: usize,
    /// Number of logged scores averaged into the smoothed score; 50.
    pub window: usize,
    /// Lag between compared smoothed scores, in iterations; 50.
    pub lag: usize,
    /// Consecutive decreases required to stop; 5.
    pub checks: usize,
    /// The rule is only checked after this many iterations (`it > min_steps`); 5000.
    pub min_steps: usize,
    /// Parameters kept at the end; [`Restore::Last`].
    pub restore: Restore,
}

impl Default for LindingerStopping {
    fn default() -> Self {
        LindingerStopping {
            holdout_fraction: 0.1,
            every: 10,
            samples: 5,
            window: 50,
            lag: 50,
            checks: 5,
            min_steps: 5000,
            restore: Restore::Last,
        }
    }
}

impl LindingerStopping {
    /// Checks the ranges: `holdout_fraction` in (0, 1), every count at least 1.
    pub fn validate(&self) -> Result<()> {
        if !(self.holdout_fraction > 0.0 && self.holdout_fraction < 1.0) {
            return Err(Error::config(
                "early_stopping.holdout_fraction",
                format!("must be in (0, 1), got {}", self.holdout_fraction),
            ));
        }
        for (name, v) in [
            ("every", self.every),
            ("samples", self.samples),
            ("window", self.window),
            ("lag", self.lag),
            ("checks", self.checks),
        ] {
            if v == 0 {
                return Err(Error::config(
                    format!("early_stopping.{name}"),
                    "must be at least 1",
                ));
            }
        }
        Ok(())
    }
}

/// Held-out early stopping as [`crate::model::FitConfig::early_stopping`] holds it; any
/// backend honours it by training through [`crate::train::fit_with_held_out`].
///
/// JSON: `{"patience": {"fraction": 0.1, "patience": 20}}` or `{"lindinger": {}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum HeldOutRule {
    /// The patience rule ([`EarlyStopping`]): rows held out without replacement, the
    /// held-out NLL (with [`PATIENCE_SCORE_SAMPLES`] predictive samples, the same seed at
    /// every evaluation) evaluated every [`EarlyStopping::period`] steps, the best
    /// parameters restored at the end.
    Patience(EarlyStopping),
    /// The rule of Lindinger et al. (2020) ([`LindingerStopping`]).
    Lindinger(LindingerStopping),
}

/// Predictive samples of each held-out evaluation of the patience rule.
pub const PATIENCE_SCORE_SAMPLES: usize = 5;

impl HeldOutRule {
    /// The reference settings of Lindinger et al. (2020).
    pub fn lindinger() -> Self {
        HeldOutRule::Lindinger(LindingerStopping::default())
    }

    /// Checks the settings of the rule.
    pub fn validate(&self) -> Result<()> {
        match self {
            HeldOutRule::Patience(e) => e.validate(),
            HeldOutRule::Lindinger(l) => l.validate(),
        }
    }

    /// The fewest rows a fit needs for the rule to run:
    /// [`crate::train::MIN_ROWS_FOR_EARLY_STOPPING`], or for the patience rule
    /// [`EarlyStopping::min_rows`] when that is larger.
    pub fn min_rows(&self) -> usize {
        let own = match self {
            HeldOutRule::Patience(e) => e.min_rows,
            HeldOutRule::Lindinger(_) => 0,
        };
        crate::train::MIN_ROWS_FOR_EARLY_STOPPING.max(own)
    }

    /// Whether the rule runs on a fit of `n` rows (`n` ≥ [`HeldOutRule::min_rows`]); on
    /// fewer, the fit trains on every row for all its steps.
    pub fn runs_on(&self, n: usize) -> bool {
        n >= self.min_rows()
    }

    /// Short name for reports: `patience` or `lindinger`.
    pub fn name(&self) -> &'static str {
        match self {
            HeldOutRule::Patience(_) => "patience",
            HeldOutRule::Lindinger(_) => "lindinger",
        }
    }

    /// Predictive samples of each held-out evaluation.
    pub fn score_samples(&self) -> usize {
        match self {
            HeldOutRule::Patience(_) => PATIENCE_SCORE_SAMPLES,
            HeldOutRule::Lindinger(l) => l.samples,
        }
    }
}

/// Stop on convergence of the training objective (no rows held out), as
/// [`crate::fit::FitConfig::convergence`] holds it.
///
/// The objective values the stepper reports are averaged over consecutive, non-overlapping
/// windows of `window` steps; with `m_k` the mean of window k and `N` the number of
/// training rows, the gain of window k is `(m_k − m_{k−1}) / N`, in nats per training row
/// (the objective is maximised and scales with N). Once at least `min_steps` steps are
/// done, the run stops at the end of the first window that completes `patience`
/// consecutive windows whose gain is below `tolerance`. A window with a non-finite mean
/// resets the count. The parameters of the last step are kept.
///
/// ```
/// use dgp_traits::model::Convergence;
/// let c = Convergence::default();
/// assert!(c.validate(c.min_steps).is_ok());
/// let bad = Convergence { patience: 0, ..c };
/// assert!(bad.validate(10_000).unwrap_err().to_string().contains("convergence.patience"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Convergence {
    /// Steps per averaging window; 100.
    pub window: usize,
    /// Smallest gain per window, in nats per training row, that counts as progress; 1e-3.
    pub tolerance: f64,
    /// Consecutive windows without progress that stop the run; 3.
    pub patience: usize,
    /// The run never stops before this many steps; 500.
    pub min_steps: usize,
}

impl Default for Convergence {
    fn default() -> Self {
        Convergence::DEFAULT
    }
}

impl Convergence {
    /// The defaults (window 100, tolerance 1e-3 nats per row, patience 3, at least 500
    /// steps), usable in constants.
    pub const DEFAULT: Convergence = Convergence {
        window: 100,
        tolerance: 1e-3,
        patience: 3,
        min_steps: 500,
    };

    /// [`Convergence::DEFAULT`] without a minimum step count: it fits any step cap (a
    /// rule's `min_steps` above the cap is an error), and ends a run after 400 steps at
    /// the earliest. The registered backends' stop.
    pub const NO_MINIMUM: Convergence = Convergence {
        min_steps: 0,
        ..Convergence::DEFAULT
    };

    /// Checks the ranges for a run of at most `steps` steps: `tolerance` finite and > 0,
    /// `window` and `patience` at least 1, `min_steps` ≤ `steps`.
    ///
    /// # Errors
    /// [`Error::Config`] naming the field (`convergence.tolerance`, …).
    pub fn validate(&self, steps: usize) -> Result<()> {
        if !(self.tolerance.is_finite() && self.tolerance > 0.0) {
            return Err(Error::config(
                "convergence.tolerance",
                format!("must be finite and > 0, got {}", self.tolerance),
            ));
        }
        for (name, v) in [("window", self.window), ("patience", self.patience)] {
            if v == 0 {
                return Err(Error::config(
                    format!("convergence.{name}"),
                    "must be at least 1",
                ));
            }
        }
        if self.min_steps > steps {
            return Err(Error::config(
                "convergence.min_steps",
                format!(
                    "{} must not exceed the maximum number of steps ({steps})",
                    self.min_steps
                ),
            ));
        }
        Ok(())
    }
}
