//! The [`SghmcStepper`]: one SGHMC step plus, during burn-in, one MCEM hyper step,
//! computed as a proposal and committed only when every part succeeded.

use crate::sghmc::sampler::{
    SampledModel, SghmcChain, SghmcConstants, SghmcSamplerConfig, SghmcSchedule, SghmcState,
    step_rng,
};
use dgp_core::{Error, Result};
use dgp_traits::model::Batch;
use dgp_traits::optim::{Adam, AdamConfig};
use dgp_traits::params::Role;
use dgp_traits::train::{StepContext, Stepper, merged_ranges};
use rand::RngExt;
use std::ops::Range;

/// The SGHMC stepper with moving-window MCEM (see the module docs).
#[derive(Clone, Debug)]
pub struct SghmcStepper {
    config: SghmcSamplerConfig,
    schedule: SghmcSchedule,
    seed: u64,
    sampled: Vec<Range<usize>>,
    optimised: Vec<Range<usize>>,
    flat: Vec<f64>,
    grad: Vec<f64>,
}

/// What one step computed, before it is committed.
struct Proposal {
    value: f64,
    chain: SghmcChain,
    theta: Vec<f64>,
    adam: Option<Adam>,
}

impl SghmcStepper {
    /// A stepper for a fresh run with the given (validated) settings, phase lengths and
    /// seed. A model that already holds a state continues that run instead (its
    /// schedule and seed win).
    ///
    /// # Errors
    /// The config's validation error.
    pub fn new(config: SghmcSamplerConfig, schedule: SghmcSchedule, seed: u64) -> Result<Self> {
        config.validate()?;
        if schedule.kept == 0
            || schedule.thinning == 0
            || schedule.window == 0
            || schedule.window > schedule.burn_in
        {
            return Err(Error::config(
                "schedule",
                format!(
                    "the schedule needs kept, thinning and window ≥ 1 and window ≤ burn_in, got {schedule:?}"
                ),
            ));
        }
        Ok(SghmcStepper {
            config,
            schedule,
            seed,
            sampled: Vec::new(),
            optimised: Vec::new(),
            flat: Vec::new(),
            grad: Vec::new(),
        })
    }

    fn scatter(&self, values: &[f64], flat: &mut [f64]) {
        let mut k = 0;
        for r in &self.sampled {
            flat[r.clone()].copy_from_slice(&values[k..k + r.len()]);
            k += r.len();
        }
    }

    /// Computes one step from `st` without changing the model or `st`.
    fn propose<M: SampledModel + ?Sized>(
        &mut self,
        model: &M,
        st: &SghmcState,
        batch: &Batch<'_>,
        ctx: &mut StepContext<'_>,
    ) -> Result<Proposal> {
        let t = st.step;
        let burn_in = st.schedule.is_burn_in(t);
        let mut rng = step_rng(st.seed, t);
        let n = batch.num_data as f64;
        model.params().flat_into(&mut self.flat);
        let (value, grad) = model.value_and_grad(ctx.tape, batch, &mut rng)?;
        let mut theta = Vec::with_capacity(st.chain.len());
        gather(&self.sampled, &self.flat, &mut theta);
        gather(&self.sampled, &grad, &mut self.grad);
        // The objective is the log joint −U; the sampler wants ∂(U/N).
        self.grad.iter_mut().for_each(|g| *g = -*g / n);
        let mut chain = st.chain.clone();
        let c = SghmcConstants {
            step_size: self.config.step_size,
            mdecay: self.config.mdecay,
            num_data: batch.num_data,
        };
        chain.update(&mut theta, &self.grad, burn_in, c, &mut rng);
        if let Some(k) = theta.iter().position(|v| !v.is_finite()) {
            return Err(Error::Numerical(format!(
                "sampled entry {k} is {}",
                theta[k]
            )));
        }
        let mut adam = st.adam.clone();
        if let (true, Some(opt)) = (burn_in, adam.as_mut()) {
            // The window after this step's sample joins it; one entry drawn uniformly.
            // (When the ring is full, its oldest entry leaves as the new one joins.)
            let dropped = usize::from(st.window.len() == st.schedule.window);
            let len = st.window.len() - dropped + 1;
            let j = rng.random_range(0..len);
            let at = if j == len - 1 {
                &theta
            } else {
                &st.window[window_slot(st, j + dropped, st.schedule.window)]
            };
            let mut probe = self.flat.clone();
            self.scatter(at, &mut probe);
            let (_, g) = model.value_and_grad_at(&probe, ctx.tape, batch, &mut rng)?;
            let g: Vec<f64> = g.iter().map(|v| v / n).collect();
            opt.ascend_ranges(&mut self.flat, &g, &self.optimised)?;
        }
        Ok(Proposal {
            value,
            chain,
            theta,
            adam,
        })
    }

