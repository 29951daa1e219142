//! [`Objective`], [`Model`] and [`NaturalGradientModel`] for [`StructuredModel`]: training on
//! the core's executor, the predictive mixture, the model's JSON, and the exact "sample f_M"
//! propagation used to test Theorem 1.

use crate::config::Family;
use crate::elbo::GRAD_CHUNK_ROWS;
use crate::model::StructuredModel;
use crate::q::{FactorTape, Q_SQRT_FLOOR, QParams};
use crate::warm_start::Resumed;
use dgp_core::rng::Rng;
use dgp_core::transforms::raw_lower_factor;
use dgp_core::{Error, Result};
use dgp_data::RowSource;
use dgp_traits::backend::Checked;
use dgp_traits::model::{
    Batch, ChunkSpec, FitConfig, FitHooks, FitReport, Model, Objective, PredictConfig,
    chunked_value_and_grad, chunked_value_and_grads,
};
use dgp_traits::optim::{NatGradConfig, natural_gradient_step};
use dgp_traits::params::{ParamId, ParamStore};
use dgp_traits::predictive::Predictive;
use dgp_traits::skeleton::{
    ChunkMoments, check_batch, check_inputs, describe_stack, finish_predictive, model_json,
    predict_chunked,
};
use dgp_traits::tape::{Tape, Var};
use dgp_traits::train::{AdamStepper, NaturalAdamStepper, NaturalGradientModel, fit_with_held_out};
use faer::{Mat, MatRef};

/// Largest number of rows (points × samples) pushed through the layers at once when
/// predicting.
const PREDICT_ROWS: usize = 8_192;

impl Objective for StructuredModel {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The ELBO of eq. (8) on a minibatch: `N/(|B|·S) Σ_{n,s} E[log p(y_n | f^L_ns)] −
    /// KL(q(f_M) ‖ p(f_M))`, f^L_ns from Theorem 1's sequential conditionals (Lindinger et al. 2020, eq. 8 and Theorem 1).
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<Var> {
        self.elbo_parts(tape, params, batch, rng).map(|(e, _, _)| e)
    }

    /// Value and gradient of eq. (8) on `batch` through the core's
    /// [`chunked_value_and_grad`]: a minibatch of at most [`GRAD_CHUNK_ROWS`] rows is
    /// recorded on `tape` as [`Objective::record`] does; a larger one in
    /// `⌈B / GRAD_CHUNK_ROWS⌉` chunks of consecutive rows on separate tapes (in parallel,
    /// and on the ranks of a distributed launch), chunk c recording its rows' share of the
    /// data term with the noise of stream c of one seed drawn from `rng`, chunk 0 also the
    /// KL, summed in chunk order.
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        check_batch("structured", batch, self.input_dim, 1)?;
        let b = batch.len();
        chunked_value_and_grad(
            tape,
            &self.params,
            batch,
            GRAD_CHUNK_ROWS,
            true,
            rng,
            |t, leaves, part, first, noise| {
                self.elbo_share(t, leaves, part, b, first, noise)
                    .map(|(e, _, _)| e)
            },
        )
    }
}

impl StructuredModel {
    /// Latent mixture moments at `x` of a model with one latent function (Gaussian or
    /// Bernoulli likelihood): per point, `samples` components (means, variances; n×S
    /// each; one component for L = 1) from Theorem 1 with the noise of chunk k drawn from
    /// stream k of `seed`.
    ///
    /// # Errors
    /// Bad inputs; Kuu not positive definite; [`Error::Unsupported`] for a multiclass
    /// model (use [`StructuredModel::latent_mixtures`]).
    pub fn latent_mixture(
        &self,
        x: MatRef<'_, f64>,
        samples: usize,
        seed: u64,
    ) -> Result<(Mat<f64>, Mat<f64>)> {
        let mut m = self.latent_mixtures(x, samples, seed)?;
        if m.means.len() != 1 {
            return Err(Error::Unsupported(format!(
                "latent_mixture is for one latent function, the model has {}; use latent_mixtures",
                m.means.len()
            )));
        }
        Ok((m.means.remove(0), m.vars.remove(0)))
    }

