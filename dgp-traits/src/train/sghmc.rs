//! Adaptive stochastic-gradient Hamiltonian Monte Carlo with moving-window MCEM
//! (Havasi, Hernández-Lobato & Murillo-Fuentes 2018; the update of Springenberg et al.
//! 2016), as a [`Stepper`] of the training [`crate::train::Executor`]:
//! [`SghmcStepper`] samples the [`Role::Sampled`] blocks of a [`SampledModel`] and, during
//! burn-in, takes one Adam step on the [`Role::Optimised`] blocks per sampler step at a
//! sample drawn from the moving window of recent samples (`shared/specs/sghmc.md` §3–4).
//!
//! # The update (spec §3, written out exactly)
//!
//! Elementwise, for every sampled entry θ, with `grad = ∂nll/∂θ`, `nll = U/N` (U the
//! potential = minus the model's objective, N the training-set size), step size ε and
//! friction `mdecay`. State `ξ = g = g² = 1`, `p = 0` at the start. Every right-hand side
//! uses the values from BEFORE the step (simultaneous update):
//!
//! ```text
//! burn-in only (adapting):                    every step (burn-in: with the OLD g²):
//!   r  = 1/(ξ + 1)                              M⁻¹ = 1/(√(g² + 1e-16) + 1e-16)
//!   g  ← (1−r) g  + r grad                      σ   = √max(2 (ε/√N)² mdecay M⁻¹, 1e-16)
//!   g² ← (1−r) g² + r grad²                     p   ← p − ε² M⁻¹ grad − mdecay p + σ·N(0,1)
//!   ξ  ← 1 + ξ (1 − g²_mean)                    θ   ← θ + p   (the new p)
//! ```
//!
//! where `g²_mean = g_old² / (g²_old + 1e-16)`. The gradient is of `nll = U/N` and the
//! noise uses `(ε/√N)²`: the two N scalings belong together (spec §9 pitfall 1); in units
//! of U this is scale-adapted SGHMC `p ← (1−mdecay) p − ε² M̂⁻¹ ∂U + N(0, 2ε² mdecay M̂⁻¹)`.
//! Adaptation (ξ, g, g²) happens only during burn-in and is frozen afterwards (pitfall 2).
//!
//! # Schedule and MCEM (spec §4)
//!
//! A run is `burn_in` adapting steps, then `kept · thinning` frozen steps, keeping the
//! sample after every `thinning`-th frozen step (the reference's `collect_samples`: 50
//! steps, then a sample). After every burn-in step the new sample joins a moving window
//! of the last `window` samples and, with MCEM on, one Adam step (ascending the objective
//! divided by N, i.e. descending the reference's nll) moves the [`Role::Optimised`] blocks,
//! its gradient evaluated with the sampled blocks set to a window sample drawn uniformly
//! ([`Objective::value_and_grad_at`](crate::model::Objective::value_and_grad_at)): the
//! chain itself is never written by it (pitfall 3). While collecting, hyperparameters are
//! frozen. Deviation: the executor hands the stepper one minibatch per step, so the hyper
//! step uses the sampler step's minibatch, not a fresh one (identical for full batches,
//! the reference's setting whenever N ≤ 10 000).
//!
//! # Randomness and resuming
//!
//! All of the sampler's randomness (the model's Monte Carlo noise of both evaluations, the
//! momentum noise, the window index) comes from a generator derived from the run seed and
//! the global step index ([`step_rng`]); the executor's own noise stream is not used. The
//! whole state — momenta, ξ, g, g², the window, the Adam moments, the kept samples, the
//! step count (which gives the phase) and the seed (which, with the step, is the RNG
//! state) — is one serialisable [`SghmcState`] that lives in the model, so a model
//! checkpoint taken after any step resumes exactly: with full batches the resumed run is
//! bit-identical to an uninterrupted one (with minibatches the batch order restarts).
//!
//! # Failures
//! A non-finite objective, gradient or new sample ends the run with
//! [`Error::Numerical`] naming the step and phase; the model keeps the state of the last
//! good step (nothing is written before every part of a step succeeded).

