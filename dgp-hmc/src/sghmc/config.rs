//! Configuration of an SGHMC deep GP ([`crate::SghmcModel`]): the architecture and
//! initialisation of the reference code (cambridge-mlg/sghmc_dgp, `models.py`), the expected
//! data term ([`Potential`]) and a shorter, faster-mixing sampler schedule by default.

use crate::sghmc::sampler::SghmcSamplerConfig;
use dgp_core::{Error, Result};
use dgp_traits::fit::Training;
use dgp_traits::likelihoods::Likelihood;
use serde::{Deserialize, Serialize};

/// Architecture, initialisation and sampler settings of a [`crate::SghmcModel`].
///
/// ```
/// let cfg = dgp_hmc::SghmcConfig::default();
/// assert_eq!((cfg.layers, cfg.num_inducing, cfg.kuu_jitter), (2, 100, 1e-7));
/// assert_eq!((cfg.sampler.burn_in, cfg.sampler.thinning, cfg.sampler.step_size), (2_000, 80, 0.03));
/// assert!(cfg.validate().is_ok());
/// let bad = dgp_hmc::SghmcConfig { kuu_jitter: -1.0, ..Default::default() };
/// assert!(bad.validate().unwrap_err().to_string().contains("kuu_jitter"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SghmcConfig {
    /// Number of GP layers L ≥ 1 (reference: 2).
    pub layers: usize,
    /// Width of every hidden layer; `None` gives the input dimension D (the reference's
    /// `RBF(D)` inner layers).
    pub hidden_width: Option<usize>,
    /// Inducing points per layer, M (reference: 100).
    pub num_inducing: usize,
    /// Jitter added to every Kuu before its Cholesky factorisation (reference HEAD: 1e-7;
    /// 1e-10 before commit `8c6398c`). Grown ×10 up to 5 times if the factorisation fails.
    pub kuu_jitter: f64,
    /// Initial RBF kernel variance of every layer (reference `Stationary` default: 0.01).
    pub kernel_variance: f64,
    /// Initial Gaussian noise variance; `None` = the variance of the training targets
    /// (reference: `var(Y_train)`), in model units.
    pub noise_variance: Option<f64>,
    /// Lloyd iterations of each layer's k-means initialisation of Z (scipy's `kmeans2`
    /// default: 10).
    pub kmeans_iters: usize,
    /// Seed of the initialisation (k-means).
    pub init_seed: u64,
    /// Test points per prediction chunk (each chunk runs all kept samples).
    pub predict_chunk: usize,
    /// The sampler: burn-in, thinning, kept samples, MCEM window, step size, friction,
    /// hyper-step learning rate ([`SghmcSamplerConfig`]). Default: the reference's kept
    /// samples (100), window (100), friction and hyper learning rate, with
    /// [`DEFAULT_BURN_IN`] burn-in steps, step size [`DEFAULT_STEP_SIZE`] and thinning
    /// [`DEFAULT_THINNING`]; [`SghmcSamplerConfig::default`] is the reference's schedule
    /// (10 000 burn-in steps, ε = 0.01, thinning 50).
    pub sampler: SghmcSamplerConfig,
    /// The data term of the potential (default [`Potential::Expected`]; the reference's is
    /// [`Potential::Marginal`], which a model file without this field keeps).
    #[serde(default = "Potential::reference")]
    pub potential: Potential,
    /// The likelihood of the last layer (default Gaussian). Classification likelihoods
    /// (Bernoulli probit/logit, robust-max, softmax) give the last layer one latent GP
    /// per target column, or K for K classes, and need [`Potential::Expected`]. For the
    /// Gaussian the initial noise variance is [`SghmcConfig::noise_variance`] (the
    /// likelihood's own `init_variance` is not used).
    pub likelihood: Likelihood,
    /// The training schedule ([`Training`]) of [`dgp_traits::fitted::Estimator::fit`]:
    /// `steps` is the budget of the whole run, which the sampler's schedule is fitted
    /// into ([`SghmcSamplerConfig::schedule`]), on minibatches of `batch_size` rows.
    pub training: Training,
}

