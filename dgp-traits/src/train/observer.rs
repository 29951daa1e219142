//! The [`Observer`] trait and the general-purpose observers: [`CallerHooks`],
//! [`ModelSnapshots`] and [`SampleCollector`].

use crate::fit::{FitHooks, Hooks};
use crate::model::Model;
use crate::params::Role;
use dgp_core::{Error, Result};
use std::collections::VecDeque;
use std::ops::Range;

/// What an observer tells the executor after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Go on.
    Continue,
    /// End the run after this step (the remaining observers still see it).
    Stop,
}

/// One completed step, as observers see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepInfo {
    /// Index of the step (0-based).
    pub step: usize,
    /// Number of steps of the run.
    pub steps: usize,
    /// The objective value the stepper reported.
    pub value: f64,
}

/// Watches a run of the executor: called after each step with the model and the step's
/// value; may ask to stop; at the end may change the model (restore the best parameters).
pub trait Observer<M: ?Sized> {
    /// Before the first step of a run of `steps` steps.
    fn on_start(&mut self, _model: &M, _steps: usize) -> Result<()> {
        Ok(())
    }

    /// After each step (the parameters are those after the step).
    fn on_step(&mut self, model: &M, info: &StepInfo) -> Result<Control>;

    /// A step failed numerically (`error` is [`Error::Numerical`] or
    /// [`Error::NotPositiveDefinite`]); return `true` when this observer can finish the run
    /// from what it has kept (e.g. the best parameters so far), which ends the run without
    /// an error.
    fn absorbs_failure(&mut self, _model: &M, _error: &Error) -> bool {
        false
    }

    /// After the last step (also after a stop or an absorbed failure).
    fn on_finish(&mut self, _model: &mut M) -> Result<()> {
        Ok(())
    }

    /// The caller's hooks when this observer forwards to them ([`CallerHooks`]): the
    /// executor asks them for stop requests, the state to resume from and checkpoints
    /// (`crate::train::resume`).
    fn caller_hooks(&mut self) -> Option<&mut dyn Hooks> {
        None
    }

    /// This observer's state for an exact resume ([`crate::train::RunState`]); by
    /// default it cannot save one (an error naming the type).
    ///
    /// # Errors
    /// When the observer cannot be checkpointed.
    fn save_state(&self) -> Result<serde_json::Value> {
        Err(crate::train::resume::not_resumable(std::any::type_name::<
            Self,
        >()))
    }

    /// Restores a state written by [`Observer::save_state`] (after [`Observer::on_start`]).
    ///
    /// # Errors
    /// When the observer cannot be checkpointed or the state is malformed.
    fn load_state(&mut self, _state: &serde_json::Value) -> Result<()> {
        Err(crate::train::resume::not_resumable(std::any::type_name::<
            Self,
        >()))
    }
}

/// Forwards every step to the caller's [`FitHooks`] (progress: `on_step(step, steps,
/// value)`, e.g. the benchmark's progress bar) and offers them to the executor, which
/// asks them for stop requests, the state to resume from and checkpoints. Every backend's
/// executor run attaches one.
pub struct CallerHooks<'a, 'h>(&'a mut FitHooks<'h>);

impl<'a, 'h> CallerHooks<'a, 'h> {
    /// Forwards to `hooks`.
    pub fn new(hooks: &'a mut FitHooks<'h>) -> Self {
        CallerHooks(hooks)
    }
}

impl<M: ?Sized> Observer<M> for CallerHooks<'_, '_> {
    fn on_step(&mut self, _model: &M, info: &StepInfo) -> Result<Control> {
        crate::fit::Progress::on_step(self.0, info.step, info.steps, info.value);
        Ok(Control::Continue)
    }

    fn caller_hooks(&mut self) -> Option<&mut dyn Hooks> {
        Some(&mut *self.0)
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }

    fn load_state(&mut self, _state: &serde_json::Value) -> Result<()> {
        Ok(())
    }
}

/// Hands the model's JSON ([`Model::to_json`]) to a sink after every `every` steps (and
/// after the last step of a run): `sink(steps_done, json)`. A sink error ends the run.
/// (Snapshots of the model alone, e.g. to watch it evolve; the state an interrupted run
/// continues from is the executor's [`crate::fit::RunState`], kept through
/// [`crate::fit::Checkpoints`].)
pub struct ModelSnapshots<F> {
    every: usize,
    sink: F,
    written: usize,
}

