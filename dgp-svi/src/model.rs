//! The DSVI deep GP: construction, the propagation of eq. (15), the ELBO of eq. (17) and
//! the predictive mixture of eq. (18).

use crate::config::{LastMean, SviConfig};
use crate::variational::{Q_SQRT_FLOOR, QParams, init_q};
use dgp_core::rng::{Rng, seeded};
use dgp_core::transforms::{inv_softplus, raw_lower_factor};
use dgp_core::{Error, Result};
use dgp_data::{Dataset, RowSource};
use dgp_traits::backend::Checked;
use dgp_traits::kernels::Kernel;
use dgp_traits::layer::{QSqrt, QVars, SparseLayer, SparseLayerInit, kl_divergence, marginals};
use dgp_traits::mean::LinearInit;
use dgp_traits::model::{
    Batch, ChunkSpec, FitConfig, FitHooks, FitReport, Model, Objective, PredictConfig,
    chunked_value_and_grad, chunked_value_and_grads,
};
use dgp_traits::optim::{NatGradConfig, natural_gradient_step};
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::predictive::Predictive;
use dgp_traits::skeleton::stack::{InitRun, MeanData, StackMean, layer_plans};
use dgp_traits::skeleton::{
    ChunkMoments, NoiseMode, Propagated, check_batch, check_inputs, describe_stack,
    finish_predictive, model_json, predict_chunked, propagate, reparam_sample, tile_rows,
};
use dgp_traits::tape::{Tape, Var};
use dgp_traits::train::{AdamStepper, NaturalAdamStepper, NaturalGradientModel, fit_with_held_out};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Lower bound of the Gaussian noise variance (softplus + floor).
pub const NOISE_FLOOR: f64 = 1e-6;
/// Jitter added to hidden-layer variances before the square root of eq. (15)
/// (the reference's `reparameterize`).
pub const SAMPLE_JITTER: f64 = 1e-6;
/// Largest number of rows (points × samples) pushed through the layers at once when
/// predicting: chunks of this size keep the M×rows intermediates at a few MB (cache- and
/// allocator-friendly) and give the thread pool enough chunks to balance.
const PREDICT_ROWS: usize = 8_192;
pub use dgp_traits::model::GRAD_CHUNK_ROWS;

/// Rows per gradient chunk for a minibatch of `b` points: [`GRAD_CHUNK_ROWS`], except that
/// a minibatch of more than half of it and at most all of it is split in two (chunks of
/// `⌈b/2⌉` rows), so that two threads share every minibatch of more than
/// `GRAD_CHUNK_ROWS / 2` points (one chunk leaves the second core idle for the whole
/// step). Depends on `b` only, never on the number of threads.
pub fn chunk_rows(b: usize) -> usize {
    if b > GRAD_CHUNK_ROWS / 2 && b <= GRAD_CHUNK_ROWS {
        b.div_ceil(2)
    } else {
        GRAD_CHUNK_ROWS
    }
}

/// A deep GP trained by doubly-stochastic variational inference (Salimbeni & Deisenroth
/// 2017). See the crate docs for an example.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SviModel {
    config: SviConfig,
    layers: Vec<SparseLayer>,
    q: Vec<QParams>,
    noise: Option<ParamId>,
    params: ParamStore,
    input_dim: usize,
    output_dim: usize,
}

impl SviModel {
    /// Builds a model for training data `data` (inputs N×D, targets N×P, already in model
    /// units), initialised as the reference code does (the initialisation of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP): Z of the
    /// first layer by k-means++ on X, later layers' Z and data pushed through fixed
    /// identity/PCA mean functions, q(u) with zero mean, inner factors at
    /// `inner_q_scale`× the prior, the last layer at the prior. M = min(`num_inducing`, N)
    /// inducing points per layer (every row one inducing input when N ≤ `num_inducing`;
    /// the model's configuration holds the M used).
    ///
    /// # Errors
    /// The configuration's [`SviConfig::validate`] error (checked once into the
    /// [`Checked`] that [`SviModel::from_checked`] takes); as [`SviModel::from_checked`].
    pub fn new(config: SviConfig, data: &Dataset) -> Result<Self> {
        Self::from_checked(Checked::new(config)?, data)
    }

