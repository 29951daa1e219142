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
//!   training executor in `crate::train`; what a fit is asked and reports is the plain
//!   data of [`crate::fit`], so this contract imports no implementation), and `predict`
//!   returning the
//!   common [`Predictive`] (a finite Gaussian mixture per test point), so that metrics,
//!   plots and the benchmark treat every backend alike through `Box<dyn Model>`.

pub use crate::fit::{Convergence, FitConfig, FitHooks, FitReport};
use crate::params::ParamStore;
use crate::predictive::Predictive;
use crate::tape::{Gradients, Tape, Var};
use dgp_core::rng::{Rng, stream};
use dgp_core::{Error, Result};
#[cfg(doc)]
use dgp_data::Dataset;
use dgp_data::RowSource;
use faer::{Mat, MatRef};
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
            return Err(Error::config(
                "num_data",
                format!("{num_data} is smaller than the batch ({} rows)", x.nrows()),
            ));
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

/// What [`chunked_value_and_grads`] returns: the objective's value, its gradient in
/// [`ParamStore::flat`] layout, and the adjoints of the extra nodes the record closure
/// named (summed over the chunks, in chunk order).
#[derive(Clone, Debug)]
pub struct ChunkedGrad {
    /// The objective's value.
    pub value: f64,
    /// Its gradient with respect to the free parameters ([`ParamStore::flat`] layout).
    pub grad: Vec<f64>,
    /// The adjoint `∂value/∂node` of each extra node, in the order the closure returned
    /// them (a zero matrix where the node does not reach the objective).
    pub adjoints: Vec<Mat<f64>>,
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
/// one per large operation. Which chunks this process computes, and how the results of
/// the others reach it, is the process-wide [`crate::distribute::runner`]'s choice (all
/// of them here by default); the sums are the same either way. The noise of chunk c: with `draws_noise`, stream c
/// ([`dgp_core::rng::stream`]) of one seed drawn from `rng`; without, a copy of `rng` the
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
    let spec = ChunkSpec {
        chunk_rows,
        draws_noise,
        at: None,
        adjoints: &[],
    };
    let out = chunked_value_and_grads(tape, params, batch, &spec, rng, |t, l, b, first, r| {
        record(t, l, b, first, r).map(|v| (v, Vec::new()))
    })?;
    Ok((out.value, out.grad))
}

/// Most minibatch rows every built-in backend records on one tape: a larger minibatch's
/// objective is recorded in `⌈B / GRAD_CHUNK_ROWS⌉` nearly equal chunks of consecutive
/// rows on separate tapes ([`chunked_value_and_grads`]), in parallel and, under a
/// distributed launch, on different processes — one parallel region a step instead of one
/// per large operation, and M×512 intermediates that stay in cache. The chunking depends
/// on B only, never on the number of threads or processes.
pub const GRAD_CHUNK_ROWS: usize = 512;

/// How [`chunked_value_and_grads`] splits and records a minibatch objective.
#[derive(Clone, Copy, Debug)]
pub struct ChunkSpec<'a> {
    /// Most rows of one chunk (a batch of at most this many rows is one chunk, recorded on
    /// the caller's tape).
    pub chunk_rows: usize,
    /// Whether the objective draws noise: chunk c then gets stream c of one seed drawn
    /// from the caller's generator (see [`chunked_value_and_grad`]).
    pub draws_noise: bool,
    /// The free parameters to record the objective at ([`ParamStore::record_at`]); `None`:
    /// the stored ones ([`ParamStore::record`]).
    pub at: Option<&'a [f64]>,
    /// Shapes of the extra nodes whose adjoints the closure asks for (the second part of
    /// its return value, in this order).
    pub adjoints: &'a [(usize, usize)],
}

