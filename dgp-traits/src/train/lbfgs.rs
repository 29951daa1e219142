//! Full-batch L-BFGS as its own driver: [`FullBatchLbfgs`].

use crate::fit::Hooks;
#[cfg(doc)]
use crate::fit::RunControl;
use crate::model::{Batch, FitReport, Model};
use crate::optim::{LbfgsConfig, lbfgs_maximise};
use crate::tape::Tape;
use crate::train::executor::HISTORY_EVERY;
use dgp_core::rng::stream;
use dgp_core::{Error, Result};
use dgp_data::Dataset;
use faer::Par;
use std::time::Instant;

/// Maximises a model's objective on the whole data set with L-BFGS
/// ([`lbfgs_maximise`]: Moré–Thuente line search, restarts after failed line searches).
///
/// Every evaluation writes the trial point into the model and evaluates the objective on
/// the full batch with noise from `stream(seed, 1)`. A trial point where the objective
/// cannot be evaluated ([`Error::Numerical`]: non-finite value or gradient;
/// [`Error::NotPositiveDefinite`]: e.g. `Kuu` lost definiteness) is reported to L-BFGS as
/// NaN, so it backs off instead of aborting. The best point is written back at the end.
/// Evaluations are numbered after `offset` steps (e.g. a warm-up) for the history (every
/// [`HISTORY_EVERY`]-th) and the caller's progress hook, whose total is `offset + max_iters`.
#[derive(Clone, Debug)]
pub struct FullBatchLbfgs {
    config: LbfgsConfig,
    seed: u64,
    offset: usize,
}

impl FullBatchLbfgs {
    /// A driver with L-BFGS settings `config` (its `max_iters` bounds the iterations) and
    /// noise seed `seed`.
    pub fn new(config: LbfgsConfig, seed: u64) -> Self {
        FullBatchLbfgs {
            config,
            seed,
            offset: 0,
        }
    }

    /// Numbers the evaluations after `steps` earlier steps.
    pub fn offset(mut self, steps: usize) -> Self {
        self.offset = steps;
        self
    }

    /// Runs L-BFGS from the model's current parameters. The report counts `offset` plus
    /// the L-BFGS iterations; its history has an entry every [`HISTORY_EVERY`] evaluations
    /// and the final value at the end.
    ///
    /// # Errors
    /// [`Error::Empty`] for data without rows; errors of the objective other than the
    /// numerical ones above; L-BFGS failures ([`lbfgs_maximise`]);
    /// [`Error::Interrupted`] when `hooks`' [`RunControl::should_stop`] turns true
    /// (checked before each evaluation; the model then holds the last evaluated point).
    pub fn run<M: Model + ?Sized>(
        &self,
        model: &mut M,
        data: &Dataset,
        hooks: &mut dyn Hooks,
    ) -> Result<FitReport> {
        let n = data.n();
        if n == 0 {
            return Err(Error::Empty("training data has no rows".into()));
        }
        let batch = Batch::new(data.x(), data.y(), n)?;
        let start = Instant::now();
        let mut tape = Tape::with_par(Par::rayon(0));
        let mut rng = stream(self.seed, 1);
        let x0 = model.params().flat();
        let n_params = x0.len();
        let (offset, total) = (self.offset, self.offset + self.config.max_iters as usize);
        let mut history = Vec::new();
        let mut evals = 0usize;
        let report = lbfgs_maximise(
            |x: &[f64]| {
                if hooks.should_stop() {
                    return Err(Error::Interrupted(format!(
                        "L-BFGS after {evals} of at most {} evaluations",
                        total - offset
                    )));
                }
                model.params_mut().set_flat(x)?;
                match model.value_and_grad(&mut tape, &batch, &mut rng) {
                    Ok((v, g)) => {
                        if evals.is_multiple_of(HISTORY_EVERY) {
                            history.push((offset + evals, v));
                        }
                        hooks.on_step(offset + evals, total, v);
                        evals += 1;
                        Ok((v, g))
                    }
                    Err(Error::Numerical(_)) | Err(Error::NotPositiveDefinite { .. }) => {
                        Ok((f64::NAN, vec![f64::NAN; n_params]))
                    }
                    Err(e) => Err(e),
                }
            },
            &x0,
            &self.config,
        )?;
        model.params_mut().set_flat(&report.x)?;
        history.push((offset + evals, report.value));
        Ok(FitReport {
            steps: offset + report.iterations as usize,
            final_objective: report.value,
            seconds: start.elapsed().as_secs_f64(),
            history,
            held_out: None,
            converged_after: None,
        })
    }
}
