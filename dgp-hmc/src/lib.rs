//! # dgp-hmc
//!
//! Two samplers of whole deep-GP functions:
//!
//! ## Fit, predict in original units, save, load
//!
//! ```
//! use dgp_hmc::prelude::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("dgp-doc-{}-{}", "hmc", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let csv = dir.join("data.csv");
//! # let rows: String = (0..60).map(|i| { let x = f64::from(i) / 10.0; format!("{x},{}\n", 3.0 * x.sin() + 10.0) }).collect();
//! # std::fs::write(&csv, format!("x,y\n{rows}"))?;
//! let data = load_csv(&csv, "y")?;
//! let mut sghmc = SghmcConfig { layers: 2, num_inducing: 10, ..Default::default() };
//! sghmc.training.steps = 300; // a short fit for the example
//! let fitted = sghmc.fit(&data)?;
//! fitted.save(dir.join("sghmc.json"))?; // one mixture component per kept sample
//! assert_eq!(Fitted::<SghmcModel>::load(dir.join("sghmc.json"))?.predict(data.x())?, fitted.predict(data.x())?);
//! let mut dgps = DgpsConfig { layers: 2, num_inducing: 5, restarts: 2, ..Default::default() };
//! dgps.training.steps = 30; // a short fit for the example
//! let fitted = dgps.fit(&data)?;
//! fitted.save(dir.join("dgps.json"))?;
//! assert_eq!(Fitted::<DgpsModel>::load(dir.join("dgps.json"))?.predict(data.x())?, fitted.predict(data.x())?);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```
//!
//! * [`SghmcModel`]: stochastic-gradient Hamiltonian Monte Carlo over the whitened inducing
//!   outputs of a deep GP (Havasi, Hernández-Lobato & Murillo-Fuentes 2018, "Inference in
//!   Deep Gaussian Processes using Stochastic Gradient Hamiltonian Monte Carlo"), with
//!   moving-window MCEM for the hyperparameters. Algorithm notes, defaults and their
//!   provenance: Havasi et al. 2018's reference code, cambridge-mlg/sghmc_dgp. See the
//!   [`sghmc`] module docs for the model, the sampler and what `fit` does.
//! * [`DgpsModel`]: the DGPS point estimate of Vafa (2016): per-unit pseudo data with the noise
//!   inside the kernel, MAP under fixed common random numbers by L-BFGS, and a predictive
//!   mixture over fresh sample paths (Vafa 2016, §4.3 and §5.1; the [`dgps`] module docs).
#![doc = include_str!("sghmc/README.md")]
#![warn(missing_docs)]

pub mod dgps;
pub mod sghmc;

pub use dgp_traits;
pub use dgps::{DGPS_BACKEND, DgpsConfig, DgpsModel};
pub use sghmc::{SGHMC_BACKEND, SghmcBackend, SghmcConfig, SghmcModel};

/// The types a user of this crate needs: both samplers' configurations and models, and
/// the shared estimator API (fit, predict in original units, save, load).
pub mod prelude {
    pub use crate::{DgpsConfig, DgpsModel, SghmcConfig, SghmcModel};
    pub use dgp_traits::data::{Dataset, load_csv};
    pub use dgp_traits::fit::Training;
    pub use dgp_traits::fitted::{Estimator, Fitted, Loadable};
    pub use dgp_traits::guard::Guard;
    pub use dgp_traits::metrics::{nll, rmse};
    pub use dgp_traits::model::{FitConfig, FitHooks, Model, Objective, PredictConfig};
    pub use faer::Mat;
}