use crate::error::{Error, Result};
use crate::model::{Batch, Model};
use crate::optim::{Adam, AdamConfig};
use crate::params::Role;
use crate::rng::{Rng, seeded};
use crate::train::stepper::{StepContext, Stepper, merged_ranges};
use rand::RngExt;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Settings of the sampler (defaults: `shared/specs/sghmc.md` §3–4, the reference's).
///
/// ```
/// use dgp_traits::train::SghmcConfig;
/// let c = SghmcConfig::default();
/// assert_eq!((c.burn_in, c.thinning, c.kept, c.window), (10_000, 50, 100, 100));
/// assert!(c.validate().is_ok());
/// let e = SghmcConfig { thinning: 0, ..c }.validate().unwrap_err().to_string();
/// assert!(e.contains("thinning"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SghmcConfig {
    /// Adapting steps before samples are kept (each followed by an MCEM hyper step).
    pub burn_in: usize,
    /// Frozen steps per kept sample.
    pub thinning: usize,
    /// Number of kept samples (the predictive mixture's components).
    pub kept: usize,
    /// Size of the MCEM moving window (recent burn-in samples); at most `burn_in`.
    pub window: usize,
    /// Step size ε.
    pub step_size: f64,
    /// Friction `mdecay` ∈ (0, 1].
    pub mdecay: f64,
    /// Adam learning rate of the MCEM hyper steps.
    pub hyper_lr: f64,
    /// Whether burn-in takes MCEM hyper steps (off: hyperparameters stay as they are).
    pub mcem: bool,
}

impl Default for SghmcConfig {
    fn default() -> Self {
        SghmcConfig {
            burn_in: 10_000,
            thinning: 50,
            kept: 100,
            window: 100,
            step_size: 0.01,
            mdecay: 0.05,
            hyper_lr: 0.01,
            mcem: true,
        }
    }
}

/// The phase lengths of one run (see [`SghmcConfig::schedule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SghmcSchedule {
    /// Adapting steps.
    pub burn_in: usize,
    /// Frozen steps per kept sample.
    pub thinning: usize,
    /// Kept samples.
    pub kept: usize,
    /// Size of the MCEM window (at most `burn_in`).
    pub window: usize,
}

impl SghmcSchedule {
    /// Total steps, `burn_in + kept · thinning`.
    pub fn total(&self) -> usize {
        self.burn_in + self.kept * self.thinning
    }

    /// Whether global step `t` (0-based) is a burn-in step.
    pub fn is_burn_in(&self, t: usize) -> bool {
        t < self.burn_in
    }

    /// Whether the sample after global step `t` is kept: the last of every `thinning`
    /// frozen steps.
    pub fn keeps(&self, t: usize) -> bool {
        t >= self.burn_in && (t - self.burn_in + 1).is_multiple_of(self.thinning)
    }
}