/// The data term of the sampled potential, per training point b, given one sample of the
/// last layer's conditional `N(f_b | μ_L,b, σ²_L,b)` (its inputs from one inner-layer sample).
///
/// ```
/// use dgp_hmc::sghmc::Potential;
/// assert_eq!(dgp_hmc::SghmcConfig::default().potential, Potential::Expected);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Potential {
    /// `log N(y_b | μ_L,b, σ²_L,b + s²)`, the marginal over f_b (cambridge-mlg/sghmc_dgp,
    /// `predict_density`). Gaussian likelihood only: a classification model with this
    /// term is refused ([`SghmcConfig::validate`]). For L = 1 the chain's target is then the FITC posterior of U,
    /// and the MCEM maximises the FITC evidence, whose diagonal term σ²_L,b acts as
    /// input-dependent noise: the M-step can drive s² to its floor (Bauer, van der Wilk
    /// & Rasmussen 2016, §3.2: FITC underestimates the noise variance).
    Marginal,
    /// `E_{N(f_b | μ_L,b, σ²_L,b)} log N(y_b | f_b, s²) = log N(y_b | μ_L,b, s²) − σ²_L,b / (2s²)`;
    /// for a classification likelihood `E_{N(f_b | μ_L,b, diag σ²_L,b)} log p(y_b | f_b)`
    /// as the core computes it (Bernoulli and robust-max by Gauss–Hermite, softmax by
    /// Monte Carlo with draws from the step's generator).
    /// With it, `p(U) exp(Σ_b E log p(y_b | f_b))` is the optimal q(U) of the collapsed
    /// variational bound (Titsias 2009, eq. 10: q*(u) ∝ p(u) exp(E_{p(f|u)} log p(y | f))),
    /// and the MCEM steps ascend that bound, whose trace term −Σ_b σ²_L,b / (2s²) keeps s²
    /// from collapsing (Bauer et al. 2016, §3.1). Like the inner-layer sample, this is a
    /// Jensen lower bound of the marginal term; exact when σ²_L,b = 0.
    Expected,
}

impl Potential {
    /// The reference's data term ([`Potential::Marginal`]).
    pub fn reference() -> Self {
        Potential::Marginal
    }
}

impl Default for SghmcConfig {
    /// The default: the reference's model (M = 100, kernel variance 0.01, 100 kept
    /// samples, the MCEM window and friction) with the expected data term, ε =
    /// [`DEFAULT_STEP_SIZE`], [`DEFAULT_BURN_IN`] burn-in steps and thinning
    /// [`DEFAULT_THINNING`], a budget of exactly that schedule (10 000 steps) on minibatches
    /// of min(N, 256) rows: under a minute a split on the small UCI sets with equal or
    /// better test NLL than the reference's schedule (`results/sghmc-defaults/`). The
    /// reference's own setting is [`SghmcConfig::paper`].
    fn default() -> Self {
        SghmcConfig {
            layers: 2,
            hidden_width: None,
            num_inducing: 100,
            kuu_jitter: 1e-7,
            kernel_variance: 0.01,
            noise_variance: None,
            kmeans_iters: 10,
            init_seed: 0,
            predict_chunk: 256,
            sampler: SghmcSamplerConfig {
                burn_in: DEFAULT_BURN_IN,
                step_size: DEFAULT_STEP_SIZE,
                thinning: DEFAULT_THINNING,
                ..SghmcSamplerConfig::default()
            },
            potential: Potential::Expected,
            likelihood: Likelihood::default(),
            training: Training {
                steps: 10_000,
                batch_size: 256,
                ..Training::default()
            },
        }
    }
}

impl SghmcConfig {
    /// The reference's setting (Havasi et al. 2018's public code, cambridge-mlg/sghmc_dgp):
    /// the marginal data term, [`SghmcSamplerConfig::default`]'s schedule (10 000 burn-in
    /// steps at ε = 0.01, then 100 samples 50 steps apart: 15 000 steps), full batches of
    /// up to 10 000 rows.
    pub fn paper() -> Self {
        let sampler = SghmcSamplerConfig::default();
        SghmcConfig {
            potential: Potential::Marginal,
            training: Training {
                steps: sampler.full_schedule().total(),
                batch_size: 10_000,
                ..Training::default()
            },
            sampler,
            ..SghmcConfig::default()
        }
    }
}

