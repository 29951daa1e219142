//! Configuration of a DGPS model ([`super::DgpsModel`]): the thesis' experiment settings
//! (Vafa 2016, §5.1.4) as defaults, validated once (`dgp_traits::backend::Checked`).
//!
//! Defaults that are ours rather than the thesis' are marked **(ours)**.

use dgp_core::{Error, Result};
use dgp_traits::fit::Training;
use dgp_traits::optim::LbfgsConfig;
use serde::{Deserialize, Serialize};

/// Architecture, objective, initialisation and optimiser settings of a [`super::DgpsModel`].
///
/// ```
/// use dgp_hmc::dgps::DgpsConfig;
/// let cfg = DgpsConfig { layers: 3, ..Default::default() };
/// assert_eq!((cfg.num_inducing, cfg.samples, cfg.restarts), (10, 10, 10));
/// assert!(cfg.validate().is_ok());
/// let bad = DgpsConfig { samples: 0, ..Default::default() };
/// assert!(bad.validate().unwrap_err().to_string().contains("samples"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DgpsConfig {
    /// Number of GP layers L ≥ 1 (L − 1 hidden layers; thesis §5.1.4: 1, 2, 3).
    pub layers: usize,
    /// Units per hidden layer; `None` gives 1 (thesis §5.1.4: "each hidden layer has one
    /// unit").
    pub hidden_width: Option<usize>,
    /// Pseudo data points per GP unit, M (thesis §5.1.4: 10).
    pub num_inducing: usize,
    /// Fixed sample paths K of the hidden layers in the objective (Procedure 3; thesis
    /// §5.1.4: 10, "more than 5 brings no gain").
    pub samples: usize,
    /// Random restarts; the one with the best training objective J is kept (thesis §5.1.4:
    /// best of 10 trials). Restart 0 trains the model's current parameters.
    pub restarts: usize,
    /// L-BFGS iterations per restart (thesis §5.1.4: at most 1000). `FitConfig::steps`
    /// caps it as well.
    pub max_iters: u64,
    /// One lengthscale per input dimension (ARD) instead of one shared.
    pub ard: bool,
    /// Initial signal variance s_f² of every unit (model units: standardised targets)
    /// **(ours)**; the thesis gives none.
    pub init_signal_variance: f64,
    /// Initial noise variance s_n² inside every unit's kernel (eq. 5.1) **(ours)**.
    pub init_noise_variance: f64,
    /// Lengthscale of the layers after the first, as a multiple of the variance of the
    /// training targets (§5.1.3: "about 10 times the variance of our data").
    pub hidden_lengthscale_factor: f64,
    /// Constant added to the diagonal of every K_X̄X̄ (§4.3.8: 10⁻⁶).
    pub jitter: f64,
    /// Lloyd iterations of the k-means initialisation of layer 1's pseudo inputs (§5.1.3).
    pub kmeans_iters: usize,
    /// Seed of the initialisation (k-means++, the hidden pseudo inputs ~ N(0, 1)).
    pub init_seed: u64,
    /// L-BFGS settings other than the iteration budget ([`DgpsConfig::max_iters`]).
    pub lbfgs: LbfgsConfig,
    /// The training schedule ([`Training`]) of [`dgp_traits::fitted::Estimator::fit`]:
    /// full batch (`batch_size` unused); `steps` caps the L-BFGS iterations of each
    /// restart together with [`DgpsConfig::max_iters`].
    pub training: Training,
    /// Fresh sample paths of the hidden layers in a prediction = components of the
    /// predictive mixture (thesis §4.3.7: 100).
    pub predict_samples: usize,
}

impl Default for DgpsConfig {
    fn default() -> Self {
        DgpsConfig {
            layers: 2,
            hidden_width: None,
            num_inducing: 10,
            samples: 10,
            restarts: 10,
            max_iters: 1000,
            ard: true,
            init_signal_variance: 1.0,
            init_noise_variance: 0.01,
            hidden_lengthscale_factor: 10.0,
            jitter: 1e-6,
            kmeans_iters: 25,
            init_seed: 0,
            lbfgs: LbfgsConfig::default(),
            training: Training {
                steps: 1_000,
                batch_size: 100_000,
                ..Training::default()
            },
            predict_samples: 100,
        }
    }
}

impl DgpsConfig {
    /// The thesis' setting (Vafa 2016, §5.1.4), which is also the default: M = 10 pseudo
    /// points per unit, K = 10 fixed sample paths, at most 1 000 L-BFGS iterations per
    /// restart, the best of 10 restarts, 100 predictive sample paths.
    pub fn paper() -> Self {
        DgpsConfig::default()
    }
}

impl DgpsConfig {
    /// Checks every range; the error ([`Error::Config`]) names the field.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<()> {
        self.training.validate()?;
        if self.predict_samples == 0 {
            return Err(Error::config("predict_samples", "must be at least 1"));
        }
        let bad = |field: &str, range: &str, got: String| {
            Err(Error::config(field, format!("must be {range}, got {got}")))
        };
        let at_least_1 = [
            ("layers", self.layers),
            ("num_inducing", self.num_inducing),
            ("samples", self.samples),
            ("restarts", self.restarts),
        ];
        for (field, v) in at_least_1 {
            if v == 0 {
                return bad(field, "at least 1", v.to_string());
            }
        }
        if self.hidden_width == Some(0) {
            return bad("hidden_width", "at least 1", "0".into());
        }
        dgp_traits::skeleton::check_sizes(
            "dgps",
            self.layers,
            self.hidden_width.as_slice(),
            self.num_inducing,
        )?;
        if self.max_iters == 0 {
            return bad("max_iters", "at least 1", "0".into());
        }
        let positive = [
            ("init_signal_variance", self.init_signal_variance),
            ("init_noise_variance", self.init_noise_variance),
            ("hidden_lengthscale_factor", self.hidden_lengthscale_factor),
        ];
        for (field, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return bad(field, "finite and > 0", v.to_string());
            }
        }
        if !(self.jitter.is_finite() && self.jitter >= 0.0) {
            return bad("jitter", "finite and ≥ 0", self.jitter.to_string());
        }
        self.lbfgs
            .validate()
            .map_err(|e| Error::config("lbfgs", format!("lbfgs: {e}")))
    }

    /// Units of every hidden layer (1 unless [`DgpsConfig::hidden_width`] says otherwise).
    pub fn hidden(&self) -> usize {
        self.hidden_width.unwrap_or(1)
    }

    /// Widths D⁽⁰⁾ (inputs), D⁽¹⁾ … D⁽ᴸ⁻¹⁾ (hidden), D⁽ᴸ⁾ (outputs).
    pub fn widths(&self, input_dim: usize, output_dim: usize) -> Vec<usize> {
        let mut w = vec![input_dim];
        w.extend(std::iter::repeat_n(
            self.hidden(),
            self.layers.saturating_sub(1),
        ));
        w.push(output_dim);
        w
    }
}