impl SghmcConfig {
    /// Checks every field; the error names it.
    ///
    /// # Errors
    /// [`Error::Config`] for `kept == 0`, `thinning == 0`, `window == 0`,
    /// `window > burn_in`, a step size or learning rate that is not finite and positive,
    /// `mdecay` outside (0, 1].
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("sghmc: {m}")));
        if self.kept == 0 {
            return bad("kept must be at least 1 (zero kept samples)".into());
        }
        if self.thinning == 0 {
            return bad("thinning must be at least 1".into());
        }
        if self.window == 0 {
            return bad("window must be at least 1".into());
        }
        if self.window > self.burn_in {
            return bad(format!(
                "window ({}) must not exceed burn_in ({})",
                self.window, self.burn_in
            ));
        }
        if !(self.step_size.is_finite() && self.step_size > 0.0) {
            return bad(format!(
                "step_size must be finite and > 0, got {}",
                self.step_size
            ));
        }
        if !(self.mdecay.is_finite() && self.mdecay > 0.0 && self.mdecay <= 1.0) {
            return bad(format!("mdecay must be in (0, 1], got {}", self.mdecay));
        }
        if !(self.hyper_lr.is_finite() && self.hyper_lr > 0.0) {
            return bad(format!(
                "hyper_lr must be finite and > 0, got {}",
                self.hyper_lr
            ));
        }
        Ok(())
    }

    /// The configured schedule, `burn_in + kept · thinning` steps.
    pub fn full_schedule(&self) -> SghmcSchedule {
        SghmcSchedule {
            burn_in: self.burn_in,
            thinning: self.thinning,
            kept: self.kept,
            window: self.window,
        }
    }

    /// The schedule of a run with a budget of `budget` steps (what a backend's `fit` makes
    /// of `FitConfig::steps`): the configured schedule when the budget holds it (extra
    /// budget is not used); else every phase shrunk by the factor `f = budget / total`:
    /// burn-in `max(1, ⌊burn_in·f⌉)`, thinning `max(1, ⌊thinning·f⌋)`, as many kept samples
    /// as the rest holds (at most `kept`; all of them unless the budget is tiny), the
    /// burn-in taking what is left, so that the run is exactly `budget` steps; the window
    /// at most the burn-in. E.g. the defaults with a budget of 1 000: burn-in 700, thinning
    /// 3, 100 samples.
    ///
    /// # Errors
    /// [`Error::Config`] (naming `steps`) for a budget below 2; the config's own errors.
    pub fn schedule(&self, budget: usize) -> Result<SghmcSchedule> {
        self.validate()?;
        let full = self.full_schedule();
        if budget >= full.total() {
            return Ok(full);
        }
        if budget < 2 {
            return Err(Error::Config(format!(
                "sghmc: steps ({budget}) must be at least 2 (one burn-in step, one kept sample)"
            )));
        }
        let f = budget as f64 / full.total() as f64;
        let burn_min = ((self.burn_in as f64 * f).round() as usize).clamp(1, budget - 1);
        let sampling = budget - burn_min;
        let thinning = ((self.thinning as f64 * f).floor() as usize).clamp(1, sampling);
        let kept = (sampling / thinning).min(self.kept);
        let burn_in = budget - kept * thinning;
        Ok(SghmcSchedule {
            burn_in,
            thinning,
            kept,
            window: self.window.min(burn_in),
        })
    }
}

/// The per-entry state of the sampler's chain (spec §3): momenta `p` and the adapted
/// `ξ`, `g`, `g²`, in the order of the sampled entries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SghmcChain {
    /// Momenta (0 at the start).
    pub p: Vec<f64>,
    /// ξ (1 at the start).
    pub xi: Vec<f64>,
    /// Running mean of the gradient (1 at the start).
    pub g: Vec<f64>,
    /// Running mean of the squared gradient (1 at the start).
    pub g2: Vec<f64>,
}

/// The constants of one update: step size ε, friction and the training-set size N.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SghmcConstants {
    /// Step size ε.
    pub step_size: f64,
    /// Friction `mdecay`.
    pub mdecay: f64,
    /// Training-set size N (the scale of `nll = U/N`).
    pub num_data: usize,
}