    /// Writes a successful step into the model and the state.
    fn commit<M: SampledModel + ?Sized>(
        &mut self,
        model: &mut M,
        st: &mut SghmcState,
        prop: Proposal,
    ) -> Result<()> {
        let t = st.step;
        let mut flat = std::mem::take(&mut self.flat);
        self.scatter(&prop.theta, &mut flat);
        let written = model.params_mut().set_flat(&flat);
        self.flat = flat;
        written?;
        if st.schedule.is_burn_in(t) {
            let w = st.schedule.window;
            if st.window.len() < w {
                st.window.push(prop.theta.clone());
            } else {
                let slot = st.window_next;
                st.window[slot].copy_from_slice(&prop.theta);
            }
            if st.window.len() == w {
                st.window_next = (st.window_next + 1) % w;
            }
        }
        if st.schedule.keeps(t) {
            st.kept.push(prop.theta);
        }
        st.chain = prop.chain;
        st.adam = prop.adam;
        st.step += 1;
        Ok(())
    }
}

/// The entries of `flat` in `ranges`, in order, into `out`.
fn gather(ranges: &[Range<usize>], flat: &[f64], out: &mut Vec<f64>) {
    out.clear();
    for r in ranges {
        out.extend_from_slice(&flat[r.clone()]);
    }
}

/// The ring position of the j-th oldest window entry (0 = oldest).
fn window_slot(st: &SghmcState, j: usize, window: usize) -> usize {
    if st.window.len() < window {
        j
    } else {
        (st.window_next + j) % window
    }
}

impl<M: SampledModel + ?Sized> Stepper<M> for SghmcStepper {
    /// Takes the sampled and optimised ranges; creates the model's sampler state for a
    /// fresh run (schedule and seed of [`SghmcStepper::new`]), or checks the one it holds.
    fn start(&mut self, model: &mut M, _steps: usize) -> Result<()> {
        let params = model.params();
        self.sampled = merged_ranges(params, Role::Sampled);
        self.optimised = merged_ranges(params, Role::Optimised);
        let n_sampled: usize = self.sampled.iter().map(|r| r.len()).sum();
        if n_sampled == 0 {
            return Err(Error::config("model", "the model has no sampled blocks"));
        }
        let n_free = params.num_free();
        self.flat = vec![0.0; n_free];
        let adam = match self.config.mcem && !self.optimised.is_empty() {
            true => Some(Adam::new(
                AdamConfig::with_lr(self.config.hyper_lr),
                n_free,
            )?),
            false => None,
        };
        match model.sampler_state() {
            Some(st) => {
                let adam_len = st.adam.as_ref().map(|a| a.len());
                if st.chain.len() != n_sampled || adam_len.is_some_and(|l| l != n_free) {
                    return Err(Error::shape(
                        "sghmc state (sampled entries)",
                        n_sampled,
                        st.chain.len(),
                    ));
                }
                self.schedule = st.schedule;
                self.seed = st.seed;
            }
            None => {
                *model.sampler_state_mut() = Some(SghmcState {
                    schedule: self.schedule,
                    step: 0,
                    seed: self.seed,
                    chain: SghmcChain::new(n_sampled),
                    window: Vec::with_capacity(self.schedule.window),
                    window_next: 0,
                    adam,
                    kept: Vec::with_capacity(self.schedule.kept),
                });
            }
        }
        Ok(())
    }

    /// One SGHMC step (adapting during burn-in, then frozen) plus, during burn-in, one MCEM
    /// hyper step; returns the objective (log joint) before the step. Steps past the end
    /// of the schedule are errors.
    fn step(&mut self, model: &mut M, batch: &Batch<'_>, ctx: &mut StepContext<'_>) -> Result<f64> {
        let Some(mut st) = model.sampler_state_mut().take() else {
            return Err(Error::config(
                "stepper",
                "sghmc stepper used before Stepper::start",
            ));
        };
        let t = st.step;
        let result = if st.finished() {
            Err(Error::config(
                "step",
                format!(
                    "{t} is past the end of the schedule ({} steps)",
                    st.schedule.total()
                ),
            ))
        } else {
            match self.propose(model, &st, batch, ctx) {
                Ok(prop) => {
                    let value = prop.value;
                    self.commit(model, &mut st, prop).map(|_| value)
                }
                Err(e) => Err(e),
            }
        };
        let phase = st.phase();
        *model.sampler_state_mut() = Some(st);
        result.map_err(|e| at_step(e, t, phase))
    }
}

/// `e` with the step and phase in its message (numerical failures stay
/// [`Error::Numerical`]).
fn at_step(e: Error, t: usize, phase: &str) -> Error {
    match e {
        Error::Numerical(m) => Error::Numerical(format!("sghmc step {t} ({phase}): {m}")),
        Error::NotPositiveDefinite { .. } | Error::NonFinite { .. } => {
            Error::Numerical(format!("sghmc step {t} ({phase}): {e}"))
        }
        other => other,
    }
}