    /// Latent mixture moments at `x` of every latent function of the last layer (one,
    /// or K for a multiclass likelihood): `means[t]`, `vars[t]` n×S, component s of
    /// point i the independent Gaussian moments of function t in sample s (where the
    /// last layer's functions are coupled, its q part is drawn in each sample and the
    /// variance is the kernel residual, as in training). Chunk k uses stream k of `seed`.
    ///
    /// # Errors
    /// Bad inputs; Kuu not positive definite.
    pub fn latent_mixtures(
        &self,
        x: MatRef<'_, f64>,
        samples: usize,
        seed: u64,
    ) -> Result<ChunkMoments> {
        check_inputs("structured predict", x, self.input_dim)?;
        let samples = if self.layers.len() == 1 {
            1
        } else {
            samples.max(1)
        };
        let chunk = (PREDICT_ROWS / samples).max(1);
        predict_chunked(x.nrows(), chunk, seed, |tape, s, len, rng| {
            tape.clear();
            let leaves = self.params.record(tape);
            let xv = tape.constant(x.subrows(s, len).to_owned());
            let prop = self.propagate(tape, &leaves, xv, samples, rng)?;
            let (mu, var) = (tape.value(prop.mean), tape.value(prop.var));
            let reps = prop.reps;
            Ok(ChunkMoments {
                means: (0..mu.nrows())
                    .map(|t| Mat::from_fn(len, reps, |i, r| mu[(t, r * len + i)]))
                    .collect(),
                vars: (0..var.nrows())
                    .map(|t| Mat::from_fn(len, reps, |i, r| var[(t, r * len + i)].max(0.0)))
                    .collect(),
            })
        })
    }

    /// Restores a model written by [`Model::to_json`].
    ///
    /// # Errors
    /// [`Error::Serde`] for malformed JSON; [`Error::Config`] for a configuration outside
    /// its ranges or parameters that do not fit it.
    pub fn from_json(s: &str) -> Result<Self> {
        model_json::from_json_checked(
            s,
            |m: &StructuredModel| {
                let config = Checked::new(m.config.clone())?;
                let widths = m.config.widths(m.input_dim);
                if m.layers.len() != m.config.layers
                    || m.layout.size() != widths[1..].iter().sum::<usize>() * m.config.num_inducing
                    || m.layers
                        .iter()
                        .any(|l| l.num_inducing != m.config.num_inducing)
                {
                    return Err(Error::config(
                        "model file",
                        "layers and q do not match the configuration",
                    ));
                }
                Ok(config)
            },
            |m, config| {
                let n = m.config.num_inducing.saturating_mul(2);
                StructuredModel::from_checked(
                    config,
                    &model_json::synthetic_data_for(&m.config.likelihood, m.input_dim, 1, n)?,
                )
            },
            // Whether the mean-field warm start has run depends on the model's history.
            &["warm_started"],
        )
    }
}

impl NaturalGradientModel for StructuredModel {
    /// The joint q's mean and dense factor (fully-coupled family; empty otherwise).
    fn natural_blocks(&self) -> Vec<ParamId> {
        match &self.q {
            QParams::Dense { mean, factor } => vec![*mean, *factor],
            QParams::Blocks { .. } => Vec::new(),
        }
    }

    /// One natural-gradient step (Lindinger et al. 2020, §3.1, Salimbeni et al. 2018) on (μ_M, S_M) jointly,
    /// all MT dimensions of the fully-coupled q, by the core's
    /// [`natural_gradient_step`] (γ halved and retried when the new S is not positive
    /// definite). A failed step leaves q as it was.
    fn natural_step(
        &mut self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
        cfg: &NatGradConfig,
    ) -> Result<(f64, Vec<f64>)> {
        let QParams::Dense {
            mean: mean_id,
            factor: factor_id,
        } = &self.q
        else {
            return Err(Error::config(
                "natgrad",
                "natural gradients need the fully_coupled family",
            ));
        };
        let (mean_id, factor_id) = (*mean_id, *factor_id);
        check_batch("structured", batch, self.input_dim, 1)?;
        // The ELBO's value, gradient and adjoints of (μ_M, L) through the row chunks (see
        // `value_and_grad`): each chunk records q from the same parameters, so the chunks'
        // adjoints of q's nodes sum to the minibatch's.
        let n = self.layout.size();
        let shapes = [(n, 1), (n, n)];
        let spec = ChunkSpec {
            chunk_rows: GRAD_CHUNK_ROWS,
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
                let (e, _, q) = self.elbo_share(t, leaves, part, b, first, noise)?;
                match q.factor {
                    FactorTape::Dense(f) => Ok((e, vec![q.mean, f])),
                    FactorTape::Blocks(_) => Err(Error::config(
                        "natgrad",
                        "natural gradients need the fully_coupled family",
                    )),
                }
            },
        )?;
        let (value, flat_grad) = (out.value, out.grad);
        // L = the factor's transform of its raw block, as every chunk recorded it.
        tape.clear();
        let leaves = self.params.record(tape);
        let q = self.q.record(tape, &leaves, &self.layout);
        let FactorTape::Dense(factor) = q.factor else {
            return Err(Error::config(
                "natgrad",
                "natural gradients need the fully_coupled family",
            ));
        };
        let mean = self.params.get(mean_id).to_owned();
        let (g_mean, g_factor) = (out.adjoints[0].as_ref(), out.adjoints[1].as_ref());
        let step = natural_gradient_step(mean.as_ref(), tape.value(factor), g_mean, g_factor, cfg)?;
        let raw = raw_lower_factor(step.factor.as_ref(), Q_SQRT_FLOOR);
        self.params.set(factor_id, raw)?;
        self.params.set(mean_id, step.mean)?;
        Ok((value, flat_grad))
    }
}

