//! The whole state of an executor run after some steps, as a caller keeps it to continue
//! the run bit for bit (see `crate::train::resume` for how the executor saves and restores
//! it).

use crate::fit::FitReport;
use dgp_core::rng::Rng;
use dgp_core::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the [`RunState`] layout.
pub const RUN_STATE_VERSION: u32 = 1;

/// The whole state of an executor run after `steps_done` steps (see the module docs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunState {
    /// [`RUN_STATE_VERSION`].
    pub version: u32,
    /// Steps completed.
    pub steps_done: usize,
    /// Steps of the run.
    pub steps: usize,
    /// Fit seed (minibatch order and noise).
    pub seed: u64,
    /// Rows per minibatch actually used.
    pub batch_size: usize,
    /// Rows of the training data the run sees.
    pub n: usize,
    /// Free parameters after `steps_done` steps ([`crate::params::ParamStore::flat`]).
    pub params: Vec<f64>,
    /// The Monte Carlo noise generator.
    pub noise: Rng,
    /// The stepper's state ([`crate::train::Stepper::save_state`]).
    pub stepper: Value,
    /// Every observer's state, in registration order.
    pub observers: Vec<Value>,
    /// The report so far.
    pub report: FitReport,
}

impl RunState {
    /// Checks that this state belongs to a run of `steps` steps with `seed`, batches of
    /// `batch_size` of `n` rows and `num_free` free parameters.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first setting that differs.
    pub fn check_matches(
        &self,
        steps: usize,
        seed: u64,
        batch_size: usize,
        n: usize,
        num_free: usize,
    ) -> Result<()> {
        let pairs = [
            ("version", self.version as u64, RUN_STATE_VERSION as u64),
            ("steps", self.steps as u64, steps as u64),
            ("seed", self.seed, seed),
            ("batch size", self.batch_size as u64, batch_size as u64),
            ("training rows", self.n as u64, n as u64),
            ("parameters", self.params.len() as u64, num_free as u64),
        ];
        for (what, saved, now) in pairs {
            if saved != now {
                return Err(Error::config(
                    "resume",
                    format!("the saved run has {what} {saved}, this run has {now}"),
                ));
            }
        }
        if self.steps_done > self.steps || self.report.steps != self.steps_done {
            return Err(Error::config(
                "resume",
                format!(
                    "saved state says {} of {} steps done, its report {}",
                    self.steps_done, self.steps, self.report.steps
                ),
            ));
        }
        Ok(())
    }
}
