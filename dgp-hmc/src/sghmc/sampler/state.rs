//! The whole state of a sampler run ([`SghmcState`], kept in the model), the trait of
//! models that hold it ([`SampledModel`]) and the per-step generators ([`step_rng`]).

use crate::sghmc::sampler::{SghmcChain, SghmcSchedule};
use dgp_core::rng::{Rng, seeded};
use dgp_traits::model::Model;
use dgp_traits::optim::Adam;
use serde::{Deserialize, Serialize};

/// The whole state of a sampler run, kept in the model (so its checkpoint resumes the run
/// exactly; see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SghmcState {
    /// The run's phase lengths.
    pub schedule: SghmcSchedule,
    /// Steps completed (the next step's global index).
    pub step: usize,
    /// Seed of the per-step generators ([`step_rng`]).
    pub seed: u64,
    /// Momenta and adapted quantities.
    pub chain: SghmcChain,
    /// The MCEM window: the most recent burn-in samples, a ring buffer of at most
    /// `window` entries.
    pub window: Vec<Vec<f64>>,
    /// Where the next window sample is written once the ring is full.
    pub window_next: usize,
    /// The MCEM optimiser (its moments and step count); `None` without MCEM.
    pub adam: Option<Adam>,
    /// The kept samples, oldest first (values of the sampled entries).
    pub kept: Vec<Vec<f64>>,
}

impl SghmcState {
    /// Whether every step of the schedule has been taken.
    pub fn finished(&self) -> bool {
        self.step >= self.schedule.total()
    }

    /// The phase of the next step, for progress displays: `"burn-in"`, `"sampling"` or
    /// `"done"`.
    pub fn phase(&self) -> &'static str {
        if self.finished() {
            "done"
        } else if self.schedule.is_burn_in(self.step) {
            "burn-in"
        } else {
            "sampling"
        }
    }
}

/// A model whose [`Role::Sampled`](dgp_traits::params::Role::Sampled) blocks an [`SghmcStepper`](crate::sghmc::sampler::SghmcStepper) samples; it keeps the
/// sampler's [`SghmcState`] (and serialises it with its checkpoint).
pub trait SampledModel: Model {
    /// The sampler state, `None` before the first run.
    fn sampler_state(&self) -> Option<&SghmcState>;

    /// Mutable access to the sampler state.
    fn sampler_state_mut(&mut self) -> &mut Option<SghmcState>;
}

/// The generator of global step `t` of a run seeded `seed` (SplitMix64-mixed, so that
/// neighbouring steps and seeds give unrelated xoshiro states).
pub fn step_rng(seed: u64, t: usize) -> Rng {
    fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    seeded(mix(seed ^ mix(t as u64)))
}
