//! The minibatch loop: [`Executor`].

use crate::fit::Hooks;
#[cfg(doc)]
use crate::fit::{Checkpoints, RunControl};
use crate::model::{Batch, FitConfig, FitReport, Model};
use crate::tape::Tape;
use crate::train::convergence::ConvergenceTrace;
use crate::train::observer::{Control, Observer, StepInfo};
use crate::train::resume::{RUN_STATE_VERSION, RunState};
use crate::train::stepper::{StepContext, Stepper};
use dgp_core::rng::stream;
use dgp_core::{Error, Result};
use dgp_data::{Minibatches, RowSource};
use faer::{Mat, Par};
use std::time::Instant;

/// How often (in steps) the objective is kept in [`FitReport::history`] (and the last step
/// always).
pub const HISTORY_EVERY: usize = 10;

/// Runs a [`Stepper`] over `steps` shuffled minibatches of a data set and shows every step
/// to the registered [`Observer`]s (see the module docs of `crate::train`).
///
/// Per step: the next minibatch of `batch_size` rows (order from `seed`; `0` or ≥ N means
/// full batch) is gathered into buffers allocated once; the stepper moves the parameters
/// (Monte Carlo noise from `stream(seed, 1)`, one tape reused across steps, large products
/// parallel on the current rayon pool); the objective is kept in the report; each observer
/// sees the step in registration order, and the run ends after the step in which any of
/// them asks to stop. A numerical failure of a step ([`Error::Numerical`],
/// [`Error::NotPositiveDefinite`]) ends the run quietly when an observer can recover from
/// it ([`Observer::absorbs_failure`]), else it is returned. At the end every observer's
/// [`Observer::on_finish`] runs (e.g. restoring the best parameters).
///
/// With [`FitConfig::convergence`] set, the executor also ends the run when the smoothed
/// objective stops improving ([`crate::model::Convergence`], gains per training row of the
/// rows it trains on), after the observers have seen that step, and reports it in
/// [`FitReport::converged_after`].
pub struct Executor<'a, M: ?Sized, S> {
    stepper: S,
    steps: usize,
    batch_size: usize,
    seed: u64,
    convergence: Option<crate::model::Convergence>,
    observers: Vec<&'a mut dyn Observer<M>>,
}

impl<'a, M: Model + ?Sized, S: Stepper<M>> Executor<'a, M, S> {
    /// An executor for `cfg.steps` steps of `stepper` on minibatches of `cfg.batch_size`
    /// rows, seeded by `cfg.seed` (the learning rate belongs to the stepper).
    pub fn new(stepper: S, cfg: &FitConfig) -> Self {
        Executor {
            stepper,
            steps: cfg.steps,
            batch_size: cfg.batch_size,
            seed: cfg.seed,
            convergence: cfg.convergence,
            observers: Vec::new(),
        }
    }

    /// Adds an observer; observers see each step in the order they were added.
    pub fn observe(mut self, observer: &'a mut dyn Observer<M>) -> Self {
        self.observers.push(observer);
        self
    }

    /// The stepper (e.g. to read its state after [`Executor::run`]).
    pub fn stepper(&self) -> &S {
        &self.stepper
    }

