//! # dgp-dspp
//!
//! Deep sigma point processes (Jankowiak, Pleiss & Gardner 2020, "Deep Sigma Point
//! Processes") and PPGPR, their one-layer special case (eq. 16).
//!
//! ## Fit, predict in original units, save, load
//!
//! ```
//! use dgp_dspp::prelude::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("dgp-doc-{}-{}", "dspp", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let csv = dir.join("data.csv");
//! # let rows: String = (0..60).map(|i| { let x = f64::from(i) / 10.0; format!("{x},{}\n", 3.0 * x.sin() + 10.0) }).collect();
//! # std::fs::write(&csv, format!("x,y\n{rows}"))?;
//! let data = load_csv(&csv, "y")?;
//! // β_reg and the width fixed (the default chooses them on validation rows), a short fit
//! let mut config = DsppConfig { layers: 2, num_inducing: 10, sites: 4, tune_beta: false, tune_width: false, ..Default::default() };
//! config.training = Training { steps: 50, ..Training::default() };
//! let fitted = config.fit(&data)?;
//! let pred = fitted.predict(data.x())?; // S-component mixture per row, units of y
//! fitted.save(dir.join("model.json"))?;
//! let loaded = Fitted::<DsppModel>::load(dir.join("model.json"))?;
//! assert_eq!(loaded.predict(data.x())?, pred);
//! let ppgpr = PpgprConfig(config).fit(&data)?;
//! assert_eq!(ppgpr.model().backend(), "ppgpr"); // save / load as Fitted::<PpgprModel>
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```
//!
//! A [`DsppModel`] has the building blocks of a variational deep GP — L layers of sparse GPs
//! with whitened q(v) (mean-field by default, as in the paper; a full Cholesky factor is
//! selectable) — but is a *parametric* model: the hidden layers' Gaussian marginals are
//! replaced by learned quadrature rules (QR1, QR2, QR3 of §3.2, [`Rule`]) with learned
//! simplex weights ω, so the predictive is a finite mixture
//! `p(y | x) = Σ_k ω_k N(y | μ_k(x), σ²_k(x) + σ²_obs)` of K Gaussians (K = S for QR3,
//! S^W for QR1/QR2), sites lined up across layers. Training maximises eq. (21) per datum:
//! the minibatch mean of `log p(y_i | x_i)` minus `β_reg · Σ KL / N`; only the minibatch
//! is random. Gaussian regression (one GP per output, or the linear model of
//! coregionalisation of App. A.3 via [`DsppConfig::lmc_latent`]) and classification are
//! supported: Bernoulli (probit, logit) and multiclass (robust-max, softmax, K latent GPs
//! in the last layer), where each component's term of eq. (21) is the likelihood's
//! predictive `log ∫ p(y | f) N(f | μ_k, v_k) df` — closed form for the probit,
//! Gauss–Hermite for the logit and robust-max, fixed-draw Monte Carlo for the softmax
//! (see [`DsppConfig::likelihood`]) — and the prediction a finite mixture of class
//! probabilities.
//! [`select_beta`] chooses β_reg and the hidden width on a validation part of the training
//! split; [`select_model`] also lets the one-layer PPGPR compete with a deep model on the
//! same validation rows (the dspp backend's default). Algorithm notes: Jankowiak et al. 2020 and GPyTorch's DSPP implementation.
//!
//! ## Small data
//! Eq. (21) is a predictive likelihood, not a bound, so on small data it can be driven up
//! by shrinking variances at the training inputs. Three defaults guard against that:
//! held-out early stopping with the validation choice of β_reg and width
//! ([`PAPER_BETAS`], [`select_beta`]); inducing inputs left at their initial values on
//! fewer than 16·M training rows ([`DsppConfig::train_inducing_min_ratio`]); and, with
//! full batches, a refit on every training row for the steps the held-out rule kept
//! ([`DsppConfig::refit_all_rows`]). Their measured effect, and DSPP against dgp-svi's
//! DGP2 and PPGPR, are in the repository's `RESULTS.md` (sections `dspp-protocol`,
//! `dspp-small-data` and `dspp-small-data-ablations`).
//!
//! ```
//! use dgp_dspp::prelude::*;
//!
//! # fn main() -> dgp_dspp::dgp_traits::Result<()> {
//! let x = Mat::from_fn(60, 1, |i, _| i as f64 / 30.0 - 1.0);
//! let y = Mat::from_fn(60, 1, |i, _| (3.0 * x[(i, 0)]).sin());
//! let data = Dataset::new(x, y)?;
//! let config = DsppConfig { num_inducing: 10, hidden_width: 2, sites: 4, learning_rate: 0.05, ..Default::default() };
//! let mut model = DsppModel::new(config, &data)?;
//! model.fit(&data, &FitConfig { steps: 300, ..Default::default() }, &mut FitHooks::none())?;
//! let pred = model.predict(data.x(), &PredictConfig::default())?;
//! assert_eq!(pred.n_components(), 4);
//! assert!(rmse(&pred, data.y())? < 0.3);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod backend;
mod blocks;
mod concurrent;
mod config;
pub mod estimator;
pub mod lmc;
mod model;
mod model_impl;
mod objective;
mod ppgpr;
mod propagation;
pub mod quadrature;
mod refit;
mod select;
pub mod train;

pub use backend::{DSPP_BACKEND, DsppBackend, PPGPR_BACKEND, PpgprBackend};
pub use blocks::{DsppLayer, GpBlock, Q_MEAN_INIT_SD, Q_SD_FLOOR, QSqrtParams, Z_NOISE_SD};
pub use config::{
    DSPP_RISES, DsppConfig, LaterZInit, LrDrops, MAX_GRID_COMPONENTS, QCov, Rule, SiteInit,
};
pub use dgp_traits;
pub use model::{DsppModel, GRAD_CHUNK_ROWS, SITE_VAR_JITTER};
pub use ppgpr::PpgprModel;
pub use select::{
    PAPER_BETAS, PAPER_WIDTHS, Selection, SelectionScore, VALIDATION_FRACTION, select_beta,
    select_model,
};
pub use train::{EarlyStopping, FitSummary};

/// Everything needed to build, train and evaluate a model.
pub mod prelude {
    pub use crate::estimator::PpgprConfig;
    pub use crate::{DsppConfig, DsppModel, PpgprModel, QCov, Rule, SiteInit, select_beta};
    pub use dgp_traits::data::{Dataset, load_csv};
    pub use dgp_traits::fit::Training;
    pub use dgp_traits::fitted::{Estimator, Fitted, Loadable};
    pub use dgp_traits::guard::Guard;
    pub use dgp_traits::metrics::{nll, rmse};
    pub use dgp_traits::model::{FitConfig, FitHooks, Model, Objective, PredictConfig};
    pub use faer::Mat;
}
