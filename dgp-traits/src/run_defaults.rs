//! A backend's own training defaults ([`RunDefaults`]) and the settings of the short
//! demonstration job ([`DemoSettings`]), declared by the backend crate through
//! [`crate::backend::Backend::run_defaults`] and [`crate::backend::Backend::demo`] so that
//! every harness — the library's [`crate::fitted::fit_backend`], `dgp-bench run`, `time`,
//! the Python package — trains the same model from the same numbers.

use crate::backend::CommonSettings;
use crate::fit::{FitConfig, LrSchedule};
use crate::train::{EarlyStopping, HeldOutRule};

/// What a fit with nothing but data, a backend and a layer count trains: the backend's
/// good, fast default (a converged experiment in seconds to minutes on the UCI sets),
/// chosen and recorded by the backend crate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunDefaults {
    /// Inducing points per layer.
    pub num_inducing: usize,
    /// Optimisation steps (when [`RunDefaults::epochs`] is `None`).
    pub steps: usize,
    /// Passes over the training split: when set, the default number of steps is
    /// `max(steps, epochs · ⌈N_train / batch⌉)` (the DSPP paper's protocol, with `steps` as
    /// a floor: on a small data set one epoch is one full-batch step, and 400 Adam steps at
    /// lr 0.01 cannot move a noise variance from its initial 0.69 to the ≈ 0.003 of energy).
    pub epochs: Option<usize>,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Minibatch size cap: the batch is `min(N_train, batch_cap)`.
    pub batch_cap: usize,
    /// Training samples ([`CommonSettings::train_samples`]).
    pub train_samples: usize,
    /// Prediction mixture components ([`CommonSettings::predict_samples`]).
    pub predict_samples: usize,
    /// Held-out early stopping of a fit that is given no other held-out rule
    /// ([`FitConfig::early_stopping`], the patience rule: the rows held out, the best
    /// held-out parameters kept); `None` trains all the steps.
    pub early_stopping: Option<EarlyStopping>,
    /// Adam learning rate of a fit whose held-out rule does not run (none given, or
    /// fewer training rows than it needs, [`HeldOutRule::runs_on`]); `None` =
    /// [`RunDefaults::learning_rate`] always. A rate raised because the rule ends the
    /// run before the model overfits falls back to this one without it.
    pub unguarded_learning_rate: Option<f64>,
}

impl RunDefaults {
    /// The DSVI reference settings (Salimbeni & Deisenroth 2017's reference code,
    /// Doubly-Stochastic-DGP `demos/run_regression.py`): M = 100, Adam lr 0.01, batch
    /// min(N, 10 000), 10 000 steps, one training sample, 100 test samples.
    pub const DSVI_REFERENCE: RunDefaults = RunDefaults {
        num_inducing: 100,
        steps: 10_000,
        epochs: None,
        learning_rate: 0.01,
        batch_cap: 10_000,
        train_samples: 1,
        predict_samples: 100,
        early_stopping: None,
        unguarded_learning_rate: None,
    };

    /// The default Adam learning rate of a fit on `n_train` training rows with held-out
    /// rule `rule`: [`RunDefaults::learning_rate`] when the rule runs on that many rows,
    /// else [`RunDefaults::unguarded_learning_rate`] when set.
    pub fn learning_rate_for(&self, rule: Option<&HeldOutRule>, n_train: usize) -> f64 {
        match self.unguarded_learning_rate {
            Some(lr) if !rule.is_some_and(|r| r.runs_on(n_train)) => lr,
            _ => self.learning_rate,
        }
    }

    /// The default number of optimisation steps for `n_train` training rows and minibatch
    /// size `batch` (see [`RunDefaults::epochs`]).
    pub fn steps_for(&self, n_train: usize, batch: usize) -> usize {
        match self.epochs {
            Some(e) => self
                .steps
                .max(e * n_train.div_ceil(batch.clamp(1, n_train.max(1)))),
            None => self.steps,
        }
    }