/// [`chunked_value_and_grad`], generalised: the parameters may be recorded at given free
/// values (`spec.at`, what [`Objective::value_and_grad_at`] needs), and the closure may
/// name extra nodes of its tape (e.g. a variational factor after its transform) whose
/// adjoints are summed over the chunks like the gradient (what a natural-gradient step
/// needs). Every chunk records the same global nodes from the same parameters, so each
/// chunk's adjoint is its rows' share and the sum in chunk order is the adjoint of the
/// whole objective; the adjoints travel with the gradient through the process-wide
/// [`crate::distribute::runner`] (one row of `1 + n_p + Σ r·c` numbers per chunk).
///
/// # Errors
/// As [`chunked_value_and_grad`]; [`Error::Shape`] when a returned node does not have
/// the shape `spec.adjoints` gives or the closure returns another number of nodes; the
/// errors of [`ParamStore::record_at`].
pub fn chunked_value_and_grads<F>(
    tape: &mut Tape,
    params: &ParamStore,
    batch: &Batch<'_>,
    spec: &ChunkSpec<'_>,
    rng: &mut Rng,
    record: F,
) -> Result<ChunkedGrad>
where
    F: Fn(&mut Tape, &[Var], &Batch<'_>, bool, &mut Rng) -> Result<(Var, Vec<Var>)> + Sync,
{
    let rows = batch.len();
    let chunks = rows.div_ceil(spec.chunk_rows.max(1));
    let shapes = spec.adjoints;
    let leaves_of = |t: &mut Tape| match spec.at {
        Some(flat) => params.record_at(t, flat),
        None => Ok(params.record(t)),
    };
    // One chunk's value, gradient and adjoints on tape `t`.
    let one = |t: &mut Tape, part: &Batch<'_>, first: bool, noise: &mut Rng| {
        t.clear();
        let leaves = leaves_of(t)?;
        let (out, nodes) = record(t, &leaves, part, first, noise)?;
        if nodes.len() != shapes.len() {
            return Err(Error::shape(
                "chunked objective: adjoint nodes",
                shapes.len(),
                nodes.len(),
            ));
        }
        let (value, grads, g) = checked_backward(t, out, params, &leaves)?;
        let mut adjoints = Vec::with_capacity(nodes.len());
        for (&node, &(r, c)) in nodes.iter().zip(shapes) {
            if t.shape(node) != (r, c) {
                return Err(Error::shape(
                    "chunked objective: adjoint node",
                    format!("{r}×{c}"),
                    format!("{:?}", t.shape(node)),
                ));
            }
            let a = grads
                .get(node)
                .map_or_else(|| Mat::zeros(r, c), |m| m.to_owned());
            if let Some(k) = a
                .col_iter()
                .flat_map(|c| c.iter())
                .position(|v| !v.is_finite())
            {
                return Err(Error::Numerical(format!("adjoint entry {k} is not finite")));
            }
            adjoints.push(a);
        }
        Ok(ChunkedGrad {
            value,
            grad: g,
            adjoints,
        })
    };
    if chunks <= 1 {
        return one(tape, batch, true, rng);
    }
    let seed: u64 = if spec.draws_noise { rng.random() } else { 0 };
    let base = rng.clone();
    let runner = crate::distribute::runner();
    // Per chunk: `None` where another process computes it, else its results.
    let parts: Vec<Option<Result<ChunkedGrad>>> = tape
        .sub_tapes(chunks)
        .par_iter_mut()
        .enumerate()
        .map(|(c, t)| {
            if !runner.owns(c, chunks) {
                return None;
            }
            let (start, end) = (c * rows / chunks, (c + 1) * rows / chunks);
            let part = Batch {
                x: batch.x.subrows(start, end - start),
                y: batch.y.subrows(start, end - start),
                num_data: batch.num_data,
            };
            let mut noise = if spec.draws_noise {
                stream(seed, c as u64)
            } else {
                base.clone()
            };
            Some(one(t, &part, c == 0, &mut noise))
        })
        .collect();
    let n_p = params.num_free();
    let extra: usize = shapes.iter().map(|(r, c)| r * c).sum();
    let (value, mut sum) = if runner.processes() == 1 {
        sum_local(parts, n_p, extra)?
    } else {
        sum_shared(runner, parts, n_p, extra)?
    };
    if !value.is_finite() {
        return Err(Error::Numerical(format!("objective is {value}")));
    }
    if let Some(k) = sum.iter().position(|v| !v.is_finite()) {
        return Err(Error::Numerical(format!(
            "gradient entry {k} is {}",
            sum[k]
        )));
    }
    let mut adjoints = Vec::with_capacity(shapes.len());
    let mut k = n_p;
    for &(r, c) in shapes {
        adjoints.push(Mat::from_fn(r, c, |i, j| sum[k + j * r + i]));
        k += r * c;
    }
    sum.truncate(n_p);
    Ok(ChunkedGrad {
        value,
        grad: sum,
        adjoints,
    })
}

