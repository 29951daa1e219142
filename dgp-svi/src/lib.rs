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
//! # What to expect on real data
//!
//! Measured with `dgp-bench run --backend svi --layers 1,2 --steps 5000` (M = 100, full
//! batch, Adam lr 0.01) on the published splits, test NLL in original units, mean ±
//! standard error over splits, next to Lindinger et al. (2020, Table 1; their own ten
//! random 90/10 splits, M = 128, up to 20 000 steps with early stopping):
//!
//! | | boston | concrete | energy | wine-red | kin8nm | power |
//! |---|---|---|---|---|---|---|
//! | SGP | 2.395 ± 0.048 | 3.135 ± 0.018 | 0.725 ± 0.022 | 0.948 ± 0.013 | −1.0529 ± 0.0061 ᵃ | 2.7964 ± 0.0094 ᵃ |
//! | DGP2 | 2.312 ± 0.042 | 3.083 ± 0.018 | 0.716 ± 0.019 | 0.951 ± 0.013 | −1.3454 ± 0.0056 | 2.777 ± 0.014 ᵃ |
//! | Lindinger SGP | 2.58 | 3.09 | 0.71 | 0.88 | −1.05 | 2.78 |
//! | Lindinger DGP2 | 2.43 | 3.06 | 0.73 | 0.89 | −1.30 | 2.77 |
//!
//! All 20 splits of the four small sets; 5 of kin8nm; 20 (SGP) and 10 (DGP2) of power.
//! ᵃ With natural gradients (below; `--natgrad 1 --natgrad-scheme joint`): on these two
//! large sets 5000 Adam steps are not converged (power SGP split 0: NLL 2.862 after 5000
//! Adam steps, 2.829 after `dgp-bench run`'s default 10 000, 2.824 after 20 000, and 2.828
//! after 5000 natural-gradient steps at the same cost per step as Adam).
//! On the small sets natural gradients change the NLL by less than 0.01 (concrete and
//! wine-red SGP, splits 0–4). The two-layer model clearly beats the SGP on boston,
//! concrete, kin8nm and power (on power by 0.024 ± 0.003 nats, on all of the 10 splits
//! both were run on) and ties on energy and wine-red.
//!
//! # Natural gradients
//!
//! Setting [`SviConfig::natgrad`] trains the last layer's q(u) by natural-gradient steps
//! (Salimbeni, Eleftheriadis & Hensman 2018; the natural-gradient option of the reference's
//! HEAD notebook, `shared/specs/dsvi.md` §6) and everything else by Adam
//! ([`dgp_traits::train::NaturalAdamStepper`]). With a Gaussian likelihood the ELBO is
//! quadratic in q(u)'s expectation parameters, so γ = 1 on a full batch puts the last
//! layer's q(u) at its optimum for the current hyper-parameters and noise draws in every
//! step: Adam then only has to move the kernel, inducing inputs, noise and inner layers.
//! The paper's default (Adam on everything) stays the default. Use γ = 1 with full batches
//! (the [`NatGradScheme::Joint`](dgp_traits::optim::NatGradScheme::Joint) scheme costs the
//! same per step as Adam); with small minibatches a smaller γ (e.g. the demo's 0.1) is safer.
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
mod variational;

pub use config::{LastMean, SviConfig};
pub use dgp_traits;
pub use model::{DeepGp, NOISE_FLOOR, SAMPLE_JITTER};
pub use variational::{Q_SQRT_FLOOR, QParams};

/// Everything needed to build, train and evaluate a model.
pub mod prelude {
    pub use crate::{DeepGp, LastMean, SviConfig};
    pub use dgp_traits::data::Dataset;
    pub use dgp_traits::metrics::{nll, rmse};
    pub use dgp_traits::model::{FitConfig, Model, Objective, PredictConfig, Silent};
    pub use faer::Mat;
}
