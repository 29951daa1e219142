//! The default training loop: Adam over shuffled minibatches of an [`Objective`].
//!
//! Used by [`Model::fit`]'s default implementation. Minibatch order comes from
//! `cfg.seed` and Monte Carlo noise from an independent stream of the same seed, so a
//! run is reproducible. Minibatch rows are gathered into buffers allocated once.

use crate::data::{Dataset, Minibatches, gather_rows_into};
use crate::error::{Error, Result};
use crate::model::{Batch, FitConfig, FitObserver, FitReport, Model};
use crate::optim::{Adam, AdamConfig};
use crate::rng::stream;
use crate::tape::Tape;
use faer::{Mat, Par};
use std::time::Instant;

/// How often (in steps) the objective is kept in [`FitReport::history`].
pub const HISTORY_EVERY: usize = 10;

/// Maximises `model`'s objective with Adam (learning rate `cfg.learning_rate`) for
/// `cfg.steps` minibatch steps. Large matrix products use faer's parallelism on the
/// current rayon pool.
pub fn fit_adam<M: Model + ?Sized>(
    model: &mut M,
    data: &Dataset,
    cfg: &FitConfig,
    observer: &mut dyn FitObserver,
) -> Result<FitReport> {
    let adam_cfg = AdamConfig {
        lr: cfg.learning_rate,
        ..AdamConfig::default()
    };
    fit_adam_with(model, data, cfg, adam_cfg, observer)
}

/// [`fit_adam`] with a full Adam configuration (learning-rate schedule, betas).
pub fn fit_adam_with<M: Model + ?Sized>(
    model: &mut M,
    data: &Dataset,
    cfg: &FitConfig,
    adam_cfg: AdamConfig,
    observer: &mut dyn FitObserver,
) -> Result<FitReport> {
    let n = data.n();
    if n == 0 {
        return Err(Error::Empty("training data has no rows".into()));
    }
    let b = if cfg.batch_size == 0 || cfg.batch_size >= n {
        n
    } else {
        cfg.batch_size
    };
    let mut batches = Minibatches::new(n, b, cfg.seed)?;
    let mut noise = stream(cfg.seed, 1);
    let mut adam = Adam::new(adam_cfg, model.params().num_trainable())?;
    let mut xb = Mat::<f64>::zeros(b, data.input_dim());
    let mut yb = Mat::<f64>::zeros(b, data.output_dim());
    let mut tape = Tape::with_par(Par::rayon(0));
    let mut flat = model.params().flat();
    let mut report = FitReport::default();
    let start = Instant::now();
    for step in 0..cfg.steps {
        let idx = batches.next_batch();
        gather_rows_into(data.x(), idx, xb.as_mut());
        gather_rows_into(data.y(), idx, yb.as_mut());
        let batch = Batch::new(xb.as_ref(), yb.as_ref(), n)?;
        let (value, grad) = model.value_and_grad(&mut tape, &batch, &mut noise)?;
        adam.ascend(&mut flat, &grad)?;
        model.params_mut().set_flat(&flat)?;
        if step % HISTORY_EVERY == 0 || step + 1 == cfg.steps {
            report.history.push((step, value));
        }
        report.final_objective = value;
        report.steps = step + 1;
        observer.on_step(step, cfg.steps, value);
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}