    /// [`SviModel::new`] from a configuration already validated ([`Checked`]); it is not
    /// validated again.
    ///
    /// # Errors
    /// Targets the likelihood refuses; initialisation failures (k-means, Cholesky).
    pub fn from_checked(config: Checked<SviConfig>, data: &Dataset) -> Result<Self> {
        let mut config = config.into_inner();
        let x = data.x();
        // A Dataset is never empty and has only finite entries (Dataset::new checks).
        let (d_in, p) = (data.input_dim(), data.output_dim());
        config.likelihood.check_training_targets(data.y())?;
        let widths = config.widths(d_in, config.likelihood.latent_dim(p));
        let mut rng = seeded(config.init_seed);
        let mut run = InitRun::kmeans_at_most_rows(
            x,
            config.num_inducing,
            config.kmeans_iters,
            true,
            &mut rng,
        )?;
        config.num_inducing = run.z.nrows();
        let hidden = StackMean::Linear {
            init: LinearInit::Pca,
            learned: false,
            bias: false,
        };
        let last = match config.last_mean {
            LastMean::Zero => StackMean::Zero,
            LastMean::Constant => StackMean::Constant,
        };
        let mut params = ParamStore::new();
        let mut layers = Vec::with_capacity(config.layers);
        let mut q = Vec::with_capacity(config.layers);
        for plan in layer_plans(&widths) {
            let (mean, mean_init) = run.layer_mean(&plan, &hidden, &last, MeanData::X, &mut rng)?;
            let w = mean_init.weights.clone();
            let kernel = Kernel::new(config.kernel, plan.input_dim, config.ard)?;
            let inner = !plan.last;
            let white = if inner { config.inner_white_noise } else { 0.0 };
            let layer = SparseLayer::new(
                &mut params,
                &plan.name,
                kernel,
                mean,
                plan.output_dim,
                white,
                SparseLayerInit {
                    z: run.z.clone(),
                    lengthscale: 1.0,
                    variance: if inner {
                        config.inner_kernel_variance
                    } else {
                        1.0
                    },
                    train_variance: true,
                    train_z: true,
                    mean: mean_init,
                },
            )?;
            let scale = if inner { config.inner_q_scale } else { 1.0 };
            q.push(init_q(
                &mut params,
                &layer,
                run.z.as_ref(),
                scale,
                config.whiten,
            )?);
            layers.push(layer);
            if let Some(w) = w {
                run.push(&w, None);
            }
        }
        let noise = match config.likelihood.init_noise_variance() {
            Some(v) => Some(params.add(
                "likelihood.variance",
                Mat::from_fn(1, 1, |_, _| inv_softplus(v - NOISE_FLOOR)),
                Role::Optimised,
            )?),
            None => None,
        };
        Ok(SviModel {
            config,
            layers,
            q,
            noise,
            params,
            input_dim: d_in,
            output_dim: p,
        })
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &SviConfig {
        &self.config
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[SparseLayer] {
        &self.layers
    }

    /// Number of latent functions of the last layer: the number of target columns, or K
    /// for a multiclass likelihood ([`dgp_traits::likelihoods::Likelihood::latent_dim`]).
    pub fn latent_dim(&self) -> usize {
        self.config.likelihood.latent_dim(self.output_dim)
    }

    /// The Gaussian noise variance σ², if the likelihood has one.
    pub fn noise_variance(&self) -> Option<f64> {
        self.noise
            .map(|id| dgp_core::transforms::softplus(self.params.get(id)[(0, 0)]) + NOISE_FLOOR)
    }

    /// Eq. (15): pushes `x` (B×D) through the layers with `samples` reparameterised draws of
    /// every hidden layer. Returns the last layer's marginal means and variances, each
    /// (R·B)×P with rows ordered sample-major (row `s·B + i`), where R = `samples` for
    /// L ≥ 2 and R = 1 for L = 1 (nothing to sample); plus R, and each layer's Cholesky
    /// factor of Kuu and q(u) (for the KL).
    fn propagate(
        &self,
        tape: &mut Tape,
        params: &[Var],
        x: Var,
        samples: usize,
        noise: NoiseMode,
        rng: &mut Rng,
    ) -> Result<Propagated> {
        let b = tape.shape(x).0;
        let marginals_of = |tape: &mut Tape, l: usize, input: Var, kl: &mut Vec<(Var, QVars)>| {
            let proj = self.layers[l].project(tape, params, input)?;
            let q = self.q[l].vars(tape, params);
            let (mu, var) = marginals(tape, &proj, &q, self.config.whiten);
            kl.push((proj.chol, q));
            Ok((mu, var))
        };
        let step = |tape: &mut Tape, _l: usize, mu: Var, var: Var, reps: &mut usize| {
            // Layer 1 sees the same deterministic inputs for every sample: evaluate it once
            // on B rows and tile its marginals S times.
            let [mu, var] = if *reps == 1 && samples > 1 {
                *reps = samples;
                tile_rows(tape, [mu, var], samples)
            } else {
                [mu, var]
            };
            Ok(reparam_sample(
                tape,
                mu,
                var,
                SAMPLE_JITTER,
                noise,
                b,
                *reps,
                rng,
            ))
        };
        propagate(tape, x, self.layers.len(), marginals_of, step)
    }

    fn noise_var(&self, tape: &mut Tape, params: &[Var]) -> Option<Var> {
        self.noise
            .map(|id| tape.positive(id.var(params), NOISE_FLOOR))
    }

    /// Predictive mixture components (latent, variances clamped at 0) for one chunk of
    /// test inputs. `tape` is cleared first; reusing one tape across chunks recycles its
    /// buffers.
    fn predict_chunk(
        &self,
        tape: &mut Tape,
        x: MatRef<'_, f64>,
        samples: usize,
        rng: &mut Rng,
    ) -> Result<ChunkMoments> {
        tape.clear();
        let params = self.params.record(tape);
        let xv = tape.constant(x.to_owned());
        let prop = self.propagate(tape, &params, xv, samples, NoiseMode::PerPoint, rng)?;
        Ok(ChunkMoments::from_stacked(
            tape.value(prop.mean),
            tape.value(prop.var),
            x.nrows(),
            prop.reps,
            |v| v.max(0.0),
        ))
    }
}

impl Objective for SviModel {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The ELBO of eq. (17) on a minibatch: `N/(|B|·S) Σ_{n,s} E_{q(f_n^L | s)}[log p(y_n | f)]
    /// − Σ_l KL(q(U^l) ‖ p(U^l))`, the last layer's expectation in closed form (Gaussian),
    /// by Gauss–Hermite (probit, logit, robust-max over the label's latent function) or by
    /// Monte Carlo with antithetic draws from `rng` (softmax); multiclass likelihoods see
    /// the last layer's K latent functions.
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<Var> {
        self.elbo(tape, params, batch, rng).map(|(elbo, _)| elbo)
    }

    /// Value and gradient of the ELBO of eq. (17) on `batch`, through the core's
    /// [`chunked_value_and_grad`]: minibatches of at most `GRAD_CHUNK_ROWS / 2` points
    /// are recorded on `tape` exactly as [`Objective::record`] does; larger ones in
    /// `⌈B / chunk_rows(B)⌉` chunks ([`chunk_rows`]) on separate tapes in parallel, chunk c drawing its
    /// Monte Carlo noise from stream c of one seed drawn from `rng` and recording its share
    /// `N/(B·S) Σ` of the data term (the KLs with chunk 0): the same estimator of eq. (17),
    /// with results independent of the number of threads.
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        check_batch("svi", batch, self.input_dim, self.output_dim)?;
        let b = batch.len();
        chunked_value_and_grad(
            tape,
            &self.params,
            batch,
            chunk_rows(batch.len()),
            true,
            rng,
            |t, leaves, part, first, noise| {
                let (out, _) = self.elbo_part(t, leaves, part, b, first, noise)?;
                Ok(out)
            },
        )
    }
}

impl SviModel {
    /// [`Objective::record`], also returning the last layer's q(u) on the tape (for the
    /// natural-gradient step).
    fn elbo(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(Var, QVars)> {
        check_batch("svi", batch, self.input_dim, self.output_dim)?;
        self.elbo_part(tape, params, batch, batch.len(), true, rng)
    }

    /// The share of the ELBO of eq. (17) of the rows of `batch` in a minibatch of `total`
    /// points, `N/(total·S) Σ_{n∈batch,s} E[log p(y_n | f)]`, minus the KLs when `with_kl`;
    /// also the last layer's q(u) on the tape.
    fn elbo_part(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        total: usize,
        with_kl: bool,
        rng: &mut Rng,
    ) -> Result<(Var, QVars)> {
        let x = tape.constant(batch.x.to_owned());
        let prop = self.propagate(
            tape,
            params,
            x,
            self.config.train_samples,
            NoiseMode::PerPoint,
            rng,
        )?;
        let b = batch.len();
        let y_tiled = Mat::from_fn(b * prop.reps, self.output_dim, |r, c| batch.y[(r % b, c)]);
        let y = tape.constant(y_tiled);
        let noise = self.noise_var(tape, params);
        // Only the softmax (a Monte Carlo estimate) draws from `rng` here.
        let ell = self
            .config
            .likelihood
            .expected_log_lik_with_rng(tape, y, prop.mean, prop.var, noise, rng)?;
        let data_term = tape.sum(ell);
        let data_term = tape.scale(
            data_term,
            batch.num_data as f64 / (total * prop.reps) as f64,
        );
        let mut elbo = data_term;
        if with_kl {
            for (chol, q) in &prop.kl_parts {
                let kl = kl_divergence(tape, *chol, q, self.config.whiten);
                elbo = tape.sub(elbo, kl);
            }
        }
        let last_q = prop
            .kl_parts
            .last()
            .map(|(_, q)| q.clone())
            .expect("a model has at least one layer");
        Ok((elbo, last_q))
    }
}

impl NaturalGradientModel for SviModel {
    /// The last layer's q(u): its mean block and its Cholesky-factor blocks.
    fn natural_blocks(&self) -> Vec<ParamId> {
        let q = self.q.last().expect("a model has at least one layer");
        std::iter::once(q.mean)
            .chain(q.sqrt.iter().copied())
            .collect()
    }

