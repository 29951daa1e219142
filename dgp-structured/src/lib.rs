//! # dgp-structured (not yet implemented)
//!
//! Will hold the fully-coupled (FC) and stripes-and-arrow (STAR) variational families of
//! Lindinger et al. (2020), "Beyond the Mean-Field: Structured Deep Gaussian Processes
//! Improve the Predictive Uncertainties": one joint Gaussian q(f_M) = N(μ_M, S_M) over the
//! inducing outputs of all layers, S_M = LLᵀ with L dense lower-triangular (FC) or with the
//! STAR block sparsity (diagonal blocks, stripes between the same GP of different hidden
//! layers, an arrow to the output layer). The ELBO (eq. 8) is propagated with the
//! sequential conditionals of Theorem 1 on top of `dgp_traits::layer::SparseLayer`;
//! FC can also use natural-gradient steps. Algorithm notes: `shared/specs/structured.md`.
//! Nothing is exported yet; this crate compiles so that the workspace layout is final.
