//! Configuration of an SGHMC deep GP ([`crate::SghmcDgp`]), with the defaults of the
//! reference code (cambridge-mlg/sghmc_dgp, `models.py`).

use dgp_traits::error::{Error, Result};
use dgp_traits::train::SghmcConfig;
use serde::{Deserialize, Serialize};

/// Architecture, initialisation and sampler settings of a [`crate::SghmcDgp`].
///
/// ```
/// let cfg = dgp_hmc::SghmcDgpConfig::default();
/// assert_eq!((cfg.layers, cfg.num_inducing, cfg.kuu_jitter), (2, 100, 1e-7));
/// assert_eq!(cfg.sampler.burn_in, 10_000);
/// assert!(cfg.validate().is_ok());
/// let bad = dgp_hmc::SghmcDgpConfig { kuu_jitter: -1.0, ..Default::default() };
/// assert!(bad.validate().unwrap_err().to_string().contains("kuu_jitter"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SghmcDgpConfig {
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
    /// hyper-step learning rate ([`SghmcConfig`], cambridge-mlg/sghmc_dgp defaults).
    pub sampler: SghmcConfig,
}

impl Default for SghmcDgpConfig {
    fn default() -> Self {
        SghmcDgpConfig {
            layers: 2,
            hidden_width: None,
            num_inducing: 100,
            kuu_jitter: 1e-7,
            kernel_variance: 0.01,
            noise_variance: None,
            kmeans_iters: 10,
            init_seed: 0,
            predict_chunk: 256,
            sampler: SghmcConfig::default(),
        }
    }
}

/// Largest hidden width [`SghmcDgpConfig::validate`] accepts: each hidden unit carries an
/// M-vector of sampled inducing outputs with its momentum and preconditioner state, so an
/// edited checkpoint or config with an absurd width is refused before anything is allocated.
pub const MAX_HIDDEN_WIDTH: usize = 10_000;

impl SghmcDgpConfig {
    /// Checks every range; the error names the field.
    ///
    /// # Errors
    /// [`Error::Config`] for the first field out of range (the sampler's own errors
    /// included: zero kept samples, thinning 0, window larger than burn-in, step ≤ 0).
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
