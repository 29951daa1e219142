//! The SGHMC deep GP (Havasi et al. 2018; reference code cambridge-mlg/sghmc_dgp, `sghmc_dgp.py` and `models.py`): construction, the potential as
//! an [`Objective`], sampling through the core executor and the predictive mixture over
//! kept samples.

use crate::sghmc::config::{Potential, SghmcConfig};
use crate::sghmc::diagnostics::effective_sample_size;
use crate::sghmc::sampler::{SampledModel, SghmcState, SghmcStepper};
use dgp_core::linalg::JitterConfig;
use dgp_core::rng::{Rng, seeded, stream};
use dgp_core::transforms::{inv_softplus, softplus};
use dgp_core::{Error, Result};
use dgp_data::{Dataset, RowSource, gather_dataset, kmeans};
use dgp_traits::backend::Checked;
use dgp_traits::conditional::{QPart, conditional};
use dgp_traits::kernels::{Kernel, KernelKind};
use dgp_traits::layer::{SparseLayer, SparseLayerInit};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::mean::LinearInit;
use dgp_traits::model::{
    Batch, ChunkSpec, FitConfig, FitHooks, FitReport, Model, Objective, PredictConfig,
    chunked_value_and_grads,
};
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::predictive::Predictive;
use dgp_traits::skeleton::stack::{InitRun, MeanData, StackMean, layer_plans};
use dgp_traits::skeleton::{
    ChunkMoments, NoiseMode, check_batch, check_inputs, describe_stack, finish_predictive,
    model_json, predict_chunked, reparam_sample,
};
use dgp_traits::tape::{Tape, Var};
use dgp_traits::train::{Executor, ModelSnapshots, Observer};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Lower bound of the Gaussian noise variance (softplus + floor, as in dgp-svi).
pub const NOISE_FLOOR: f64 = 1e-6;

pub use dgp_traits::model::GRAD_CHUNK_ROWS;

/// Most training rows on which the potential's effective sample size
/// ([`SghmcModel::potential_ess`]) is computed after sampling (a full pass over the rows per
/// kept sample; rows from a source that does not hold them in memory are read once).
pub const ESS_MAX_ROWS: usize = 100_000;
/// Inner-layer variances are clamped at this floor before the square root of the
/// reparameterised sample (cambridge-mlg/sghmc_dgp: the reference adds no jitter and its variance
/// can be slightly negative; a floor above 0 keeps √'s derivative finite).
pub const VAR_FLOOR: f64 = 1e-12;

/// A deep GP whose whitened inducing outputs are sampled by adaptive SGHMC with
/// moving-window MCEM for the hyperparameters (Havasi et al. 2018). See the crate docs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SghmcModel {
    config: SghmcConfig,
    layers: Vec<SparseLayer>,
    u: Vec<ParamId>,
    /// The Gaussian noise variance s² (unconstrained); `None` for a classification
    /// likelihood.
    noise: Option<ParamId>,
    likelihood: Likelihood,
    params: ParamStore,
    input_dim: usize,
    output_dim: usize,
    sampler: Option<SghmcState>,
    /// Effective sample size of the potential over the kept samples, set when a run ends
    /// ([`SghmcModel::potential_ess`]).
    #[serde(default)]
    potential_ess: Option<f64>,
}

impl SghmcModel {
    /// Builds a model for training data `data` (model units), initialised as the reference
    /// (cambridge-mlg/sghmc_dgp, `models.py`): U_l = 0 ([`Role::Sampled`]); Z_l by k-means on the data pushed through
    /// the fixed inner means (identity / `[I, 0]` pad / PCA = right singular vectors of the
    /// running data), computed afresh per layer, M = min(`num_inducing`, N) of them (the
    /// model's configuration holds the M used); RBF ARD with lengthscales √D_in and
    /// variance [`SghmcConfig::kernel_variance`]; noise variance var(Y). Hyperparameters
    /// (Z, lengthscales, variances, noise) are [`Role::Optimised`] (MCEM), the inner mean
    /// maps fixed. With a classification likelihood ([`SghmcConfig::likelihood`]) the
    /// last layer has one GP per latent function (K for K classes) and there is no noise
    /// variance.
    ///
    /// Differences from the reference: Z comes from the core's k-means (k-means++ seeding,
    /// then at most `kmeans_iters` Lloyd iterations, empty clusters re-seeded), not scipy's
    /// `kmeans2(minit='points')` (random data points as seeds, empty clusters kept); the
    /// positive hyperparameters are `softplus(θ) + 1e-6` (the workspace transform), not
    /// `exp(θ)`, which changes the Adam geometry of the hyper steps but not the model.
    ///
    /// # Errors
    /// Invalid configuration (checked once into the [`Checked`] that
    /// [`SghmcModel::from_checked`] takes); as [`SghmcModel::from_checked`].
    pub fn new(config: SghmcConfig, data: &Dataset) -> Result<Self> {
        Self::from_checked(Checked::new(config)?, data)
    }