impl Model for StructuredModel {
    fn backend(&self) -> &'static str {
        match self.config.family {
            Family::Star => "star",
            Family::FullyCoupled => "fc",
            Family::MeanField => "mf",
        }
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    fn noise_variance(&self) -> Option<f64> {
        StructuredModel::noise_variance(self)
    }

    /// Adam on every trainable block ([`AdamStepper`]); for the fully-coupled family with
    /// [`crate::StructuredConfig::natgrad`] set, natural steps on (μ_M, S_M) next to Adam
    /// on the rest ([`NaturalAdamStepper`]); both on the core's minibatch executor through
    /// [`fit_with_held_out`], which honours `cfg.early_stopping` (held-out rows split off,
    /// the rule's observer attached; Lindinger et al.'s rule is the reference's) and
    /// `cfg.convergence`;
    /// Adam's settings, schedule included, are [`crate::StructuredConfig::adam`]. With
    /// [`crate::StructuredConfig::warm_start`] set, the fit of the mean-field restriction
    /// comes first (once per model, and not when `hooks` hold a saved state to resume);
    /// the report is the fully-coupled run's, or the warm start's if a stop was requested
    /// during it.
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        // With `cfg.early_stopping == None` `fit_with_held_out` is the plain executor run.
        let (state, stopped) = self.warm_start(data, cfg, hooks)?;
        if let Some(report) = stopped {
            return Ok(report);
        }
        let mut resumed = Resumed { hooks, state };
        let hooks = &mut FitHooks::all(&mut resumed);
        let adam = self.config.adam.clone();
        match self.config.natgrad {
            Some(nat) if self.config.family == Family::FullyCoupled => {
                fit_with_held_out(self, data, cfg, NaturalAdamStepper::new(adam, nat)?, hooks)
            }
            _ => fit_with_held_out(self, data, cfg, AdamStepper::new(adam), hooks),
        }
    }

    /// The equal-weight mixture of `cfg.samples` Gaussians per test point, each
    /// `N(mû^L_s, Σ̂^L_s + σ²)` from one draw of the hidden layers by Theorem 1; chunked
    /// and parallel, chunk k with noise stream k of `cfg.seed` (thread-count independent).
    /// For a classification likelihood the predictive also carries the class
    /// probabilities `(1/S) Σ_s p(y | component s)`
    /// ([`dgp_traits::likelihoods::Likelihood::class_probs_mixture`]) of the components
    /// of [`StructuredModel::latent_mixtures`].
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        let moments = self.latent_mixtures(x, cfg.samples, cfg.seed)?;
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

    /// `None` for a multiclass model (K latent functions); otherwise coherent function
    /// draws (the tests of the reference code, Structured_DGP's exact propagation given one f_M ~ q per
    /// function, one hidden-layer noise draw per function shared by every point; see
    /// [`StructuredModel::function_draws`]).
    fn function_samples(
        &self,
        x: MatRef<'_, f64>,
        count: usize,
        seed: u64,
    ) -> Result<Option<Mat<f64>>> {
        if self.config.likelihood.is_multiclass() {
            return Ok(None);
        }
        self.function_draws(x, count, seed).map(Some)
    }

    fn describe(&self) -> String {
        let c = &self.config;
        let extra = format!(
            "{:?}{}{}{} S_train={}",
            c.family,
            if c.whitened { " whitened" } else { "" },
            if c.natgrad.is_some() { " natgrad" } else { "" },
            if c.warm_start.is_some() {
                " mean-field warm start"
            } else {
                ""
            },
            c.train_samples
        );
        describe_stack(
            self.backend(),
            &c.widths(self.input_dim),
            c.num_inducing,
            &extra,
        )
    }
}

