//! Learning-rate schedules, plain data a fit is configured with.

use dgp_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Multiplicative learning-rate schedule: the step with index `t` (0 for the first
/// update) uses `lr · factor(t)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LrSchedule {
    /// `factor(t) = 1`.
    Constant,
    /// `factor(t) = γ^{⌊t / every⌋}` when `staircase`, else `γ^{t / every}` — TensorFlow's
    /// `exponential_decay`. The Structured-DGP reference uses γ = 0.98, every = 1000,
    /// staircase.
    Exponential {
        /// Decay factor γ ∈ (0, 1].
        gamma: f64,
        /// Decay period in steps (≥ 1).
        every: u64,
        /// Decay in discrete jumps (`true`) or continuously (`false`).
        staircase: bool,
    },
    /// `factor(t) = factor^{#{m ∈ milestones : m ≤ t}}` — PyTorch's `MultiStepLR`, with
    /// milestones counted in optimiser steps (multiply epochs by steps per epoch).
    /// The DSPP reference drops ×0.1 at epochs 20, 150 and 300.
    StepDrops {
        /// Steps at which the rate is multiplied by `factor` (any order).
        milestones: Vec<u64>,
        /// Multiplier applied at each milestone, in (0, 1].
        factor: f64,
    },
}

impl LrSchedule {
    /// The multiplier of the base learning rate for step index `t` (0-based).
    pub fn factor(&self, t: u64) -> f64 {
        match self {
            LrSchedule::Constant => 1.0,
            LrSchedule::Exponential {
                gamma,
                every,
                staircase,
            } => {
                let every = (*every).max(1);
                let e = if *staircase {
                    (t / every) as f64
                } else {
                    t as f64 / every as f64
                };
                gamma.powf(e)
            }
            LrSchedule::StepDrops { milestones, factor } => {
                let k = milestones.iter().filter(|&&m| m <= t).count();
                factor.powi(i32::try_from(k).unwrap_or(i32::MAX))
            }
        }
    }

    /// Checks the ranges documented on the variants.
    pub fn validate(&self) -> Result<()> {
        match self {
            LrSchedule::Constant => Ok(()),
            LrSchedule::Exponential { gamma, every, .. } => {
                if !(*gamma > 0.0 && *gamma <= 1.0) || *every == 0 {
                    Err(Error::config(
                        "lr_schedule",
                        format!(
                            "exponential lr decay needs 0 < gamma <= 1 and every >= 1, got gamma={gamma}, every={every}"
                        ),
                    ))
                } else {
                    Ok(())
                }
            }
            LrSchedule::StepDrops { factor, .. } => {
                if !(*factor > 0.0 && *factor <= 1.0) {
                    Err(Error::config(
                        "lr_schedule",
                        format!("step-drop lr schedule needs 0 < factor <= 1, got {factor}"),
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}