    /// [`SghmcModel::new`] from a configuration already validated ([`Checked`]); it is not
    /// validated again.
    ///
    /// # Errors
    /// Targets the likelihood refuses (labels outside 0..K−1, a class absent from
    /// `data`); k-means or PCA failures.
    pub fn from_checked(config: Checked<SghmcConfig>, data: &Dataset) -> Result<Self> {
        let mut config = config.into_inner();
        config.likelihood.check_training_targets(data.y())?;
        let x = data.x();
        let (d_in, p) = (data.input_dim(), data.output_dim());
        let widths = config.widths(d_in, config.likelihood.latent_dim(p));
        let mut rng = seeded(config.init_seed);
        let mut run = InitRun::kmeans_at_most_rows(
            x,
            config.num_inducing,
            config.kmeans_iters,
            true,
            &mut rng,
        )?;
        let m = run.z.nrows();
        config.num_inducing = m;
        let hidden = StackMean::Linear {
            init: LinearInit::Pca,
            learned: false,
            bias: false,
        };
        let mut params = ParamStore::new();
        let mut layers = Vec::with_capacity(config.layers);
        let mut u = Vec::with_capacity(config.layers);
        for plan in layer_plans(&widths) {
            if plan.index > 0
                && let Some(xr) = &run.x
            {
                run.z = kmeans(xr.as_ref(), m, config.kmeans_iters, &mut rng)?;
            }
            let (mean, mean_init) =
                run.layer_mean(&plan, &hidden, &StackMean::Zero, MeanData::X, &mut rng)?;
            let w = mean_init.weights.clone();
            let kernel = Kernel::new(KernelKind::Rbf, plan.input_dim, true)?;
            let mut layer = SparseLayer::new(
                &mut params,
                &plan.name,
                kernel,
                mean,
                plan.output_dim,
                0.0,
                SparseLayerInit {
                    z: run.z.clone(),
                    lengthscale: (plan.input_dim as f64).sqrt(),
                    variance: config.kernel_variance,
                    train_variance: true,
                    train_z: true,
                    mean: mean_init,
                },
            )?;
            layer.jitter = JitterConfig {
                rel: 0.0,
                abs_floor: config.kuu_jitter,
                ..JitterConfig::default()
            };
            u.push(params.add(
                format!("{}.u", plan.name),
                Mat::zeros(m, plan.output_dim),
                Role::Sampled,
            )?);
            layers.push(layer);
            if let Some(w) = w {
                run.push(&w, None);
            }
        }
        let (noise, likelihood) = if config.likelihood.has_noise_variance() {
            let s2 = config
                .noise_variance
                .unwrap_or_else(|| target_variance(data.y()))
                .max(2.0 * NOISE_FLOOR);
            let id = params.add(
                "likelihood.variance",
                Mat::from_fn(1, 1, |_, _| inv_softplus(s2 - NOISE_FLOOR)),
                Role::Optimised,
            )?;
            (Some(id), Likelihood::gaussian(s2))
        } else {
            (None, config.likelihood.clone())
        };
        Ok(SghmcModel {
            config,
            layers,
            u,
            noise,
            likelihood,
            params,
            input_dim: d_in,
            output_dim: p,
            sampler: None,
            potential_ess: None,
        })
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &SghmcConfig {
        &self.config
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[SparseLayer] {
        &self.layers
    }

    /// The sampled blocks U_l (whitened inducing outputs, M×D_l), first layer first.
    pub fn inducing_outputs(&self) -> &[ParamId] {
        &self.u
    }

    /// The Gaussian noise variance σ²; `None` for a classification likelihood.
    pub fn noise_variance(&self) -> Option<f64> {
        self.noise
            .map(|id| softplus(self.params.get(id)[(0, 0)]) + NOISE_FLOOR)
    }

    /// The likelihood of the last layer.
    pub fn likelihood(&self) -> &Likelihood {
        &self.likelihood
    }

    /// Number of latent GPs of the last layer: the target columns, or K for a K-class
    /// likelihood.
    fn latent_dim(&self) -> usize {
        self.likelihood.latent_dim(self.output_dim)
    }

    /// The kept samples (values of the sampled blocks in flat order), oldest first; empty
    /// before sampling.
    pub fn kept_samples(&self) -> &[Vec<f64>] {
        self.sampler.as_ref().map_or(&[], |s| s.kept.as_slice())
    }

    /// Spec §1: pushes `x` (B×D) through the layers — per layer the "no q" whitened
    /// conditional `μ = m(x) + aᵀU_l`, `σ² = k(x,x) − aᵀa` with `a = L⁻¹k(Z, x)`; one
    /// reparameterised sample of every inner layer (variance clamped at [`VAR_FLOOR`]):
    /// independent per point ([`NoiseMode::PerPoint`], training and prediction) or one
    /// draw per hidden unit shared by all points ([`NoiseMode::PerPath`], function
    /// samples); returns the last layer's means and variances (B×P).
    fn forward(
        &self,
        tape: &mut Tape,
        params: &[Var],
        x: Var,
        mode: NoiseMode,
        rng: &mut Rng,
    ) -> Result<(Var, Var)> {
        let b = tape.shape(x).0;
        let mut input = x;
        let last = self.layers.len() - 1;
        for (l, layer) in self.layers.iter().enumerate() {
            let proj = layer.project(tape, params, input)?;
            let (mu, var) = conditional(tape, &proj, QPart::Given(self.u[l].var(params)), true);
            if l == last {
                return Ok((mu, var));
            }
            let var = tape.clamp_min(var, VAR_FLOOR);
            input = reparam_sample(tape, mu, var, 0.0, mode, b, 1, rng);
        }
        Err(Error::Empty(
            "sghmc: a deep GP needs at least one layer".into(),
        ))
    }

    /// Latent moments of one chunk of test points under every sample of `samples`
    /// (flat parameter vectors), fresh inner-layer noise per sample.
    fn predict_chunk(
        &self,
        tape: &mut Tape,
        x: MatRef<'_, f64>,
        samples: &[Vec<f64>],
        rng: &mut Rng,
    ) -> Result<ChunkMoments> {
        let (n, s) = (x.nrows(), samples.len());
        let latent = self.latent_dim();
        let mut means = vec![Mat::zeros(n, s); latent];
        let mut vars = vec![Mat::zeros(n, s); latent];
        for (k, flat) in samples.iter().enumerate() {
            tape.clear();
            let params = self.params.record_at(tape, flat)?;
            let xv = tape.constant(x.to_owned());
            let (mu, var) = self.forward(tape, &params, xv, NoiseMode::PerPoint, rng)?;
            let (mu, var) = (tape.value(mu), tape.value(var));
            for d in 0..latent {
                for i in 0..n {
                    means[d][(i, k)] = mu[(i, d)];
                    vars[d][(i, k)] = var[(i, d)].max(0.0);
                }
            }
        }
        Ok(ChunkMoments { means, vars })
    }

    /// The flat parameter vectors of the predictive's components: the current parameters
    /// with the sampled blocks set to each kept sample (the current sample alone before
    /// any was kept).
    fn component_params(&self) -> Vec<Vec<f64>> {
        let base = self.params.flat();
        let kept = self.kept_samples();
        if kept.is_empty() {
            return vec![base];
        }
        let ranges = self.params.ranges(Role::Sampled);
        kept.iter()
            .map(|sample| {
                let mut flat = base.clone();
                let mut k = 0;
                for r in &ranges {
                    flat[r.clone()].copy_from_slice(&sample[k..k + r.len()]);
                    k += r.len();
                }
                flat
            })
            .collect()
    }

    /// [`Model::fit`] with a snapshot of the model (its JSON, sampler state included)
    /// handed to `sink(steps_done_in_this_run, json)` after every `every` steps and the
    /// last: a run interrupted after a snapshot continues exactly from it
    /// ([`SghmcModel::from_json`], then `fit` again).
    ///
    /// # Errors
    /// As [`Model::fit`]; `every == 0`; the sink's errors.
    pub fn fit_with_snapshots(
        &mut self,
        data: &Dataset,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
        every: usize,
        sink: impl FnMut(usize, String) -> Result<()>,
    ) -> Result<FitReport> {
        let mut ckpt = ModelSnapshots::new(every, sink)?;
        self.sample(data, cfg, hooks, Some(&mut ckpt))
    }

    /// The sampler run behind [`Model::fit`] (see there), with an optional extra observer.
    pub(crate) fn sample(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
        extra: Option<&mut dyn Observer<SghmcModel>>,
    ) -> Result<FitReport> {
        if cfg.early_stopping.is_some() {
            return Err(Error::config(
                "early_stopping",
                "early_stopping: not supported by sghmc (a sampler keeps every sample after \
                 burn-in; the reference has no held-out stopping); leave it unset",
            ));
        }
        let (schedule, seed, done) = match &self.sampler {
            Some(st) => (st.schedule, st.seed, st.step),
            None => (self.config.sampler.schedule(cfg.steps)?, cfg.seed, 0),
        };
        let remaining = schedule.total().saturating_sub(done);
        if remaining == 0 {
            return Ok(FitReport::default());
        }
        let stepper = SghmcStepper::new(self.config.sampler.clone(), schedule, seed)?;
        let run = FitConfig {
            steps: remaining,
            ..cfg.clone()
        };
        let mut progress = crate::sghmc::progress::PhaseProgress::new(hooks, schedule, done);
        let mut ex = Executor::new(stepper, &run).observe(&mut progress);
        if let Some(o) = extra {
            ex = ex.observe(o);
        }
        let report = ex.run(self, data)?;
        // The diagnostic is a full pass over the rows per kept sample: bounded by
        // ESS_MAX_ROWS, the same for rows in memory and rows read from a source.
        if self.sampler.as_ref().is_some_and(|st| st.finished()) && data.n() <= ESS_MAX_ROWS {
            let gathered;
            let rows = match data.in_memory() {
                Some(d) => d,
                None => {
                    let all: Vec<usize> = (0..data.n()).collect();
                    gathered = gather_dataset(data, &all)?;
                    &gathered
                }
            };
            let potentials = self.kept_potentials(rows)?;
            self.potential_ess = Some(effective_sample_size(&potentials));
        }
        Ok(report)
    }

    /// The potential U = −log joint (full batch of `data`, model units) of every kept
    /// sample, all with the same inner-layer noise (common random numbers, seed 1), so
    /// that the series moves only with the sampled U.
    ///
    /// # Errors
    /// Shape errors of `data`; numerical failures of the forward pass.
    pub fn kept_potentials(&self, data: &Dataset) -> Result<Vec<f64>> {
        let batch = Batch::new(data.x(), data.y(), data.n())?;
        let mut tape = Tape::new();
        let mut out = Vec::with_capacity(self.kept_samples().len());
        for flat in self.component_params() {
            let (v, _) = self.value_and_grad_at(&flat, &mut tape, &batch, &mut stream(1, 0))?;
            out.push(-v);
        }
        Ok(out)
    }

    /// The per-point data term ℓ_b of the potential (B×1, or B×P for P Gaussian
    /// outputs) on the tape: the one place the likelihood enters the potential (see
    /// [`Objective::record`]).
    fn data_term(
        &self,
        tape: &mut Tape,
        params: &[Var],
        y: Var,
        mu: Var,
        var: Var,
        rng: &mut Rng,
    ) -> Result<Var> {
        let s2 = self
            .noise
            .map(|id| tape.positive(id.var(params), NOISE_FLOOR));
        match self.config.potential {
            Potential::Marginal if s2.is_some() => {
                self.likelihood.log_predictive(tape, y, mu, var, s2)
            }
            Potential::Marginal => Err(Error::config(
                "potential",
                "the marginal data term needs the Gaussian likelihood",
            )),
            Potential::Expected => self
                .likelihood
                .expected_log_lik_with_rng(tape, y, mu, var, s2, rng),
        }
    }

    /// Geyer's effective sample size of [`SghmcModel::kept_potentials`] on the training
    /// data, computed when the run's last sample was kept (`None` before that, and for
    /// more than [`ESS_MAX_ROWS`] training rows: the diagnostic is a full pass over the
    /// rows per kept sample).
    pub fn potential_ess(&self) -> Option<f64> {
        self.potential_ess
    }
}

/// The mean over outputs of the (population) variance of each target column.
fn target_variance(y: MatRef<'_, f64>) -> f64 {
    let (n, p) = (y.nrows() as f64, y.ncols());
    let mut total = 0.0;
    for d in 0..p {
        let mean = (0..y.nrows()).map(|i| y[(i, d)]).sum::<f64>() / n;
        total += (0..y.nrows())
            .map(|i| (y[(i, d)] - mean).powi(2))
            .sum::<f64>()
            / n;
    }
    total / p as f64
}

impl Objective for SghmcModel {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The log joint on a minibatch, `−U = (N/|B|) Σ_b ℓ_b − ½ Σ_l ‖U_l‖²_F`, with one
    /// sample of the inner layers (noise from `rng`) and the data term ℓ_b of
    /// [`SghmcConfig::potential`]: `log N(y_b | μ_L,b, σ²_L,b + s²)` (the reference's,
    /// cambridge-mlg/sghmc_dgp: this is its `−N·nll`) or
    /// `E_{N(f|μ_L,b, σ²_L,b)} log N(y_b | f, s²)` — for a classification likelihood
    /// `E_{N(f|μ_L,b, diag σ²_L,b)} log p(y_b | f)` over the last layer's latent GPs
    /// (Bernoulli probit/logit and robust-max by Gauss–Hermite quadrature, softmax by
    /// Monte Carlo with antithetic draws from `rng`; the core's
    /// [`Likelihood::expected_log_lik_with_rng`]). Because ℓ_b is taken of a single
    /// inner-layer sample, its expectation over the noise is a Jensen lower bound of the
    /// exact log marginal: the chain targets `p(U) exp(E_ε ℓ(U, ε))`, not exactly
    /// `p(U | y)` (as the reference does; exact for L = 1 with the marginal term).
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<Var> {
        check_batch("sghmc", batch, self.input_dim, self.output_dim)?;
        self.joint_share(tape, params, batch, batch.len(), true, rng)
    }

    /// Value and gradient of the log joint on `batch` through the core's
    /// [`chunked_value_and_grads`]: a minibatch of at most [`GRAD_CHUNK_ROWS`] rows is
    /// recorded on `tape` as [`Objective::record`] does; a larger one in
    /// `⌈B / GRAD_CHUNK_ROWS⌉` chunks of consecutive rows on separate tapes (in parallel,
    /// and on the ranks of a distributed launch), chunk c recording its rows' share
    /// `(N/|B|) Σ_{b∈c} ℓ_b` with the inner-layer noise of stream c of one seed drawn from
    /// `rng`, chunk 0 also the prior term, summed in chunk order.
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        self.chunked_joint(None, tape, batch, rng)
    }

    /// [`Objective::value_and_grad`] at the free parameters `flat` (the MCEM hyper step's
    /// window sample), through the same row chunks.
    fn value_and_grad_at(
        &self,
        flat: &[f64],
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        self.chunked_joint(Some(flat), tape, batch, rng)
    }
}

impl SghmcModel {
    /// The share of the log joint of the rows of `batch` in a minibatch of `total` rows,
    /// `(N/total) Σ_{b∈batch} ℓ_b`, minus `½ Σ_l ‖U_l‖²_F` when `with_prior`.
    fn joint_share(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        total: usize,
        with_prior: bool,
        rng: &mut Rng,
    ) -> Result<Var> {
        let x = tape.constant(batch.x.to_owned());
        let (mu, var) = self.forward(tape, params, x, NoiseMode::PerPoint, rng)?;
        let y = tape.constant(batch.y.to_owned());
        let lp = self.data_term(tape, params, y, mu, var, rng)?;
        let data = tape.sum(lp);
        let mut joint = tape.scale(data, batch.num_data as f64 / total as f64);
        if with_prior {
            for id in &self.u {
                let sq = tape.sum_squares(id.var(params));
                let half = tape.scale(sq, 0.5);
                joint = tape.sub(joint, half);
            }
        }
        Ok(joint)
    }

