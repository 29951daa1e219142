//! Early stopping on a held-out score: [`EarlyStopping`] (settings), [`heldout_split`]
//! (which rows are held out) and the [`HeldOutStopping`] observer, which keeps the
//! best-scoring parameters and restores them at the end ([`FitSummary`] says what it did).
//!
//! Any backend can use it; the DSPP needs it on small data, where its predictive objective
//! can be driven up without bound by shrinking variances at the training inputs while the
//! held-out NLL explodes (see `dgp-dspp`'s training docs).

pub use crate::fit::FitSummary;
use crate::model::Model;
use crate::train::observer::{Control, Observer, StepInfo};
use crate::train::rules::{EarlyStopping, LindingerStopping, LindingerTrace, Restore};
use dgp_core::{Error, Result};
use dgp_data::held_out::{MAX_HELD_OUT_ROWS, complement, draw_without_replacement};
use dgp_data::held_out_count;

/// Training data with fewer rows than this are never split for early stopping.
pub const MIN_ROWS_FOR_EARLY_STOPPING: usize = 20;

/// The rows `(kept, held out)` of a data set of `n` rows held out for early stopping with
/// `fraction` and fit seed `seed`, both ascending: [`patience_held_out`] and its
/// complement.
///
/// # Errors
/// As [`patience_held_out`].
pub fn heldout_split(n: usize, fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    let held = patience_held_out(n, fraction, seed)?;
    Ok((complement(n, &held), held))
}

/// The rows of `0..n` the patience rule holds out with `fraction` and fit seed `seed`,
/// ascending: `k = min(⌊fraction · n⌋,` [`MAX_HELD_OUT_ROWS`]`)` rows drawn without
/// replacement with seed `seed + 0x5EED` ([`draw_without_replacement`]; below the cap
/// and up to [`dgp_data::PERMUTATION_TABLE_MAX_N`] rows these are the validation rows
/// of [`dgp_data::validation_split`] of `0..n` with that seed).
///
/// # Errors
/// [`Error::Config`] if `fraction ∉ (0, 1)` or either set would be empty.
pub fn patience_held_out(n: usize, fraction: f64, seed: u64) -> Result<Vec<usize>> {
    let k = held_out_count(n, fraction, "validation")?.min(MAX_HELD_OUT_ROWS);
    Ok(draw_without_replacement(n, k, seed.wrapping_add(0x5EED)))
}

/// Observer: evaluates a held-out score (lower is better, `+∞` for "cannot evaluate") at
/// the start and every [`EarlyStopping::period`] steps (and after the last step), keeps
/// the parameters with the lowest score (ties keep the earlier), asks to stop after
/// `patience` evaluations without improvement (`0`: never) or after
/// [`EarlyStopping::rises`] evaluations in a row that each scored worse than the one
/// before (`0`: never; an evaluation that cannot be scored counts as worse than a finite
/// one), absorbs a numerical failure
/// once a finite score exists, and restores the kept parameters at the end.
pub struct HeldOutStopping<F> {
    es: EarlyStopping,
    every: usize,
    score: F,
    best: Option<(f64, Vec<f64>, usize)>,
    since_best: usize,
    /// The last score and how many evaluations in a row have each scored worse than
    /// the one before.
    last: f64,
    rising: usize,
    summary: FitSummary,
}

