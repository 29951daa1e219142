//! Configuration of a structured deep GP with the defaults of the reference code
//! (Lindinger et al. 2020, §4, and their reference code, Structured_DGP).

use dgp_core::{Error, Result};
use dgp_traits::backend::Validate;
use dgp_traits::fit::{Convergence, HeldOutRule, LrSchedule, Training};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::optim::{AdamConfig, NatGradConfig, NatGradScheme};
use serde::{Deserialize, Serialize};

/// The variational family of the joint q(f_M) = N(μ_M, LLᵀ) (Lindinger et al. 2020, §3.1–3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Block-diagonal L (one block per GP): mean-field DSVI, non-whitened by default.
    MeanField,
    /// Stripes-and-arrow L (Lindinger et al. 2020, §3.2): diagonal blocks, stripes between the same
    /// GP of different hidden layers, an arrow from the output GP to every hidden GP.
    Star,
    /// Dense lower-triangular L over all layers (Lindinger et al. 2020, §3.1; the reference's `Fully_Coupled_Layers`).
    FullyCoupled,
}

/// Architecture and inference settings of a [`crate::StructuredModel`].
///
/// ```
/// use dgp_structured::{Family, StructuredConfig};
/// let cfg = StructuredConfig { family: Family::Star, ..Default::default() };
/// assert_eq!((cfg.layers, cfg.tau, cfg.num_inducing), (3, 5, 128));
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StructuredConfig {
    /// The variational family.
    pub family: Family,
    /// Number of GP layers L ≥ 1 (the last has T_L = 1 GP).
    pub layers: usize,
    /// Width τ of every hidden layer (the paper's τ; reference 5).
    pub tau: usize,
    /// Optional per-hidden-layer widths overriding `tau` (L − 1 entries). STAR needs them
    /// all equal (its stripes couple GP t of every hidden layer).
    #[serde(default)]
    pub hidden_widths: Option<Vec<usize>>,
    /// Inducing points M per layer (reference 128).
    pub num_inducing: usize,
    /// Whitened prior (K_l replaced by I, Lindinger et al. 2020, §2); `false` is the published default.
    pub whitened: bool,
    /// Monte Carlo samples S per point in the training ELBO (eq. 8; reference 5).
    pub train_samples: usize,
    /// STAR: the stripe blocks (need L ≥ 3 to exist).
    pub stripes: bool,
    /// STAR: the arrow blocks (need L ≥ 2 to exist).
    pub arrow: bool,
    /// Natural-gradient steps of size γ on (μ_M, S_M) jointly (Lindinger et al. 2020, §3.1); fully-coupled
    /// family only (STAR's map to a full Gaussian is not invertible, paper §3.2).
    #[serde(default)]
    pub natgrad: Option<NatGradConfig>,
    /// Initial variance of the trainable white-noise kernel of every hidden layer (1e-3).
    pub inner_white_noise: f64,
    /// Scale of the hidden layers' initial diagonal blocks relative to chol(K_l) (1e-5).
    pub inner_q_scale: f64,
    /// Likelihood (Gaussian with initial variance 0.01). A classification likelihood
    /// (Bernoulli probit/logit, robust-max, softmax) is trained through its expected
    /// log-likelihood of the sampled f^L; a multiclass one gives the last layer K GPs.
    pub likelihood: Likelihood,
    /// Lloyd iterations of the k-means++ initialisation of Z (30).
    pub kmeans_iters: usize,
    /// Seed of the initialisation (k-means++).
    pub init_seed: u64,
    /// Adam (Kingma & Ba 2015, Algorithm 1) of the fit: its learning rate, moment decays
    /// and learning-rate schedule (the reference decays the rate by 0.98 every 1000 steps,
    /// staircase), used for every trainable block (every block but (μ_M, S_M) when
    /// [`StructuredConfig::natgrad`] is set). [`StructuredConfig::fast`]: lr 0.02, constant;
    /// [`StructuredConfig::paper`]: lr 0.005 decayed as the reference; a configuration
    /// without the field: [`AdamConfig::default`] (lr 0.01, constant).
    #[serde(default)]
    pub adam: AdamConfig,
    /// Fully-coupled family only: before the first fit, train the mean-field restriction
    /// of this model (q's diagonal blocks, every other parameter shared) and start the
    /// fully-coupled fit from it ([`WarmStart`]); `None` (the default here): the
    /// reference's initialisation.
    #[serde(default)]
    pub warm_start: Option<WarmStart>,
    /// The training schedule ([`Training`]) of [`dgp_traits::fitted::Estimator::fit`]:
    /// step budget, minibatch size, seed, held-out early stopping, convergence stop.
    #[serde(default = "default_training")]
    pub training: Training,
    /// Monte Carlo samples of the hidden layers in a prediction (Theorem 1) = components of
    /// the equal-weight predictive mixture (reference: 100).
    #[serde(default = "default_predict_samples")]
    pub predict_samples: usize,
}

