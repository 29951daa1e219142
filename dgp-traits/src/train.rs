//! The default training loop: Adam over shuffled minibatches of an [`Objective`]; and
//! its natural-gradient variant ([`fit_natgrad_adam`]) for models whose variational
//! factors take natural-gradient steps ([`NaturalGradientModel`]).
//!
//! Used by [`Model::fit`]'s default implementation. Minibatch order comes from
//! `cfg.seed` and Monte Carlo noise from an independent stream of the same seed, so a
//! run is reproducible. Minibatch rows are gathered into buffers allocated once.

use crate::data::{Dataset, Minibatches, gather_rows_into};
use crate::error::{Error, Result};
use crate::model::{Batch, FitConfig, FitObserver, FitReport, Model};
use crate::optim::{Adam, AdamConfig, NatGradConfig, NatGradScheme};
use crate::params::ParamId;
use crate::rng::{Rng, stream};
use crate::tape::Tape;
use faer::{Mat, Par};
use std::ops::Range;
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
    train_loop(model, data, cfg, adam_cfg, observer, None)
}

/// A model some of whose parameter blocks form Gaussian variational factors
/// q = N(m, LLᵀ) that are updated by natural-gradient steps
/// ([`crate::optim::natural_gradient_step`]) instead of Adam.
pub trait NaturalGradientModel: Model {
    /// The parameter blocks the natural steps own; Adam leaves them unchanged.
    fn natural_blocks(&self) -> Vec<ParamId>;

    /// One natural-gradient step on the blocks of [`Self::natural_blocks`], using the
    /// objective on `batch` (noise from `rng`). Returns the objective before the step and
    /// its gradient there in the layout of [`crate::params::ParamStore::flat`] (what
    /// [`Objective::value_and_grad`](crate::model::Objective::value_and_grad) would have
    /// returned), which the joint scheme hands to Adam.
    fn natural_step(
        &mut self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
        cfg: &NatGradConfig,
    ) -> Result<(f64, Vec<f64>)>;
}

/// Natural-gradient steps of size `nat.gamma` on the model's
/// [`NaturalGradientModel::natural_blocks`] and Adam (learning rate `cfg.learning_rate`)
/// on all other parameters, on the same minibatch. With [`NatGradScheme::Alternate`] (the
/// scheme of Salimbeni et al. 2018, `shared/specs/dsvi.md` §6) the Adam gradient is
/// evaluated after the natural step, with independent noise; with
/// [`NatGradScheme::Joint`] both steps use the one evaluation before it. Reproducible as
/// [`fit_adam`].
pub fn fit_natgrad_adam<M: NaturalGradientModel + ?Sized>(
    model: &mut M,
    data: &Dataset,
    cfg: &FitConfig,
    nat: &NatGradConfig,
    observer: &mut dyn FitObserver,
) -> Result<FitReport> {
    nat.validate()?;
    let adam_cfg = AdamConfig {
        lr: cfg.learning_rate,
        ..AdamConfig::default()
    };
    let mut natural = |m: &mut M, tape: &mut Tape, batch: &Batch<'_>, rng: &mut Rng| {
        let (value, grad) = m.natural_step(tape, batch, rng, nat)?;
        Ok(match nat.scheme {
            NatGradScheme::Alternate => None,
            NatGradScheme::Joint => Some((value, grad)),
        })
    };
    let frozen: Vec<Range<usize>> = model
        .natural_blocks()
        .into_iter()
        .filter_map(|id| model.params().flat_range(id))
        .collect();
    train_loop(
        model,
        data,
        cfg,
        adam_cfg,
        observer,
        Some((&frozen, &mut natural)),
    )
}

/// Parameters the Adam step must not move, and the step that updates them instead; the
/// step may return the objective and gradient Adam is to use (else Adam evaluates them
/// afresh).
type PreStep<'a, M> = (
    &'a [Range<usize>],
    &'a mut dyn FnMut(&mut M, &mut Tape, &Batch<'_>, &mut Rng) -> Result<Option<(f64, Vec<f64>)>>,
);

/// The minibatch loop shared by [`fit_adam_with`] and [`fit_natgrad_adam`].
fn train_loop<M: Model + ?Sized>(
    model: &mut M,
    data: &Dataset,
    cfg: &FitConfig,
    adam_cfg: AdamConfig,
    observer: &mut dyn FitObserver,
    mut pre_step: Option<PreStep<'_, M>>,
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
    let mut adam = Adam::new(adam_cfg, model.params().num_free())?;
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
        let (value, grad) = match pre_step.as_mut() {
            Some((frozen, natural)) => {
                let given = natural(model, &mut tape, &batch, &mut noise)?;
                model.params().flat_into(&mut flat);
                let (value, mut grad) = match given {
                    Some(vg) => vg,
                    None => model.value_and_grad(&mut tape, &batch, &mut noise)?,
                };
                for r in frozen.iter() {
                    grad[r.clone()].fill(0.0);
                }
                (value, grad)
            }
            None => model.value_and_grad(&mut tape, &batch, &mut noise)?,
        };
        adam.ascend(&mut flat, &grad)?;
        keep_objective(&mut report, step, cfg.steps, value);
        model.params_mut().set_flat(&flat)?;
        observer.on_step(step, cfg.steps, report.final_objective);
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// Keeps the objective of `step` in the report.
fn keep_objective(report: &mut FitReport, step: usize, steps: usize, value: f64) {
    if step.is_multiple_of(HISTORY_EVERY) || step + 1 == steps {
        report.history.push((step, value));
    }
    report.final_objective = value;
    report.steps = step + 1;
}