impl StructuredModel {
    /// Values of a_l (M×R), k − aᵀKa (R) and the mean function (R×T_l) at `input`.
    #[allow(clippy::type_complexity)]
    pub(crate) fn project_values(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        l: usize,
        input: Var,
    ) -> Result<(Mat<f64>, Vec<f64>, Option<Mat<f64>>)> {
        let p = self.project_pub(tape, leaves, l, input)?;
        let a = tape.value(p.0).to_owned();
        let b = tape.value(p.1);
        let base = (0..b.ncols()).map(|j| b[(0, j)]).collect();
        let mean = p.2.map(|m| tape.value(m).to_owned());
        Ok((a, base, mean))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StructuredConfig;
    use dgp_core::rng::seeded;
    use dgp_traits::model::checked_backward;
    use dgp_traits::testing::{assert_chunked_value_and_grad, toy_regression};

    fn model(family: Family, layers: usize, n: usize) -> (StructuredModel, dgp_data::Dataset) {
        let data = toy_regression(n, 2, 1.5, 3);
        let c = StructuredConfig {
            family,
            layers,
            num_inducing: 5,
            train_samples: 2,
            kmeans_iters: 3,
            ..Default::default()
        };
        (StructuredModel::new(c, &data).unwrap(), data)
    }

    /// A minibatch of more than GRAD_CHUNK_ROWS rows: value and gradient equal
    /// `Σ_c (b_c/B)·record(chunk c)` on one tape with chunk c's noise from stream c of the
    /// seed drawn from the step's generator (each record counts its rows at N/(b_c·S) and
    /// the KL once, so the weights give every row N/(B·S) and the KL weight 1).
    #[test]
    fn chunked_value_and_grad_is_the_weighted_sum_of_its_chunks() {
        for family in [Family::Star, Family::FullyCoupled] {
            let n = 2 * GRAD_CHUNK_ROWS + 37;
            let (m, data) = model(family, 2, n);
            let batch = Batch::new(data.x(), data.y(), 4000).unwrap();
            let chunks = n.div_ceil(GRAD_CHUNK_ROWS);
            assert_chunked_value_and_grad(&m, &batch, chunks, None, 4, format!("{family:?}"));
        }
    }

    /// The fully-coupled natural step on a minibatch of several chunks equals the step
    /// computed from one tape holding the whole batch (one layer: no noise, so both see
    /// the same objective): the chunks' adjoints of (μ_M, L) sum to the batch's.
    #[test]
    fn chunked_natural_step_equals_the_one_tape_step() {
        let n = 2 * GRAD_CHUNK_ROWS + 11;
        let (mut m, data) = model(Family::FullyCoupled, 1, n);
        let batch = Batch::new(data.x(), data.y(), n).unwrap();
        let cfg = NatGradConfig::default();
        // The reference: the whole batch on one tape.
        let mut r = m.clone();
        let mut tape = Tape::new();
        let leaves = r.params.record(&mut tape);
        let (out, _, q) = r
            .elbo_parts(&mut tape, &leaves, &batch, &mut seeded(1))
            .unwrap();
        let (v_ref, grads, g_ref) = checked_backward(&tape, out, &r.params, &leaves).unwrap();
        let (QParams::Dense { mean, factor }, FactorTape::Dense(f)) = (&r.q, &q.factor) else {
            panic!("fc has a dense q");
        };
        let (mean, factor) = (*mean, *factor);
        let step = natural_gradient_step(
            r.params.get(mean),
            tape.value(*f),
            grads.get(q.mean).unwrap(),
            grads.get(*f).unwrap(),
            &cfg,
        )
        .unwrap();
        drop(grads);
        r.params
            .set(factor, raw_lower_factor(step.factor.as_ref(), Q_SQRT_FLOOR))
            .unwrap();
        r.params.set(mean, step.mean).unwrap();

        let (v, g) = m
            .natural_step(&mut Tape::new(), &batch, &mut seeded(1), &cfg)
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