/// A mean-field fit that starts a fully-coupled one ([`StructuredConfig::warm_start`]).
///
/// The fully-coupled family contains the mean-field one (a block-diagonal L), so its
/// ELBO (Lindinger et al. 2020, eq. 8) at the mean-field optimum is that optimum's, and
/// the natural steps on the joint q start from there instead of from the reference's
/// nearly deterministic hidden layers (`inner_q_scale`), whose precision a natural step
/// of size γ reduces only by the factor 1 − γ a step (about 220 steps at γ = 0.1 before
/// the hidden means move at all). The mean-field phase runs on the same rows with the
/// same Adam settings, convergence stop (its minimum step count capped at `steps`) and
/// held-out rule as the fit it precedes, for at most `steps` steps; it runs once per model (a model that has had it, a loaded one
/// included, does not repeat it, nor does a run resumed from a saved state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmStart {
    /// Most steps of the mean-field phase (≥ 1).
    pub steps: usize,
}

/// The convergence stop of the defaults ([`StructuredConfig::star`], `mf`, `fc`): the run
/// ends when the mean ELBO over windows of 100 steps has gained less than 1e-3 nats per
/// training row (1e-5 per row and step) three windows in a row, i.e. after 400 steps at
/// the earliest; no minimum of its own, so it fits any step cap.
pub const DEFAULT_CONVERGENCE: Convergence = Convergence::NO_MINIMUM;

/// Initial noise variance σ² of the defaults' Gaussian likelihood (standardised
/// targets): 0.1, against the reference's 0.01 ([`StructuredConfig::paper`]). At
/// σ² = 0.01 eq. (8)'s data term weighs every squared residual by 1/σ² = 100, so the
/// first steps fit the training targets closely and σ² then follows the slowly shrinking
/// fit, up or down; started nearer the middle of the noise levels of standardised data,
/// that phase is short (measurements: `RESULTS.md`, section `time-to-model`).
pub const DEFAULT_INIT_NOISE_VARIANCE: f64 = 0.1;

/// The mean-field warm start of the fully-coupled default ([`StructuredConfig::fc`]):
/// at most 1 500 Adam steps of the mean-field restriction (`mf`'s own step budget),
/// ended earlier by the run's convergence stop, before the natural steps on the joint q.
/// Without it the natural steps spend their first ≈ 220 steps (γ = 0.1) undoing the
/// reference's nearly deterministic start of the hidden layers (`RESULTS.md`, section
/// `time-to-model`).
pub const DEFAULT_WARM_START: WarmStart = WarmStart { steps: 1_500 };

/// The natural steps on (μ_M, S_M) of the fully-coupled default
/// ([`StructuredConfig::fc`]): γ = 0.03 (the reference's 0.1 in
/// [`StructuredConfig::paper`]), halved up to 10 times on a step whose new S is not
/// positive definite. From the mean-field optimum of the warm start, γ = 0.1 let the
/// minibatch estimate of the target precision throw q off (energy split 0 at L = 3: the
/// ELBO fell from ≈ +700 to −20 800 nats within 75 steps, test NLL 0.55 → 1.96), where
/// γ = 0.03 improved steadily (test NLL 0.50 after 200 steps, against the mean-field
/// start's 0.67) and γ = 0.01 more slowly.
pub const DEFAULT_NATGRAD: NatGradConfig = NatGradConfig {
    gamma: 0.03,
    max_halvings: 10,
    scheme: NatGradScheme::Alternate,
};

