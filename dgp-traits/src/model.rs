//! The two traits every backend implements, [`Objective`] and [`Model`]. (The prior side
//! of a layer is the concrete [`crate::layer::SparseLayer`], shared by every backend that
//! conditions on points; nested's layers see distributions and hold psi-statistics instead,
//! so no method signature is common to both and no `Layer` trait abstracts over them.)
//!
//! * [`Objective`]: the scalar a backend *maximises* on a minibatch, recorded on a
//!   [`Tape`] so that its gradient comes for free: the ELBO (svi, structured, nested), the
//!   regularised predictive log-likelihood (dspp), the log joint of data and inducing
//!   outputs (hmc, whose negative is the SGHMC potential).
//! * [`Model`]: the trained thing — a [`ParamStore`], `fit` (each backend's own use of the
//!   training executor in `crate::train`, which imports this module, never the reverse),
//!   and `predict` returning the
//!   common [`Predictive`] (a finite Gaussian mixture per test point), so that metrics,
//!   plots and the benchmark treat every backend alike through `Box<dyn Model>`.

use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::optim::{AdamConfig, LrSchedule};
use crate::params::ParamStore;
use crate::predictive::Predictive;
use crate::rng::{Rng, stream};
use crate::tape::{Gradients, Tape, Var};
use crate::train::rules::HeldOutRule;
use faer::MatRef;
use rand::RngExt;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// A minibatch in model units: inputs `x` (B×D), targets `y` (B×P), and the size of the
/// whole training set, used to scale the data term (`N/|B|`).
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// Inputs, B×D.
    pub x: MatRef<'a, f64>,
    /// Targets, B×P.
    pub y: MatRef<'a, f64>,
    /// Size N of the training set the batch is drawn from.
    pub num_data: usize,
}

impl<'a> Batch<'a> {
    /// Checks that `x` and `y` have the same number of rows, at least one row, and
    /// `num_data ≥ rows`.
    pub fn new(x: MatRef<'a, f64>, y: MatRef<'a, f64>, num_data: usize) -> Result<Self> {
        if x.nrows() != y.nrows() {
            return Err(Error::shape("Batch rows of x and y", x.nrows(), y.nrows()));
        }
        if x.nrows() == 0 {
            return Err(Error::Empty("minibatch has no rows".into()));
        }
        if num_data < x.nrows() {
            return Err(Error::Config(format!(
                "num_data {num_data} is smaller than the batch ({} rows)",
                x.nrows()
            )));
        }
        Ok(Batch { x, y, num_data })
    }

    /// Number of points in the batch.
    pub fn len(&self) -> usize {
        self.x.nrows()
    }

    /// True when the batch has no rows (never, for a batch built with [`Batch::new`]).
    pub fn is_empty(&self) -> bool {
        self.x.nrows() == 0
    }
}

/// The scalar a backend maximises; see the module docs.
pub trait Objective {
    /// The parameters the objective depends on.
    fn params(&self) -> &ParamStore;

    /// Records the objective for `batch` on `tape` and returns its 1×1 node. `params`
    /// are the leaves of [`Objective::params`] on this tape; `rng` supplies any noise
    /// (Monte Carlo draws), so a fixed generator state gives a deterministic function.
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<Var>;

    /// Objective value and its gradient with respect to the flat trainable parameters
    /// ([`ParamStore::flat`] layout). Fails on a non-finite value or gradient.
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        tape.clear();
        let leaves = self.params().record(tape);
        let out = self.record(tape, &leaves, batch, rng)?;
        let (value, _, g) = checked_backward(tape, out, self.params(), &leaves)?;
        Ok((value, g))
    }

    /// [`Objective::value_and_grad`] at the free parameters `flat` (layout of
    /// [`ParamStore::flat`]) instead of the stored ones, which stay untouched
    /// ([`ParamStore::record_at`]): what MCEM needs to evaluate the objective at a window
    /// sample without moving the chain, and what a line search needs at a trial point.
    ///
    /// # Errors
    /// A `flat` of the wrong length or with non-finite entries; else as
    /// [`Objective::value_and_grad`].
    fn value_and_grad_at(
        &self,
        flat: &[f64],
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        tape.clear();
        let leaves = self.params().record_at(tape, flat)?;
        let out = self.record(tape, &leaves, batch, rng)?;
        let (value, _, g) = checked_backward(tape, out, self.params(), &leaves)?;
        Ok((value, g))
    }
}