    /// The log joint's value and gradient at `at` (else the stored parameters) in row
    /// chunks (see [`Objective::value_and_grad`]).
    fn chunked_joint(
        &self,
        at: Option<&[f64]>,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        check_batch("sghmc", batch, self.input_dim, self.output_dim)?;
        let total = batch.len();
        let spec = ChunkSpec {
            chunk_rows: GRAD_CHUNK_ROWS,
            draws_noise: true,
            at,
            adjoints: &[],
        };
        let out = chunked_value_and_grads(
            tape,
            &self.params,
            batch,
            &spec,
            rng,
            |t, leaves, part, first, noise| {
                self.joint_share(t, leaves, part, total, first, noise)
                    .map(|v| (v, Vec::new()))
            },
        )?;
        Ok((out.value, out.grad))
    }
}

impl SampledModel for SghmcModel {
    fn sampler_state(&self) -> Option<&SghmcState> {
        self.sampler.as_ref()
    }

    fn sampler_state_mut(&mut self) -> &mut Option<SghmcState> {
        &mut self.sampler
    }
}

impl Model for SghmcModel {
    fn backend(&self) -> &'static str {
        "sghmc"
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    fn noise_variance(&self) -> Option<f64> {
        SghmcModel::noise_variance(self)
    }

    /// Runs the sampler ([`SghmcStepper`] on the core [`Executor`], minibatches of
    /// `cfg.batch_size`, seed `cfg.seed`): burn-in with MCEM hyper steps, then the kept
    /// samples with thinning. `cfg.steps` is the budget of the whole run, burn-in plus
    /// sampling ([`crate::sghmc::SghmcSamplerConfig::schedule`]): at least the configured
    /// schedule (10 000 + 100·50 steps by default) runs it unchanged; a smaller budget
    /// shrinks burn-in and thinning by the same factor and keeps every sample.
    /// The hyper steps' learning rate is `sampler.hyper_lr`. A model
    /// that already holds a sampler state (restored from its JSON) continues that run
    /// to its end with its own schedule and seed; a finished run does nothing.
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        self.sample(data, cfg, hooks, None)
    }