/// Adds `p`'s gradient and flattened adjoints (column-major, in order) into `sum`.
fn add_part(sum: &mut [f64], p: &ChunkedGrad) {
    let n_p = p.grad.len();
    sum[..n_p]
        .iter_mut()
        .zip(&p.grad)
        .for_each(|(a, b)| *a += b);
    let mut k = n_p;
    for a in &p.adjoints {
        for col in a.col_iter() {
            for v in col.iter() {
                sum[k] += v;
                k += 1;
            }
        }
    }
}

/// The value and the summed gradient and adjoints of chunks all computed in this process,
/// summed in chunk order from zero (the numbers [`sum_shared`] gives, without the shared
/// table); the first failed chunk's error otherwise.
fn sum_local(
    parts: Vec<Option<Result<ChunkedGrad>>>,
    n_p: usize,
    extra: usize,
) -> Result<(f64, Vec<f64>)> {
    let mut value = 0.0;
    let mut sum = vec![0.0; n_p + extra];
    for (c, part) in parts.into_iter().enumerate() {
        let p = part.ok_or_else(|| {
            Error::Numerical(format!("chunk {c} of the minibatch was not computed"))
        })??;
        value += p.value;
        add_part(&mut sum, &p);
    }
    Ok((value, sum))
}

/// The value and the summed gradient and adjoints when several processes share the
/// chunks: each fills its chunks' rows of a table of `1 + n_p + extra` numbers a chunk,
/// the runner makes every row known everywhere, and every process sums the rows in chunk
/// order.
fn sum_shared(
    runner: &dyn crate::distribute::ChunkRunner,
    parts: Vec<Option<Result<ChunkedGrad>>>,
    n_p: usize,
    extra: usize,
) -> Result<(f64, Vec<f64>)> {
    let chunks = parts.len();
    let width = 1 + n_p + extra;
    let mut slots = vec![0.0; chunks * width];
    let mut local_error = None;
    for (c, part) in parts.into_iter().enumerate() {
        let row = &mut slots[c * width..(c + 1) * width];
        match part {
            Some(Ok(p)) => {
                row[0] = p.value;
                add_part(&mut row[1..], &p);
            }
            Some(Err(e)) => {
                row[0] = f64::NAN;
                local_error.get_or_insert(e);
            }
            None => {}
        }
    }
    runner.combine(&mut slots, chunks, width)?;
    if let Some(e) = local_error {
        return Err(e);
    }
    let mut value = 0.0;
    let mut sum = vec![0.0; n_p + extra];
    for (c, row) in slots.chunks_exact(width).enumerate() {
        if row[0].is_nan() {
            return Err(Error::Numerical(format!(
                "chunk {c} of the minibatch failed in another process"
            )));
        }
        value += row[0];
        sum.iter_mut().zip(&row[1..]).for_each(|(a, b)| *a += b);
    }
    Ok((value, sum))
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

/// A trainable deep-GP model; see the module docs.
pub trait Model: Objective + Send + Sync {
    /// Name of the backend (`"svi"`, `"dspp"`, ...).
    fn backend(&self) -> &'static str;

    /// One-line description of the architecture (layers, widths, inducing points).
    fn describe(&self) -> String;

    /// Mutable access to the parameters (optimisers, restoring a run's state).
    fn params_mut(&mut self) -> &mut ParamStore;

    /// The Gaussian likelihood's noise variance σ² in model (standardised) units, of the
    /// first output when there are several; `None` for other likelihoods or backends that
    /// do not say (the default). A diagnostic: a run whose σ² collapses or balloons is
    /// over- or under-fitting.
    fn noise_variance(&self) -> Option<f64> {
        None
    }

    /// Trains on the rows of `data` (already in model units: an in-memory [`Dataset`] or
    /// any other [`RowSource`]), with the caller's `hooks` (progress, run control,
    /// checkpoints: [`FitHooks::none`] for none). Each backend composes
    /// its scheme from the core's training pieces (`crate::train`: an executor with a
    /// stepper — Adam, natural gradient + Adam, a sampler — and observers, or the
    /// full-batch L-BFGS driver); there is no default. A backend that needs the rows in
    /// memory (full-batch training, a selection on validation rows) returns
    /// [`Error::Unsupported`] for a source that does not hold them
    /// ([`dgp_data::require_in_memory`]); [`crate::backend::Capabilities::streams`]
    /// declares which do.
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport>;

    /// Predictive distribution at `x` (N×D, model units).
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive>;

    /// The model (configuration and parameters) as JSON: the backend's part of a model
    /// file ([`crate::fitted::Fitted::save`]), read back by its loader
    /// ([`crate::fitted::Loadable::from_model_json`]).
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

/// A boxed model of any backend is a model: every method forwards, so a trained model of
/// a backend chosen at run time fits where a [`Model`] type is asked for (a
/// [`crate::fitted::Fitted`] of `Box<dyn Model>`, the registry's whole fit).
impl Objective for Box<dyn Model> {
    fn params(&self) -> &ParamStore {
        (**self).params()
    }

    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<Var> {
        (**self).record(tape, params, batch, rng)
    }

    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        (**self).value_and_grad(tape, batch, rng)
    }

    fn value_and_grad_at(
        &self,
        flat: &[f64],
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        (**self).value_and_grad_at(flat, tape, batch, rng)
    }
}

impl Model for Box<dyn Model> {
    fn backend(&self) -> &'static str {
        (**self).backend()
    }

    fn describe(&self) -> String {
        (**self).describe()
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        (**self).params_mut()
    }

    fn noise_variance(&self) -> Option<f64> {
        (**self).noise_variance()
    }

    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        (**self).fit(data, cfg, hooks)
    }

    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        (**self).predict(x, cfg)
    }

    fn to_json(&self) -> Result<String> {
        (**self).to_json()
    }

    fn function_samples(
        &self,
        x: MatRef<'_, f64>,
        count: usize,
        seed: u64,
    ) -> Result<Option<faer::Mat<f64>>> {
        (**self).function_samples(x, count, seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(scale: f64) -> ChunkedGrad {
        ChunkedGrad {
            value: -3.25 * scale,
            grad: (0..5).map(|i| scale * (i as f64 - 2.1)).collect(),
            adjoints: vec![Mat::from_fn(2, 3, |i, j| {
                scale * (i as f64 + 0.3 * j as f64)
            })],
        }
    }

    #[test]
    fn the_local_sum_equals_the_shared_table_sum_bit_for_bit() {
        let parts = || {
            vec![
                Some(Ok(part(1.0))),
                Some(Ok(part(0.1))),
                Some(Ok(part(-7.3))),
            ]
        };
        let local = sum_local(parts(), 5, 6).unwrap();
        let shared = sum_shared(&crate::distribute::Local, parts(), 5, 6).unwrap();
        assert_eq!(local, shared);
        // Chunk order: value = ((0 + v₀) + v₁) + v₂, and so every entry.
        let v = |s: f64| -3.25 * s;
        let expected = ((0.0 + v(1.0)) + v(0.1)) + v(-7.3);
        assert_eq!(local.0, expected);
        assert_eq!(local.1.len(), 11);
        // The adjoint's entry (1, 2) comes after the 5 gradient entries, column-major.
        let a12 = |s: f64| s * (1.0 + 0.3 * 2.0);
        assert_eq!(
            local.1[5 + 2 * 2 + 1],
            ((0.0 + a12(1.0)) + a12(0.1)) + a12(-7.3)
        );
    }

    #[test]
    fn the_first_failed_chunk_is_the_error_of_both_sums() {
        let parts = || {
            vec![
                Some(Ok(part(1.0))),
                Some(Err(Error::Numerical("chunk one".into()))),
                Some(Err(Error::Numerical("chunk two".into()))),
            ]
        };
        for r in [
            sum_local(parts(), 5, 6),
            sum_shared(&crate::distribute::Local, parts(), 5, 6),
        ] {
            assert!(matches!(r, Err(Error::Numerical(m)) if m == "chunk one"));
        }
        // A chunk this process did not compute cannot be summed locally.
        assert!(sum_local(vec![Some(Ok(part(1.0))), None], 5, 6).is_err());
    }
}
