//! # dgp-svi
//!
//! Doubly-stochastic variational inference for deep Gaussian processes (Salimbeni &
//! Deisenroth 2017, "Doubly Stochastic Variational Inference for Deep Gaussian Processes").
//!
//! A [`DeepGp`] has L sparse-GP layers (L = 1 is the sparse-GP baseline, "SGP"); each layer's
//! GPs share a kernel and M inducing inputs, and q(u) is a Gaussian per output with a full
//! Cholesky factor, whitened by default. Training maximises the bound of eq. (17) — the
//! minibatch expected log-likelihood, scaled by N/|B|, minus the KLs — where the hidden
//! layers are sampled by the reparameterisation of eq. (15) and the last layer is handled in
//! closed form. Prediction (eq. 18) is an equal-weight mixture of S Gaussians per test
//! point. Gaussian regression and Bernoulli-probit classification are supported. Algorithm
//! notes, defaults and their provenance: `shared/specs/dsvi.md`.
//!
//! This crate re-exports [`dgp_traits`], so depending on `dgp-svi` alone is enough:
//!
//! ```
//! use dgp_svi::prelude::*;
//!
//! # fn main() -> dgp_svi::dgp_traits::Result<()> {
//! let x = Mat::from_fn(60, 1, |i, _| i as f64 / 30.0 - 1.0);
//! let y = Mat::from_fn(60, 1, |i, _| (3.0 * x[(i, 0)]).sin());
//! let data = Dataset::new(x, y)?;
//! let config = SviConfig { layers: 2, num_inducing: 10, ..Default::default() };
//! let mut model = DeepGp::new(config, &data)?;
//! model.fit(&data, &FitConfig { steps: 300, ..Default::default() }, &mut Silent)?;
//! let pred = model.predict(data.x(), &PredictConfig::default())?;
//! assert!(rmse(&pred, data.y())? < 0.3);
//! # Ok(())
//! # }
//! ```
//!
//! # Natural gradients
//!
//! Setting [`SviConfig::natgrad`] trains the last layer's q(u) by natural-gradient steps
//! (Salimbeni, Eleftheriadis & Hensman 2018; the natural-gradient option of the reference's
//! HEAD notebook, `shared/specs/dsvi.md` §6) and everything else by Adam
//! ([`dgp_traits::train::fit_natgrad_adam`]). With a Gaussian likelihood the ELBO is
//! quadratic in q(u)'s expectation parameters, so γ = 1 on a full batch puts the last
//! layer's q(u) at its optimum for the current hyper-parameters and noise draws in every
//! step: Adam then only has to move the kernel, inducing inputs, noise and inner layers.
//! The paper's default (Adam on everything) stays the default.
//!
//! ```
//! use dgp_svi::prelude::*;
//! use dgp_svi::dgp_traits::optim::{NatGradConfig, NatGradScheme};
//!
//! let config = SviConfig {
//!     layers: 1,
//!     natgrad: Some(NatGradConfig { gamma: 1.0, scheme: NatGradScheme::Joint, ..Default::default() }),
//!     ..Default::default()
//! };
//! assert!(config.validate().is_ok());
//! ```
#![warn(missing_docs)]

mod config;
mod model;

pub use config::{LastMean, SviConfig};
pub use dgp_traits;
pub use model::{DeepGp, NOISE_FLOOR, Q_SQRT_FLOOR, QParams, SAMPLE_JITTER};

/// Everything needed to build, train and evaluate a model.
pub mod prelude {
    pub use crate::{DeepGp, LastMean, SviConfig};
    pub use dgp_traits::data::Dataset;
    pub use dgp_traits::metrics::{nll, rmse};
    pub use dgp_traits::model::{FitConfig, Model, Objective, PredictConfig, Silent};
    pub use faer::Mat;
}