/// The reference's schedule (Lindinger et al. 2020, §4, and their reference code,
/// Structured_DGP): at most 20 000 steps on minibatches of 512, seed 0, their held-out
/// early stopping ([`HeldOutRule::lindinger`]). Also what a configuration without a
/// `training` field reads as.
fn default_training() -> Training {
    Training {
        steps: 20_000,
        epochs: None,
        batch_size: 512,
        seed: 0,
        early_stopping: Some(HeldOutRule::lindinger()),
        convergence: None,
    }
}

/// 100 predictive samples (the reference's test-time samples).
fn default_predict_samples() -> usize {
    100
}

impl Default for StructuredConfig {
    /// [`StructuredConfig::star`].
    fn default() -> Self {
        StructuredConfig::star()
    }
}

impl StructuredConfig {
    /// The paper's setting of `family` (Lindinger et al. 2020, §4, and their reference
    /// code, Structured_DGP): L = 3, τ = 5, M = 128, S = 5 training and 100 test samples,
    /// the non-whitened parametrisation with the noise variance started at 0.01, Adam at
    /// lr 0.005 decayed ×0.98 every 1 000 steps (staircase) for at most 20 000 steps on
    /// minibatches of 512 with their held-out early stopping; the fully-coupled family
    /// with natural steps of γ = 0.1 from the reference's start.
    pub fn paper(family: Family) -> Self {
        StructuredConfig {
            family,
            layers: 3,
            tau: 5,
            hidden_widths: None,
            num_inducing: 128,
            whitened: false,
            train_samples: 5,
            stripes: true,
            arrow: true,
            natgrad: (family == Family::FullyCoupled).then(NatGradConfig::default),
            inner_white_noise: 1e-3,
            inner_q_scale: 1e-5,
            likelihood: Likelihood::gaussian(0.01),
            kmeans_iters: 30,
            init_seed: 0,
            adam: AdamConfig {
                schedule: LrSchedule::Exponential {
                    gamma: 0.98,
                    every: 1000,
                    staircase: true,
                },
                ..AdamConfig::with_lr(0.005)
            },
            warm_start: None,
            training: default_training(),
            predict_samples: default_predict_samples(),
        }
    }

    /// The default of `family` for a good model fast (what the benchmark trains for star,
    /// mf and fc unless asked otherwise): the paper's architecture and sample counts
    /// ([`StructuredConfig::paper`]) in whitened coordinates (q over u = L_K⁻¹ f_M with
    /// the prior N(0, I): the same ELBO, eq. 8, in coordinates where Adam's
    /// per-coordinate steps do not fight the prior's correlations), the noise variance
    /// started at [`DEFAULT_INIT_NOISE_VARIANCE`], Adam at a constant lr 0.02 for at most
    /// 1 500 steps on minibatches of 512, ended earlier by the convergence stop
    /// [`DEFAULT_CONVERGENCE`], no held-out rule. The fully-coupled family trains at most
    /// 200 natural-gradient steps ([`DEFAULT_NATGRAD`], γ = 0.03; one costs about ten of
    /// the mean-field family's steps) after its mean-field warm start
    /// ([`DEFAULT_WARM_START`]). Traces and tables: `results/time-to-model/README.md`,
    /// `results/fc-warm-start/`.
    pub fn fast(family: Family) -> Self {
        let fc = family == Family::FullyCoupled;
        StructuredConfig {
            whitened: true,
            likelihood: Likelihood::gaussian(DEFAULT_INIT_NOISE_VARIANCE),
            natgrad: fc.then_some(DEFAULT_NATGRAD),
            warm_start: fc.then_some(DEFAULT_WARM_START),
            adam: AdamConfig::with_lr(0.02),
            training: Training {
                steps: if fc { 200 } else { 1_500 },
                epochs: None,
                batch_size: 512,
                seed: 0,
                early_stopping: None,
                convergence: Some(DEFAULT_CONVERGENCE),
            },
            ..StructuredConfig::paper(family)
        }
    }

    /// The stripes-and-arrow default ([`StructuredConfig::fast`] of [`Family::Star`]).
    pub fn star() -> Self {
        StructuredConfig::fast(Family::Star)
    }

    /// The mean-field default ([`StructuredConfig::fast`] of [`Family::MeanField`]).
    pub fn mf() -> Self {
        StructuredConfig::fast(Family::MeanField)
    }