    /// Spec §5: the equal-weight mixture over the kept samples — per sample s one
    /// forward pass with fresh inner-layer noise gives `N(μ_L,s, σ²_L,s + s²)` — so the
    /// log density is the logsumexp over samples minus log S. Test points run in chunks
    /// of [`SghmcConfig::predict_chunk`] in parallel, chunk k with noise stream k of
    /// `cfg.seed` (thread-count independent). `cfg.samples` is not used: the number of
    /// components is the number of kept samples (one, the current state, before
    /// sampling).
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        check_inputs("sghmc predict", x, self.input_dim)?;
        let samples = self.component_params();
        let moments = predict_chunked(
            x.nrows(),
            self.config.predict_chunk,
            cfg.seed,
            |tape, s, len, rng| self.predict_chunk(tape, x.subrows(s, len), &samples, rng),
        )?;
        let s = samples.len();
        let noise = self.noise_variance().map(|v| [v]);
        finish_predictive(
            &self.likelihood,
            vec![1.0 / s as f64; s],
            moments,
            noise.as_ref().map(|v| v.as_slice()),
        )
    }

    fn to_json(&self) -> Result<String> {
        model_json::to_json(self)
    }

    /// `None` for a multiclass model (K latent GPs); otherwise `count` coherent function
    /// draws at the rows of `x` (first output, model units):
    /// function j is the last layer's mean `μ_L(x)` under kept sample `j mod S` (the
    /// current state before sampling) with ONE inner-layer noise draw per hidden unit
    /// shared by all rows ([`NoiseMode::PerPath`]), so each column is a path of the
    /// posterior over functions. Noise from `seed`, one stream per function.
    fn function_samples(
        &self,
        x: MatRef<'_, f64>,
        count: usize,
        seed: u64,
    ) -> Result<Option<Mat<f64>>> {
        check_inputs("sghmc function_samples", x, self.input_dim)?;
        if self.likelihood.is_multiclass() {
            return Ok(None);
        }
        let samples = self.component_params();
        let mut out = Mat::zeros(x.nrows(), count);
        let mut tape = Tape::new();
        for j in 0..count {
            tape.clear();
            let params = self
                .params
                .record_at(&mut tape, &samples[j % samples.len()])?;
            let xv = tape.constant(x.to_owned());
            let mut rng = stream(seed, j as u64);
            let (mu, _) = self.forward(&mut tape, &params, xv, NoiseMode::PerPath, &mut rng)?;
            let mu = tape.value(mu);
            for i in 0..x.nrows() {
                out[(i, j)] = mu[(i, 0)];
            }
        }
        Ok(Some(out))
    }

    fn describe(&self) -> String {
        let widths = self.config.widths(self.input_dim, self.output_dim);
        let s = &self.config.sampler;
        // The schedule of the run (a step budget may have shrunk the configured one).
        let run = self
            .sampler
            .as_ref()
            .map_or_else(|| s.full_schedule(), |st| st.schedule);
        let extra = format!(
            "SGHMC eps={} mdecay={} burn-in {} thin {} kept {} window {}{}",
            s.step_size,
            s.mdecay,
            run.burn_in,
            run.thinning,
            run.kept,
            s.window,
            if s.mcem { " MCEM" } else { "" }
        );
        let extra = match self.potential_ess {
            Some(ess) => format!(
                "{extra}; {:?} potential,{} ESS(potential)={ess:.1}/{}",
                self.config.potential,
                self.noise_variance()
                    .map_or(String::new(), |v| format!(" s²={v:.3e},")),
                self.kept_samples().len()
            ),
            None => format!("{extra}; {:?} potential", self.config.potential),
        };
        describe_stack("sghmc", &widths, self.config.num_inducing, &extra)
    }
}

