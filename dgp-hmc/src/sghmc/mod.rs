//! SGHMC deep GPs (Havasi, Hernández-Lobato & Murillo-Fuentes 2018): the model
//! ([`SghmcModel`]), its configuration, its registration ([`SGHMC_BACKEND`]) and the phase-aware
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
pub use config::{
    DEFAULT_BURN_IN, DEFAULT_STEP_SIZE, DEFAULT_THINNING, MAX_HIDDEN_WIDTH, Potential, SghmcConfig,
};
pub use model::{ESS_MAX_ROWS, GRAD_CHUNK_ROWS, NOISE_FLOOR, SghmcModel, VAR_FLOOR};
pub use progress::PhaseProgress;
pub use sampler::{
    SampledModel, SghmcChain, SghmcConstants, SghmcSamplerConfig, SghmcSchedule, SghmcState,
    SghmcStepper, step_rng,
};