    /// One natural-gradient step (Salimbeni et al. 2018) on each output's
    /// q(u_d) = N(m_d, L_d L_dᵀ) of the last layer, from the gradients of the ELBO of
    /// eq. (17) on `batch` with respect to m_d and L_d. With a Gaussian likelihood, the
    /// hidden layers' noise fixed and γ = 1, the new q(u) maximises that ELBO exactly.
    fn natural_step(
        &mut self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
        cfg: &NatGradConfig,
    ) -> Result<(f64, Vec<f64>)> {
        check_batch("svi", batch, self.input_dim, self.output_dim)?;
        let ids = self
            .q
            .last()
            .expect("a model has at least one layer")
            .clone();
        let mean = self.params.get(ids.mean).to_owned();
        let m = mean.nrows();
        // The ELBO's value, gradient and the adjoints of the last layer's (m, L_d) through
        // the row chunks of `value_and_grad`: every chunk records q(u) from the same
        // parameters, so the chunks' adjoints sum to the minibatch's.
        let mut shapes = vec![(m, self.latent_dim())];
        shapes.extend(std::iter::repeat_n((m, m), ids.sqrt.len()));
        let spec = ChunkSpec {
            chunk_rows: chunk_rows(batch.len()),
            draws_noise: true,
            at: None,
            adjoints: &shapes,
        };
        let b = batch.len();
        let out = chunked_value_and_grads(
            tape,
            &self.params,
            batch,
            &spec,
            rng,
            |t, leaves, part, first, noise| {
                let (elbo, q) = self.elbo_part(t, leaves, part, b, first, noise)?;
                let QSqrt::Full(factors) = &q.sqrt else {
                    unreachable!("svi's q(u) has full Cholesky factors")
                };
                let mut nodes = vec![q.mean];
                nodes.extend(factors.iter().copied());
                Ok((elbo, nodes))
            },
        )?;
        let (value, flat_grad) = (out.value, out.grad);
        // The factors L_d as every chunk recorded them.
        tape.clear();
        let leaves = self.params.record(tape);
        let q = ids.vars(tape, &leaves);
        let QSqrt::Full(factors) = &q.sqrt else {
            unreachable!("svi's q(u) has full Cholesky factors")
        };
        let g_mean = out.adjoints[0].as_ref();
        // All outputs' steps first, then the parameters: a failed step leaves q(u) as it was.
        let mut new_mean = mean.clone();
        let mut new_factors = Vec::with_capacity(factors.len());
        for (d, &factor) in factors.iter().enumerate() {
            let g_factor = out.adjoints[1 + d].as_ref();
            let step = natural_gradient_step(
                mean.subcols(d, 1),
                tape.value(factor),
                g_mean.subcols(d, 1),
                g_factor,
                cfg,
            )?;
            new_mean.subcols_mut(d, 1).copy_from(step.mean.as_ref());
            new_factors.push(raw_lower_factor(step.factor.as_ref(), Q_SQRT_FLOOR));
        }
        for (&raw_id, raw) in ids.sqrt.iter().zip(new_factors) {
            self.params.set(raw_id, raw)?;
        }
        self.params.set(ids.mean, new_mean)?;
        Ok((value, flat_grad))
    }
}

impl Model for SviModel {
    fn backend(&self) -> &'static str {
        "svi"
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    fn noise_variance(&self) -> Option<f64> {
        SviModel::noise_variance(self)
    }

