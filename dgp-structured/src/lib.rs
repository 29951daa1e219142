//! # dgp-structured
//!
//! Structured deep GPs (Lindinger et al. 2020, "Beyond the Mean-Field: Structured Deep
//! Gaussian Processes Improve the Predictive Uncertainties"): one joint Gaussian
//! q(f_M) = N(μ_M, LLᵀ) over the inducing outputs of ALL layers (layout: the core's
//! [`dgp_traits::joint_q::JointQ`], Lindinger et al. 2020, §2–3), with three
//! families behind one [`StructuredConfig`]:
//!
//! * [`Family::FullyCoupled`] (FC, paper §3.1, the reference's `Fully_Coupled_Layers`): L dense lower triangular, stored
//!   as one n×n block (n = M·Σ_l T_l); its KL is the core's
//!   [`dgp_traits::kl::gauss_kl_block_diag`]; optional natural-gradient steps on
//!   (μ_M, S_M) jointly (Lindinger et al. 2020, §3.1) through the core's
//!   [`dgp_traits::train::NaturalAdamStepper`]; optionally started from a fit of its
//!   mean-field restriction ([`WarmStart`]).
//! * [`Family::Star`] (stripes-and-arrow, paper §3.2, Lindinger et al. 2020, §3.2): only the non-zero M×M
//!   blocks of L are stored (diagonal blocks, stripes, arrow). The blocks of S_M = LLᵀ are
//!   formed by the sums of Lindinger et al. 2020, §3.2 (`Σ_k L_ik L_jkᵀ` over stored blocks, stripe×stripe terms
//!   included), never an n×n matrix; its KL sums over the stored blocks.
//! * [`Family::MeanField`]: block-diagonal L — DSVI (non-whitened by default; the
//!   whitened variant reproduces `dgp-svi`'s ELBO, tested across crates in `dgp-bench`).
//!
//! ## Fit, predict in original units, save, load
//!
//! ```
//! use dgp_structured::prelude::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("dgp-doc-{}-{}", "structured", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let csv = dir.join("data.csv");
//! # let rows: String = (0..60).map(|i| { let x = f64::from(i) / 10.0; format!("{x},{}\n", 3.0 * x.sin() + 10.0) }).collect();
//! # std::fs::write(&csv, format!("x,y\n{rows}"))?;
//! let data = load_csv(&csv, "y")?;
//! for family in [Family::Star, Family::MeanField, Family::FullyCoupled] {
//!     let mut config = StructuredConfig { family, layers: 2, num_inducing: 8, ..Default::default() };
//!     config.training.steps = 30; // a short fit for the example
//!     let fitted = config.fit(&data)?;
//!     let pred = fitted.predict(data.x())?; // units of y
//!     fitted.save(dir.join("model.json"))?;
//!     let loaded = Fitted::<StructuredModel>::load(dir.join("model.json"))?;
//!     assert_eq!(loaded.predict(data.x())?, pred);
//! }
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```
//!
//! ## The objective
//!
//! The ELBO of eq. (8) of Lindinger et al. 2020 with the sequential conditionals of Theorem 1 (Lindinger et al. 2020):
//! for every point and sample, layer l's marginal is conditioned on that sample's draws of
//! the earlier layers, `mû^l = mũ^l + WᵀC⁻¹(f^{<l} − mũ^{<l})`, `Σ̂^l = S̃^{ll} − WᵀW`
//! (eqs. 10–11). The per-point small matrices (S̃, B, W, Σ̂ and the growing factor C) are
//! held entry by entry as 1×R rows on the shared tape (R = points × samples), so each
//! row's factorisation uses its own a_l's (pitfall 1) and the gradients come from the
//! tape's elementwise rules; structurally zero entries are skipped, which for STAR splits
//! the hidden layers into τ independent chains (Lindinger et al. 2020, §3.2). Because every hidden draw is
//! `f^l = mû^l + chol(Σ̂^l + 10⁻⁶I) ε`, the whitened residual C⁻¹(f^{<l} − mũ^{<l}) is
//! exactly the stacked ε (Lindinger et al. 2020, Theorem 1 with the reference's `update_cholesky`).
//! Inner kernel variances are frozen, inner White(1e-3) is trainable (the defaults of the reference code, Structured_DGP).
//!
//! ```
//! use dgp_structured::{Family, StructuredConfig, StructuredModel};
//! use dgp_traits::model::{FitConfig, Model, PredictConfig, FitHooks};
//! use dgp_traits::optim::AdamConfig;
//!
//! # fn main() -> dgp_traits::Result<()> {
//! let data = dgp_traits::testing::toy_regression(40, 2, 1.5, 0);
//! let config = StructuredConfig {
//!     family: Family::Star, layers: 3, tau: 2, num_inducing: 8,
//!     adam: AdamConfig::with_lr(0.01), ..Default::default()
//! };
//! let mut model = StructuredModel::new(config, &data)?;
//! let fit = FitConfig { steps: 30, ..FitConfig::default() };
//! model.fit(&data, &fit, &mut FitHooks::none())?;
//! let pred = model.predict(data.x(), &PredictConfig { samples: 10, seed: 1 })?;
//! assert_eq!((pred.n_points(), pred.n_components()), (40, 10));
//! # Ok(())
//! # }
//! ```
//!
//! ## Classification
//!
//! [`StructuredConfig::likelihood`] takes any of the core's likelihoods: the ELBO's data
//! term is `E log p(y | f^L)` of the last layer's moments given the hidden draws, by the
//! likelihood's own rule (closed form for the Gaussian, Gauss–Hermite for Bernoulli and
//! robust-max, Monte Carlo for softmax). A K-class likelihood gives the last layer K GPs.
//! Under star's arrow and fc's dense factor those K functions are correlated given the
//! hidden draws; their covariance splits exactly into the kernel residual (diagonal) and
//! the q part, the q part is drawn once per sample and the residual is integrated by the
//! likelihood, so the estimate stays unbiased and keeps the cross-covariances (mean field:
//! no coupling, nothing extra drawn). Predictions carry class probabilities, the mixture
//! over samples of each component's `∫ p(y | f) N(f | m, v) df`.
//!
//! ## Cost
//!
//! A step costs O(S·B·M²) per layer for the mean-field and STAR families (STAR's
//! block-sparse factor is applied through its M×M blocks, never as the dense matrix); FC
//! also forms the products of its dense factor's blocks, `S_ij = L_{i,0..=i} L_{j,0..=i}ᵀ`,
//! once per step (M³ each, no data factor). The non-whitened prior (the published default)
//! maps the factors to whitened coordinates once per step, so it costs one solve with the
//! data per layer, as the whitened one. Measured step times against svi DGP3, and where
//! the time goes: `RESULTS.md`, section "structured: step times against svi DGP3".
//!
//! ## Accuracy and extrapolation
//!
//! Measured tables live in the repository's `RESULTS.md` (regenerated by `dgp-bench
//! results` from `results/`), not here: section `structured-vs-svi` holds STAR
//! and FC against svi DGP3 on the published splits under the paper's settings
//! ([`StructuredConfig::paper`], the benchmark's Lindinger protocol). Give the
//! non-whitened families (the published default) the paper's 20 000-step cap: their ELBO
//! converges in more steps than svi's whitened one.
//!
//! The extrapolation study of the paper's §4.2 (the benchmark's extrapolation split and
//! per-point comparison, sections `extrapolation/energy` and `extrapolation/boston` of
//! `RESULTS.md`) compares STAR with `mf`, this crate's own mean-field family with star's
//! settings, the paper's baseline. The paper's Table 2 (the fraction of test points
//! where STAR's log density beats MF's) stands beside ours in that section.
//!
//! ## Deviations from the reference
//! * Diagonal blocks of L have a positive diagonal (softplus + 1e-10), as the svi
//!   backend's factors; GPflow's `LowerTriangular` leaves the sign free (same family of
//!   covariances).
//! * The per-point Cholesky pivots are floored at 1e-12 after the 1e-6 jitter (no NaN on a
//!   row whose Σ̂ lost definiteness to rounding).
//! * The reference's Adam staircase decay (×0.98 / 1000 steps) is applied only when
//!   [`StructuredConfig::adam`]'s schedule asks for it ([`StructuredConfig::paper`] does);
//!   the default is a constant rate.
#![warn(missing_docs)]

