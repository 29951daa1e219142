//! # dgp-hmc
//!
//! Two samplers of whole deep-GP functions:
//!
//! * [`SghmcDgp`]: stochastic-gradient Hamiltonian Monte Carlo over the whitened inducing
//!   outputs of a deep GP (Havasi, Hernández-Lobato & Murillo-Fuentes 2018, "Inference in
//!   Deep Gaussian Processes using Stochastic Gradient Hamiltonian Monte Carlo"), with
//!   moving-window MCEM for the hyperparameters. Algorithm notes, defaults and their
//!   provenance: Havasi et al. 2018's reference code, cambridge-mlg/sghmc_dgp. See the
//!   [`sghmc`] module docs for the model, the sampler and what `fit` does.
//! * [`Dgps`]: the DGPS point estimate of Vafa (2016): per-unit pseudo data with the noise
//!   inside the kernel, MAP under fixed common random numbers by L-BFGS, and a predictive
//!   mixture over fresh sample paths (Vafa 2016, §4.3 and §5.1; the [`dgps`] module docs).
#![doc = include_str!("sghmc/README.md")]
#![warn(missing_docs)]

pub mod dgps;
pub mod sghmc;

pub use dgp_traits;
pub use dgps::{DGPS_BACKEND, Dgps, DgpsConfig};
pub use sghmc::{SGHMC_BACKEND, SghmcBackend, SghmcDgp, SghmcDgpConfig};