    /// Adam on every parameter ([`AdamStepper`]), or, when [`SviConfig::natgrad`] is set,
    /// natural-gradient steps on the last layer's q(u) (its blocks get
    /// [`Role::Natural`]) next to Adam on the rest ([`NaturalAdamStepper`], alternate or
    /// joint scheme); both on the core's minibatch executor through
    /// [`fit_with_held_out`], which honours `cfg.early_stopping` (held-out rows split off,
    /// the rule's observer attached); Adam's settings are [`SviConfig::adam`].
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        // With `cfg.early_stopping == None` `fit_with_held_out` is the plain executor run.
        let adam = self.config.adam.clone();
        match self.config.natgrad {
            Some(nat) => {
                let stepper = NaturalAdamStepper::new(adam, nat)?;
                fit_with_held_out(self, data, cfg, stepper, hooks)
            }
            None => fit_with_held_out(self, data, cfg, AdamStepper::new(adam), hooks),
        }
    }

    /// Eq. (18): S draws of the hidden layers at each test point give an equal-weight
    /// mixture of S Gaussians `N(μ_s, σ²_s + σ²_noise)` (for L = 1 a single Gaussian).
    /// For classification the components are the last layer's latent marginals (one output
    /// per latent function: K for multiclass) and the predictive carries the class
    /// probabilities `(1/S) Σ_s p(y = c | μ_s, σ²_s)` — the probabilities averaged over
    /// the hidden-layer samples ([`dgp_traits::likelihoods::Likelihood::class_probs`]).
    /// Test points are processed in chunks in parallel; chunk k uses noise stream k of
    /// `cfg.seed`, so the result does not depend on the number of threads.
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        check_inputs("svi predict", x, self.input_dim)?;
        let samples = if self.layers.len() == 1 {
            1
        } else {
            cfg.samples.max(1)
        };
        let chunk = (PREDICT_ROWS / samples).max(1);
        let moments = predict_chunked(x.nrows(), chunk, cfg.seed, |tape, s, len, rng| {
            self.predict_chunk(tape, x.subrows(s, len), samples, rng)
        })?;
        let reps = moments.means[0].ncols();
        let noise = self.noise_variance().map(|v| [v]);
        finish_predictive(
            &self.config.likelihood,
            vec![1.0 / reps as f64; reps],
            moments,
            noise.as_ref().map(|v| v.as_slice()),
        )
    }