impl SghmcModel {
    /// Restores a model written by [`Model::to_json`] (sampler state included).
    ///
    /// # Errors
    /// [`Error::Serde`] for malformed JSON; [`Error::Config`] for a configuration outside
    /// its ranges or a sampler state that does not fit the parameters.
    pub fn from_json(s: &str) -> Result<Self> {
        model_json::from_json_checked(
            s,
            |m: &SghmcModel| {
                let config = Checked::new(m.config.clone())?;
                if m.layers.len() != m.config.layers || m.u.len() != m.layers.len() {
                    return Err(Error::config("model file", "layer count mismatch"));
                }
                for l in &m.layers {
                    if l.num_inducing != m.config.num_inducing {
                        return Err(Error::config(
                            "model file",
                            "num_inducing does not match the layers",
                        ));
                    }
                }
                if m.potential_ess
                    .is_some_and(|e| !(e.is_finite() && e >= 0.0))
                {
                    return Err(Error::config(
                        "model file",
                        "potential_ess must be finite and ≥ 0",
                    ));
                }
                let n: usize = m.params.ranges(Role::Sampled).iter().map(|r| r.len()).sum();
                if let Some(st) = &m.sampler
                    && (st.chain.len() != n
                        || st.kept.iter().any(|k| k.len() != n)
                        || st.window.iter().any(|k| k.len() != n)
                        || st.schedule.thinning == 0
                        || st.schedule.kept == 0
                        || st.schedule.window == 0
                        || st.schedule.window > st.schedule.burn_in
                        || st.window.len() > st.schedule.window
                        || st.window_next >= st.schedule.window)
                {
                    return Err(Error::config(
                        "model file",
                        "sampler state does not fit the sampled blocks",
                    ));
                }
                Ok(config)
            },
            |m, config| {
                let n = m.config.num_inducing.saturating_mul(2);
                SghmcModel::from_checked(
                    config,
                    &model_json::synthetic_data_for(
                        &m.config.likelihood,
                        m.input_dim,
                        m.output_dim,
                        n,
                    )?,
                )
            },
            &["sampler", "potential_ess"],
        )
    }
}