/// Default burn-in of [`SghmcConfig`] (the reference runs 10 000): adapting steps, each
/// with one MCEM hyper step.
pub const DEFAULT_BURN_IN: usize = 2_000;

/// Default step size ε of [`SghmcConfig`] (the reference: 0.01). With the expected data
/// term the posterior over U is broader than the marginal term's, and at ε = 0.01 the
/// kept samples' potential mixes too slowly for 100 samples 50 steps apart to be nearly
/// independent; measurements in `results/sghmc-defaults/`.
pub const DEFAULT_STEP_SIZE: f64 = 0.03;

/// Default thinning of [`SghmcConfig`]: frozen sampler steps per kept sample (the
/// reference: 50). The potential of the kept samples is the slowest-mixing quantity of
/// the chain; a larger step size would mix it faster but samples a hotter chain, so the
/// sampling phase is longer instead (100 · 80 steps), enough for the 100 kept samples to
/// be worth at least 30 independent draws of it on the small UCI sets (measurements in
/// `results/sghmc-defaults/`).
pub const DEFAULT_THINNING: usize = 80;

/// Largest hidden width [`SghmcConfig::validate`] accepts: each hidden unit carries an
/// M-vector of sampled inducing outputs with its momentum and preconditioner state, so an
/// edited model file or config with an absurd width is refused before anything is allocated.
pub const MAX_HIDDEN_WIDTH: usize = 10_000;

impl SghmcConfig {
    /// Checks every range; the error names the field.
    ///
    /// # Errors
    /// [`Error::Config`] for the first field out of range (the sampler's own errors
    /// included: zero kept samples, thinning 0, window larger than burn-in, step ≤ 0);
    /// `potential` for [`Potential::Marginal`] with a classification likelihood; the
    /// likelihood's own configuration errors.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, m: &str| Err(Error::config(field, m));
        self.training.validate()?;
        if self.layers == 0 {
            return bad("layers", "must be at least 1");
        }
        if self.num_inducing == 0 {
            return bad("num_inducing", "must be at least 1");
        }
        if self.hidden_width == Some(0) {
            return bad("hidden_width", "must be at least 1");
        }
        dgp_traits::skeleton::check_sizes(
            "sghmc",
            self.layers,
            self.hidden_width.as_slice(),
            self.num_inducing,
        )?;
        if let Some(w) = self.hidden_width
            && w > MAX_HIDDEN_WIDTH
        {
            return Err(Error::config(
                "hidden_width",
                format!("must be at most {MAX_HIDDEN_WIDTH}, got {w}"),
            ));
        }
        if !(self.kuu_jitter.is_finite() && self.kuu_jitter > 0.0) {
            return bad("kuu_jitter", "must be finite and > 0");
        }
        if !(self.kernel_variance.is_finite() && self.kernel_variance > 1e-6) {
            return bad("kernel_variance", "must be finite and > 1e-6");
        }
        if let Some(v) = self.noise_variance
            && !(v.is_finite() && v > 1e-6)
        {
            return bad("noise_variance", "must be finite and > 1e-6");
        }
        if self.predict_chunk == 0 {
            return bad("predict_chunk", "must be at least 1");
        }
        self.likelihood.validate()?;
        if self.potential == Potential::Marginal && !self.likelihood.has_noise_variance() {
            return bad(
                "potential",
                "the marginal data term is written for the Gaussian likelihood; a \
                 classification likelihood needs potential = expected",
            );
        }
        self.sampler.validate()
    }

    /// Widths D⁰ (inputs), D¹ … D^{L−1} (hidden), D^L (outputs).
    pub fn widths(&self, input_dim: usize, output_dim: usize) -> Vec<usize> {
        let hidden = self.hidden_width.unwrap_or(input_dim);
        let mut w = vec![input_dim];
        w.extend(std::iter::repeat_n(hidden, self.layers.saturating_sub(1)));
        w.push(output_dim);
        w
    }
}
