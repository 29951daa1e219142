//! Training as an executor (the shape of argmin's `Executor`/`Solver` split): one loop
//! that owns the minibatches, the tape and the noise stream, a pluggable [`Stepper`] that
//! moves the parameters, and [`Observer`]s that watch each step.
//!
//! * [`Executor`]: `cfg.steps` steps over shuffled minibatches (order from `cfg.seed`,
//!   Monte Carlo noise from `stream(cfg.seed, 1)`; rows gathered into buffers allocated
//!   once), calling the stepper on each batch and then every observer.
//! * Steppers: [`AdamStepper`] (Adam on the [`crate::params::Role::Optimised`] ranges);
//!   [`NaturalAdamStepper`] (a natural-gradient step on the
//!   [`crate::params::Role::Natural`] blocks of a [`NaturalGradientModel`] and Adam on the
//!   rest, alternate or joint scheme). A stepper is told the step index and owns its
//!   per-parameter state, so a sampler with adapting and frozen phases (dgp-hmc's SGHMC
//!   sampler) is one more implementation.
//! * Observers: [`CallerHooks`] (forwards to the caller's [`crate::fit::FitHooks`]:
//!   progress, run control, checkpoints), [`HeldOutStopping`] (early stopping on a
//!   held-out score, restoring the best parameters; configured by [`EarlyStopping`]),
//!   [`ModelSnapshots`] (the model's JSON every N steps to a sink) and
//!   [`SampleCollector`] (burn-in, thinning, a maximum number of kept samples).
//! * Held-out early stopping for every backend: `FitConfig::early_stopping` holds a
//!   [`HeldOutRule`] (the patience rule [`EarlyStopping`], or Lindinger et al.'s
//!   [`LindingerStopping`]); a backend's `fit` honours it by calling
//!   [`fit_with_held_out`] (rows split, rule observer attached, scored by the model's own
//!   held-out predictive NLL), which is the plain executor run when it is `None`.
//! * A stop on convergence of the training objective for every executor run:
//!   `FitConfig::convergence` ([`crate::model::Convergence`], decided by
//!   [`ConvergenceTrace`]); the report's `converged_after` says when it stopped.
//! * [`FullBatchLbfgs`]: full-batch L-BFGS as its own driver, backing off from trial points
//!   where the objective cannot be evaluated.
//! * [`best_of`]: random restarts — train candidates briefly and keep the best-scoring.
//!
//! A backend's `fit` composes these in a few lines, e.g. Adam with the caller's hooks:
//!
//! ```text
//! Executor::new(AdamStepper::new(self.config.adam.clone()), cfg)
//!     .observe(&mut CallerHooks::new(hooks))
//!     .run(self, data)
//! ```

mod convergence;
mod early_stopping;
mod executor;
mod held_out;
mod lbfgs;
mod natural;
mod observer;
mod restarts;
pub mod resume;
pub(crate) mod rules;
mod stepper;
#[cfg(test)]
mod tests;

pub use convergence::ConvergenceTrace;
pub use early_stopping::{
    FitSummary, HeldOutStopping, LindingerObserver, MIN_ROWS_FOR_EARLY_STOPPING, heldout_split,
    patience_held_out,
};
pub use executor::{Executor, HISTORY_EVERY};
pub use held_out::{
    HOLDOUT_SEED_OFFSET, HeldOutSplit, KeptRows, SCORE_SEED_OFFSET, fit_with_held_out,
    fit_with_held_out_observed, heldout_nll, predictive_nll,
};
pub use lbfgs::FullBatchLbfgs;
pub use natural::{NaturalAdamStepper, NaturalGradientModel};
pub use observer::{CallerHooks, Control, ModelSnapshots, Observer, SampleCollector, StepInfo};
pub use restarts::{BestOf, best_of};
pub use resume::{RUN_STATE_VERSION, RunState};
pub use rules::{
    EarlyStopping, HeldOutRule, LindingerStopping, LindingerTrace, PATIENCE_SCORE_SAMPLES, Restore,
};
pub use stepper::{AdamStepper, StepContext, Stepper, merged_ranges};
