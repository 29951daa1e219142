//! # dgp-svi (in progress)
//!
//! Doubly-stochastic variational inference for deep Gaussian processes (Salimbeni &
//! Deisenroth 2017). Algorithm notes: `shared/specs/dsvi.md`.
