//! Early stopping on a held-out score: [`EarlyStopping`] (settings), [`heldout_split`]
//! (which rows are held out) and the [`HeldOutStopping`] observer, which keeps the
//! best-scoring parameters and restores them at the end ([`FitSummary`] says what it did).
//!
//! Any backend can use it; the DSPP needs it on small data, where its predictive objective
//! can be driven up without bound by shrinking variances at the training inputs while the
//! held-out NLL explodes (see `dgp-dspp`'s training docs).

use crate::data::validation_split;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::train::observer::{Control, Observer, StepInfo};
use serde::{Deserialize, Serialize};

/// Training data with fewer rows than this are never split for early stopping.
pub const MIN_ROWS_FOR_EARLY_STOPPING: usize = 20;

/// Early stopping on held-out training rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
}

impl Default for EarlyStopping {
    fn default() -> Self {
        EarlyStopping {
            fraction: 2.0 / 17.0,
            every: 0,
            patience: 20,
        }
    }
}

impl EarlyStopping {
    /// Checks the ranges: `fraction` in (0, 1).
    pub fn validate(&self) -> Result<()> {
        if !(self.fraction > 0.0 && self.fraction < 1.0) {
            return Err(Error::Config(format!(
                "early_stopping.fraction must be in (0, 1), got {}",
                self.fraction
            )));
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

/// The rows `(kept, held out)` of a data set of `n` rows held out for early stopping with
/// `fraction` and fit seed `seed` (a [`validation_split`] with seed `seed + 0x5EED`).
///
/// # Errors
/// As [`validation_split`].
pub fn heldout_split(n: usize, fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    let all: Vec<usize> = (0..n).collect();
    validation_split(&all, fraction, seed.wrapping_add(0x5EED))
}

/// What a run with held-out early stopping did, for diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FitSummary {
    /// Optimisation steps taken.
    pub steps: usize,
    /// Step whose parameters were kept (early stopping), if any.
    pub best_step: Option<usize>,
    /// Held-out score (an NLL, model units) of the kept parameters, if early stopping ran.
    pub best_heldout_nll: Option<f64>,
    /// Rows held out for early stopping (0 when it did not run).
    pub heldout_rows: usize,
    /// Whether training stopped on a numerical failure after a good checkpoint existed.
    pub stopped_on_numerical_failure: bool,
}

/// Observer: evaluates a held-out score (lower is better, `+∞` for "cannot evaluate") at
/// the start and every [`EarlyStopping::period`] steps (and after the last step), keeps
/// the parameters with the lowest score (ties keep the earlier), asks to stop after
/// `patience` evaluations without improvement (`0`: never), absorbs a numerical failure
/// once a finite score exists, and restores the kept parameters at the end.
pub struct HeldOutStopping<F> {
    es: EarlyStopping,
    every: usize,
    score: F,
    best: Option<(f64, Vec<f64>, usize)>,
    since_best: usize,
    summary: FitSummary,
}

impl<F> HeldOutStopping<F> {
    /// Early stopping with settings `es` on `heldout_rows` held-out rows, scored by
    /// `score(model)`.
    pub fn new(es: &EarlyStopping, heldout_rows: usize, score: F) -> Self {
        HeldOutStopping {
            es: es.clone(),
            every: 1,
            score,
            best: None,
            since_best: 0,
            summary: FitSummary {
                heldout_rows,
                ..FitSummary::default()
            },
        }
    }

    /// What the run did (complete after the executor's run).
    pub fn summary(&self) -> &FitSummary {
        &self.summary
    }
}

impl<M: Model + ?Sized, F: FnMut(&M) -> f64> Observer<M> for HeldOutStopping<F> {
    fn on_start(&mut self, model: &M, steps: usize) -> Result<()> {
        self.every = self.es.period(steps);
        self.best = Some(((self.score)(model), model.params().flat(), 0));
        self.since_best = 0;
        Ok(())
    }

    fn on_step(&mut self, model: &M, info: &StepInfo) -> Result<Control> {
        self.summary.steps = info.step + 1;
        let Some(best) = self.best.as_mut() else {
            return Ok(Control::Continue);
        };
        let done = info.step + 1;
        if !(done.is_multiple_of(self.every) || done == info.steps) {
            return Ok(Control::Continue);
        }
        let score = (self.score)(model);
        if score < best.0 {
            best.0 = score;
            model.params().flat_into(&mut best.1);
            best.2 = done;
            self.since_best = 0;
        } else {
            self.since_best += 1;
            if self.es.patience > 0 && self.since_best >= self.es.patience {
                return Ok(Control::Stop);
            }
        }
        Ok(Control::Continue)
    }

    fn absorbs_failure(&mut self, _model: &M, _error: &Error) -> bool {
        let ok = self.best.as_ref().is_some_and(|(v, _, _)| v.is_finite());
        self.summary.stopped_on_numerical_failure |= ok;
        ok
    }

    fn on_finish(&mut self, model: &mut M) -> Result<()> {
        if let Some((score, params, at)) = &self.best {
            model.params_mut().set_flat(params)?;
            self.summary.best_step = Some(*at);
            self.summary.best_heldout_nll = Some(*score);
        }
        Ok(())
    }
}
