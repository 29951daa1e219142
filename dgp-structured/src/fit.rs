//! [`Objective`], [`Model`] and [`NaturalGradientModel`] for [`StructuredDgp`]: training on
//! the core's executor, the predictive mixture, checkpoints, and the exact "sample f_M"
//! propagation used to test Theorem 1.

use crate::config::Family;
use crate::model::StructuredDgp;
use crate::q::{FactorTape, Q_SQRT_FLOOR, QParams};
use dgp_traits::data::RowSource;
use dgp_traits::error::{Error, Result};
use dgp_traits::model::{
    Batch, FitConfig, FitObserver, FitReport, Model, Objective, PredictConfig, checked_backward,
};
use dgp_traits::optim::{NatGradConfig, natural_gradient_step};
use dgp_traits::params::{ParamId, ParamStore};
use dgp_traits::predictive::Predictive;
use dgp_traits::rng::Rng;
use dgp_traits::skeleton::{
    ChunkMoments, check_inputs, checkpoint, describe_stack, finish_predictive, predict_chunked,
};
use dgp_traits::tape::{Tape, Var};
use dgp_traits::train::{AdamStepper, NaturalAdamStepper, NaturalGradientModel, fit_with_held_out};
use dgp_traits::transforms::raw_lower_factor;
use faer::{Mat, MatRef};

/// Largest number of rows (points × samples) pushed through the layers at once when
/// predicting.
const PREDICT_ROWS: usize = 8_192;

impl Objective for StructuredDgp {
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
}

impl StructuredDgp {
    /// Latent mixture moments at `x` of a model with one latent function (Gaussian or
    /// Bernoulli likelihood): per point, `samples` components (means, variances; n×S
    /// each; one component for L = 1) from Theorem 1 with the noise of chunk k drawn from
    /// stream k of `seed`.
    ///
    /// # Errors
    /// Bad inputs; Kuu not positive definite; [`Error::Unsupported`] for a multiclass
    /// model (use [`StructuredDgp::latent_mixtures`]).
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
        checkpoint::from_json_checked(
            s,
            |m: &StructuredDgp| {
                m.config.validate()?;
                let widths = m.config.widths(m.input_dim);
                if m.layers.len() != m.config.layers
                    || m.layout.size() != widths[1..].iter().sum::<usize>() * m.config.num_inducing
                    || m.layers
                        .iter()
                        .any(|l| l.num_inducing != m.config.num_inducing)
                {
                    return Err(Error::config(
                        "checkpoint",
                        "layers and q do not match the configuration",
                    ));
                }
                Ok(())
            },
            |m| {
                let n = m.config.num_inducing.saturating_mul(2);
                StructuredDgp::new(
                    m.config.clone(),
                    &checkpoint::synthetic_data_for(&m.config.likelihood, m.input_dim, 1, n)?,
                )
            },
            &[],
        )
    }
}

impl NaturalGradientModel for StructuredDgp {
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
        tape.clear();
        let leaves = self.params.record(tape);
        let (out, _, q) = self.elbo_parts(tape, &leaves, batch, rng)?;
        let (value, grads, flat_grad) = checked_backward(tape, out, &self.params, &leaves)?;
        let (
            QParams::Dense {
                mean: mean_id,
                factor: factor_id,
            },
            FactorTape::Dense(factor),
        ) = (&self.q, &q.factor)
        else {
            return Err(Error::config(
                "natgrad",
                "natural gradients need the fully_coupled family",
            ));
        };
        let mean = self.params.get(*mean_id).to_owned();
        let n = mean.nrows();
        let zeros = Mat::<f64>::zeros(n, n);
        let zero_mean = Mat::<f64>::zeros(n, 1);
        let g_mean = grads.get(q.mean).unwrap_or(zero_mean.as_ref());
        let g_factor = grads.get(*factor).unwrap_or(zeros.as_ref());
        let step =
            natural_gradient_step(mean.as_ref(), tape.value(*factor), g_mean, g_factor, cfg)?;
        let raw = raw_lower_factor(step.factor.as_ref(), Q_SQRT_FLOOR);
        let (mean_id, factor_id) = (*mean_id, *factor_id);
        drop(grads);
        self.params.set(factor_id, raw)?;
        self.params.set(mean_id, step.mean)?;
        Ok((value, flat_grad))
    }
}

impl Model for StructuredDgp {
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
        StructuredDgp::noise_variance(self)
    }

    /// Adam on every trainable block ([`AdamStepper`]); for the fully-coupled family with
    /// [`crate::StructuredConfig::natgrad`] set, natural steps on (μ_M, S_M) next to Adam
    /// on the rest ([`NaturalAdamStepper`]); both on the core's minibatch executor through
    /// [`fit_with_held_out`], which honours `cfg.early_stopping` (held-out rows split off,
    /// the rule's observer attached; Lindinger et al.'s rule is the reference's),
    /// `cfg.lr_schedule` (the reference's staircase decay) and `cfg.convergence` (or, when
    /// that is `None`, [`crate::StructuredConfig::convergence`]).
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        observer: &mut dyn FitObserver,
    ) -> Result<FitReport> {
        // `cfg.adam()` carries `cfg.lr_schedule`; with `cfg.early_stopping == None`
        // `fit_with_held_out` is the plain executor run.
        let merged;
        let cfg = match (&cfg.convergence, &self.config.convergence) {
            (None, Some(c)) => {
                merged = FitConfig {
                    convergence: Some(*c),
                    ..cfg.clone()
                };
                &merged
            }
            _ => cfg,
        };
        let adam = cfg.adam();
        match self.config.natgrad {
            Some(nat) if self.config.family == Family::FullyCoupled => fit_with_held_out(
                self,
                data,
                cfg,
                NaturalAdamStepper::new(adam, nat)?,
                observer,
            ),
            _ => fit_with_held_out(self, data, cfg, AdamStepper::new(adam), observer),
        }
    }

    /// The equal-weight mixture of `cfg.samples` Gaussians per test point, each
    /// `N(mû^L_s, Σ̂^L_s + σ²)` from one draw of the hidden layers by Theorem 1; chunked
    /// and parallel, chunk k with noise stream k of `cfg.seed` (thread-count independent).
    /// For a classification likelihood the predictive also carries the class
    /// probabilities `(1/S) Σ_s p(y | component s)`
    /// ([`dgp_traits::likelihoods::Likelihood::class_probs_mixture`]) of the components
    /// of [`StructuredDgp::latent_mixtures`].
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
        checkpoint::to_json(self)
    }

    /// `None` for a multiclass model (K latent functions); otherwise coherent function
    /// draws (the tests of the reference code, Structured_DGP's exact propagation given one f_M ~ q per
    /// function, one hidden-layer noise draw per function shared by every point; see
    /// [`StructuredDgp::function_draws`]).
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
            "{:?}{}{} S_train={}",
            c.family,
            if c.whitened { " whitened" } else { "" },
            if c.natgrad.is_some() { " natgrad" } else { "" },
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

impl StructuredDgp {
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
