//! JSON checkpoints: a model (configuration and parameters) written with serde, and read
//! back with its configuration validated, so that an edited checkpoint outside the
//! configuration's ranges is an error rather than a model in an unchecked state.

use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// `model` as JSON.
///
/// # Errors
/// [`Error::Serde`] when serialisation fails (a non-finite number, for instance).
pub fn to_json<T: Serialize>(model: &T) -> Result<String> {
    serde_json::to_string(model).map_err(|e| Error::Serde(e.to_string()))
}

/// Restores a model written by [`to_json`] and checks it with `validate` (typically the
/// configuration's own validation).
///
/// # Errors
/// [`Error::Serde`] for malformed JSON; whatever `validate` returns (e.g.
/// [`Error::Config`] for a configuration outside its ranges).
pub fn from_json<T: DeserializeOwned>(
    s: &str,
    validate: impl FnOnce(&T) -> Result<()>,
) -> Result<T> {
    let model: T = serde_json::from_str(s).map_err(|e| Error::Serde(e.to_string()))?;
    validate(&model)?;
    Ok(model)
}
