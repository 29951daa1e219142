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
//! The caller asks for checkpoints ([`Checkpoints::every`], [`Checkpoints::save`]),
//! supplies a state to resume from ([`RunControl::take_resume_state`]) and asks to stop
//! ([`RunControl::should_stop`]) through its [`crate::fit::FitHooks`], which the executor
//! reaches through the [`crate::train::CallerHooks`] observer every backend's fit attaches
//! — so every backend that trains on the executor honours them without code of its own.
//! A stepper or observer that cannot save its state makes the run refuse checkpointing
//! with an error naming it, before the first step.

#[cfg(doc)]
use crate::fit::{Checkpoints, RunControl};
pub use crate::fit::{RUN_STATE_VERSION, RunState};
use crate::optim::Adam;
use dgp_core::{Error, Result};
use serde::Deserialize;
use serde_json::Value;

/// The semantic checks of a saved state: they know the Adam stepper's layout, so they live
/// with the executor, not with the plain-data [`RunState`].
impl RunState {
    /// Checks that this state is one a run can be in, whatever run it belongs to: finite
    /// parameters, a noise generator that is not stuck (xoshiro's all-zero state only ever
    /// yields zeros, on which a normal sampler never returns), step counters that agree
    /// (`steps_done` ≤ `steps`, the report's and an Adam stepper's step count equal to
    /// `steps_done`) and Adam moments that can occur (finite; second moments ≥ 0).
    ///
    /// # Errors
    /// [`Error::Config`] naming the field (`params[3]`, `noise.s`, `stepper.state.v[7]`,
    /// `stepper.state.step`, ...) and what is wrong with it.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: String, what: String| Err(Error::config(field, what));
        if self.steps_done > self.steps {
            return bad(
                "steps_done".into(),
                format!("{} steps done of a run of {}", self.steps_done, self.steps),
            );
        }
        if self.report.steps != self.steps_done {
            return bad(
                "report.steps".into(),
                format!(
                    "{}, but steps_done is {}",
                    self.report.steps, self.steps_done
                ),
            );
        }
        if let Some(i) = self.params.iter().position(|v| !v.is_finite()) {
            return bad(
                format!("params[{i}]"),
                format!("{} is not finite", self.params[i]),
            );
        }
        let noise = serde_json::to_value(&self.noise).map_err(|e| Error::Serde(e.to_string()))?;
        let words: Vec<u64> = noise
            .get("s")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        if !words.is_empty() && words.iter().all(|&w| w == 0) {
            return bad(
                "noise.s".into(),
                "the generator state is all zeros, which xoshiro never leaves (it would draw \
                 zeros forever)"
                    .into(),
            );
        }
        if let Some(state) = self.stepper.get("state") {
            if let Some(step) = state.get("step")
                && step.as_u64() != Some(self.steps_done as u64)
            {
                return bad(
                    "stepper.state.step".into(),
                    format!(
                        "{step} Adam updates, but steps_done is {} (one update per step)",
                        self.steps_done
                    ),
                );
            }
            for key in ["m", "v"] {
                let Some(values) = state.get(key).and_then(Value::as_array) else {
                    continue;
                };
                for (i, x) in values.iter().enumerate() {
                    let Some(x) = x.as_f64().filter(|x| x.is_finite()) else {
                        return bad(
                            format!("stepper.state.{key}[{i}]"),
                            format!("{x} is not a finite number"),
                        );
                    };
                    if key == "v" && x < 0.0 {
                        return bad(
                            format!("stepper.state.v[{i}]"),
                            format!(
                                "{x}: an Adam second moment (a mean of squared gradients) cannot be negative"
                            ),
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// The error of a stepper or observer (`type_name`) that cannot save its state.
pub fn not_resumable(type_name: &str) -> Error {
    Error::config(
        "checkpoint",
        format!(
            "checkpoint/resume: {type_name} cannot save its state yet, so this training cannot be checkpointed"
        ),
    )
}

/// An Adam stepper's state as JSON ([`crate::train::Stepper::save_state`]).
///
/// # Errors
/// [`Error::Config`] before the stepper started; [`Error::Serde`] otherwise.
pub fn save_adam(adam: &Option<Adam>) -> Result<Value> {
    let adam = adam
        .as_ref()
        .ok_or_else(|| Error::config("stepper", "state saved before Stepper::start"))?;
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
        .ok_or_else(|| Error::config("stepper", "state loaded before Stepper::start"))?;
    if saved.config() != now.config() || saved.len() != now.len() {
        return Err(Error::config(
            "resume",
            "the saved Adam state has other settings or another size",
        ));
    }
    *adam = Some(saved);
    Ok(())
}
