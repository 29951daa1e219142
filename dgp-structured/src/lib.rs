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
//! ## Speed (dgp-bench, 2-core machine)
//! `dgp-bench time --data ../shared/data/uci/kin8nm --backend svi,mf,star,fc --layers 3
//! --inducing 128 --hidden 5 --batch 512 --samples 5 --predict-reps 1 --steps 60` (split 0,
//! τ = 5, one thread: `RAYON_NUM_THREADS=1`): each backend's own `fit` and stepper (Adam;
//! `fc` without natural gradients, as the paper's runtime comparison), interleaved in
//! rounds in one process; median ms per step and the median of the per-round ratios with
//! its interquartile range. Measured at 4e36492 with the machine otherwise idle (every
//! other job paused):
//!
//! | backend | ms / step | ratio to svi DGP3 | predict test split (100 components) |
//! |---|---:|---:|---:|
//! | svi DGP3 | 48.1 | 1 | 0.57 s |
//! | mf DGP3 | 52.5 | 1.10× [1.08–1.11] | 0.57 s |
//! | star DGP3 | 123.3 | 2.59× [2.54–2.63] | 1.12 s |
//! | fc DGP3 (Adam) | 379.5 | 7.89× [7.81–8.00] | 2.96 s |
//!
//! Earlier, on a machine loaded by training jobs (ratios only): fc with natural steps
//! `--set 'fc:natgrad={"gamma":0.1,"max_halvings":10,"scheme":"joint"}'` 9.3× and with the
//! alternating scheme (`--set fc:natgrad.gamma=0.1`, two evaluations per step) 19.4× the
//! svi step. With two threads (`RAYON_NUM_THREADS=2`) the ratios stay (svi 38.7 ms,
//! star 2.7×, fc 8.6×).
//!
//! Issue 14's bars (STAR ≤ 2×, FC ≤ 6× the svi step) are NOT met. STAR is 2.35× this
//! crate's own mean field, the paper's "STAR about 2× slower than MF" (§4.2), and FC is
//! 3.1× STAR, the paper's "FC three times slower than STAR (Adam)".
//!
//! The non-whitened prior (the published default) costs one solve with the data per
//! layer, as the whitened one: the mean-field and STAR factors are mapped to whitened
//! coordinates once per step ([`q::QTape::whiten`]: `μ_g ← L_K⁻¹μ_g`, `L_ik ← L_K⁻¹L_ik`,
//! an M³ cost per stored block with no data factor, and the KL's own solves), which took
//! mf from 1.27× to 1.10× and star from 2.72× to 2.60× the svi step (same command and
//! machine state, binaries e09d2c5 and ef52d4b). The dense FC factor keeps the second
//! solve (`K⁻¹k`), about 2 % of its step.
//!
//! History. Before the block-sparse route (binary of bf75aa4) STAR was 5–6× svi. FC took
//! the products of L's rows with the data, `W_g = L_{g,0..=g}ᵀ a_l` ((g+1)M×R each), and
//! their pairwise column dots: 21× svi in that form, 13.4× with the dots fused
//! (measured at the start of the change below: svi 65.4 ms, fc 855 ms, predict 9.2 s).
//! FC now takes STAR's S-block route (private module `sparse`): the blocks
//! `S_ij = L_{i,0..=i} L_{j,0..=i}ᵀ` once per step (M³ each, no data factor) and one
//! fused pass of forms per layer ([`forms::stacked_forms`]); 8.1×, then 7.5× with the
//! blocks as one op on views of L (no row and column slices copied onto the tape).
//! The natural step on FC's 1408-dimensional joint q costs 191 ms (criterion
//! `natgrad_step/M1408` of dgp-traits; 838 ms before it was rewritten in the factor's own
//! coordinates, same machine state).
//!
//! Where the time goes (`cargo run --release -p dgp-structured --example step_probe --
//! star|fc`, per-operation wall time of the tape's forward and backward rules, one
//! thread, ms per ELBO + gradient evaluation on the same loaded machine):
//!
//! | operation | star fwd + bwd | fc fwd + bwd |
//! |---|---:|---:|
//! | fused forms `colsum(U ⊙ S a)` (`stacked_forms`) | 24 + 45 | 60 + 86 |
//! | triangular solves (non-whitened `K⁻¹k`, KL) | 12 + 21 | 18 + 34 |
//! | plain products (S blocks, `S_ijᵀ a_1`, layer 1) | 8 + 17 | 34 + 71 |
//! | layer-1 cross terms (`tiled_col_dots`) | 3 + 6 | 8 + 14 |
//! | kernels | 4 + 3 | 3 + 3 |
//! | slices of the dense L (gone since: the S blocks are one op on views of L) | 1 + 1 | 16 + 14 |
//! | everything else (per-row conditionals, Cholesky factors, KL) | ≈ 30 | ≈ 70 |
//! | total | ≈ 175 | ≈ 440 |
//!
//! In multiply-adds (M²R = 128²·2560 ≈ 4.2·10⁷) the step is about 21 M²R for svi DGP3,
//! 35 for STAR (11 forms forward, 16 backward, 4 non-whitened solves and their adjoints)
//! and 126 for FC (21 forms on R columns, 30 products and 15 forms on the B points, 286 M³
//! of S blocks, each with a backward of about twice its forward): 1.7× and 6× svi before
//! any overhead, so the FC bar cannot be met by tuning this route, and STAR's gap to 2×
//! is in the ≈ 30 ms of small operations of the per-row conditionals and the solves' lower
//! throughput (that table predates the whitened coordinates, which removed two of STAR's
//! four solves). A sampling profile of STAR's step at 4e36492 (`perf record -e cpu-clock`,
//! one thread) puts ≈ 60 % of the time in faer's matrix-product kernels (≈ 74 ms, about
//! 1.5 svi steps: the arithmetic above at the rate svi reaches) and the rest in
//! memory-bound passes over the M×R blocks of the forms' adjoints (`axpy` columns, column
//! dots, ≈ 10 %), the tiled layer-1 cross terms (≈ 5 %), copies and the per-row
//! elementwise ops; the column dots were made vectorisable (`dgp_traits::lanes::dot`,
//! −1 ms). Not tried: symmetric rank-k adjoints for the quadratic forms (half of
//! `a diag(ḡ) aᵀ`, about 3 M²R of STAR's step), fewer passes in the forms' adjoint.