impl<F: FnMut(usize, String) -> Result<()>> ModelSnapshots<F> {
    /// A snapshot every `every` steps (≥ 1) to `sink`.
    ///
    /// # Errors
    /// [`Error::Config`] for `every == 0`.
    pub fn new(every: usize, sink: F) -> Result<Self> {
        if every == 0 {
            return Err(Error::config(
                "snapshots.every",
                "snapshots every must be at least 1",
            ));
        }
        Ok(ModelSnapshots {
            every,
            sink,
            written: 0,
        })
    }

    /// Snapshots written so far.
    pub fn written(&self) -> usize {
        self.written
    }
}

impl<M: Model + ?Sized, F: FnMut(usize, String) -> Result<()>> Observer<M> for ModelSnapshots<F> {
    fn on_step(&mut self, model: &M, info: &StepInfo) -> Result<Control> {
        let done = info.step + 1;
        if done.is_multiple_of(self.every) || done == info.steps {
            (self.sink)(done, model.to_json()?)?;
            self.written += 1;
        }
        Ok(Control::Continue)
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }

    fn load_state(&mut self, _state: &serde_json::Value) -> Result<()> {
        Ok(())
    }
}

/// Keeps samples of a sampler's chain: the values of the blocks with one role
/// ([`Role::Sampled`] unless told otherwise), in [`crate::params::ParamStore::flat`]
/// order, after step index `burn_in` and then every `thin`-th step; at most `max_kept`
/// are kept, the oldest dropped first (a moving window, as MCEM uses).
#[derive(Clone, Debug)]
pub struct SampleCollector {
    burn_in: usize,
    thin: usize,
    max_kept: usize,
    role: Role,
    ranges: Vec<Range<usize>>,
    samples: VecDeque<Vec<f64>>,
    seen: usize,
}

impl SampleCollector {
    /// A collector that skips steps `0..burn_in`, then keeps steps `burn_in`,
    /// `burn_in + thin`, ... (`thin ≥ 1`), at most `max_kept ≥ 1` of them.
    ///
    /// # Errors
    /// [`Error::Config`] for `thin == 0` or `max_kept == 0`.
    pub fn new(burn_in: usize, thin: usize, max_kept: usize) -> Result<Self> {
        if thin == 0 || max_kept == 0 {
            return Err(Error::config(
                "collector",
                format!(
                    "sample collector needs thin >= 1 and max_kept >= 1, got thin={thin}, max_kept={max_kept}"
                ),
            ));
        }
        Ok(SampleCollector {
            burn_in,
            thin,
            max_kept,
            role: Role::Sampled,
            ranges: Vec::new(),
            samples: VecDeque::new(),
            seen: 0,
        })
    }

    /// Collects the blocks of `role` instead of [`Role::Sampled`].
    pub fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }

    /// The kept samples, oldest first.
    pub fn samples(&self) -> &VecDeque<Vec<f64>> {
        &self.samples
    }

    /// How many steps were collected, including those dropped from the window since.
    pub fn collected(&self) -> usize {
        self.seen
    }

    /// The kept samples, oldest first, consuming the collector.
    pub fn into_samples(self) -> Vec<Vec<f64>> {
        self.samples.into()
    }
}

impl<M: Model + ?Sized> Observer<M> for SampleCollector {
    fn on_start(&mut self, model: &M, _steps: usize) -> Result<()> {
        self.ranges = model.params().ranges(self.role);
        Ok(())
    }

    fn on_step(&mut self, model: &M, info: &StepInfo) -> Result<Control> {
        if info.step < self.burn_in || !(info.step - self.burn_in).is_multiple_of(self.thin) {
            return Ok(Control::Continue);
        }
        let flat = model.params().flat();
        let mut sample = if self.samples.len() == self.max_kept {
            let mut old = self.samples.pop_front().unwrap_or_default();
            old.clear();
            old
        } else {
            Vec::new()
        };
        for r in &self.ranges {
            sample.extend_from_slice(&flat[r.clone()]);
        }
        self.samples.push_back(sample);
        self.seen += 1;
        Ok(Control::Continue)
    }
}
