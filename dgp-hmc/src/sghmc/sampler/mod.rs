//! Adaptive stochastic-gradient Hamiltonian Monte Carlo with moving-window MCEM
//! (Havasi, Hernández-Lobato & Murillo-Fuentes 2018; the update of Springenberg et al.
//! 2016), as a [`Stepper`](dgp_traits::train::Stepper) of the training [`dgp_traits::train::Executor`]:
//! [`SghmcStepper`] samples the [`Role::Sampled`](dgp_traits::params::Role::Sampled) blocks of a [`SampledModel`] and, during
//! burn-in, takes one Adam step on the [`Role::Optimised`](dgp_traits::params::Role::Optimised) blocks per sampler step at a
//! sample drawn from the moving window of recent samples (the sampler and schedule of cambridge-mlg/sghmc_dgp, `sghmc_base.py` and `models.py`).
//!
//! # The update (the update of cambridge-mlg/sghmc_dgp, `sghmc_base.py`, written out exactly)
//!
//! Elementwise, for every sampled entry θ, with `grad = ∂nll/∂θ`, `nll = U/N` (U the
//! potential = minus the model's objective, N the training-set size), step size ε and
//! friction `mdecay`. State `ξ = g = g² = 1`, `p = 0` at the start. Every right-hand side
//! uses the values from BEFORE the step (simultaneous update):
//!
//! ```text
//! burn-in only (adapting):                    every step (burn-in: with the OLD g²):
//!   r  = 1/(ξ + 1)                              M⁻¹ = 1/(√(g² + 1e-16) + 1e-16)
//!   g  ← (1−r) g  + r grad                      σ   = √max(2 (ε/√N)² mdecay M⁻¹, 1e-16)
//!   g² ← (1−r) g² + r grad²                     p   ← p − ε² M⁻¹ grad − mdecay p + σ·N(0,1)
//!   ξ  ← 1 + ξ (1 − g²_mean)                    θ   ← θ + p   (the new p)
//! ```
//!
//! where `g²_mean = g_old² / (g²_old + 1e-16)`. The gradient is of `nll = U/N` and the
//! noise uses `(ε/√N)²`: the two N scalings belong together (cambridge-mlg/sghmc_dgp pitfall 1); in units
//! of U this is scale-adapted SGHMC `p ← (1−mdecay) p − ε² M̂⁻¹ ∂U + N(0, 2ε² mdecay M̂⁻¹)`.
//! Adaptation (ξ, g, g²) happens only during burn-in and is frozen afterwards (pitfall 2).
//!
//! # Schedule and MCEM (cambridge-mlg/sghmc_dgp, `models.py`)
//!
//! A run is `burn_in` adapting steps, then `kept · thinning` frozen steps, keeping the
//! sample after every `thinning`-th frozen step (the reference's `collect_samples`: 50
//! steps, then a sample). After every burn-in step the new sample joins a moving window
//! of the last `window` samples and, with MCEM on, one Adam step (ascending the objective
//! divided by N, i.e. descending the reference's nll) moves the [`Role::Optimised`](dgp_traits::params::Role::Optimised) blocks,
//! its gradient evaluated with the sampled blocks set to a window sample drawn uniformly
//! ([`Objective::value_and_grad_at`](dgp_traits::model::Objective::value_and_grad_at)): the
//! chain itself is never written by it (pitfall 3). While collecting, hyperparameters are
//! frozen. Deviation: the executor hands the stepper one minibatch per step, so the hyper
//! step uses the sampler step's minibatch, not a fresh one (identical for full batches,
//! the reference's setting whenever N ≤ 10 000).
//!
//! # Randomness and resuming
//!
//! All of the sampler's randomness (the model's Monte Carlo noise of both evaluations, the
//! momentum noise, the window index) comes from a generator derived from the run seed and
//! the global step index ([`step_rng`]); the executor's own noise stream is not used. The
//! whole state — momenta, ξ, g, g², the window, the Adam moments, the kept samples, the
//! step count (which gives the phase) and the seed (which, with the step, is the RNG
//! state) — is one serialisable [`SghmcState`] that lives in the model, so a model
//! checkpoint taken after any step resumes exactly: with full batches the resumed run is
//! bit-identical to an uninterrupted one (with minibatches the batch order restarts).
//!
//! # Failures
//! A non-finite objective, gradient or new sample ends the run with
//! [`Error::Numerical`](dgp_core::Error::Numerical) naming the step and phase; the model keeps the state of the last
//! good step (nothing is written before every part of a step succeeded).

mod chain;
mod config;
mod state;
mod stepper;
#[cfg(test)]
mod tests;

pub use chain::{SghmcChain, SghmcConstants};
pub use config::{SghmcSamplerConfig, SghmcSchedule};
pub use state::{SampledModel, SghmcState, step_rng};
pub use stepper::SghmcStepper;
