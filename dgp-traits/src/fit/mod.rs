//! What a fit is asked and what it reports — the training half of the [`crate::model::Model`]
//! contract, as plain data and hooks with no dependence on how training is done:
//!
//! * [`FitConfig`] — steps, minibatch size, seed, held-out early stopping
//!   ([`HeldOutRule`]) and the convergence stop ([`Convergence`]); the optimiser's own
//!   settings (a learning rate and its [`LrSchedule`]) belong to the backend's
//!   configuration, which hands them to its stepper;
//! * [`FitHooks`] — the caller's hooks, each optional: [`Progress`], [`RunControl`]
//!   (stop, and the [`RunState`] to resume from) and [`Checkpoints`] (the run's state at
//!   a cadence);
//! * [`FitReport`] — what a fit did (with [`FitSummary`] when early stopping ran);
//! * [`Training`] — the schedule a backend's configuration holds (step budget or epochs,
//!   batch, seed, early stopping, convergence stop), which gives the [`FitConfig`] of a
//!   fit on `n` rows.
//!
//! The implementation (`crate::train`: the executor, steppers and observers;
//! `crate::optim`) imports this module, never the reverse.

mod hooks;
mod rules;
mod run_state;
mod schedule;
mod summary;
mod training;

pub use hooks::{Checkpoints, FitHooks, Hooks, Progress, RunControl};
pub use rules::{
    Convergence, EarlyStopping, HeldOutRule, LindingerStopping, PATIENCE_SCORE_SAMPLES, Restore,
};
pub use run_state::{RUN_STATE_VERSION, RunState};
pub use schedule::LrSchedule;
pub use summary::FitSummary;
pub use training::{PREDICT_SEED_OFFSET, Training};

use serde::{Deserialize, Serialize};

/// Settings shared by every backend's training loop. Backend-specific settings (numbers
/// of training samples, natural-gradient steps, burn-in) and the optimiser's settings
/// (Adam's learning rate and schedule, a sampler's step sizes) live in the backend's own
/// config.
///
/// Write literals with `..FitConfig::default()`: fields are added over time (each with a
/// serde default, so older JSON still loads). Unknown keys are ignored when reading JSON,
/// so JSON with keys that are not fields here still loads.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FitConfig {
    /// Optimisation (or sampler) steps.
    pub steps: usize,
    /// Minibatch size; `0` or ≥ N means full batch.
    pub batch_size: usize,
    /// Seed for minibatch order and Monte Carlo noise.
    pub seed: u64,
    /// Held-out early stopping (`None`: train on every row for `steps` steps). Honoured by
    /// backends whose `fit` trains through [`crate::train::fit_with_held_out`] (svi and
    /// nested's Adam, and any backend written on it).
    #[serde(default)]
    pub early_stopping: Option<HeldOutRule>,
    /// Stop when the smoothed training objective stops improving ([`Convergence`];
    /// `None`: run every step). Honoured by every backend that trains on the core's
    /// [`crate::train::Executor`]; `steps` is then the cap.
    #[serde(default)]
    pub convergence: Option<Convergence>,
}

impl Default for FitConfig {
    fn default() -> Self {
        FitConfig {
            steps: 2000,
            batch_size: 10_000,
            seed: 0,
            early_stopping: None,
            convergence: None,
        }
    }
}

impl FitConfig {
    /// This configuration, with `fallback` as its convergence stop when it has none of its
    /// own: how a backend applies the stop its configuration carries (e.g.
    /// `SviConfig::convergence`) while a caller's explicit
    /// [`FitConfig::convergence`] still wins.
    ///
    /// ```
    /// use dgp_traits::model::{Convergence, FitConfig};
    /// let own = Convergence { patience: 5, ..Convergence::default() };
    /// let fit = FitConfig::default();
    /// assert_eq!(fit.with_convergence_fallback(Some(&own)).convergence, Some(own));
    /// let explicit = FitConfig { convergence: Some(Convergence::default()), ..fit };
    /// let kept = explicit.with_convergence_fallback(Some(&own));
    /// assert_eq!(kept.convergence, Some(Convergence::default()));
    /// ```
    pub fn with_convergence_fallback(
        &self,
        fallback: Option<&Convergence>,
    ) -> std::borrow::Cow<'_, FitConfig> {
        match (&self.convergence, fallback) {
            (None, Some(c)) => std::borrow::Cow::Owned(FitConfig {
                convergence: Some(*c),
                ..self.clone()
            }),
            _ => std::borrow::Cow::Borrowed(self),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that are not fields (here the optimiser's settings, which belong to a
    /// backend's configuration) are ignored, and missing optional fields take defaults.
    #[test]
    fn json_with_optimiser_keys_still_loads() {
        let old: FitConfig = serde_json::from_str(
            r#"{"steps":5,"batch_size":3,"learning_rate":0.1,"seed":2,
                "lr_schedule":{"kind":"exponential","gamma":0.98,"every":1000,"staircase":true}}"#,
        )
        .unwrap();
        assert_eq!(
            old,
            FitConfig {
                steps: 5,
                batch_size: 3,
                seed: 2,
                ..FitConfig::default()
            }
        );
        let text = serde_json::to_string(&old).unwrap();
        assert!(!text.contains("learning_rate") && !text.contains("lr_schedule"));
        assert_eq!(serde_json::from_str::<FitConfig>(&text).unwrap(), old);
    }
}