    fn to_json(&self) -> Result<String> {
        model_json::to_json(self)
    }

    /// Sample paths of the last layer's mean, `μ^L(x)` under one noise draw per hidden unit
    /// shared by all rows of `x` (for L = 1, the posterior mean repeated).
    fn function_samples(
        &self,
        x: MatRef<'_, f64>,
        count: usize,
        seed: u64,
    ) -> Result<Option<Mat<f64>>> {
        if x.ncols() != self.input_dim {
            return Err(Error::shape(
                "svi function_samples inputs",
                self.input_dim,
                x.ncols(),
            ));
        }
        let mut tape = Tape::new();
        let params = self.params.record(&mut tape);
        let xv = tape.constant(x.to_owned());
        let mut rng = seeded(seed);
        let prop = self.propagate(
            &mut tape,
            &params,
            xv,
            count.max(1),
            NoiseMode::PerPath,
            &mut rng,
        )?;
        let mu = tape.value(prop.mean);
        let n = x.nrows();
        Ok(Some(Mat::from_fn(n, count, |i, s| {
            mu[((s % prop.reps) * n + i, 0)]
        })))
    }

    fn describe(&self) -> String {
        let widths = self.config.widths(self.input_dim, self.latent_dim());
        let extra = format!(
            "{:?}{} S_train={}",
            self.config.kernel,
            if self.config.whiten { " whitened" } else { "" },
            self.config.train_samples
        );
        describe_stack("svi", &widths, self.config.num_inducing, &extra)
    }
}

