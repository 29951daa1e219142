//! # dgp-structured
//!
//! Structured deep GPs (Lindinger et al. 2020, "Beyond the Mean-Field: Structured Deep
//! Gaussian Processes Improve the Predictive Uncertainties"): one joint Gaussian
//! q(f_M) = N(μ_M, LLᵀ) over the inducing outputs of ALL layers (layout: the core's
//! [`dgp_traits::joint_q::JointQ`], spec `shared/specs/structured.md` §1), with three
//! families behind one [`StructuredConfig`]:
//!
//! * [`Family::FullyCoupled`] (FC, paper §3.1, spec §5): L dense lower triangular, stored
//!   as one n×n block (n = M·Σ_l T_l); its KL is the core's
//!   [`dgp_traits::kl::gauss_kl_block_diag`]; optional natural-gradient steps on
//!   (μ_M, S_M) jointly (spec §6) through the core's
//!   [`dgp_traits::train::NaturalAdamStepper`].
//! * [`Family::Star`] (stripes-and-arrow, paper §3.2, spec §4): only the non-zero M×M
//!   blocks of L are stored (diagonal blocks, stripes, arrow). The blocks of S_M = LLᵀ are
//!   formed by the sums of spec §4 (`Σ_k L_ik L_jkᵀ` over stored blocks, stripe×stripe terms
//!   included), never an n×n matrix; its KL sums over the stored blocks.
//! * [`Family::MeanField`]: block-diagonal L — DSVI (non-whitened by default; the
//!   whitened variant reproduces `dgp-svi`'s ELBO, tested across crates in `dgp-bench`).
//!
//! ## The objective
//!
//! The ELBO of eq. (8) (spec §2) with the sequential conditionals of Theorem 1 (spec §3):
//! for every point and sample, layer l's marginal is conditioned on that sample's draws of
//! the earlier layers, `mû^l = mũ^l + WᵀC⁻¹(f^{<l} − mũ^{<l})`, `Σ̂^l = S̃^{ll} − WᵀW`
//! (eqs. 10–11). The per-point small matrices (S̃, B, W, Σ̂ and the growing factor C) are
//! held entry by entry as 1×R rows on the shared tape (R = points × samples), so each
//! row's factorisation uses its own a_l's (pitfall 1) and the gradients come from the
//! tape's elementwise rules; structurally zero entries are skipped, which for STAR splits
//! the hidden layers into τ independent chains (spec §4). Because every hidden draw is
//! `f^l = mû^l + chol(Σ̂^l + 10⁻⁶I) ε`, the whitened residual C⁻¹(f^{<l} − mũ^{<l}) is
//! exactly the stacked ε (spec §3 step 7 with the reference's `update_cholesky`).
//! Inner kernel variances are frozen, inner White(1e-3) is trainable (spec §7).
//!
//! ```
//! use dgp_structured::{Family, StructuredConfig, StructuredDgp};
//! use dgp_traits::model::{FitConfig, Model, PredictConfig, Silent};
//!
//! # fn main() -> dgp_traits::Result<()> {
//! let data = dgp_traits::testing::toy_regression(40, 2, 1.5, 0);
//! let config = StructuredConfig {
//!     family: Family::Star, layers: 3, tau: 2, num_inducing: 8, ..Default::default()
//! };
//! let mut model = StructuredDgp::new(config, &data)?;
//! let fit = FitConfig { steps: 30, learning_rate: 0.01, ..FitConfig::default() };
//! model.fit(&data, &fit, &mut Silent)?;
//! let pred = model.predict(data.x(), &PredictConfig { samples: 10, seed: 1 })?;
//! assert_eq!((pred.n_points(), pred.n_components()), (40, 10));
//! # Ok(())
//! # }
//! ```
//!
//! ## Deviations from the reference
//! * Diagonal blocks of L have a positive diagonal (softplus + 1e-10), as the svi
//!   backend's factors; GPflow's `LowerTriangular` leaves the sign free (same family of
//!   covariances).
//! * The per-point Cholesky pivots are floored at 1e-12 after the 1e-6 jitter (no NaN on a
//!   row whose Σ̂ lost definiteness to rounding).
//! * The reference's Adam staircase decay (×0.98 / 1000 steps) is not applied: the core's
//!   executor runs Adam at `FitConfig::learning_rate`.
#![warn(missing_docs)]

mod backend;
mod config;
pub mod fields;
mod fit;
mod model;
pub mod q;

pub use backend::{FC_BACKEND, STAR_BACKEND, StructuredBackend};
pub use config::{Family, StructuredConfig};
pub use dgp_traits;
pub use model::{NOISE_FLOOR, SAMPLE_JITTER, StructuredDgp};
