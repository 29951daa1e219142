//! # dgp-core
//!
//! The bottom layer of the deep-GP workspace: what every other crate is built on and
//! that knows nothing of Gaussian processes.
//!
//! * the workspace's one error type ([`Error`], [`Result`], with [`ConfigError`],
//!   [`LabelError`] and [`CheckpointError`]), and [`check_finite`];
//! * [`rng`] — the seeded generators (every random draw of the workspace comes from one);
//! * [`linalg`] — dense linear algebra with the jitter rule (Cholesky with bounded
//!   retries, triangular solves, log-determinants);
//! * [`special`] — special functions (Gaussian densities and CDFs, log-sum-exp, erf, …),
//!   [`fastexp`] and [`lanes`] (SIMD inner loops), [`transforms`] (positivity
//!   transforms), [`serde_mat`] (matrices in JSON).
#![warn(missing_docs)]

mod error;
pub mod fastexp;
pub mod lanes;
pub mod linalg;
pub mod rng;
pub mod serde_mat;
pub mod special;
pub mod transforms;

pub use error::{CheckpointError, ConfigError, Error, LabelError, Result, check_finite};