/// The reverse pass from the recorded objective `out`: its value, the adjoints of every
/// node and the gradient in [`ParamStore::flat`] layout (`leaves` are `params` on
/// `tape`). Fails on a non-finite value or gradient entry, so no NaN reaches an optimiser.
pub fn checked_backward(
    tape: &Tape,
    out: Var,
    params: &ParamStore,
    leaves: &[Var],
) -> Result<(f64, Gradients, Vec<f64>)> {
    let value = tape.scalar(out);
    if !value.is_finite() {
        return Err(Error::Numerical(format!("objective is {value}")));
    }
    let grads = tape.backward(out);
    let g = params.flat_grad(&grads, leaves);
    if let Some(k) = g.iter().position(|v| !v.is_finite()) {
        return Err(Error::Numerical(format!("gradient entry {k} is {}", g[k])));
    }
    Ok((value, grads, g))
}

/// Value and gradient of an objective that sums over the rows of a minibatch, with large
/// minibatches recorded in chunks on separate tapes in parallel.
///
/// With at most `chunk_rows` rows, `record(tape, leaves, batch, true, rng)` is recorded on
/// `tape` itself. Otherwise the rows are split into `k = ⌈B / chunk_rows⌉` nearly equal
/// parts of consecutive rows (the same `num_data`), and part c is recorded on sub-tape c
/// ([`Tape::sub_tapes`], single-threaded each) as `record(t, leaves, part, c == 0, noise)`
/// — `first` tells the closure to add the batch-level terms (the KLs) once — and the
/// values and gradients are summed in chunk order. One parallel region a step instead of
/// one per large operation. The noise of chunk c: with `draws_noise`, stream c
/// ([`crate::rng::stream`]) of one seed drawn from `rng`; without, a copy of `rng` the
/// closure does not use (a deterministic objective leaves `rng` untouched). The chunking
/// depends on B only, so results never depend on the number of threads.
///
/// # Errors
/// The first error of a chunk's `record` (in chunk order); a non-finite value or gradient.
#[allow(clippy::too_many_arguments)]
pub fn chunked_value_and_grad<F>(
    tape: &mut Tape,
    params: &ParamStore,
    batch: &Batch<'_>,
    chunk_rows: usize,
    draws_noise: bool,
    rng: &mut Rng,
    record: F,
) -> Result<(f64, Vec<f64>)>
where
    F: Fn(&mut Tape, &[Var], &Batch<'_>, bool, &mut Rng) -> Result<Var> + Sync,
{
    let rows = batch.len();
    let chunks = rows.div_ceil(chunk_rows.max(1));
    if chunks <= 1 {
        tape.clear();
        let leaves = params.record(tape);
        let out = record(tape, &leaves, batch, true, rng)?;
        let (value, _, g) = checked_backward(tape, out, params, &leaves)?;
        return Ok((value, g));
    }
    let seed: u64 = if draws_noise { rng.random() } else { 0 };
    let base = rng.clone();
    let parts: Vec<Result<(f64, Vec<f64>)>> = tape
        .sub_tapes(chunks)
        .par_iter_mut()
        .enumerate()
        .map(|(c, t)| {
            let (start, end) = (c * rows / chunks, (c + 1) * rows / chunks);
            let part = Batch {
                x: batch.x.subrows(start, end - start),
                y: batch.y.subrows(start, end - start),
                num_data: batch.num_data,
            };
            let mut noise = if draws_noise {
                stream(seed, c as u64)
            } else {
                base.clone()
            };
            t.clear();
            let leaves = params.record(t);
            let out = record(t, &leaves, &part, c == 0, &mut noise)?;
            let (value, _, g) = checked_backward(t, out, params, &leaves)?;
            Ok((value, g))
        })
        .collect();
    let mut value = 0.0;
    let mut grad = vec![0.0; params.num_free()];
    for part in parts {
        let (v, g) = part?;
        value += v;
        grad.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
    }
    if !value.is_finite() {
        return Err(Error::Numerical(format!("objective is {value}")));
    }
    if let Some(k) = grad.iter().position(|v| !v.is_finite()) {
        return Err(Error::Numerical(format!(
            "gradient entry {k} is {}",
            grad[k]
        )));
    }
    Ok((value, grad))
}

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
        }
    }
}

impl FitConfig {
    /// Adam settings of this fit: `learning_rate` with `lr_schedule`, other settings at
    /// their defaults (with the constant schedule, exactly `AdamConfig::with_lr(lr)`).
    pub fn adam(&self) -> AdamConfig {
        AdamConfig {
            schedule: self.lr_schedule.clone(),
            ..AdamConfig::with_lr(self.learning_rate)
        }
    }
}

