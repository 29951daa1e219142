//! The [`Stepper`] trait and the plain Adam stepper.

use crate::model::{Batch, Model};
use crate::optim::{Adam, AdamConfig};
use crate::params::{ParamStore, Role};
use crate::tape::Tape;
use dgp_core::Result;
use dgp_core::rng::Rng;
use std::ops::Range;

/// What the executor lends a stepper for one step.
pub struct StepContext<'a> {
    /// Index of this step (0-based): a sampler derives its phase (adapting, frozen, burn-in)
    /// from it, a schedule its rate.
    pub step: usize,
    /// Number of steps of the run.
    pub steps: usize,
    /// The tape, reused across steps (clear it before recording).
    pub tape: &'a mut Tape,
    /// The run's Monte Carlo noise stream (`stream(seed, 1)`).
    pub rng: &'a mut Rng,
}

/// Moves a model's parameters one step on a minibatch: the "solver" of the executor.
///
/// A stepper owns whatever per-parameter state it needs (Adam's moments, a sampler's
/// momentum and adapted step sizes), sized in [`Stepper::start`], and should touch only
/// the parameter blocks whose [`Role`] it serves.
pub trait Stepper<M: ?Sized> {
    /// Prepares a run of `steps` steps on `model` (allocates state, may set roles).
    fn start(&mut self, model: &mut M, steps: usize) -> Result<()>;

    /// One step on `batch`; returns the objective value of the step (the one reported in
    /// [`crate::model::FitReport`]).
    fn step(&mut self, model: &mut M, batch: &Batch<'_>, ctx: &mut StepContext<'_>) -> Result<f64>;

    /// The stepper's state after [`Stepper::start`] and some steps, for an exact resume
    /// ([`crate::train::RunState`]); by default it cannot save one (an error naming it).
    ///
    /// # Errors
    /// When the stepper cannot be checkpointed.
    fn save_state(&self) -> Result<serde_json::Value> {
        Err(crate::train::resume::not_resumable(std::any::type_name::<
            Self,
        >()))
    }

    /// Restores a state written by [`Stepper::save_state`] into a started stepper;
    /// `model` already holds the saved parameters.
    ///
    /// # Errors
    /// When the stepper cannot be checkpointed or the state does not fit it.
    fn load_state(&mut self, _model: &mut M, _state: &serde_json::Value) -> Result<()> {
        Err(crate::train::resume::not_resumable(std::any::type_name::<
            Self,
        >()))
    }
}

/// The positions of `role`'s blocks in the flat view, adjacent ranges merged (fewer, longer
/// loops for the optimiser; the same entries).
pub fn merged_ranges(params: &ParamStore, role: Role) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for r in params.ranges(role) {
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

/// Adam ([`Adam::ascend`], the objective is maximised) on the [`Role::Optimised`] blocks;
/// blocks with any other role are never moved. One objective evaluation per step.
#[derive(Clone, Debug)]
pub struct AdamStepper {
    config: AdamConfig,
    adam: Option<Adam>,
    flat: Vec<f64>,
    ranges: Vec<Range<usize>>,
}

impl AdamStepper {
    /// A stepper with Adam settings `config` (validated in [`Stepper::start`]).
    pub fn new(config: AdamConfig) -> Self {
        AdamStepper {
            config,
            adam: None,
            flat: Vec::new(),
            ranges: Vec::new(),
        }
    }

    /// The optimiser after (or during) a run; `None` before the first.
    pub fn adam(&self) -> Option<&Adam> {
        self.adam.as_ref()
    }
}

impl<M: Model + ?Sized> Stepper<M> for AdamStepper {
    fn start(&mut self, model: &mut M, _steps: usize) -> Result<()> {
        let params = model.params();
        self.adam = Some(Adam::new(self.config.clone(), params.num_free())?);
        self.flat = params.flat();
        self.ranges = merged_ranges(params, Role::Optimised);
        Ok(())
    }

    fn step(&mut self, model: &mut M, batch: &Batch<'_>, ctx: &mut StepContext<'_>) -> Result<f64> {
        let adam = started(&mut self.adam)?;
        let (value, grad) = model.value_and_grad(ctx.tape, batch, ctx.rng)?;
        adam.ascend_ranges(&mut self.flat, &grad, &self.ranges)?;
        model.params_mut().set_flat(&self.flat)?;
        Ok(value)
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        crate::train::resume::save_adam(&self.adam)
    }

    fn load_state(&mut self, model: &mut M, state: &serde_json::Value) -> Result<()> {
        crate::train::resume::load_adam(&mut self.adam, state)?;
        self.flat = model.params().flat();
        Ok(())
    }
}

/// The optimiser of a started stepper.
pub(crate) fn started(adam: &mut Option<Adam>) -> Result<&mut Adam> {
    adam.as_mut()
        .ok_or_else(|| dgp_core::Error::config("stepper", "used before Stepper::start"))
}
