//! Optimisers on flat `f64` parameter vectors.
//!
//! * [`Adam`] (Kingma & Ba 2015) with bias correction and learning-rate schedules
//!   ([`LrSchedule`]: constant, exponential/staircase decay, step drops), for stochastic
//!   (minibatch) objectives. Its state serialises with a run's state ([`crate::fit::RunState`]).
//! * [`lbfgs_minimise`] / [`lbfgs_maximise`]: L-BFGS with the Moré–Thuente line search
//!   from `argmin`, for deterministic full-batch objectives (e.g. nested variational
//!   compression on small data sets).
//! * [`natural_gradient_step`]: one natural-gradient step on a Gaussian factor
//!   q = N(m, LLᵀ) (Salimbeni et al. 2018), for the variational blocks a model hands to
//!   [`crate::train::NaturalAdamStepper`].
//!
//! # Sign convention
//! The workspace's models **maximise** their objectives (ELBOs, predictive
//! log-likelihoods). Both optimisers therefore name the direction explicitly:
//! [`Adam::ascend`] takes the gradient of an objective to maximise, [`Adam::descend`] the
//! gradient of an objective to minimise; likewise [`lbfgs_maximise`] and
//! [`lbfgs_minimise`]. There is no implicit default direction.

mod adam;
mod lbfgs;
mod natgrad;

pub use adam::{Adam, AdamConfig, AdamState, LrSchedule};
pub use lbfgs::{LbfgsConfig, LbfgsReport, lbfgs_maximise, lbfgs_minimise};
pub use natgrad::{
    NatGradConfig, NatGradScheme, NaturalStep, covariance_adjoint, natural_gradient_step,
};
