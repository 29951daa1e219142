//! Configuration of a structured deep GP with the defaults of the reference code
//! (Lindinger et al. 2020, §4, and their reference code, Structured_DGP).

use dgp_traits::backend::Validate;
use dgp_traits::error::{Error, Result};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::Convergence;
use dgp_traits::optim::{AdamConfig, NatGradConfig};
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
    /// Stop on convergence of the training objective ([`Convergence`]), used when the
    /// fit's own `FitConfig::convergence` is `None`; `None` (the default here): train for
    /// the fit's `steps`. The `dgp-bench` backends set it.
    #[serde(default)]
    pub convergence: Option<Convergence>,
    /// Adam (Kingma & Ba 2015, Algorithm 1) of the fit: its learning rate, moment decays
    /// and learning-rate schedule (the reference decays the rate by 0.98 every 1000 steps,
    /// staircase), used for every trainable block (every block but (μ_M, S_M) when
    /// [`StructuredConfig::natgrad`] is set). Default [`AdamConfig::default`] (lr 0.01,
    /// constant), also when the field is absent from JSON.
    #[serde(default)]
    pub adam: AdamConfig,
    /// Fully-coupled family only: before the first fit, train the mean-field restriction
    /// of this model (q's diagonal blocks, every other parameter shared) and start the
    /// fully-coupled fit from it ([`WarmStart`]); `None` (the default here): the
    /// reference's initialisation.
    #[serde(default)]
    pub warm_start: Option<WarmStart>,
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

impl Default for StructuredConfig {
    fn default() -> Self {
        StructuredConfig {
            family: Family::Star,
            layers: 3,
            tau: 5,
            hidden_widths: None,
            num_inducing: 128,
            whitened: false,
            train_samples: 5,
            stripes: true,
            arrow: true,
            natgrad: None,
            inner_white_noise: 1e-3,
            inner_q_scale: 1e-5,
            likelihood: Likelihood::gaussian(0.01),
            kmeans_iters: 30,
            init_seed: 0,
            convergence: None,
            adam: AdamConfig::default(),
            warm_start: None,
        }
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
        if let Some(c) = &self.convergence {
            // `min_steps` against the step cap is checked when a fit starts.
            c.validate(usize::MAX)?;
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
