//! Configuration of a nested-compression deep GP ([`crate::NestedModel`]).
//!
//! The paper gives no initial values; every default below
//! that is ours rather than the paper's is marked **(ours)**.

use crate::psi::ExpectationRule;
use dgp_traits::error::{Error, Result};
use dgp_traits::kernels::KernelKind;
use dgp_traits::optim::{AdamConfig, LbfgsConfig};
use serde::{Deserialize, Serialize};

/// The optimiser [`dgp_traits::model::Model::fit`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimiser {
    /// Adam over minibatches (the core executor with `dgp_traits::train::AdamStepper`: `steps`,
    /// `batch_size` and `seed` of the `FitConfig`, Adam's settings [`NestedConfig::adam`]). The bound is a sum over
    /// points, so a minibatch scaled by N/|B| is an unbiased estimate of it (paper §1, §4.1:
    /// "the bound lends itself to stochastic optimisation").
    Adam,
    /// Full-batch L-BFGS (the paper's choice, §5.2–5.3) with at most `FitConfig::steps`
    /// iterations, started from the closed-form optimal last-layer q and
    /// [`NestedConfig::lbfgs_warmup`] full-batch Adam steps (both ours); `batch_size` is
    /// ignored, [`NestedConfig::adam`] only drives the warm-up.
    Lbfgs,
}

/// What [`dgp_traits::model::Model::predict`] returns per test point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictMode {
    /// One Gaussian: the last layer's propagated q(h_ℓ) of the bound (Hensman & Lawrence 2014, §4.2, eq. 16),
    /// mean `ψ1 K⁻¹ m`, variance `σ_ℓ² + ψ1 K⁻¹ S K⁻¹ ψ1ᵀ` (hidden layers propagated the
    /// same way).
    Propagated,
    /// One Gaussian with the exact variance of the last layer's output under the
    /// approximate posterior (Hensman & Lawrence 2014, §4.2, eq. 16, `Var_exact`): the propagated variance plus the two
    /// gaps the bound pays for, `ψ0 − tr(K⁻¹Φ_n)` and `tr(K⁻¹(Φ_n − ψ1ᵀψ1)K⁻¹(mmᵀ + S))`.
    /// For one layer this is exactly the SVGP predictive. **(ours)**, the default.
    MomentMatched,
    /// An equal-weight mixture of `PredictConfig::samples` Gaussians: each hidden layer is
    /// sampled from its sparse-GP conditional at the sampled inputs
    /// (`N(kK⁻¹m, k − kK⁻¹kᵀ + kK⁻¹SK⁻¹kᵀ + σ_i²)`), the last layer is that Gaussian plus
    /// σ_ℓ². **(ours)**
    Sampled,
}