impl<F> HeldOutStopping<F> {
    /// Early stopping with settings `es` on `heldout_rows` held-out rows, scored by
    /// `score(model)`.
    pub fn new(es: &EarlyStopping, heldout_rows: usize, score: F) -> Self {
        HeldOutStopping {
            es: *es,
            every: 1,
            score,
            best: None,
            since_best: 0,
            last: f64::INFINITY,
            rising: 0,
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

    /// The step of the best held-out score so far (0: the parameters the run started
    /// from), `None` before the run starts; the step whose parameters the run ends with
    /// once it has finished.
    pub fn best_step(&self) -> Option<usize> {
        self.best.as_ref().map(|b| b.2)
    }
}

impl<M: Model + ?Sized, F: FnMut(&M) -> f64> Observer<M> for HeldOutStopping<F> {
    fn on_start(&mut self, model: &M, steps: usize) -> Result<()> {
        self.every = self.es.period(steps);
        let score = (self.score)(model);
        self.summary.scores.clear();
        self.summary.scores.push((0, score));
        self.best = Some((score, model.params().flat(), 0));
        self.since_best = 0;
        self.last = score;
        self.rising = 0;
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
        self.summary.scores.push((done, score));
        self.rising = if score > self.last {
            self.rising + 1
        } else {
            0
        };
        self.last = score;
        if score < best.0 {
            best.0 = score;
            model.params().flat_into(&mut best.1);
            best.2 = done;
            self.since_best = 0;
        } else {
            self.since_best += 1;
            let patience_out = self.es.patience > 0 && self.since_best >= self.es.patience;
            let turned = self.es.rises > 0 && self.rising >= self.es.rises;
            if patience_out || turned {
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

/// Observer of the [`LindingerStopping`] rule: logs the held-out score (`score(model)` is a
/// held-out NLL, lower is better; the rule works on its negative, the log-likelihood) at
/// the start and before every `every`-th iteration, asks to stop when
/// [`LindingerTrace::after_step`] says so, and ends with the parameters chosen by
/// [`LindingerStopping::restore`]. A numerical failure of a step is absorbed once a
/// finite score was logged; the run then ends with the last logged parameters.
pub struct LindingerObserver<F> {
    rule: LindingerStopping,
    score: F,
    trace: Option<LindingerTrace>,
    /// Parameters at the last logged finite score, and the step count they belong to.
    last_good: Option<(Vec<f64>, usize)>,
    /// Parameters with the best logged score: (NLL, flat, steps).
    best: Option<(f64, Vec<f64>, usize)>,
    failed: bool,
    summary: FitSummary,
}

impl<F> LindingerObserver<F> {
    /// The rule `rule` on `heldout_rows` held-out rows, scored by `score(model)` (an NLL).
    pub fn new(rule: &LindingerStopping, heldout_rows: usize, score: F) -> Self {
        LindingerObserver {
            rule: rule.clone(),
            score,
            trace: None,
            last_good: None,
            best: None,
            failed: false,
            summary: FitSummary {
                heldout_rows,
                ..FitSummary::default()
            },
        }
    }

    /// What the run did (complete after the executor's run). `best_step` and
    /// `best_heldout_nll` describe the kept parameters when they were chosen by score
    /// ([`Restore::Best`] or after a failure), and are `None` when the last are kept.
    pub fn summary(&self) -> &FitSummary {
        &self.summary
    }

    /// The logged and smoothed held-out scores (log-likelihoods), after a run.
    pub fn trace(&self) -> Option<&LindingerTrace> {
        self.trace.as_ref()
    }
}

impl<F> LindingerObserver<F> {
    /// Logs the score of `model` after `done` steps and keeps the snapshots.
    fn log<M: Model + ?Sized>(&mut self, model: &M, done: usize)
    where
        F: FnMut(&M) -> f64,
    {
        let nll = (self.score)(model);
        self.summary.scores.push((done, nll));
        if let Some(t) = self.trace.as_mut() {
            t.log(-nll);
        }
        if !nll.is_finite() {
            return;
        }
        let slot = self.last_good.get_or_insert_with(|| (Vec::new(), 0));
        copy_flat(model, &mut slot.0);
        slot.1 = done;
        if self.rule.restore == Restore::Best && self.best.as_ref().is_none_or(|b| nll < b.0) {
            let b = self.best.get_or_insert_with(|| (nll, Vec::new(), done));
            b.0 = nll;
            copy_flat(model, &mut b.1);
            b.2 = done;
        }
    }
}

/// `buf` ← the model's flat parameters, reusing `buf`'s allocation once it has the size.
fn copy_flat<M: Model + ?Sized>(model: &M, buf: &mut Vec<f64>) {
    if buf.len() == model.params().num_free() {
        model.params().flat_into(buf);
    } else {
        *buf = model.params().flat();
    }
}

impl<M: Model + ?Sized, F: FnMut(&M) -> f64> Observer<M> for LindingerObserver<F> {
    fn on_start(&mut self, model: &M, steps: usize) -> Result<()> {
        self.rule.validate()?;
        self.trace = Some(LindingerTrace::new(&self.rule, steps));
        self.last_good = None;
        self.best = None;
        self.failed = false;
        self.summary.scores.clear();
        self.log(model, 0);
        Ok(())
    }

    fn on_step(&mut self, model: &M, info: &StepInfo) -> Result<Control> {
        let it = info.step;
        self.summary.steps = it + 1;
        let Some(trace) = self.trace.as_mut() else {
            return Ok(Control::Continue);
        };
        if trace.after_step(it) {
            return Ok(Control::Stop);
        }
        if it + 1 < info.steps && trace.logs_at(it + 1) {
            self.log(model, it + 1);
        }
        Ok(Control::Continue)
    }

    fn absorbs_failure(&mut self, _model: &M, _error: &Error) -> bool {
        let ok = self.last_good.is_some();
        self.failed |= ok;
        self.summary.stopped_on_numerical_failure |= ok;
        ok
    }

    fn on_finish(&mut self, model: &mut M) -> Result<()> {
        let kept = if self.failed && self.rule.restore == Restore::Last {
            self.last_good.as_ref().map(|(p, at)| (None, p, *at))
        } else if self.rule.restore == Restore::Best {
            self.best.as_ref().map(|(s, p, at)| (Some(*s), p, *at))
        } else {
            None
        };
        if let Some((score, params, at)) = kept {
            model.params_mut().set_flat(params)?;
            self.summary.best_step = Some(at);
            self.summary.best_heldout_nll = score;
        }
        Ok(())
    }
}