impl SghmcChain {
    /// The initial state of `n` entries: `p = 0`, `ξ = g = g² = 1`.
    pub fn new(n: usize) -> Self {
        SghmcChain {
            p: vec![0.0; n],
            xi: vec![1.0; n],
            g: vec![1.0; n],
            g2: vec![1.0; n],
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.p.len()
    }

    /// Whether the chain has no entries.
    pub fn is_empty(&self) -> bool {
        self.p.is_empty()
    }

    /// One update of spec §3 (see the module docs) of `theta` given `grad` = ∂nll/∂θ
    /// (nll = U/N), adapting ξ, g, g² when `adapt` (burn-in); N(0, 1) noise from `rng`, one
    /// draw per entry in order. Simultaneous: every right-hand side reads the old values.
    ///
    /// # Panics
    /// When `theta`, `grad` and the chain differ in length (a programming error).
    pub fn update(
        &mut self,
        theta: &mut [f64],
        grad: &[f64],
        adapt: bool,
        c: SghmcConstants,
        rng: &mut Rng,
    ) {
        assert!(
            theta.len() == self.len() && grad.len() == self.len(),
            "sghmc lengths"
        );
        let eps2 = c.step_size * c.step_size;
        let eps_scaled2 = eps2 / c.num_data as f64;
        for i in 0..theta.len() {
            let (xi, g, g2, p) = (self.xi[i], self.g[i], self.g2[i], self.p[i]);
            let gr = grad[i];
            let minv = 1.0 / ((g2 + 1e-16).sqrt() + 1e-16);
            let sigma = (2.0 * eps_scaled2 * c.mdecay * minv).max(1e-16).sqrt();
            let z: f64 = StandardNormal.sample(rng);
            let p_new = p - eps2 * minv * gr - c.mdecay * p + sigma * z;
            theta[i] += p_new;
            self.p[i] = p_new;
            if adapt {
                let r = 1.0 / (xi + 1.0);
                self.g[i] = (1.0 - r) * g + r * gr;
                self.g2[i] = (1.0 - r) * g2 + r * gr * gr;
                self.xi[i] = 1.0 + xi * (1.0 - g * g / (g2 + 1e-16));
            }
        }
    }
}

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

/// A model whose [`Role::Sampled`] blocks an [`SghmcStepper`] samples; it keeps the
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

/// The SGHMC stepper with moving-window MCEM (see the module docs).
#[derive(Clone, Debug)]
pub struct SghmcStepper {
    config: SghmcConfig,
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
    pub fn new(config: SghmcConfig, schedule: SghmcSchedule, seed: u64) -> Result<Self> {
        config.validate()?;
        if schedule.kept == 0
            || schedule.thinning == 0
            || schedule.window == 0
            || schedule.window > schedule.burn_in
        {
            return Err(Error::Config(format!(
                "sghmc: the schedule needs kept, thinning and window ≥ 1 and window ≤ burn_in, got {schedule:?}"
            )));
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
            return Err(Error::Config(
                "sghmc: the model has no sampled blocks".into(),
            ));
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
            return Err(Error::Config(
                "sghmc stepper used before Stepper::start".into(),
            ));
        };
        let t = st.step;
        let result = if st.finished() {
            Err(Error::Config(format!(
                "sghmc: step {t} is past the end of the schedule ({} steps)",
                st.schedule.total()
            )))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;
    use crate::model::{FitConfig, FitObserver, FitReport, Objective, PredictConfig};
    use crate::params::{ParamId, ParamStore};
    use crate::predictive::Predictive;
    use crate::tape::{Tape, Var};
    use crate::train::Executor;
    use faer::{Mat, MatRef, mat};
    use std::sync::Mutex;

    /// Issue 15 test 1 / spec §7: U = θ²/2 (nll = θ²/(2N), N = 1000), exact gradients,
    /// 2000 independent chains (entries of one vector — the update is elementwise),
    /// 10⁴ adapting steps, then 2·10⁴ frozen steps. Var(θ) at the end of the run within
    /// ±0.15 of 1 (s.e. of a sample variance over 2000 chains ≈ 0.032; the spec's band),
    /// and the time average of θ² over the frozen phase after 1500 steps of relaxation
    /// within 4 s.e. of 1, the mean within 4 s.e. of 0 (s.e. from batch means over time).
    #[test]
    fn update_rule_samples_a_standard_normal() {
        let (chains, n) = (2000, 1000);
        let c = SghmcConstants {
            step_size: 0.01,
            mdecay: 0.05,
            num_data: n,
        };
        let mut chain = SghmcChain::new(chains);
        let mut theta = vec![0.0; chains];
        let mut grad = vec![0.0; chains];
        let mut rng = seeded(7);
        for _ in 0..10_000 {
            grad.iter_mut()
                .zip(&theta)
                .for_each(|(g, t)| *g = t / n as f64);
            chain.update(&mut theta, &grad, true, c, &mut rng);
        }
        let (frozen, relax, batches) = (20_000, 1_500, 37);
        let per_batch = (frozen - relax) / batches;
        let mut batch_m2 = vec![0.0; batches];
        let mut batch_m1 = vec![0.0; batches];
        for t in 0..frozen {
            grad.iter_mut()
                .zip(&theta)
                .for_each(|(g, x)| *g = x / n as f64);
            chain.update(&mut theta, &grad, false, c, &mut rng);
            if t >= relax && (t - relax) / per_batch < batches {
                let k = (t - relax) / per_batch;
                batch_m2[k] += theta.iter().map(|x| x * x).sum::<f64>() / chains as f64;
                batch_m1[k] += theta.iter().sum::<f64>() / chains as f64;
            }
        }
        let mean = theta.iter().sum::<f64>() / chains as f64;
        let var = theta.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (chains - 1) as f64;
        assert!((var - 1.0).abs() < 0.15, "end-of-run variance {var}");
        assert!(mean.abs() < 0.15, "end-of-run mean {mean}");
        let stats = |b: &[f64]| {
            let v: Vec<f64> = b.iter().map(|s| s / per_batch as f64).collect();
            let m = v.iter().sum::<f64>() / v.len() as f64;
            let s2 = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
            (m, (s2 / v.len() as f64).sqrt())
        };
        let (m2, se2) = stats(&batch_m2);
        let (m1, se1) = stats(&batch_m1);
        assert!(
            (m2 - 1.0).abs() < 4.0 * se2,
            "time-averaged E θ² = {m2} ± {se2}"
        );
        assert!(m1.abs() < 4.0 * se1, "time-averaged E θ = {m1} ± {se1}");
        assert!(se2 < 0.02, "the time average is informative (s.e. {se2})");
    }

    /// The update is simultaneous: adaptation reads the old g, g², ξ, and the momentum
    /// step reads the old g²; frozen steps leave ξ, g, g² alone.
    #[test]
    fn one_update_by_hand() {
        let c = SghmcConstants {
            step_size: 0.1,
            mdecay: 0.05,
            num_data: 4,
        };
        let mut chain = SghmcChain {
            p: vec![0.2],
            xi: vec![1.5],
            g: vec![0.5],
            g2: vec![2.0],
        };
        let mut theta = vec![1.0];
        let mut rng = seeded(3);
        let z: f64 = StandardNormal.sample(&mut seeded(3));
        chain.update(&mut theta, &[0.3], true, c, &mut rng);
        let minv = 1.0 / ((2.0f64 + 1e-16).sqrt() + 1e-16);
        let sigma = (2.0 * 0.01 / 4.0 * 0.05 * minv).sqrt();
        let p = 0.2 - 0.01 * minv * 0.3 - 0.05 * 0.2 + sigma * z;
        let r = 1.0 / 2.5;
        assert_eq!(chain.p[0], p);
        assert_eq!(theta[0], 1.0 + p);
        assert_eq!(chain.g[0], (1.0 - r) * 0.5 + r * 0.3);
        assert_eq!(chain.g2[0], (1.0 - r) * 2.0 + r * 0.09);
        assert_eq!(chain.xi[0], 1.0 + 1.5 * (1.0 - 0.25 / (2.0 + 1e-16)));
        let before = chain.clone();
        chain.update(&mut theta, &[0.3], false, c, &mut rng);
        assert_eq!(
            (&chain.xi, &chain.g, &chain.g2),
            (&before.xi, &before.g, &before.g2)
        );
    }

    /// A sampled θ (1×1) and an optimised h (1×1); J = −½θ² − ½(h − θ)² (so the hyper
    /// gradient at θ_w is θ_w − h). Every evaluation logs the θ it saw.
    struct Toy {
        params: ParamStore,
        theta: ParamId,
        h: ParamId,
        seen: Mutex<Vec<f64>>,
        state: Option<SghmcState>,
        poison_after: Option<usize>,
    }

    fn toy() -> Toy {
        let mut params = ParamStore::new();
        let theta = params.add("theta", mat![[0.5]], Role::Sampled).unwrap();
        let h = params.add("h", mat![[2.0]], Role::Optimised).unwrap();
        Toy {
            params,
            theta,
            h,
            seen: Mutex::new(Vec::new()),
            state: None,
            poison_after: None,
        }
    }

    impl Objective for Toy {
        fn params(&self) -> &ParamStore {
            &self.params
        }
        fn record(&self, t: &mut Tape, p: &[Var], _: &Batch<'_>, _: &mut Rng) -> Result<Var> {
            let th = t.value(p[self.theta.0])[(0, 0)];
            let mut seen = self.seen.lock().unwrap();
            seen.push(th);
            let poisoned = self.poison_after.is_some_and(|k| seen.len() > k);
            let a = t.sum_squares(p[self.theta.0]);
            let d = t.sub(p[self.h.0], p[self.theta.0]);
            let b = t.sum_squares(d);
            let s = t.add(a, b);
            let j = t.scale(s, -0.5);
            Ok(if poisoned { t.scale(j, f64::NAN) } else { j })
        }
    }

    impl Model for Toy {
        fn backend(&self) -> &'static str {
            "toy"
        }
        fn describe(&self) -> String {
            "toy".into()
        }
        fn params_mut(&mut self) -> &mut ParamStore {
            &mut self.params
        }
        fn fit(
            &mut self,
            _: &Dataset,
            _: &FitConfig,
            _: &mut dyn FitObserver,
        ) -> Result<FitReport> {
            Err(Error::Config("not used".into()))
        }
        fn predict(&self, _: MatRef<'_, f64>, _: &PredictConfig) -> Result<Predictive> {
            Err(Error::Config("not used".into()))
        }
        fn to_json(&self) -> Result<String> {
            Err(Error::Config("not used".into()))
        }
    }

    impl SampledModel for Toy {
        fn sampler_state(&self) -> Option<&SghmcState> {
            self.state.as_ref()
        }
        fn sampler_state_mut(&mut self) -> &mut Option<SghmcState> {
            &mut self.state
        }
    }

    fn data() -> Dataset {
        Dataset::new(Mat::zeros(4, 1), Mat::zeros(4, 1)).unwrap()
    }

    fn run(model: &mut Toy, cfg: &SghmcConfig, steps: usize) -> Result<FitReport> {
        let schedule = cfg.full_schedule();
        let stepper = SghmcStepper::new(cfg.clone(), schedule, 11)?;
        let fit = FitConfig {
            steps,
            seed: 5,
            ..FitConfig::default()
        };
        Executor::new(stepper, &fit).run(model, &data())
    }

    fn small() -> SghmcConfig {
        SghmcConfig {
            burn_in: 40,
            thinning: 3,
            kept: 5,
            window: 8,
            step_size: 0.2,
            ..SghmcConfig::default()
        }
    }

    /// Issue 15 test 4: each burn-in step evaluates the objective twice — at the chain's
    /// current θ, then (hyper step) at an entry of the window that includes the new
    /// sample — and the hyper step leaves the chain exactly where the sampler put it
    /// (same θ path with MCEM on and off); several window entries are used, not only the
    /// newest; after burn-in one evaluation per step and h never changes; samples are
    /// kept after every `thinning`-th frozen step.
    #[test]
    fn mcem_reads_the_window_and_leaves_the_chain_alone() {
        let cfg = small();
        let mut with = toy();
        for t in 0..cfg.burn_in {
            // The same step without the hyper step, from the same state.
            let mut without = toy();
            without.params = with.params.clone();
            without.state = with.state.clone().map(|s| SghmcState { adam: None, ..s });
            let h_before = with.params.get(with.h)[(0, 0)];
            run(&mut with, &cfg, 1).unwrap();
            run(
                &mut without,
                &SghmcConfig {
                    mcem: false,
                    ..cfg.clone()
                },
                1,
            )
            .unwrap();
            let st = with.state.as_ref().unwrap();
            assert_eq!(st.step, t + 1);
            let th = with.params.get(with.theta)[(0, 0)];
            assert_eq!(
                th,
                without.params.get(without.theta)[(0, 0)],
                "chain moved by MCEM"
            );
            let seen = with.seen.lock().unwrap();
            assert_eq!(seen.len(), 2 * (t + 1));
            let at = seen[2 * t + 1];
            assert!(
                st.window.contains(&vec![at]),
                "hyper step at {at}, not in the window"
            );
            assert_eq!(st.window.len(), (t + 1).min(cfg.window));
            assert_ne!(with.params.get(with.h)[(0, 0)], h_before);
            assert_eq!(without.params.get(without.h)[(0, 0)], h_before);
        }
        {
            let seen = with.seen.lock().unwrap();
            let st = with.state.as_ref().unwrap();
            let hyper_at: Vec<f64> = seen.iter().skip(1).step_by(2).copied().collect();
            let current: Vec<f64> = seen.iter().step_by(2).skip(1).copied().collect();
            let stale = hyper_at
                .iter()
                .zip(&current)
                .filter(|(a, b)| a != b)
                .count();
            assert!(
                stale > 10,
                "the hyper step used the newest sample almost always"
            );
            assert!(st.adam.as_ref().unwrap().steps() == cfg.burn_in as u64);
        }
        let h = with.params.get(with.h)[(0, 0)];
        let window = with.state.as_ref().unwrap().window.clone();
        for t in 0..cfg.kept * cfg.thinning {
            run(&mut with, &cfg, 1).unwrap();
            assert_eq!(
                with.params.get(with.h)[(0, 0)],
                h,
                "hyper moved while sampling"
            );
            let st = with.state.as_ref().unwrap();
            assert_eq!(st.window, window);
            assert_eq!(st.kept.len(), (t + 1) / cfg.thinning);
            if (t + 1) % cfg.thinning == 0 {
                assert_eq!(
                    st.kept.last().unwrap()[0],
                    with.params.get(with.theta)[(0, 0)]
                );
            }
        }
        assert_eq!(
            with.seen.lock().unwrap().len(),
            2 * cfg.burn_in + cfg.kept * cfg.thinning
        );
        assert!(with.state.as_ref().unwrap().finished());
        let e = run(&mut with, &cfg, 1).unwrap_err().to_string();
        assert!(e.contains("past the end"), "{e}");
    }

    /// Step by step equals one run: the state in the model carries everything.
    #[test]
    fn split_runs_equal_one_run() {
        let cfg = small();
        let mut a = toy();
        run(&mut a, &cfg, cfg.full_schedule().total()).unwrap();
        let mut b = toy();
        run(&mut b, &cfg, 17).unwrap();
        run(&mut b, &cfg, 30).unwrap();
        run(&mut b, &cfg, cfg.full_schedule().total() - 47).unwrap();
        assert_eq!(a.params.flat(), b.params.flat());
        assert_eq!(a.state, b.state);
        assert_eq!(*a.seen.lock().unwrap(), *b.seen.lock().unwrap());
    }

    /// A non-finite objective stops the run with a numerical error naming the step and
    /// phase; the model keeps the last good state.
    #[test]
    fn non_finite_stops_with_the_step_and_keeps_the_last_good_state() {
        let cfg = small();
        let mut m = toy();
        m.poison_after = Some(2 * 7);
        let e = run(&mut m, &cfg, 30).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Numerical(_)), "{msg}");
        assert!(msg.contains("step 7") && msg.contains("burn-in"), "{msg}");
        let st = m.state.as_ref().unwrap();
        assert_eq!(st.step, 7);
        let mut good = toy();
        run(&mut good, &cfg, 7).unwrap();
        assert_eq!(good.params.flat(), m.params.flat());
        assert_eq!(good.state, m.state);
    }

