//! [`Training`]: how a configuration trains, held by every backend's configuration (its
//! `training` field), so that `Config::default().fit(&data)` trains what the backend
//! chose as its default and every harness reads the same numbers from the same place.

use serde::{Deserialize, Serialize};

use crate::fit::{Convergence, FitConfig, HeldOutRule};
use dgp_core::{Error, Result};

/// Offset between a fit's seed ([`Training::seed`]) and the seed of the predictions made
/// with its defaults ([`Training::predict_seed`]): the Monte Carlo draws of a prediction
/// never replay those of training.
pub const PREDICT_SEED_OFFSET: u64 = 0x5eed;

/// The training schedule of a configuration: step budget, minibatch size, seed, held-out
/// early stopping and the convergence stop. A fit on `n` training rows runs
/// [`Training::fit_config`]`(n)`.
///
/// The optimiser's own settings (Adam's learning rate and its schedule, a sampler's step
/// sizes) are fields of the backend's configuration, beside this one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    /// Optimisation (or sampler) steps; with [`Training::convergence`] or
    /// [`Training::early_stopping`] the cap, with [`Training::epochs`] the floor.
    pub steps: usize,
    /// Passes over the training rows: when set, a fit on `n` rows with batches of `b`
    /// runs `max(steps, epochs · ⌈n / b⌉)` steps (the DSPP paper's schedule, with `steps`
    /// as a floor for small data sets where one epoch is one step).
    #[serde(default)]
    pub epochs: Option<usize>,
    /// Rows per minibatch; a fit on `n` rows uses `min(n, batch_size)` (full batch when
    /// `batch_size ≥ n`).
    pub batch_size: usize,
    /// Seed of the minibatch order and the Monte Carlo noise of training (the seed of the
    /// model's initialisation is a field of the backend's configuration).
    #[serde(default)]
    pub seed: u64,
    /// Held-out early stopping ([`HeldOutRule`]); `None`: train on every row.
    #[serde(default)]
    pub early_stopping: Option<HeldOutRule>,
    /// Stop once the smoothed training objective stops improving ([`Convergence`]);
    /// `None`: run every step.
    #[serde(default)]
    pub convergence: Option<Convergence>,
}

impl Default for Training {
    /// [`FitConfig::default`]'s schedule: 2 000 steps on minibatches of up to 10 000 rows,
    /// seed 0, no stop.
    fn default() -> Self {
        let f = FitConfig::default();
        Training {
            steps: f.steps,
            epochs: None,
            batch_size: f.batch_size,
            seed: f.seed,
            early_stopping: f.early_stopping,
            convergence: f.convergence,
        }
    }
}

impl Training {
    /// The minibatch size of a fit on `n_train` rows: `min(n_train, batch_size)`, at least 1.
    pub fn batch_for(&self, n_train: usize) -> usize {
        self.batch_size.min(n_train).max(1)
    }

    /// The step budget of a fit on `n_train` rows (see [`Training::epochs`]).
    pub fn steps_for(&self, n_train: usize) -> usize {
        match self.epochs {
            Some(e) => self
                .steps
                .max(e.saturating_mul(n_train.div_ceil(self.batch_for(n_train)))),
            None => self.steps,
        }
    }

    /// The fit of `n_train` rows this schedule asks for.
    ///
    /// ```
    /// use dgp_traits::fit::Training;
    /// let t = Training { steps: 3_000, epochs: Some(400), batch_size: 1_000, ..Training::default() };
    /// assert_eq!((t.fit_config(900).steps, t.fit_config(900).batch_size), (3_000, 900));
    /// assert_eq!(t.fit_config(10_001).steps, 400 * 11);
    /// ```
    pub fn fit_config(&self, n_train: usize) -> FitConfig {
        FitConfig {
            steps: self.steps_for(n_train),
            batch_size: self.batch_for(n_train),
            seed: self.seed,
            early_stopping: self.early_stopping.clone(),
            convergence: self.convergence,
        }
    }

    /// The seed of predictions made with this schedule's defaults:
    /// `seed + `[`PREDICT_SEED_OFFSET`] (wrapping).
    pub fn predict_seed(&self) -> u64 {
        self.seed.wrapping_add(PREDICT_SEED_OFFSET)
    }

    /// Checks the ranges: at least one step, a batch of at least one row, at least one
    /// epoch when set, and the held-out rule's own ranges.
    ///
    /// # Errors
    /// [`Error::Config`] naming the field (`training.steps`, ...).
    pub fn validate(&self) -> Result<()> {
        if self.steps == 0 {
            return Err(Error::config("training.steps", "must be at least 1"));
        }
        if self.batch_size == 0 {
            return Err(Error::config("training.batch_size", "must be at least 1"));
        }
        if self.epochs == Some(0) {
            return Err(Error::config(
                "training.epochs",
                "must be at least 1 when set (null: no epoch count)",
            ));
        }
        if let Some(rule) = &self.early_stopping {
            rule.validate()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_set_a_floor_bounded_step_count_and_the_batch_follows_the_rows() {
        let t = Training {
            steps: 3_000,
            epochs: Some(400),
            batch_size: 1_000,
            ..Training::default()
        };
        assert_eq!(t.fit_config(900).steps, 3_000);
        assert_eq!(t.fit_config(900).batch_size, 900);
        assert_eq!(t.fit_config(10_000).steps, 4_000);
        assert_eq!(t.fit_config(10_001).steps, 400 * 11);
        assert_eq!(t.fit_config(0).batch_size, 1);
        let plain = Training {
            steps: 10_000,
            ..Training::default()
        };
        assert_eq!(plain.fit_config(50_000).steps, 10_000);
        assert_eq!(plain.predict_seed(), PREDICT_SEED_OFFSET);
    }

    #[test]
    fn ranges_name_the_field() {
        let bad = |t: Training| t.validate().unwrap_err().to_string();
        assert!(
            bad(Training {
                steps: 0,
                ..Training::default()
            })
            .contains("training.steps")
        );
        assert!(
            bad(Training {
                batch_size: 0,
                ..Training::default()
            })
            .contains("training.batch_size")
        );
        assert!(
            bad(Training {
                epochs: Some(0),
                ..Training::default()
            })
            .contains("training.epochs")
        );
        assert!(Training::default().validate().is_ok());
    }
}