    /// Trains `model` on the rows of `data` (model units; an in-memory
    /// [`dgp_data::Dataset`] or any other [`RowSource`]: the minibatch indices depend on
    /// the number of rows, the batch size and the seed only, so the same source contents
    /// give the same run bit for bit); see the type docs. When the caller's hooks
    /// ([`crate::fit::FitHooks`], reached through the [`crate::train::CallerHooks`]
    /// observer) ask for checkpoints ([`Checkpoints`]) or supply a state to resume from
    /// ([`RunControl::take_resume_state`]), the run saves / continues from [`RunState`]s
    /// (`crate::train::resume`); when they ask to stop ([`RunControl::should_stop`]), the
    /// run ends after the current step (saving its state first if checkpoints are on).
    ///
    /// # Errors
    /// [`Error::Empty`] for data without rows; [`Error::Config`] naming the field for
    /// convergence settings out of range; the source's read errors; the stepper's and observers' errors; a
    /// stepper or observer that cannot be checkpointed when checkpoints are asked for; a
    /// saved state of another run.
    pub fn run(&mut self, model: &mut M, data: &dyn RowSource) -> Result<FitReport> {
        let n = data.n();
        if n == 0 {
            return Err(Error::Empty("training data has no rows".into()));
        }
        let b = if self.batch_size == 0 || self.batch_size >= n {
            n
        } else {
            self.batch_size
        };
        let mut conv = match &self.convergence {
            Some(rule) => Some(ConvergenceTrace::new(rule, self.steps, n)?),
            None => None,
        };
        let mut batches = Minibatches::new(n, b, self.seed)?;
        let mut noise = stream(self.seed, 1);
        self.stepper.start(model, self.steps)?;
        let mut xb = Mat::<f64>::zeros(b, data.input_dim());
        let mut yb = Mat::<f64>::zeros(b, data.output_dim());
        let mut tape = Tape::with_par(Par::rayon(0));
        for o in self.observers.iter_mut() {
            o.on_start(model, self.steps)?;
        }
        let mut report = FitReport::default();
        let every = self.hooks().map_or(0, |c| c.every());
        let resume = self.hooks().and_then(|c| c.take_resume_state());
        if every > 0 || resume.is_some() {
            self.save_state(model, &noise, &report, conv.as_ref(), (0, b, n))?;
        }
        let first = match resume {
            Some(state) => {
                self.restore(model, state, (b, n), &mut noise, &mut report, conv.as_mut())?
            }
            None => 0,
        };
        for _ in 0..first {
            batches.next_batch();
        }
        let start = Instant::now();
        for step in first..self.steps {
            let idx = batches.next_batch();
            data.gather(idx, xb.as_mut(), yb.as_mut())?;
            let batch = Batch::new(xb.as_ref(), yb.as_ref(), n)?;
            let mut ctx = StepContext {
                step,
                steps: self.steps,
                tape: &mut tape,
                rng: &mut noise,
            };
            let value = match self.stepper.step(model, &batch, &mut ctx) {
                Ok(v) => v,
                Err(e) if self.absorbed(model, &e) => break,
                Err(e) => return Err(e),
            };
            keep_objective(&mut report, step, self.steps, value);
            let info = StepInfo {
                step,
                steps: self.steps,
                value,
            };
            let mut stop = false;
            for o in self.observers.iter_mut() {
                stop |= o.on_step(model, &info)? == Control::Stop;
            }
            if conv.as_mut().is_some_and(|c| c.after_step(step, value)) && !stop {
                stop = true;
                report.converged_after = Some(step + 1);
            }
            let asked = self.hooks().is_some_and(|c| c.should_stop());
            let done = step + 1;
            let due = asked || done.is_multiple_of(every.max(1));
            if every > 0 && (done == self.steps || (!stop && due)) {
                let state = self.save_state(model, &noise, &report, conv.as_ref(), (done, b, n))?;
                if let Some(c) = self.hooks() {
                    c.save(&state)?;
                }
            }
            if stop || asked {
                break;
            }
        }
        for o in self.observers.iter_mut() {
            o.on_finish(model)?;
        }
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The caller's hooks, reached through the first observer that forwards to them.
    fn hooks(&mut self) -> Option<&mut dyn Hooks> {
        self.observers.iter_mut().find_map(|o| o.caller_hooks())
    }

    /// The run's state after `done` steps (`(done, batch_size, n)`); also the check,
    /// before the first step, that the stepper and every observer can save theirs. The
    /// convergence trace, when there is one, is saved after the observers' states.
    fn save_state(
        &self,
        model: &M,
        noise: &dgp_core::rng::Rng,
        report: &FitReport,
        conv: Option<&ConvergenceTrace>,
        (done, b, n): (usize, usize, usize),
    ) -> Result<RunState> {
        let mut observers = self
            .observers
            .iter()
            .map(|o| o.save_state())
            .collect::<Result<Vec<_>>>()?;
        if let Some(c) = conv {
            observers.push(serde_json::to_value(c).map_err(|e| Error::Serde(e.to_string()))?);
        }
        Ok(RunState {
            version: RUN_STATE_VERSION,
            steps_done: done,
            steps: self.steps,
            seed: self.seed,
            batch_size: b,
            n,
            params: model.params().flat(),
            noise: noise.clone(),
            stepper: self.stepper.save_state()?,
            observers,
            report: report.clone(),
        })
    }

    /// Continues from `state`: parameters, stepper, observers, noise and report; returns
    /// the number of steps done.
    fn restore(
        &mut self,
        model: &mut M,
        state: RunState,
        (b, n): (usize, usize),
        noise: &mut dgp_core::rng::Rng,
        report: &mut FitReport,
        conv: Option<&mut ConvergenceTrace>,
    ) -> Result<usize> {
        let num_free = model.params().num_free();
        state.check_matches(self.steps, self.seed, b, n, num_free)?;
        let expected = self.observers.len() + usize::from(conv.is_some());
        if state.observers.len() != expected {
            return Err(Error::config(
                "resume",
                format!(
                    "the saved run had {} observer states, this run has {expected}",
                    state.observers.len(),
                ),
            ));
        }
        if let (Some(c), Some(saved)) = (conv, state.observers.last()) {
            *c = serde_json::from_value(saved.clone()).map_err(|e| Error::Serde(e.to_string()))?;
        }
        model.params_mut().set_flat(&state.params)?;
        self.stepper.load_state(model, &state.stepper)?;
        for (o, v) in self.observers.iter_mut().zip(&state.observers) {
            o.load_state(v)?;
        }
        *noise = state.noise;
        *report = state.report;
        Ok(state.steps_done)
    }

    /// Whether a numerical failure `e` ends the run quietly (some observer recovers).
    fn absorbed(&mut self, model: &M, e: &Error) -> bool {
        if !matches!(e, Error::Numerical(_) | Error::NotPositiveDefinite { .. }) {
            return false;
        }
        let mut any = false;
        for o in self.observers.iter_mut() {
            any |= o.absorbs_failure(model, e);
        }
        any
    }
}

/// Keeps the objective of `step` in the report.
pub(crate) fn keep_objective(report: &mut FitReport, step: usize, steps: usize, value: f64) {
    if step.is_multiple_of(HISTORY_EVERY) || step + 1 == steps {
        report.history.push((step, value));
    }
    report.final_objective = value;
    report.steps = step + 1;
}
