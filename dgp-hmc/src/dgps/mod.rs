//! # DGPS: the Deep Gaussian Process Sampling point estimate (Vafa 2016)
//!
//! Algorithm notes: Vafa 2016, §4.3 and §5.1.
//!
//! **Model.** An L-layer deep GP whose every unit d of layer l is its own FITC GP
//! ([`GpUnit`]) with pseudo inputs X̄_d⁽ˡ⁾ (M×D⁽ˡ⁻¹⁾), pseudo outputs ȳ_d⁽ˡ⁾ (M) and an RBF
//! kernel with the noise inside (eq. 5.1): `K_X̄X̄ + s_n² I + 10⁻⁶ I` (§4.3.8), `k(x, x)`
//! includes s_n², cross-covariances do not. Given inputs H the unit is the FITC diagonal
//! (eqs. 4.15–4.16)
//!
//! ```text
//! μ = K_HX̄ K_X̄X̄⁻¹ ȳ,    σ² = diag(K_HH − K_HX̄ K_X̄X̄⁻¹ K_X̄H),
//! ```
//!
//! computed by the core's `conditional` (ȳ as given, non-whitened inducing values).
//! Hidden layers are sampled, `H = μ + ε ⊙ σ` (eq. 4.14, Procedure 1); the last layer's
//! (μ, σ²) is the Gaussian for y (Procedure 2).
//!
//! **Objective** (Procedure 3, eqs. 4.23–4.25), maximised: with K sample paths of all
//! hidden layers over the whole training set, drawn from FIXED common random numbers,
//!
//! ```text
//! J = logsumexp_k [Σ_n log N(y_n | μ_kn, σ²_kn)] − log K + Σ_{l,d} log N(ȳ_d⁽ˡ⁾ | 0, K_X̄X̄)
//! ```
//!
//! a deterministic function of the parameters (the thesis' "BFGS with a fixed random
//! seed"), recorded on the shared tape for its gradient. The prior term is non-whitened
//! (it includes −½ log|K|), so this is MAP of the pseudo outputs under the GP prior. The
//! thesis writes "− log N" in line 4 of Procedure 3; eq. 4.23 makes it 1/K (a constant
//! either way).
//!
//! **Training** ([`dgp_traits::model::Model::fit`]): full-batch L-BFGS (the core's
//! `FullBatchLbfgs`, at most 1000 iterations) from the smart initialisation of §5.1.3
//! ([`init`]), best of `restarts` random restarts by training J (§5.1.4, Fig. 5.9; the
//! core's `best_of`).
//!
//! **Prediction** (§4.3.7): an equal-weight mixture over 100 fresh sample paths (one
//! `Predictive` component per path, independent per test point). The thesis averages log
//! probabilities over samples with full test covariances; the per-point mixture is what the
//! shared `Predictive` holds (Vafa 2016).
//!
//! **Ours versus the thesis.** Positivity by softplus (+10⁻⁶) rather than logs; the jitter
//! grows tenfold on a failed factorisation (the workspace rule) instead of failing; initial
//! s_f² = 1 and s_n² = 0.01 and layer 1's initial pseudo outputs (the thesis gives none;
//! see [`init`]); restart r uses initialisation stream r and common random numbers stream r.
//!
//! ## Measured
//!
//! Test NLL on the noisy step function (thesis §5.1.4 settings) and on boston, against
//! the thesis' Fig. 5.9: `RESULTS.md`, section "dgps: the noisy step function and boston".
//!
//! ## Example
//!
//! ```
//! use dgp_hmc::dgps::{DgpsModel, DgpsConfig};
//! use dgp_traits::model::{FitConfig, Model, PredictConfig, FitHooks};
//! use dgp_traits::testing::toy_regression;
//!
//! let data = toy_regression(40, 1, 1.0, 0);
//! let cfg = DgpsConfig { layers: 2, num_inducing: 5, samples: 3, restarts: 2, max_iters: 30, ..Default::default() };
//! let mut model = DgpsModel::new(cfg, &data).unwrap();
//! let fit = FitConfig { seed: 1, ..FitConfig::default() };
//! let report = model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
//! assert!(report.final_objective.is_finite());
//! let pred = model.predict(data.x(), &PredictConfig { samples: 20, seed: 2 }).unwrap();
//! assert_eq!((pred.n_points(), pred.n_components()), (40, 20));
//! ```

#![warn(missing_docs)]

mod backend;
mod config;
mod estimator;
mod fit;
pub mod init;
mod model;
#[cfg(test)]
mod tests;
mod unit;

pub use backend::{DGPS_BACKEND, DgpsBackend};
pub use config::DgpsConfig;
pub use model::DgpsModel;
pub use unit::{GpUnit, UnitInit, UnitPrior};
