//! SGHMC deep GPs (Havasi, Hernández-Lobato & Murillo-Fuentes 2018): the model
//! ([`SghmcDgp`]), its configuration, its registration ([`SGHMC_BACKEND`]) and the phase-aware
//! progress observer, and the sampler ([`sampler`]: [`SghmcStepper`], a stepper of the
//! core's training executor).

mod backend;
mod config;
pub mod diagnostics;
mod estimator;
mod model;
mod progress;
pub mod sampler;

pub use backend::{SGHMC_BACKEND, SghmcBackend};
pub use config::{DEFAULT_BURN_IN, DEFAULT_STEP_SIZE, MAX_HIDDEN_WIDTH, Potential, SghmcDgpConfig};
pub use model::{ESS_MAX_ROWS, GRAD_CHUNK_ROWS, NOISE_FLOOR, SghmcDgp, VAR_FLOOR};
pub use progress::PhaseProgress;
pub use sampler::{
    SampledModel, SghmcChain, SghmcConfig, SghmcConstants, SghmcSchedule, SghmcState, SghmcStepper,
    step_rng,
};
