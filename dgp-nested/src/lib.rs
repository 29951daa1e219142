//! # dgp-nested
//!
//! Nested variational compression for deep Gaussian processes (Hensman & Lawrence 2014,
//! "Nested Variational Compression in Deep Gaussian Processes").
//!
//! ## Fit, predict in original units, save, load
//!
//! ```
//! use dgp_nested::prelude::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("dgp-doc-{}-{}", "nested", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let csv = dir.join("data.csv");
//! # let rows: String = (0..60).map(|i| { let x = f64::from(i) / 10.0; format!("{x},{}\n", 3.0 * x.sin() + 10.0) }).collect();
//! # std::fs::write(&csv, format!("x,y\n{rows}"))?;
//! let data = load_csv(&csv, "y")?;
//! let mut config = NestedConfig { layers: 2, num_inducing: 10, ..Default::default() };
//! config.training.steps = 50; // a short fit for the example
//! let fitted = config.fit(&data)?;
//! let pred = fitted.predict(data.x())?; // one Gaussian per row, units of y
//! fitted.save(dir.join("model.json"))?;
//! let loaded = Fitted::<NestedModel>::load(dir.join("model.json"))?;
//! assert_eq!(loaded.predict(data.x())?, pred);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```
//!
//! A [`NestedModel`] has ℓ sparse-GP layers `h_i = f_i(h_{i−1}) + ε_i`, ε_i ~ N(0, σ_i²), with
//! h_0 = X and h_ℓ = y (so σ_ℓ² is the likelihood variance). Every layer has inducing
//! inputs Z_i, kernel hyperparameters and a non-whitened q(u_id) = N(m_id, S_id) per
//! output (S = LLᵀ). Instead of sampling, each layer's *distribution* is propagated:
//! q(h_i) = N(ψ1 K⁻¹ m, σ_i² + ψ1 K⁻¹ S K⁻¹ ψ1ᵀ) per point and output (eq. 16), where the
//! psi-statistics ψ0, Ψ1, Ψ2 ([`psi`]) are expectations of kernel quantities under the
//! previous layer's Gaussian. The objective is the bound of eq. (19) as corrected in
//! Hensman & Lawrence 2014, eq. 19 — written as a sum over data points (so a minibatch scaled
//! by N/|B| is unbiased):
//!
//! ```text
//! Σ_n Σ_d [log N(y_nd | μ_ℓnd, σ_ℓ²) − vf_ℓnd/(2σ_ℓ²)]                           (data fit)
//! − Σ_i D_i/(2σ_i²) Σ_n [ψ0_in − tr(K_i⁻¹ Φ_in)]                                (TCV)
//! − Σ_{i≥2} 1/(2σ_i²) Σ_n Σ_d tr(K_i⁻¹(Φ_in − ψ1_inᵀψ1_in)K_i⁻¹(m m ᵀ + S)_id)  (propagation)
//! − Σ_i Σ_d KL(q(u_id) ‖ N(0, K_i))
//! ```
//!
//! ## Ours versus the paper
//! * The bound: eq. (19) as printed omits the data-fit variance term `vf` and writes
//!   1/σ_1² instead of 1/(2σ_1²) for the first TCV; we use the corrected form (Hensman & Lawrence 2014, corrected), and
//!   the first layer's TCV/propagation are computed from plain kernel evaluations.
//! * Parameterisation: q(u) is whitened by default (`NestedConfig::whiten`, u = L v,
//!   q(v) = N(m̃, S̃)); the paper's q(u) = N(m, S) against N(0, K) is `whiten: false`. Same
//!   model and bound (tested), much better optimisation geometry.
//! * Initial values (the paper gives none): see [`NestedConfig`] and [`NestedModel::new`]
//!   (k-means Z, identity/PCA hidden means m = Z W, hidden S = 10⁻¹⁰K, last m = 0, S = K,
//!   σ² = 0.01, lengthscales and variance 1, M = 50; our defaults; the paper gives none).
//! * Optimiser: the paper used full-batch L-BFGS. [`Optimiser::Adam`] (minibatches, the
//!   shared loop) is the default; [`Optimiser::Lbfgs`] first sets the last layer's q to its
//!   closed-form optimum ([`NestedModel::set_optimal_last_q`]) and runs
//!   `NestedConfig::lbfgs_warmup` Adam steps, without which it can fall into the
//!   "everything is noise" optimum from these initial values.
//! * Kernels without closed-form psi-statistics (Matérn) use a Gauss–Hermite or Monte
//!   Carlo fallback ([`psi::quadrature`]).
//! * Mean functions: the paper's are zero. [`NestedConfig::linear_mean`] gives every
//!   hidden layer the fixed linear mean `m(h) = h W` of Salimbeni & Deisenroth 2017 (not in the nested paper) (W the
//!   identity / PCA projection, as dgp-svi's inner layers). Its propagated mean gains μW,
//!   and for Gaussian inputs the propagation penalty gains
//!   `W_dᵀ diag(v_n) W_d + 2 Σ_q W_qd Cov(h_nq, k(h_n, Z)) K⁻¹ m_d`
//!   ([`psi::input_cov_contract`]; tested against Gauss–Hermite quadrature of the whole
//!   penalty).
//! * Prediction: the paper gives none; [`PredictMode`] offers the propagated Gaussian, the
//!   moment-matched Gaussian (default; for one layer the SVGP predictive) and a sampled
//!   mixture.
//!
//! ## What to expect on real data
//!
//! With the paper's zero mean functions a hidden layer has to carry its inputs through
//! the GP itself, and every unit of input uncertainty it passes on is charged by the
//! propagation term of the bound and widens the prediction; the linear mean function
//! ([`NestedConfig::linear_mean`], not in the paper) takes
//! that job off the GP. The defaults are the paper's (zero mean, σ₁² trained from 0.01).
//! Measurements (the bound's terms on boston, the effect of the linear mean, the cost of
//! the psi-statistics against GPy's): `RESULTS.md`, sections "nested: DGP2 against SGP on boston" and
//! "nested: cost of the psi-statistics".
//!
//! ```
//! use dgp_nested::prelude::*;
//!
//! # fn main() -> dgp_nested::dgp_traits::Result<()> {
//! let x = Mat::from_fn(40, 1, |i, _| i as f64 / 10.0 - 2.0);
//! let y = Mat::from_fn(40, 1, |i, _| if x[(i, 0)] < 0.0 { -1.0 } else { 1.0 });
//! let data = Dataset::new(x, y)?;
//! let config = NestedConfig {
//!     layers: 2, num_inducing: 8, adam: AdamConfig::with_lr(0.05), ..Default::default()
//! };
//! let mut model = NestedModel::new(config, &data)?;
//! model.fit(&data, &FitConfig { steps: 100, ..Default::default() }, &mut FitHooks::none())?;
//! let pred = model.predict(data.x(), &PredictConfig::default())?;
//! assert!(rmse(&pred, data.y())? < 0.5);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod backend;
mod bound;
mod config;
mod estimator;
mod init;
pub mod layer;
mod model;
mod moments;
mod optimal_q;
pub mod psi;

pub use backend::{NESTED_BACKEND, NestedBackend};
pub use bound::BoundTerms;
pub use config::{NestedConfig, Optimiser, PredictMode};
pub use dgp_traits;
pub use layer::{NOISE_FLOOR, NestedLayer, Q_SQRT_FLOOR};
pub use model::NestedModel;

/// Everything needed to build, train and evaluate a model.
pub mod prelude {
    pub use crate::{NestedConfig, NestedModel, Optimiser, PredictMode};
    pub use dgp_traits::data::{Dataset, load_csv};
    pub use dgp_traits::fit::Training;
    pub use dgp_traits::fitted::{Estimator, Fitted, Loadable};
    pub use dgp_traits::guard::Guard;
    pub use dgp_traits::metrics::{nll, rmse};
    pub use dgp_traits::model::{FitConfig, FitHooks, Model, Objective, PredictConfig};
    pub use dgp_traits::optim::AdamConfig;
    pub use faer::Mat;
}
