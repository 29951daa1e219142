//! # dgp-traits
//!
//! The shared vocabulary and building blocks of the deep-GP workspace.
#![warn(missing_docs)]

pub mod data;
pub mod error;
pub mod kernels;
pub mod layer;
pub mod likelihoods;
pub mod linalg;
pub mod mean;
pub mod metrics;
pub mod model;
pub mod optim;
pub mod params;
pub mod predictive;
pub mod quadrature;
pub mod rng;
pub mod special;
pub mod tape;
pub mod transforms;

pub use error::{Error, Result};
