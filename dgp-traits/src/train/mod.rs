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
//!   per-parameter state, so a sampler with adapting and frozen phases (SGHMC) is one more
//!   implementation.
//! * Observers: [`Progress`] (forwards to a [`crate::model::FitObserver`]),
//!   [`HeldOutStopping`] (early stopping on a held-out score, restoring the best
//!   parameters; configured by [`EarlyStopping`]), [`Checkpoint`] (the model's JSON every
//!   N steps to a sink) and [`SampleCollector`] (burn-in, thinning, a maximum number of
//!   kept samples).
//! * [`FullBatchLbfgs`]: full-batch L-BFGS as its own driver, backing off from trial points
//!   where the objective cannot be evaluated.
//! * [`best_of`]: random restarts — train candidates briefly and keep the best-scoring.
//!
//! A backend's `fit` composes these in a few lines, e.g. Adam with progress:
//!
//! ```text
//! Executor::new(AdamStepper::new(AdamConfig::with_lr(cfg.learning_rate)), cfg)
//!     .observe(&mut Progress::new(observer))
//!     .run(self, data)
//! ```

mod early_stopping;
mod executor;
mod lbfgs;
mod natural;
mod observer;
mod restarts;
mod sghmc;
mod stepper;
#[cfg(test)]
mod tests;

pub use early_stopping::{
    EarlyStopping, FitSummary, HeldOutStopping, MIN_ROWS_FOR_EARLY_STOPPING, heldout_split,
};
pub use executor::{Executor, HISTORY_EVERY};
pub use lbfgs::FullBatchLbfgs;
pub use natural::{NaturalAdamStepper, NaturalGradientModel};
pub use observer::{Checkpoint, Control, Observer, Progress, SampleCollector, StepInfo};
pub use restarts::{BestOf, best_of};
pub use sghmc::{
    SampledModel, SghmcChain, SghmcConfig, SghmcConstants, SghmcSchedule, SghmcState, SghmcStepper,
    step_rng,
};
pub use stepper::{AdamStepper, StepContext, Stepper};