/// Architecture, initialisation and optimiser of a [`crate::NestedModel`].
///
/// ```
/// let cfg = dgp_nested::NestedConfig { layers: 3, ..Default::default() };
/// assert_eq!(cfg.num_inducing, 50);
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NestedConfig {
    /// Number of GP layers ℓ ≥ 1 (ℓ = 1 is the SVGP of Hensman et al. 2013).
    pub layers: usize,
    /// Width of every hidden layer; `None` gives `min(30, D)` (as dgp-svi) **(ours)**.
    pub hidden_width: Option<usize>,
    /// Inducing points per layer, M (our defaults; the paper gives none: 50) **(ours)**.
    pub num_inducing: usize,
    /// Kernel of every layer (RBF by default). RBF and linear kernels have closed-form
    /// psi-statistics; Matérn kernels use [`NestedConfig::fallback`] beyond layer 1.
    pub kernel: KernelKind,
    /// One lengthscale (linear: weight) per input dimension.
    pub ard: bool,
    /// Initial lengthscales (linear kernel: weights) and kernel variance (our defaults; the paper gives none: 1, 1)
    /// **(ours)**.
    pub init_lengthscale: f64,
    /// Initial kernel variance α.
    pub init_variance: f64,
    /// Initial noise variance σ_i² of every hidden layer (our defaults; the paper gives none: 0.01) **(ours)**.
    pub hidden_noise: f64,
    /// Initial likelihood variance σ_ℓ² (our defaults; the paper gives none: 0.01) **(ours)**.
    pub likelihood_noise: f64,
    /// Hidden layers start with S = scale²·K_i (our defaults; the paper gives none: S = 10⁻¹⁰·K, scale 10⁻⁵) **(ours)**.
    pub hidden_q_scale: f64,
    /// Whitened q(u) (u = L v, prior N(0, I)) instead of the paper's q(u) = N(m, S) against
    /// N(0, K) **(ours)**. Same model and bound in better-conditioned coordinates: the
    /// whitened parameters do not couple through K, so gradient steps on them are not
    /// scaled by K's condition number. `false` is the paper's form.
    pub whiten: bool,
    /// Whether the hidden noise variances σ_i² are trained (the likelihood variance always
    /// is). `true` (the default) is the paper's: every noise variance is a
    /// hyper-parameter of the bound. `false` holds them at [`NestedConfig::hidden_noise`].
    pub train_hidden_noise: bool,
    /// Hidden layers get the fixed linear mean function `m(h) = h W` of
    /// the linear mean of Salimbeni & Deisenroth 2017 (not in the paper; W the identity when the widths match,
    /// the PCA projection of the layer's initial inputs otherwise, as in dgp-svi), and
    /// their q(u) starts at m = 0, so each hidden layer starts as exactly that linear map
    /// plus a GP residual. The last layer keeps a zero mean. `false` (the default) is the
    /// paper's zero mean everywhere.
    #[serde(default)]
    pub linear_mean: bool,
    /// The optimiser `fit` runs (default Adam; the paper used L-BFGS).
    pub optimiser: Optimiser,
    /// L-BFGS settings other than the iteration budget (`FitConfig::steps`).
    pub lbfgs: LbfgsConfig,
    /// Full-batch Adam steps ([`NestedConfig::adam`] at a constant rate) run before L-BFGS
    /// **(ours)**. From the spec's initial values (σ² = 0.01, lengthscale 1) the first
    /// L-BFGS line searches can jump straight into the "everything is noise" optimum
    /// (bound −227 on the step-function example, seeds 1 and 2); 200 Adam steps avoid it.
    pub lbfgs_warmup: usize,
    /// Expectation rule for kernels without closed-form psi-statistics.
    pub fallback: ExpectationRule,
    /// What `predict` returns.
    pub predict: PredictMode,
    /// Lloyd iterations of the k-means initialisation of the inducing inputs.
    pub kmeans_iters: usize,
    /// Seed of the initialisation (k-means++).
    pub init_seed: u64,
    /// Adam (Kingma & Ba 2015, Algorithm 1) of [`Optimiser::Adam`]: its learning rate,
    /// moment decays and learning-rate schedule; with [`Optimiser::Lbfgs`] the same
    /// settings at a constant rate drive the [`NestedConfig::lbfgs_warmup`] steps. Default
    /// [`AdamConfig::default`] (lr 0.01, constant), also when the field is absent from
    /// JSON.
    pub adam: AdamConfig,
}

impl Default for NestedConfig {
    fn default() -> Self {
        NestedConfig {
            layers: 2,
            hidden_width: None,
            num_inducing: 50,
            kernel: KernelKind::Rbf,
            ard: true,
            init_lengthscale: 1.0,
            init_variance: 1.0,
            hidden_noise: 0.01,
            likelihood_noise: 0.01,
            hidden_q_scale: 1e-5,
            whiten: true,
            train_hidden_noise: true,
            linear_mean: false,
            optimiser: Optimiser::Adam,
            lbfgs: LbfgsConfig::default(),
            lbfgs_warmup: 200,
            fallback: ExpectationRule::default(),
            predict: PredictMode::MomentMatched,
            kmeans_iters: 25,
            init_seed: 0,
            adam: AdamConfig::default(),
        }
    }
}

impl NestedConfig {
    /// Checks every range; called by [`crate::NestedModel::new`].
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, m: &str| Err(Error::config(field, m));
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
            "nested",
            self.layers,
            self.hidden_width.as_slice(),
            self.num_inducing,
        )?;
        let pos = |x: f64| x > 0.0 && x.is_finite();
        if !(pos(self.init_lengthscale) && pos(self.init_variance)) {
            return bad(
                "init_lengthscale",
                "init_lengthscale and init_variance must be finite and > 0",
            );
        }
        if !(pos(self.hidden_noise) && pos(self.likelihood_noise)) {
            return bad(
                "hidden_noise",
                "hidden_noise and likelihood_noise must be finite and > 0",
            );
        }
        if !(self.hidden_q_scale > 0.0 && self.hidden_q_scale <= 1.0) {
            return bad("hidden_q_scale", "must be in (0, 1]");
        }
        self.lbfgs.validate()?;
        self.adam.validate()?;
        if !crate::psi::has_closed_form(self.kernel) && self.layers > 1 {
            // Fails early for grids that would be too large.
            self.fallback.nodes(1)?;
        }
        Ok(())
    }

    /// Widths D_0 (inputs), D_1 … D_{ℓ−1} (hidden), D_ℓ (outputs).
    pub fn widths(&self, input_dim: usize, output_dim: usize) -> Vec<usize> {
        let hidden = self.hidden_width.unwrap_or(input_dim.min(30));
        let mut w = vec![input_dim];
        w.extend(std::iter::repeat_n(hidden, self.layers - 1));
        w.push(output_dim);
        w
    }
}
