//! The sampler's settings ([`SghmcSamplerConfig`]) and a run's phase lengths ([`SghmcSchedule`]),
//! the sampler and schedule of cambridge-mlg/sghmc_dgp, `sghmc_base.py` and `models.py`.

use dgp_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Settings of the sampler (defaults: the reference's, cambridge-mlg/sghmc_dgp `sghmc_base.py` and `models.py`).
///
/// ```
/// use dgp_hmc::sghmc::SghmcSamplerConfig;
/// let c = SghmcSamplerConfig::default();
/// assert_eq!((c.burn_in, c.thinning, c.kept, c.window), (10_000, 50, 100, 100));
/// assert!(c.validate().is_ok());
/// let e = SghmcSamplerConfig { thinning: 0, ..c }.validate().unwrap_err().to_string();
/// assert!(e.contains("thinning"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SghmcSamplerConfig {
    /// Adapting steps before samples are kept (each followed by an MCEM hyper step).
    pub burn_in: usize,
    /// Frozen steps per kept sample.
    pub thinning: usize,
    /// Number of kept samples (the predictive mixture's components).
    pub kept: usize,
    /// Size of the MCEM moving window (recent burn-in samples); at most `burn_in`.
    pub window: usize,
    /// Step size ε.
    pub step_size: f64,
    /// Friction `mdecay` ∈ (0, 1].
    pub mdecay: f64,
    /// Adam learning rate of the MCEM hyper steps.
    pub hyper_lr: f64,
    /// Whether burn-in takes MCEM hyper steps (off: hyperparameters stay as they are).
    pub mcem: bool,
}

impl Default for SghmcSamplerConfig {
    fn default() -> Self {
        SghmcSamplerConfig {
            burn_in: 10_000,
            thinning: 50,
            kept: 100,
            window: 100,
            step_size: 0.01,
            mdecay: 0.05,
            hyper_lr: 0.01,
            mcem: true,
        }
    }
}

/// The phase lengths of one run (see [`SghmcSamplerConfig::schedule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SghmcSchedule {
    /// Adapting steps.
    pub burn_in: usize,
    /// Frozen steps per kept sample.
    pub thinning: usize,
    /// Kept samples.
    pub kept: usize,
    /// Size of the MCEM window (at most `burn_in`).
    pub window: usize,
}

impl SghmcSchedule {
    /// Total steps, `burn_in + kept · thinning`.
    pub fn total(&self) -> usize {
        self.burn_in + self.kept * self.thinning
    }

    /// Whether global step `t` (0-based) is a burn-in step.
    pub fn is_burn_in(&self, t: usize) -> bool {
        t < self.burn_in
    }

    /// Whether the sample after global step `t` is kept: the last of every `thinning`
    /// frozen steps.
    pub fn keeps(&self, t: usize) -> bool {
        t >= self.burn_in && (t - self.burn_in + 1).is_multiple_of(self.thinning)
    }
}

impl SghmcSamplerConfig {
    /// Checks every field; the error names it.
    ///
    /// # Errors
    /// [`Error::Config`] for `kept == 0`, `thinning == 0`, `window == 0`,
    /// `window > burn_in`, a step size or learning rate that is not finite and positive,
    /// `mdecay` outside (0, 1].
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, m: String| Err(Error::config(field, m));
        if self.kept == 0 {
            return bad("kept", "must be at least 1 (zero kept samples)".into());
        }
        if self.thinning == 0 {
            return bad("thinning", "must be at least 1".into());
        }
        if self.window == 0 {
            return bad("window", "must be at least 1".into());
        }
        if self.window > self.burn_in {
            return bad(
                "window",
                format!("{} must not exceed burn_in ({})", self.window, self.burn_in),
            );
        }
        if !(self.step_size.is_finite() && self.step_size > 0.0) {
            return bad(
                "step_size",
                format!("must be finite and > 0, got {}", self.step_size),
            );
        }
        if !(self.mdecay.is_finite() && self.mdecay > 0.0 && self.mdecay <= 1.0) {
            return bad("mdecay", format!("must be in (0, 1], got {}", self.mdecay));
        }
        if !(self.hyper_lr.is_finite() && self.hyper_lr > 0.0) {
            return bad(
                "hyper_lr",
                format!("must be finite and > 0, got {}", self.hyper_lr),
            );
        }
        Ok(())
    }

    /// The configured schedule, `burn_in + kept · thinning` steps.
    pub fn full_schedule(&self) -> SghmcSchedule {
        SghmcSchedule {
            burn_in: self.burn_in,
            thinning: self.thinning,
            kept: self.kept,
            window: self.window,
        }
    }

    /// The schedule of a run with a budget of `budget` steps (what a backend's `fit` makes
    /// of `FitConfig::steps`): the configured schedule when the budget holds it (extra
    /// budget is not used); else every phase shrunk by the factor `f = budget / total`:
    /// burn-in `max(1, ⌊burn_in·f⌉)`, thinning `max(1, ⌊thinning·f⌋)`, as many kept samples
    /// as the rest holds (at most `kept`; all of them unless the budget is tiny), the
    /// burn-in taking what is left, so that the run is exactly `budget` steps; the window
    /// at most the burn-in. E.g. the defaults with a budget of 1 000: burn-in 700, thinning
    /// 3, 100 samples.
    ///
    /// # Errors
    /// [`Error::Config`] (naming `steps`) for a budget below 2; the config's own errors.
    pub fn schedule(&self, budget: usize) -> Result<SghmcSchedule> {
        self.validate()?;
        let full = self.full_schedule();
        if budget >= full.total() {
            return Ok(full);
        }
        if budget < 2 {
            return Err(Error::config(
                "steps",
                format!("must be at least 2 (one burn-in step, one kept sample), got {budget}"),
            ));
        }
        let f = budget as f64 / full.total() as f64;
        let burn_min = ((self.burn_in as f64 * f).round() as usize).clamp(1, budget - 1);
        let sampling = budget - burn_min;
        let thinning = ((self.thinning as f64 * f).floor() as usize).clamp(1, sampling);
        let kept = (sampling / thinning).min(self.kept);
        let burn_in = budget - kept * thinning;
        Ok(SghmcSchedule {
            burn_in,
            thinning,
            kept,
            window: self.window.min(burn_in),
        })
    }
}
