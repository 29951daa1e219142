//! The common settings a backend configuration holds ([`RunDefaults`], read off the
//! configuration by [`crate::fitted::Estimator::defaults`]) and the settings of the short
//! demonstration job ([`DemoSettings`], declared by the backend crate through
//! [`crate::backend::Backend::demo`]), so that every harness — the library's
//! [`crate::fitted::Estimator::fit`], `dgp-bench run`, `time`, the Python package — trains
//! the same model from the same numbers.

use crate::fit::{FitConfig, HeldOutRule, Training};

/// The common settings a backend configuration holds ([`crate::fitted::Estimator::defaults`]):
/// what a fit of that configuration trains with, read by every harness from the
/// configuration itself (the backend's `Default`, or a named preset) rather than declared
/// a second time.
#[derive(Clone, Debug, PartialEq)]
pub struct RunDefaults {
    /// GP layers (1 = the sparse-GP baseline).
    pub layers: usize,
    /// Inducing points per layer.
    pub num_inducing: usize,
    /// Training samples ([`crate::backend::CommonSettings::train_samples`]).
    pub train_samples: usize,
    /// Prediction mixture components ([`crate::backend::CommonSettings::predict_samples`]).
    pub predict_samples: usize,
    /// Adam learning rate of a fit whose held-out rule runs (or that has none and no
    /// [`RunDefaults::unguarded_learning_rate`]); a backend that uses no learning rate
    /// states its nominal value, which nothing reads.
    pub learning_rate: f64,
    /// Adam learning rate of a fit whose held-out rule does not run (none given, or
    /// fewer training rows than it needs, [`HeldOutRule::runs_on`]); `None` =
    /// [`RunDefaults::learning_rate`] always. A rate raised because the rule ends the
    /// run before the model overfits falls back to this one without it.
    pub unguarded_learning_rate: Option<f64>,
    /// The training schedule ([`Training`]).
    pub training: Training,
}

impl RunDefaults {
    /// The default Adam learning rate of a fit on `n_train` training rows with held-out
    /// rule `rule`: [`RunDefaults::learning_rate`] when the rule runs on that many rows,
    /// else [`RunDefaults::unguarded_learning_rate`] when set.
    pub fn learning_rate_for(&self, rule: Option<&HeldOutRule>, n_train: usize) -> f64 {
        match self.unguarded_learning_rate {
            Some(lr) if !rule.is_some_and(|r| r.runs_on(n_train)) => lr,
            _ => self.learning_rate,
        }
    }

    /// The step budget of a fit on `n_train` rows ([`Training::steps_for`]).
    pub fn steps_for(&self, n_train: usize) -> usize {
        self.training.steps_for(n_train)
    }

    /// The held-out rule of a default fit ([`Training::early_stopping`]).
    pub fn held_out_rule(&self) -> Option<HeldOutRule> {
        self.training.early_stopping.clone()
    }

    /// The fit of `n_train` rows these defaults ask for ([`Training::fit_config`]).
    pub fn fit_config(&self, n_train: usize) -> FitConfig {
        self.training.fit_config(n_train)
    }
}

/// Reduced settings of a backend in the benchmark's no-argument demonstration job (all
/// registered backends together in about three minutes on two cores): fewer steps and
/// inducing points than [`RunDefaults`], on a real data set (concrete) and a 1-D step
/// function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DemoSettings {
    /// Optimisation steps on the real data set; 0 = the backend does not run on it in the
    /// demonstration job.
    pub steps: usize,
    /// Optimisation steps on the 1-D step function (N = 160 training points).
    pub steps_1d: usize,
    /// Inducing points per layer.
    pub num_inducing: usize,
    /// Minibatch size cap.
    pub batch_cap: usize,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Prediction mixture components.
    pub predict_samples: usize,
    /// The layer counts the demonstration trains (1 = SGP, 2 = DGP2, ...).
    pub layers: &'static [usize],
    /// How these settings shorten the backend's own schedule, stated in the report (empty:
    /// nothing beyond the numbers above).
    pub note: &'static str,
}

impl DemoSettings {
    /// The demonstration settings of svi: 1500 Adam steps (lr 0.01) at M = 50 with
    /// minibatches of 256 on concrete, 1500 full-batch steps at M = 20 on the step
    /// function, 50 prediction samples, SGP, DGP2 and DGP3.
    pub const DEFAULT: DemoSettings = DemoSettings {
        steps: 1_500,
        steps_1d: 1_500,
        num_inducing: 50,
        batch_cap: 256,
        learning_rate: 0.01,
        predict_samples: 50,
        layers: &[1, 2, 3],
        note: "",
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::EarlyStopping;

    /// A raised rate holds only where its held-out rule runs; without a rule, or below
    /// its row count, the fit keeps the unguarded rate. Defaults without an unguarded
    /// rate keep their one rate.
    #[test]
    fn the_raised_learning_rate_needs_a_rule_that_runs() {
        let rule = HeldOutRule::Patience(EarlyStopping {
            fraction: 2.0 / 17.0,
            every: 0,
            patience: 10,
            min_rows: 400,
            rises: 0,
        });
        let d = RunDefaults {
            layers: 2,
            num_inducing: 100,
            train_samples: 1,
            predict_samples: 100,
            learning_rate: 0.03,
            unguarded_learning_rate: Some(0.01),
            training: Training {
                early_stopping: Some(rule),
                ..Training::default()
            },
        };
        let r = d.held_out_rule();
        assert_eq!(d.learning_rate_for(r.as_ref(), 400), 0.03);
        assert_eq!(d.learning_rate_for(r.as_ref(), 399), 0.01);
        assert_eq!(d.learning_rate_for(None, 10_000), 0.01);
        let plain = RunDefaults {
            unguarded_learning_rate: None,
            learning_rate: 0.01,
            ..d
        };
        assert_eq!(plain.learning_rate_for(None, 100), 0.01);
        assert_eq!(plain.learning_rate_for(r.as_ref(), 100), 0.01);
    }
}
