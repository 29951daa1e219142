//! # dgp-traits
//!
//! The shared vocabulary and building blocks of the deep-GP workspace. Every inference
//! backend (`dgp-svi`, `dgp-structured`, `dgp-dspp`, `dgp-nested`, `dgp-hmc`) builds on this
//! crate and exposes its trained model through the same two traits:
//!
//! * [`model::Objective`] — the scalar a backend maximises on a minibatch, recorded on the
//!   reverse-mode [`tape`], which gives its gradient;
//! * [`model::Model`] — parameters, training, and prediction as a common
//!   [`predictive::Predictive`] (a finite Gaussian mixture per test point).
//!
//! The deep-GP pieces every backend shares: sparse-GP [`conditional`]s (the prior
//! conditional apart from the q part: a Gaussian q(u), full or diagonal, or a given u),
//! Gaussian [`kl`] divergences (per layer, and one joint Gaussian against a block-diagonal
//! prior, laid out by [`joint_q::JointQ`]), the shared [`layer::SparseLayer`], and the
//! [`skeleton`] of a deep GP (layer-stack initialisation, the propagation loop, chunked
//! prediction, the model's JSON, input checks).
//!
//! The user-facing shape: every backend's configuration is an [`fitted::Estimator`]
//! (`fit(&data)` standardises internally) giving a [`fitted::Fitted`] model that predicts in
//! original units and is saved and loaded through one checksummed model file.
//!
//! Training: what a fit is asked and reports is the plain data of [`fit`] ([`fit::FitConfig`],
//! [`fit::FitHooks`], [`fit::FitReport`]); the rows come from any [`data::RowSource`]
//! (in memory, or an out-of-core store); [`params`] (blocks with roles), the [`train`]ing
//! executor with its steppers and observers; [`distribute`] decides which chunks of a
//! minibatch gradient this process computes (all of them, or its share of a data-parallel
//! launch). Building blocks: [`kernels`], [`mean`] functions, [`likelihoods`], parameter
//! [`transforms`], [`optim`]isers (Adam, L-BFGS, natural gradients), [`data`] loading / standardisation /
//! splits / minibatches / k-means++, [`metrics`] (NLL, RMSE, CRPS, coverage, PIT), [`classification`] labels, class
//! probabilities and metrics (error rate, log loss, Brier, ECE, AUC), seeded
//! [`rng`], and the one [`error::Error`] type. A backend registers itself with a harness
//! through [`backend::Backend`] (its own configuration, validated once, and a build function).
//!
//! ## The core at a glance
//!
//! ```text
//!   backend crate (svi, dspp, nested, …)            dgp-bench
//!   ├─ config (serde) ── backend::ConfigBackend ──▶ backend::Backend registry, --set / --config
//!   ├─ model: skeleton::stack (Z, means, widths)
//!   │         conditional + kl (+ joint_q)  ──▶ Objective::record on the tape
//!   │         skeleton::propagate / predict ──▶ Predictive (likelihood finishes it)
//!   └─ Model::fit = train::Executor { Stepper, Observers }   (or train::FullBatchLbfgs)
//!                    │          │
//!        params::Role decides   └─ CallerHooks, HeldOutStopping, ModelSnapshots, SampleCollector
//!        which flat positions
//!        each stepper moves (Optimised: Adam; Natural: natural gradient; Sampled: a sampler)
//! ```
//!
//! * [`params::ParamStore`] holds every parameter block with a [`params::Role`]; the flat
//!   view (every non-fixed block) is what the tape differentiates, and
//!   [`params::ParamStore::ranges`] tells each stepper which positions are its own.
//! * [`train::Executor`] owns the one minibatch loop (batch order from the fit seed, Monte
//!   Carlo noise from an independent stream); a [`train::Stepper`] makes each step and
//!   [`train::Observer`]s watch it. No backend writes its own loop; `Model::fit` has no
//!   default, so each backend states which stepper and observers it trains with.
//! * Held-out early stopping is part of [`model::FitConfig`] (`early_stopping`: the
//!   patience rule or Lindinger et al.'s, [`train::HeldOutRule`]); a backend honours it by
//!   running its stepper through [`train::fit_with_held_out`] (`Executor` + `CallerHooks`
//!   when it is `None`, bit for bit).
//! * [`conditional`] and [`kl`] are the sparse-GP algebra as functions on the tape;
//!   [`skeleton`] is the deep-GP scaffolding around them; `testing` (behind the `testing`
//!   cargo feature, for tests only) is the kit a
//!   backend's test suite calls. A conditional takes one of two routes, chosen from the
//!   shapes by a cost model ([`conditional::Route::choose`]): through `A = L⁻¹Kuf`, or,
//!   for whitened layers with many rows (DSVI's last layer with S samples), through M×M
//!   forms and [`tape::Tape::quad_form_cols`] without any solve against the batch.
//!
//! ## How each backend maps onto the traits
//!
//! **svi** (Salimbeni & Deisenroth 2017). Every layer is a [`layer::SparseLayer`]; q(u) is a
//! Gaussian per output with a full Cholesky factor. The objective is the ELBO of eq. (17):
//! inputs are propagated by Monte Carlo (eq. 15, reparameterised samples of each hidden
//! layer, the last layer analytic), the data term scaled by N/|B| minus the KLs. `predict`
//! draws S samples of the hidden layers and returns an equal-weight S-component mixture
//! (eq. 18).
//!
//! **structured** (Lindinger et al. 2020). Same layers, but one joint Gaussian q over the
//! inducing outputs of all layers (fully coupled, or the stripes-and-arrow sparsity). The
//! objective is the ELBO of eq. (8), propagated with the sequential conditionals of
//! Theorem 1 (each layer's marginal conditioned on the samples of earlier layers); the
//! predictive is again an equal-weight mixture of samples.
//!
//! **dspp** (Jankowiak et al. 2020). Same layers, whitened mean-field q(u). Instead of
//! sampling, each hidden layer's marginal is evaluated at S learned quadrature sites with
//! learned simplex weights; the objective is the regularised predictive log-likelihood of
//! eq. (21) (log of the mixture, minus β·KL); the predictive is the S-component mixture with
//! the learned weights.
//!
//! **nested** (Hensman & Lawrence 2014). Layers see Gaussian *distributions* of inputs, so a
//! nested layer plays [`layer::SparseLayer`]'s role with psi-statistics (ψ0, Ψ1, Ψ2) as fused
//! tape operations; moments are propagated deterministically and the objective is the
//! nested bound (eq. 19 as corrected in the spec). The predictive is one Gaussian per point
//! (optionally a mixture from sampling the hidden layers).
//!
//! **hmc** (Havasi et al. 2018; Vafa 2016). Same layers; the whitened inducing outputs are
//! sampled by SGHMC instead of given a q. The objective is the log joint of data and
//! inducing outputs (its negative is the sampler's potential); `fit` runs the training executor
//! ([`train`]) with a sampler as its stepper (burn-in, moving-window MCEM hyperparameter
//! steps) and a sample collector (thinning) as an observer, and the
//! predictive is the equal-weight mixture over kept samples. The DGPS point estimate
//! maximises the same objective with L-BFGS.
#![warn(missing_docs)]

pub mod backend;
pub mod calibration;
pub mod classification;
pub mod conditional;
pub mod data;
pub mod distribute;
pub mod error;
pub mod fastexp;
pub mod fit;
pub mod fitted;
pub mod guard;
pub mod joint_q;
pub mod kernels;
pub mod kl;
pub mod lanes;
pub mod layer;
pub mod likelihoods;
pub mod linalg;
pub mod mean;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod optim;
pub mod params;
pub mod predictive;
pub mod quadrature;
pub mod rng;
mod run_defaults;
pub mod serde_mat;
pub mod skeleton;
pub mod special;
#[cfg(feature = "testing")]
pub mod svgp_reference;
pub mod tape;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod train;
pub mod transforms;

pub use error::{CheckpointError, ConfigError, Error, Result};
