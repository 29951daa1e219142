//! # dgp-dspp
//!
//! Deep sigma point processes (Jankowiak, Pleiss & Gardner 2020, "Deep Sigma Point
//! Processes") and PPGPR, their one-layer special case (eq. 16).
//!
//! A [`Dspp`] has the building blocks of a variational deep GP — L layers of sparse GPs
//! with whitened q(v) (mean-field by default, as in the paper; a full Cholesky factor is
//! selectable) — but is a *parametric* model: the hidden layers' Gaussian marginals are
//! replaced by learned quadrature rules (QR1, QR2, QR3 of §3.2, [`Rule`]) with learned
//! simplex weights ω, so the predictive is a finite mixture
//! `p(y | x) = Σ_k ω_k N(y | μ_k(x), σ²_k(x) + σ²_obs)` of K Gaussians (K = S for QR3,
//! S^W for QR1/QR2), sites lined up across layers. Training maximises eq. (21) per datum:
//! the minibatch mean of `log p(y_i | x_i)` minus `β_reg · Σ KL / N`; only the minibatch
//! is random. Gaussian regression (one GP per output, or the linear model of
//! coregionalisation of App. A.3 via [`DsppConfig::lmc_latent`]) and Bernoulli-probit
//! classification (a finite mixture of probit probabilities) are supported.
//! [`select_beta`] chooses β_reg and the hidden width on a validation part of the training
//! split. Algorithm notes: `shared/specs/dspp.md`.
//!
//! ## What to expect on real data
//! Measured with `dgp-bench run --backend dspp --layers 2` (QR3, S = 8, M = 128, β_reg and
//! the hidden width chosen on 10 % of the training rows; on kin8nm and power the width was
//! fixed at 5 with `--hidden 5`) on the published splits (10 of boston, concrete, energy
//! and wine-red, 5 of kin8nm and power), test NLL in original units, next to dgp-svi's
//! DGP2 on the same splits:
//!
//! | | boston | concrete | energy | wine-red | kin8nm | power |
//! |---|---|---|---|---|---|---|
//! | DSPP2 | 2.69 ± 0.10 | **3.038 ± 0.048** | 0.929 ± 0.086 | 0.976 ± 0.025 | −1.186 ± 0.017 | **2.618 ± 0.026** |
//! | svi DGP2 | 2.353 ± 0.074 | 3.115 ± 0.021 | 0.708 ± 0.020 | 0.964 ± 0.021 | −1.345 ± 0.006 | 2.805 ± 0.020 |
//!
//! So the DSPP beats the DGP clearly on concrete and power (where its RMSE is lower too),
//! ties on wine-red and is worse on boston, energy and kin8nm — not "on most sets" as the
//! paper found, but always within 0.35 nats and never over-confident in the way
//! GPyTorch's DSPP is on small data (noise collapse, NLL 13–26): held-out early stopping
//! and the validation choice of β_reg prevent it. Its 95 % intervals are a little narrow on
//! the large sets (coverage 0.92 on kin8nm, 0.90 on power). β_reg = 1, the top of
//! [`PAPER_BETAS`], was chosen on 26 of the 50 splits, so a grid reaching above 1 may help.
//!
//! ```
//! use dgp_dspp::prelude::*;
//!
//! # fn main() -> dgp_dspp::dgp_traits::Result<()> {
//! let x = Mat::from_fn(60, 1, |i, _| i as f64 / 30.0 - 1.0);
//! let y = Mat::from_fn(60, 1, |i, _| (3.0 * x[(i, 0)]).sin());
//! let data = Dataset::new(x, y)?;
//! let config = DsppConfig { num_inducing: 10, hidden_width: 2, sites: 4, ..Default::default() };
//! let mut model = Dspp::new(config, &data)?;
//! model.fit(&data, &FitConfig { steps: 300, learning_rate: 0.05, ..Default::default() }, &mut Silent)?;
//! let pred = model.predict(data.x(), &PredictConfig::default())?;
//! assert_eq!(pred.n_components(), 4);
//! assert!(rmse(&pred, data.y())? < 0.3);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod blocks;
mod config;
pub mod lmc;
mod model;
mod objective;
mod ppgpr;
mod propagation;
pub mod quadrature;
mod select;
pub mod train;

pub use blocks::{DsppLayer, GpBlock, QSqrtParams};
pub use config::{DsppConfig, LaterZInit, LrDrops, MAX_GRID_COMPONENTS, QCov, Rule, SiteInit};
pub use dgp_traits;
pub use model::{Dspp, GRAD_CHUNK_ROWS, Q_MEAN_INIT_SD, Q_SD_FLOOR, SITE_VAR_JITTER, Z_NOISE_SD};
pub use ppgpr::Ppgpr;
pub use select::{PAPER_BETAS, PAPER_WIDTHS, SelectionScore, VALIDATION_FRACTION, select_beta};
pub use train::{EarlyStopping, FitSummary};

/// Everything needed to build, train and evaluate a model.
pub mod prelude {
    pub use crate::{Dspp, DsppConfig, Ppgpr, QCov, Rule, SiteInit, select_beta};
    pub use dgp_traits::data::Dataset;
    pub use dgp_traits::metrics::{nll, rmse};
    pub use dgp_traits::model::{FitConfig, Model, Objective, PredictConfig, Silent};
    pub use faer::Mat;
}
