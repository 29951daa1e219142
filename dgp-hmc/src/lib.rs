//! # dgp-hmc
//!
//! Stochastic-gradient Hamiltonian Monte Carlo over the whitened inducing outputs of a deep
//! GP (Havasi, Hernández-Lobato & Murillo-Fuentes 2018, "Inference in Deep Gaussian
//! Processes using Stochastic Gradient Hamiltonian Monte Carlo"): [`SghmcDgp`]. Algorithm
//! notes, defaults and their provenance (reference `cambridge-mlg/sghmc_dgp`):
//! `shared/specs/sghmc.md`. See the [`sghmc`] module docs for the model, the sampler and
//! what `fit` does.
#![doc = include_str!("sghmc/README.md")]
#![warn(missing_docs)]

pub mod sghmc;

pub use dgp_traits;
pub use sghmc::{SGHMC_BACKEND, SghmcBackend, SghmcDgp, SghmcDgpConfig};
