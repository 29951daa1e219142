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
//! ## Measured (dgp-bench, 2-core machine shared with other jobs)
//! Speed, `dgp-bench time --data ../shared/data/uci/kin8nm --backend svi,star,fc --layers 3
//! --inducing 128 --hidden 5 --batch 512 --samples 5 --warmup 3 --steps 20 --block 2
//! --predict-reps 1` (split 0, τ = 5): each backend's own `fit` and stepper, interleaved in
//! rounds in one process, on the idle 2-core machine (load < 0.2; median ms per step, ratio
//! = median of per-round ratios with its interquartile range):
//!
//! | backend | ms / step | ratio to svi DGP3 | predict test split (100 components) |
//! |---|---:|---:|---:|
//! | svi DGP3 | 48.5 | 1 | 0.48 s |
//! | star DGP3 | 140.2 | 2.85× [2.71–3.14] | 1.03 s |
//! | fc DGP3 (Adam) | 1074 | 21.3× [20.5–22.8] | 15.4 s |
//! | structured mean field (`--set star:stripes=false --set star:arrow=false`, separate run; now the `mf` backend) | 64.7 | 1.32× [1.31–1.39] | |
//!
//! Before the block-sparse route (binary of bf75aa4, loaded machine) STAR was 5–6× svi.
//! STAR is ≈ 2.85× svi (issue 14's ≤ 2× is NOT met) and ≈ 2.2× this crate's
//! own non-whitened mean field (`--set stripes=false --set arrow=false`; the paper's
//! "STAR about 2× slower than MF" is against its own mean-field code). What changed:
//! the block-sparse route (private module `sparse`, fused ops in [`forms`]) forms the S_M blocks a
//! layer needs once per step by the sums of spec §4 (M³, no data factor) and meets each
//! layer's `a_l` in ONE fused pass over column chunks — `e_p = colsum(U_p ⊙ (S_p a_l))`
//! for the layer's quadratic forms and its cross terms with earlier layers — run on
//! rayon over chunks with single-threaded products (no faer barriers), no M×R slices,
//! tiles or elementwise temporaries; cross terms with layer-1 GPs use `L_ji (L_iiᵀ a_1)`
//! on the B points shared by every sample. For L = 3, τ = 5 that is, in M²R products
//! forward, 5 (layer 2) + 6 (layer 3) full instead of 15 full + 6 triangular, with the
//! quadratic forms' adjoints w.r.t. `a` from the stored product (`2 g ⊙ S a`). Measured
//! against the old route on the same L at kin8nm size (M = 128, τ = 5, L = 3, perturbed
//! parameters): ELBO equal to 6e-16 relative. What remains is inherent to the family:
//! layer 3's five bilinear forms `a_2ᵀ S_{(2,t),L} a_3` between two different per-sample
//! vectors (5 full products forward, 10 backward) and the non-whitened a_l solves.
//! FC keeps the dense factor route (≈ 21× svi before the change below; the paper has
//! FC ≈ 3× STAR).
//!
//! FC's cross entries `a_iᵀ S_M^{(i),(j)} a_j = W_i · W_j` (W = stacked `L_{g,0..=g}ᵀ a`)
//! used to go through the plain tape: layer 1's products tiled to every sample
//! (`concat_cols`, (g+1)M×R copies), the longer product sliced to the common rows (a
//! copy), then `W_i ⊙ W_j` (a (i+1)M×R temporary per pair, ≈ 200·M·R entries per step for
//! L = 3, τ = 5) and its column sums, each with its backward temporaries. They now run as
//! one fused pass (`prefix_col_dots`, since replaced by the S-block route: column dots over the common rows, layer
//! 1's products read on the B points at column `c mod B`), values equal up to the
//! summation order (tests: the fused op against the sliced/tiled tape product, values
//! and gradients; STAR = FC, FD gradients, 1 vs 2 threads unchanged). Same command on the
//! LOADED machine (load ≈ 6.5 on 2 cores, old binary at d3753a0 and new binary run back
//! to back, so only the interleaved ratios are comparable):
//!
//! | binary | svi ms | star ms (ratio \[IQR\]) | fc ms (ratio \[IQR\]) | fc predict |
//! |---|---:|---:|---:|---:|
//! | d3753a0 | 100.3 | 268.9 (2.71× [2.69–2.88]) | 2147 (21.8× [18.9–22.1]) | 45.7 s |
//! | fused FC cross entries | 139.9 | 353.8 (2.64× [2.53–2.79]) | 2167 (16.4× [15.0–17.0]) | 21.5 s |
//!
//! Where FC's step time still goes (operation counts, M²R = 128²·2560 ≈ 4.2·10⁷
//! multiply-adds): the products `W_g = L_{g,0..=g}ᵀ a_l` are Σ(g+1) = 40 M²R (layer 2),
//! 11 M²R (layer 3) and 3 M²R (layer 1, on B points) forward and twice that backward,
//! ≈ 160 M²R per step against STAR's ≈ 27 M²R of fused forms — the 6× bar needs FC to
//! use the S-block route of STAR (`a_iᵀ S_ij a_j` from blocks of S_M formed once per
//! step: 21 M²R forward), which is NOT done. STAR (profile, 1 thread, `perf record
//! --call-graph dwarf`, a short run whose samples include set-up and one prediction):
//! gemm microkernels ≈ 55 % (the fused forms' forward and backward
//! products, the non-whitened `K⁻¹k` solves), fresh allocations with page zeroing
//! (`SharedPool::alloc` misses → `clear_page`, memset) ≈ 15 %, the rest elementwise
//! field arithmetic of the per-row conditionals.
//!
//! ## Accuracy and extrapolation
//!
//! Measured tables live in the repository's `RESULTS.md` (regenerated by `dgp-bench
//! results` from `results/`), not here. The extrapolation study of the paper's §4.2 is
//! `dgp-bench run --backend star,mf --layers 3 --protocol lindinger --split-kind
//! extrapolate --per-point` followed by `dgp-bench compare FILE --a star:3 --b mf:3`
//! (sections `energy-extrapolate` and `boston-extrapolate` of `RESULTS.md`); `mf` is this
//! crate's own mean-field family with star's settings, the paper's baseline. For reference,
//! the paper's Table 2 (fraction of test points where STAR's log density beats MF's, mean
//! (s.e.) over 10 seeds, L = 3):
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