mod backend;
mod config;
mod elbo;
mod estimator;
pub mod fields;
mod fit;
pub mod forms;
mod model;
mod propagate;
pub mod q;
mod sampling;
mod sparse;
mod warm_start;

pub use backend::{FC_BACKEND, MF_BACKEND, STAR_BACKEND, StructuredBackend};
pub use config::{
    DEFAULT_CONVERGENCE, DEFAULT_INIT_NOISE_VARIANCE, DEFAULT_NATGRAD, DEFAULT_WARM_START, Family,
    StructuredConfig, WarmStart,
};
pub use dgp_traits;
pub use elbo::GRAD_CHUNK_ROWS;
pub use model::{NOISE_FLOOR, SAMPLE_JITTER, StructuredModel};

/// The types a user of this crate needs: the configuration, the model, and the shared
/// estimator API (fit, predict in original units, save, load).
pub mod prelude {
    pub use crate::{Family, StructuredConfig, StructuredModel};
    pub use dgp_traits::data::{Dataset, load_csv};
    pub use dgp_traits::fit::Training;
    pub use dgp_traits::fitted::{Estimator, Fitted, Loadable};
    pub use dgp_traits::guard::Guard;
    pub use dgp_traits::metrics::{nll, rmse};
    pub use dgp_traits::model::{FitConfig, FitHooks, Model, Objective, PredictConfig};
    pub use dgp_traits::optim::AdamConfig;
    pub use faer::Mat;
}