    #[test]
    fn config_errors_name_the_field_and_schedules_fit_the_budget() {
        let c = SghmcConfig::default();
        for (bad, field) in [
            (
                SghmcConfig {
                    kept: 0,
                    ..c.clone()
                },
                "kept",
            ),
            (
                SghmcConfig {
                    thinning: 0,
                    ..c.clone()
                },
                "thinning",
            ),
            (
                SghmcConfig {
                    window: 20_000,
                    ..c.clone()
                },
                "window",
            ),
            (
                SghmcConfig {
                    step_size: 0.0,
                    ..c.clone()
                },
                "step_size",
            ),
            (
                SghmcConfig {
                    step_size: f64::NAN,
                    ..c.clone()
                },
                "step_size",
            ),
            (
                SghmcConfig {
                    mdecay: 0.0,
                    ..c.clone()
                },
                "mdecay",
            ),
            (
                SghmcConfig {
                    hyper_lr: f64::INFINITY,
                    ..c.clone()
                },
                "hyper_lr",
            ),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains(field), "{field}: {e}");
        }
        assert_eq!(c.schedule(1_000_000).unwrap(), c.full_schedule());
        let s = c.schedule(3_000).unwrap();
        assert_eq!(
            (s.total(), s.kept, s.thinning, s.burn_in),
            (3_000, 100, 10, 2_000)
        );
        let s = c.schedule(1_000).unwrap();
        assert_eq!(
            (s.burn_in, s.thinning, s.kept, s.window),
            (700, 3, 100, 100)
        );
        let s = c.schedule(20).unwrap();
        assert_eq!(
            (s.total(), s.burn_in, s.thinning, s.kept, s.window),
            (20, 13, 1, 7, 13)
        );
        for b in 2..400 {
            let s = c.schedule(b).unwrap();
            assert_eq!(s.total(), b);
            assert!(
                s.kept >= 1 && s.window >= 1 && s.window <= s.burn_in,
                "{b}: {s:?}"
            );
        }
        let e = c.schedule(1).unwrap_err().to_string();
        assert!(e.contains("steps (1)"), "{e}");
    }
}