    /// The held-out rule of a default fit ([`RunDefaults::early_stopping`] as the patience
    /// rule).
    pub fn held_out_rule(&self) -> Option<HeldOutRule> {
        self.early_stopping.map(HeldOutRule::Patience)
    }

    /// The common settings of a default fit of `layers` layers on `n_train` rows: these
    /// defaults' sizes and sample counts, the backend's own hidden width, seed 0, tuning on
    /// validation rows where the backend tunes, and the learning rate
    /// [`RunDefaults::learning_rate_for`] with a constant schedule.
    pub fn common(&self, layers: usize, n_train: usize) -> CommonSettings {
        CommonSettings {
            layers,
            num_inducing: self.num_inducing,
            hidden_width: None,
            train_samples: self.train_samples,
            predict_samples: self.predict_samples,
            seed: 0,
            tune: true,
            learning_rate: Some(self.learning_rate_for(self.held_out_rule().as_ref(), n_train)),
            lr_schedule: Some(LrSchedule::Constant),
        }
    }

    /// The training settings of a default fit on `n_train` rows: [`RunDefaults::steps_for`]
    /// steps on minibatches of `min(n_train, batch_cap)` rows, seed 0, the held-out rule
    /// of [`RunDefaults::early_stopping`], and the backend's own convergence stop (none
    /// given here).
    pub fn fit_config(&self, n_train: usize) -> FitConfig {
        let batch_size = self.batch_cap.min(n_train).max(1);
        FitConfig {
            steps: self.steps_for(n_train, batch_size),
            batch_size,
            seed: 0,
            early_stopping: self.held_out_rule(),
            convergence: None,
        }
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

    /// A raised rate holds only where its held-out rule runs; without a rule, or below
    /// its row count, the fit keeps the unguarded rate. Defaults without an unguarded
    /// rate keep their one rate.
    #[test]
    fn the_raised_learning_rate_needs_a_rule_that_runs() {
        let rule = EarlyStopping {
            fraction: 2.0 / 17.0,
            every: 0,
            patience: 10,
            min_rows: 400,
            rises: 0,
        };
        let d = RunDefaults {
            learning_rate: 0.03,
            early_stopping: Some(rule),
            unguarded_learning_rate: Some(0.01),
            ..RunDefaults::DSVI_REFERENCE
        };
        let r = d.held_out_rule();
        assert_eq!(d.learning_rate_for(r.as_ref(), 400), 0.03);
        assert_eq!(d.learning_rate_for(r.as_ref(), 399), 0.01);
        assert_eq!(d.learning_rate_for(None, 10_000), 0.01);
        assert_eq!(d.common(2, 399).learning_rate, Some(0.01));
        assert_eq!(d.common(2, 400).learning_rate, Some(0.03));
        let plain = RunDefaults::DSVI_REFERENCE;
        assert_eq!(plain.learning_rate_for(None, 100), 0.01);
        assert_eq!(plain.learning_rate_for(r.as_ref(), 100), 0.01);
    }

    /// Epochs set a floor-bounded step count from the batch; the batch never exceeds the
    /// rows, and never falls to zero.
    #[test]
    fn steps_and_batch_follow_the_rows() {
        let d = RunDefaults {
            steps: 3_000,
            epochs: Some(400),
            batch_cap: 1_000,
            ..RunDefaults::DSVI_REFERENCE
        };
        assert_eq!(d.fit_config(900).steps, 3_000);
        assert_eq!(d.fit_config(900).batch_size, 900);
        assert_eq!(d.fit_config(10_000).steps, 4_000);
        assert_eq!(d.fit_config(10_001).steps, 400 * 11);
        assert_eq!(d.fit_config(0).batch_size, 1);
        assert_eq!(RunDefaults::DSVI_REFERENCE.fit_config(50_000).steps, 10_000);
    }
}