impl SviModel {
    /// Restores a model written by [`Model::to_json`].
    ///
    /// # Errors
    /// [`Error::Serde`] for malformed JSON; [`Error::Config`] for a configuration outside
    /// its ranges (an edited model file).
    pub fn from_json(s: &str) -> Result<Self> {
        model_json::from_json_checked(
            s,
            |m: &SviModel| Checked::new(m.config.clone()),
            |m, config| {
                let n = m.config.num_inducing.saturating_mul(2);
                SviModel::from_checked(
                    config,
                    &model_json::synthetic_data_for(
                        &m.config.likelihood,
                        m.input_dim,
                        m.output_dim,
                        n,
                    )?,
                )
            },
            &[],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::testing::toy_regression;

    /// The natural step on a minibatch of several chunks equals the step computed from
    /// one tape holding the whole batch (one layer: no noise, so both see the same
    /// objective): the chunks' adjoints of (m_d, L_d) sum to the batch's.
    #[test]
    fn chunked_natural_step_equals_the_one_tape_step() {
        let n = 2 * GRAD_CHUNK_ROWS + 11;
        let data = toy_regression(n, 2, 1.5, 3);
        let cfg = SviConfig {
            layers: 1,
            num_inducing: 6,
            ..Default::default()
        };
        let mut m = SviModel::new(cfg, &data).unwrap();
        let batch = Batch::new(data.x(), data.y(), n).unwrap();
        let nat = NatGradConfig::default();
        // The reference: the whole batch on one tape.
        let mut r = m.clone();
        let mut tape = Tape::new();
        let leaves = r.params.record(&mut tape);
        let (out, q) = r.elbo(&mut tape, &leaves, &batch, &mut seeded(1)).unwrap();
        let (v_ref, grads, g_ref) =
            dgp_traits::model::checked_backward(&tape, out, &r.params, &leaves).unwrap();
        let QSqrt::Full(factors) = &q.sqrt else {
            panic!("full factors")
        };
        let ids = r.q.last().unwrap().clone();
        let mean = r.params.get(ids.mean).to_owned();
        let mut new_mean = mean.clone();
        let mut raws = Vec::new();
        for (d, &f) in factors.iter().enumerate() {
            let step = natural_gradient_step(
                mean.subcols(d, 1),
                tape.value(f),
                grads.get(q.mean).unwrap().subcols(d, 1),
                grads.get(f).unwrap(),
                &nat,
            )
            .unwrap();
            new_mean.subcols_mut(d, 1).copy_from(step.mean.as_ref());
            raws.push(raw_lower_factor(step.factor.as_ref(), Q_SQRT_FLOOR));
        }
        drop(grads);
        for (&id, raw) in ids.sqrt.iter().zip(raws) {
            r.params.set(id, raw).unwrap();
        }
        r.params.set(ids.mean, new_mean).unwrap();

        let (v, g) = m
            .natural_step(&mut Tape::new(), &batch, &mut seeded(1), &nat)
            .unwrap();
        assert!((v - v_ref).abs() <= 1e-10 * v_ref.abs(), "{v} vs {v_ref}");
        let scale = g_ref.iter().fold(0.0f64, |a, b| a.max(b.abs()));
        for (a, b) in g.iter().zip(&g_ref) {
            assert!((a - b).abs() <= 1e-10 * scale, "{a} vs {b}");
        }
        let (pa, pb) = (m.params().flat(), r.params().flat());
        let scale = pb.iter().fold(0.0f64, |a, b| a.max(b.abs()));
        for (a, b) in pa.iter().zip(&pb) {
            assert!((a - b).abs() <= 1e-9 * scale, "{a} vs {b}");
        }
    }
}