    /// The fully-coupled default ([`StructuredConfig::fast`] of [`Family::FullyCoupled`]).
    pub fn fc() -> Self {
        StructuredConfig::fast(Family::FullyCoupled)
    }
}

fn err(field: &str, what: &str) -> Error {
    Error::config(field, what)
}

impl StructuredConfig {
    /// Checks every field once (errors name the field); called by
    /// [`crate::StructuredModel::new`] and, through [`Validate`], by the backend registry.
    pub fn validate(&self) -> Result<()> {
        if self.layers == 0 {
            return Err(err("layers", "must be at least 1"));
        }
        if self.num_inducing == 0 {
            return Err(err("num_inducing", "must be at least 1"));
        }
        if self.tau == 0 {
            return Err(err("tau", "must be at least 1"));
        }
        dgp_traits::skeleton::check_sizes(
            "structured",
            self.layers,
            &[self.tau],
            self.num_inducing,
        )?;
        if let Some(w) = &self.hidden_widths {
            dgp_traits::skeleton::check_sizes("structured", self.layers, w, self.num_inducing)?;
        }
        if self.train_samples == 0 {
            return Err(err("train_samples", "must be at least 1"));
        }
        if let Some(w) = &self.hidden_widths {
            if w.len() != self.layers - 1 {
                return Err(err(
                    "hidden_widths",
                    &format!("must have layers − 1 = {} entries", self.layers - 1),
                ));
            }
            if w.contains(&0) {
                return Err(err("hidden_widths", "entries must be at least 1"));
            }
            if self.family == Family::Star && w.windows(2).any(|p| p[0] != p[1]) {
                return Err(err(
                    "hidden_widths",
                    "(tau per inner layer) must be equal across inner layers for STAR",
                ));
            }
        }
        if self.family == Family::Star && self.layers == 1 && (self.stripes || self.arrow) {
            return Err(err(
                "stripes/arrow",
                "need at least 2 layers (L = 1 with stripes or arrow); use family mean_field",
            ));
        }
        if !(self.inner_white_noise.is_finite() && self.inner_white_noise > 0.0) {
            return Err(err("inner_white_noise", "must be finite and > 0"));
        }
        if !(self.inner_q_scale.is_finite()
            && self.inner_q_scale > 0.0
            && self.inner_q_scale <= 1.0)
        {
            return Err(err("inner_q_scale", "must be finite and in (0, 1]"));
        }
        if let Some(n) = &self.natgrad {
            if self.family != Family::FullyCoupled {
                return Err(err(
                    "natgrad",
                    "is only available for the fully_coupled family (paper §3.2)",
                ));
            }
            if !(n.gamma.is_finite() && n.gamma > 0.0) {
                return Err(err("natgrad.gamma", "must be finite and > 0"));
            }
            n.validate()
                .map_err(|e| err("natgrad.gamma", &format!("invalid: {e}")))?;
        }
        if let Some(w) = &self.warm_start {
            if self.family != Family::FullyCoupled {
                return Err(err(
                    "warm_start",
                    "is only available for the fully_coupled family (it trains the mean-field restriction first)",
                ));
            }
            if w.steps == 0 {
                return Err(err("warm_start.steps", "must be at least 1"));
            }
        }
        if let Some(c) = &self.training.convergence {
            // `min_steps` against the step cap is checked when a fit starts.
            c.validate(usize::MAX)?;
        }
        self.training.validate()?;
        if self.predict_samples == 0 {
            return Err(err("predict_samples", "must be at least 1"));
        }
        self.adam.validate()?;
        self.likelihood.validate()
    }

    /// Widths D⁰ (inputs), T_1 … T_{L−1} (hidden), T_L: one latent function for the
    /// Gaussian and Bernoulli likelihoods, K for a K-class multiclass likelihood
    /// ([`Likelihood::latent_dim`] of one target column).
    pub fn widths(&self, input_dim: usize) -> Vec<usize> {
        let mut w = vec![input_dim];
        match &self.hidden_widths {
            Some(h) => w.extend(h.iter().copied()),
            None => w.extend(std::iter::repeat_n(self.tau, self.layers - 1)),
        }
        w.push(self.likelihood.latent_dim(1));
        w
    }
}

impl Validate for StructuredConfig {
    fn validate(&self) -> Result<()> {
        StructuredConfig::validate(self)
    }
}
