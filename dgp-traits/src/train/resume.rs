//! Exact resume of an executor run: [`RunState`], the whole state of a run after some
//! steps, and the pieces of the executor that save and restore it.
//!
//! A run continues bit for bit from a [`RunState`] because everything a step depends on is
//! in it: the free parameters ([`crate::params::ParamStore::flat`]), the stepper's state
//! ([`crate::train::Stepper::save_state`]: Adam's moments and step count, hence the
//! schedule position), the Monte Carlo noise generator, every observer's state, the report
//! so far, and the position in the minibatch order (the number of steps done: the order is
//! a pure function of the seed, so the executor replays `steps_done` batches of it). JSON
//! numbers round-trip exactly (serde_json's `float_roundtrip`).
//!
//! The caller asks for checkpoints and supplies a state to resume through its
//! [`FitObserver`] ([`FitObserver::checkpoint_every`], [`FitObserver::save_run_state`],
//! [`FitObserver::take_run_state`], [`FitObserver::should_stop`]), which the executor
//! reaches through the [`crate::train::Progress`] observer every backend's fit attaches
//! — so every backend that trains on the executor honours them without code of its own.
//! A stepper or observer that cannot save its state makes the run refuse checkpointing
//! with an error naming it, before the first step.

use crate::error::{Error, Result};
pub use crate::fit::{RUN_STATE_VERSION, RunState};
#[cfg(doc)]
use crate::model::FitObserver;
use crate::optim::Adam;
use serde::Deserialize;
use serde_json::Value;

/// The error of a stepper or observer (`type_name`) that cannot save its state.
pub fn not_resumable(type_name: &str) -> Error {
    Error::Config(format!(
        "checkpoint/resume: {type_name} cannot save its state yet, so this training cannot be checkpointed"
    ))
}

/// An Adam stepper's state as JSON ([`crate::train::Stepper::save_state`]).
///
/// # Errors
/// [`Error::Config`] before the stepper started; [`Error::Serde`] otherwise.
pub fn save_adam(adam: &Option<Adam>) -> Result<Value> {
    let adam = adam
        .as_ref()
        .ok_or_else(|| Error::Config("stepper state saved before Stepper::start".into()))?;
    serde_json::to_value(adam).map_err(|e| Error::Serde(e.to_string()))
}

/// Restores an Adam state saved by [`save_adam`] into a started stepper's `adam`; the
/// saved optimiser must have the same settings and size.
///
/// # Errors
/// [`Error::Serde`] for a malformed state; [`Error::Config`] for other settings or size.
pub fn load_adam(adam: &mut Option<Adam>, state: &Value) -> Result<()> {
    let saved: Adam = Adam::deserialize(state).map_err(|e| Error::Serde(e.to_string()))?;
    let saved = Adam::from_parts(saved.config().clone(), saved.state().clone())?;
    let now = adam
        .as_ref()
        .ok_or_else(|| Error::Config("stepper state loaded before Stepper::start".into()))?;
    if saved.config() != now.config() || saved.len() != now.len() {
        return Err(Error::Config(
            "resume: the saved Adam state has other settings or another size".into(),
        ));
    }
    *adam = Some(saved);
    Ok(())
}