//! ## Accuracy and extrapolation
//!
//! Measured tables live in the repository's `RESULTS.md` (regenerated by `dgp-bench
//! results` from `results/`), not here: sections `<data>-structured-accuracy` hold STAR
//! and FC against svi DGP3 on the published splits under the paper's settings
//! (`dgp-bench run --backend star --layers 3 --protocol lindinger --split-kind
//! published`). Give the non-whitened families (the published default) the paper's
//! 20 000-step cap: on energy STAR's held-out score was still falling at 6000 steps and
//! the stopping rule ended it near 10 000, about twice svi's steps.
//!
//! The extrapolation study of the paper's §4.2 is `dgp-bench run --backend star,mf
//! --layers 3 --protocol lindinger --split-kind extrapolate --per-point` followed by
//! `dgp-bench compare FILE --a star:3 --b mf:3` (sections `extrapolation/energy` and
//! `extrapolation/boston` of `RESULTS.md`); `mf` is this crate's own mean-field family with
//! star's settings, the paper's baseline. For reference, the paper's Table 2 (fraction
//! of test points where STAR's log density beats MF's, mean (s.e.) over 10 seeds, L = 3):
//!
//! | boston | energy | concrete | wine red | kin8nm | power | naval | protein |
//! |---|---|---|---|---|---|---|---|
//! | 0.55 (0.04) | 0.73 (0.05) | 0.57 (0.04) | 0.57 (0.04) | 0.36 (0.03) | 0.44 (0.06) | 0.67 (0.06) | 0.49 (0.03) |
//!
//! ## Deviations from the reference
//! * Diagonal blocks of L have a positive diagonal (softplus + 1e-10), as the svi
//!   backend's factors; GPflow's `LowerTriangular` leaves the sign free (same family of
//!   covariances).
//! * The per-point Cholesky pivots are floored at 1e-12 after the 1e-6 jitter (no NaN on a
//!   row whose Σ̂ lost definiteness to rounding).
//! * The reference's Adam staircase decay (×0.98 / 1000 steps) is applied only when
//!   `FitConfig::lr_schedule` asks for it (`dgp-bench run --protocol lindinger` does); the
//!   default is a constant rate.
#![warn(missing_docs)]

mod backend;
mod config;
mod elbo;
pub mod fields;
mod fit;
pub mod forms;
mod model;
mod propagate;
pub mod q;
mod sampling;
mod sparse;

pub use backend::{FC_BACKEND, MF_BACKEND, STAR_BACKEND, StructuredBackend};
pub use config::{Family, StructuredConfig};
pub use dgp_traits;
pub use model::{NOISE_FLOOR, SAMPLE_JITTER, StructuredDgp};
