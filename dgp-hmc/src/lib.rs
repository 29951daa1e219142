//! # dgp-hmc (not yet implemented)
//!
//! Will hold stochastic-gradient Hamiltonian Monte Carlo over the whitened inducing outputs
//! of a deep GP (Havasi, Hernández-Lobato & Murillo-Fuentes 2018: adaptive SGHMC with
//! moving-window MCEM for the hyperparameters, burn-in, thinning, and an equal-weight
//! predictive mixture over kept samples), plus the DGPS point-estimate sampler of Vafa
//! (2016): MAP pseudo data with fixed common random numbers and L-BFGS. Both use
//! `dgp_traits::layer::SparseLayer` and the log joint of data and inducing outputs as their
//! `Objective`. Algorithm notes: `shared/specs/sghmc.md`.
//! Nothing is exported yet; this crate compiles so that the workspace layout is final.

pub mod dgps;
pub use dgps::{DGPS_BACKEND, Dgps, DgpsConfig};