/// Settings of a prediction.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PredictConfig {
    /// Number of mixture components requested (Monte Carlo samples for svi/hmc/structured;
    /// ignored where the model fixes it, e.g. dspp's quadrature sites).
    pub samples: usize,
    /// Seed for the prediction's own noise.
    pub seed: u64,
}

impl Default for PredictConfig {
    fn default() -> Self {
        PredictConfig {
            samples: 100,
            seed: 1,
        }
    }
}

/// Receives progress from a training loop (the benchmark shows a progress bar with it).
pub trait FitObserver {
    /// Called after every step with the objective value of that step.
    fn on_step(&mut self, _step: usize, _total: usize, _objective: f64) {}

    /// Called when a run enters a named phase (a sampler's `"burn-in"`, `"sampling"`),
    /// before the phase's first [`FitObserver::on_step`]; ignored by default.
    fn on_phase(&mut self, _phase: &str) {}

    /// Whether the caller asks the run to stop after the current step (e.g. on SIGINT);
    /// polled by the executor after every step (issue 16). Default `false`.
    fn should_stop(&self) -> bool {
        false
    }

    /// Save the run's state ([`crate::train::RunState`]) through
    /// [`FitObserver::save_run_state`] every this many steps (and when stopped by
    /// [`FitObserver::should_stop`]); `0` (the default) saves nothing.
    fn checkpoint_every(&self) -> usize {
        0
    }

    /// Receives a run's state to keep (see [`FitObserver::checkpoint_every`]).
    ///
    /// # Errors
    /// A failure to keep it, which ends the run with that error.
    fn save_run_state(&mut self, _state: &crate::train::RunState) -> Result<()> {
        Ok(())
    }

    /// A saved state the executor's run should continue from instead of starting fresh
    /// (taken once); `None` by default.
    fn take_run_state(&mut self) -> Option<crate::train::RunState> {
        None
    }
}

/// An observer that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl FitObserver for Silent {}

/// Forwards only the caller's stop request ([`FitObserver::should_stop`]) of `0`: the
/// observer for fits *inside* a fit or a build — random restarts, the candidates of a
/// hyper-parameter search — whose steps, phases and checkpoints are not the caller's run
/// but which must still end when the caller asks (e.g. on SIGTERM).
///
/// ```
/// use dgp_traits::model::{FitObserver, Silent, StopOnly};
/// struct Stop;
/// impl FitObserver for Stop {
///     fn should_stop(&self) -> bool { true }
/// }
/// assert!(StopOnly(&Stop).should_stop());
/// assert!(!StopOnly(&Silent).should_stop());
/// ```
#[derive(Clone, Copy)]
pub struct StopOnly<'a>(pub &'a dyn FitObserver);

impl FitObserver for StopOnly<'_> {
    fn should_stop(&self) -> bool {
        self.0.should_stop()
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
    pub held_out: Option<crate::train::FitSummary>,
}

/// A trainable deep-GP model; see the module docs.
pub trait Model: Objective + Send + Sync {
    /// Name of the backend (`"svi"`, `"dspp"`, ...).
    fn backend(&self) -> &'static str;

    /// One-line description of the architecture (layers, widths, inducing points).
    fn describe(&self) -> String;

    /// Mutable access to the parameters (optimisers, checkpoints).
    fn params_mut(&mut self) -> &mut ParamStore;

    /// The Gaussian likelihood's noise variance σ² in model (standardised) units, of the
    /// first output when there are several; `None` for other likelihoods or backends that
    /// do not say (the default). A diagnostic: a run whose σ² collapses or balloons is
    /// over- or under-fitting.
    fn noise_variance(&self) -> Option<f64> {
        None
    }

    /// Trains on `data` (already in model units), reporting progress to `observer`. Each
    /// backend composes its scheme from the core's training pieces (`crate::train`: an
    /// executor with a stepper — Adam, natural gradient + Adam, a sampler — and
    /// observers, or the full-batch L-BFGS driver); there is no default.
    fn fit(
        &mut self,
        data: &Dataset,
        cfg: &FitConfig,
        observer: &mut dyn FitObserver,
    ) -> Result<FitReport>;

    /// Predictive distribution at `x` (N×D, model units).
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive>;

    /// The model (configuration and parameters) as JSON, for checkpoints.
    fn to_json(&self) -> Result<String>;

    /// `count` sampled functions at the rows of `x` (N×count, first output), for plots:
    /// coherent draws where the backend can make them (e.g. one noise draw per hidden unit
    /// shared by all points). `None` when the backend has no notion of a function sample.
    fn function_samples(
        &self,
        _x: MatRef<'_, f64>,
        _count: usize,
        _seed: u64,
    ) -> Result<Option<faer::Mat<f64>>> {
        Ok(None)
    }
}
