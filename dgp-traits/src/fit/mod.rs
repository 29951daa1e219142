//! What a fit is asked and what it reports — the training half of the [`crate::model::Model`]
//! contract, as plain data and hooks with no dependence on how training is done:
//!
//! * [`FitConfig`] — steps, minibatch size, seed, held-out early stopping
//!   ([`HeldOutRule`]) and the learning rate with its schedule ([`LrSchedule`]) of the
//!   backends that train with Adam;
//! * [`FitHooks`] — the caller's hooks, each optional: [`Progress`], [`RunControl`]
//!   (stop, and the [`RunState`] to resume from) and [`Checkpoints`] (the run's state at
//!   a cadence);
//! * [`FitReport`] — what a fit did (with [`FitSummary`] when early stopping ran).
//!
//! The implementation (`crate::train`: the executor, steppers and observers;
//! `crate::optim`) imports this module, never the reverse.

mod hooks;
mod rules;
mod run_state;
mod schedule;
mod summary;

pub use hooks::{Checkpoints, FitHooks, Hooks, Progress, RunControl};
pub use rules::{
    Convergence, EarlyStopping, HeldOutRule, LindingerStopping, PATIENCE_SCORE_SAMPLES, Restore,
};
pub use run_state::{RUN_STATE_VERSION, RunState};
pub use schedule::LrSchedule;
pub use summary::FitSummary;

use serde::{Deserialize, Serialize};

/// Settings shared by every backend's training loop. Backend-specific settings (numbers
/// of training samples, natural-gradient steps, burn-in) live in the backend's own config.
///
/// Write literals with `..FitConfig::default()`: fields are added over time (each with a
/// serde default, so older JSON still loads).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FitConfig {
    /// Optimisation (or sampler) steps.
    pub steps: usize,
    /// Minibatch size; `0` or ≥ N means full batch.
    pub batch_size: usize,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Seed for minibatch order and Monte Carlo noise.
    pub seed: u64,
    /// Held-out early stopping (`None`: train on every row for `steps` steps). Honoured by
    /// backends whose `fit` trains through [`crate::train::fit_with_held_out`] (svi and
    /// nested's Adam, and any backend written on it).
    #[serde(default)]
    pub early_stopping: Option<HeldOutRule>,
    /// Learning-rate schedule of the Adam steps ([`FitConfig::adam`]); default constant.
    /// Backends with a schedule of their own (dspp's `lr_drops`) keep theirs.
    #[serde(default = "constant_schedule")]
    pub lr_schedule: LrSchedule,
    /// Stop when the smoothed training objective stops improving ([`Convergence`];
    /// `None`: run every step). Honoured by every backend that trains on the core's
    /// [`crate::train::Executor`]; `steps` is then the cap.
    #[serde(default)]
    pub convergence: Option<Convergence>,
}

fn constant_schedule() -> LrSchedule {
    LrSchedule::Constant
}

impl Default for FitConfig {
    fn default() -> Self {
        FitConfig {
            steps: 2000,
            batch_size: 10_000,
            learning_rate: 0.01,
            seed: 0,
            early_stopping: None,
            lr_schedule: LrSchedule::Constant,
            convergence: None,
        }
    }
}

/// Summary of a training run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FitReport {
    /// Steps taken.
    pub steps: usize,
    /// Objective of the last step (per the backend's objective, on its last minibatch).
    pub final_objective: f64,
    /// Wall-clock seconds spent training.
    pub seconds: f64,
    /// (step, objective) pairs recorded along the way.
    pub history: Vec<(usize, f64)>,
    /// What held-out early stopping did (the step kept, the held-out score trace), when
    /// [`FitConfig::early_stopping`] ran; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out: Option<FitSummary>,
    /// The number of steps after which the convergence stop ([`FitConfig::convergence`])
    /// ended the run; `None` when it did not (no stop configured, or the run reached its
    /// step cap or ended otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged_after: Option<usize>,
}
