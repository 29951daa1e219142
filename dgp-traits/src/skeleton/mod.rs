//! One deep-GP skeleton that the backends fill in with their own paper:
//!
//! * [`stack`]: the layer-stack initialisation — widths and layer names, k-means++ inducing
//!   inputs, fixed (identity / PCA) or learned linear mean functions, and pushing the data
//!   and Z through the hidden layers' means;
//! * [`propagate`](mod@propagate): the layer loop of a sampled (or sigma-point) propagation with the
//!   "layer 1 once, tiled" trick, reparameterised samples (eq. 15 of Salimbeni & Deisenroth
//!   2017) and the shared [`Propagated`] result;
//! * [`predict`]: chunked parallel prediction into [`crate::predictive::Predictive`], chunk k
//!   drawing its noise from stream k of the prediction seed, and the likelihood finishing
//!   the job (Gaussian noise added, probit class probabilities);
//! * [`model_json`]: a model's JSON (the backend's part of a model file), read back with
//!   its whole state validated against its configuration;
//! * [`checks`]: input checks and the one-line description shared by the backends.

pub mod checks;
pub mod model_json;
pub mod predict;
pub mod propagate;
pub mod stack;

pub use checks::{
    MAX_INDUCING, MAX_LAYERS, MAX_WIDTH, check_batch, check_inputs, check_sizes, describe_stack,
};
pub use predict::{ChunkMoments, finish_predictive, predict_chunked};
pub use propagate::{NoiseMode, Propagated, propagate, reparam_sample, tile_rows};
pub use stack::{InitRun, LayerPlan, MeanData, StackMean, layer_plans};
