//! Adam with bias correction and learning-rate schedules.

pub use crate::fit::LrSchedule;
use dgp_core::{Error, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Entries per parallel block of one Adam update (a range of at least two blocks is
/// updated in parallel).
const PAR_BLOCK: usize = 8192;

/// Hyper-parameters of [`Adam`] (Kingma & Ba 2015, Algorithm 1: step size α, moment decays
/// β₁ and β₂, offset ε), with a schedule multiplying α by `schedule.factor(t)` at update
/// `t`. Defaults: α 0.01, β₁ 0.9, β₂ 0.999, ε 1e-8, constant rate (the settings of the
/// DSVI, SGHMC and DSPP references). Every field has a serde default, so a JSON object
/// giving only some of them (or none) reads as those over the defaults; unknown keys are
/// refused.
///
/// A backend that trains with Adam holds one in its own configuration (e.g.
/// `SviConfig::adam`) and hands it to its stepper; a harness sets α and the schedule
/// through the backend's common settings (`CommonSettings::adam_over`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdamConfig {
    /// Base learning rate (step size) α > 0.
    pub lr: f64,
    /// First-moment decay β₁ ∈ [0, 1).
    pub beta1: f64,
    /// Second-moment decay β₂ ∈ [0, 1).
    pub beta2: f64,
    /// Denominator offset ε ≥ 0.
    pub eps: f64,
    /// Learning-rate schedule.
    pub schedule: LrSchedule,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            schedule: LrSchedule::Constant,
        }
    }
}

impl AdamConfig {
    /// Default settings with base learning rate `lr`.
    pub fn with_lr(lr: f64) -> Self {
        AdamConfig {
            lr,
            ..Self::default()
        }
    }

    /// Checks the documented ranges.
    pub fn validate(&self) -> Result<()> {
        let ok = self.lr > 0.0
            && self.lr.is_finite()
            && (0.0..1.0).contains(&self.beta1)
            && (0.0..1.0).contains(&self.beta2)
            && self.eps >= 0.0
            && self.eps.is_finite();
        if !ok {
            return Err(Error::config(
                "adam",
                format!(
                    "Adam needs lr > 0, beta1, beta2 in [0, 1), eps >= 0; got lr={}, beta1={}, beta2={}, eps={}",
                    self.lr, self.beta1, self.beta2, self.eps
                ),
            ));
        }
        self.schedule.validate()
    }
}

/// The mutable state of [`Adam`]: completed steps and the moment estimates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamState {
    /// Number of completed updates `t`.
    pub step: u64,
    /// Biased first-moment estimate `m` (of the gradient as passed to the step method).
    pub m: Vec<f64>,
    /// Biased second-moment estimate `v`.
    pub v: Vec<f64>,
}

/// Adam (Kingma & Ba 2015, Algorithm 1) on a flat parameter vector.
///
/// Update number `t + 1` (with `t` = [`AdamState::step`] completed updates) and gradient
/// `g`:
/// `m ← β₁m + (1−β₁)g`, `v ← β₂v + (1−β₂)g²`, `m̂ = m/(1−β₁^{t+1})`,
/// `v̂ = v/(1−β₂^{t+1})`, `θ ← θ ± α_t m̂/(√v̂ + ε)` with `α_t = lr · schedule.factor(t)`
/// and `+` for [`Adam::ascend`], `−` for [`Adam::descend`]. On the first step
/// `m̂ = g`, `v̂ = g²`, so every coordinate moves by `α₀·|g|/(|g| + ε)` ≈ `α₀` in the
/// direction of `sign(g)`. (ε sits outside the square root as in the paper; TensorFlow's
/// `AdamOptimizer` used by the GPflow references adds ε to `√v` before bias-correcting,
/// which differs only in the size of ε's effect.)
///
/// Use one direction per optimiser: the moments are kept for the gradient as passed.
/// The whole optimiser (configuration and state) serialises with a run's state
/// ([`crate::fit::RunState`]), so a checkpointed run resumes exactly.
///
/// ```
/// use dgp_traits::optim::{Adam, AdamConfig};
/// // maximise −(x − 3)²
/// let mut x = vec![0.0];
/// let mut adam = Adam::new(AdamConfig::with_lr(0.1), 1).unwrap();
/// for _ in 0..2000 {
///     let g = vec![-2.0 * (x[0] - 3.0)];
///     adam.ascend(&mut x, &g).unwrap();
/// }
/// assert!((x[0] - 3.0).abs() < 1e-3);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Adam {
    config: AdamConfig,
    state: AdamState,
}

impl Adam {
    /// A fresh optimiser for `n_params` parameters.
    pub fn new(config: AdamConfig, n_params: usize) -> Result<Self> {
        config.validate()?;
        Ok(Adam {
            config,
            state: AdamState {
                step: 0,
                m: vec![0.0; n_params],
                v: vec![0.0; n_params],
            },
        })
    }

    /// Rebuilds an optimiser from a saved configuration and state.
    pub fn from_parts(config: AdamConfig, state: AdamState) -> Result<Self> {
        config.validate()?;
        if state.m.len() != state.v.len() {
            return Err(Error::shape("Adam state", state.m.len(), state.v.len()));
        }
        Ok(Adam { config, state })
    }

    /// The configuration.
    pub fn config(&self) -> &AdamConfig {
        &self.config
    }

    /// The state (step count and moments).
    pub fn state(&self) -> &AdamState {
        &self.state
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.state.m.len()
    }

    /// Whether the optimiser has no parameters.
    pub fn is_empty(&self) -> bool {
        self.state.m.is_empty()
    }

    /// Completed updates.
    pub fn steps(&self) -> u64 {
        self.state.step
    }

    /// The learning rate the next update will use.
    pub fn current_lr(&self) -> f64 {
        self.config.lr * self.config.schedule.factor(self.state.step)
    }

    /// Forgets the moments and the step count (the configuration is kept).
    pub fn reset(&mut self) {
        self.state.step = 0;
        self.state.m.iter_mut().for_each(|x| *x = 0.0);
        self.state.v.iter_mut().for_each(|x| *x = 0.0);
    }

    /// One update that **increases** the objective whose gradient is `grad`.
    pub fn ascend(&mut self, params: &mut [f64], grad: &[f64]) -> Result<()> {
        self.update(params, grad, 1.0)
    }

    /// One update that **decreases** the objective whose gradient is `grad`.
    pub fn descend(&mut self, params: &mut [f64], grad: &[f64]) -> Result<()> {
        self.update(params, grad, -1.0)
    }

    /// [`Adam::ascend`] restricted to the positions in `ranges` (e.g. the
    /// [`crate::params::Role::Optimised`] ranges of a store): the other entries of
    /// `params` and their moments are left exactly as they are; the step count advances
    /// once. Each updated entry gets the same arithmetic as in [`Adam::ascend`].
    ///
    /// # Errors
    /// Lengths other than [`Adam::len`], a range past the end, or a non-finite gradient
    /// entry inside a range.
    pub fn ascend_ranges(
        &mut self,
        params: &mut [f64],
        grad: &[f64],
        ranges: &[Range<usize>],
    ) -> Result<()> {
        self.update_ranges(params, grad, ranges, 1.0)
    }

    fn update(&mut self, params: &mut [f64], grad: &[f64], sign: f64) -> Result<()> {
        let n = self.state.m.len();
        self.update_ranges(params, grad, std::slice::from_ref(&(0..n)), sign)
    }

    fn update_ranges(
        &mut self,
        params: &mut [f64],
        grad: &[f64],
        ranges: &[Range<usize>],
        sign: f64,
    ) -> Result<()> {
        let n = self.state.m.len();
        if params.len() != n {
            return Err(Error::shape("Adam parameters", n, params.len()));
        }
        if grad.len() != n {
            return Err(Error::shape("Adam gradient", n, grad.len()));
        }
        for r in ranges {
            if r.end > n || r.start > r.end {
                return Err(Error::shape("Adam range end", n, r.end));
            }
            if let Some(i) = grad[r.clone()].iter().position(|g| !g.is_finite()) {
                return Err(Error::NonFinite {
                    context: "Adam gradient".into(),
                    row: r.start + i,
                    col: 0,
                });
            }
        }
        let AdamConfig {
            beta1, beta2, eps, ..
        } = self.config;
        let lr = self.current_lr();
        let t1 = (self.state.step + 1) as f64;
        let bc1 = 1.0 - beta1.powf(t1);
        let bc2 = 1.0 - beta2.powf(t1);
        // step = lr·m̂/(√v̂ + ε) with m̂ = m/bc1, v̂ = v/bc2: the bias corrections are folded
        // into constants (one square root and one division per entry).
        let k = Moments {
            beta1,
            beta2,
            eps,
            step_scale: sign * lr / bc1,
            inv_bc2: 1.0 / bc2,
        };
        let AdamState { m, v, .. } = &mut self.state;
        for r in ranges {
            let (p, g) = (&mut params[r.clone()], &grad[r.clone()]);
            let (m, v) = (&mut m[r.clone()], &mut v[r.clone()]);
            // Every entry's update is independent of the others: long ranges are split
            // into blocks updated in parallel, with the same arithmetic per entry (the
            // result does not depend on the thread count).
            if p.len() >= 2 * PAR_BLOCK {
                p.par_chunks_mut(PAR_BLOCK)
                    .zip(g.par_chunks(PAR_BLOCK))
                    .zip(m.par_chunks_mut(PAR_BLOCK))
                    .zip(v.par_chunks_mut(PAR_BLOCK))
                    .for_each(|(((p, g), m), v)| k.update(p, g, m, v));
            } else {
                k.update(p, g, m, v);
            }
        }
        self.state.step += 1;
        Ok(())
    }
}

/// The constants of one Adam update.
#[derive(Clone, Copy)]
struct Moments {
    beta1: f64,
    beta2: f64,
    eps: f64,
    step_scale: f64,
    inv_bc2: f64,
}

impl Moments {
    /// Updates the moments `m`, `v` and the entries `p` with gradient `g`, entry by entry.
    /// The branch-free loop is compiled inside pulp's target-feature context, so it runs
    /// on the widest vector instructions of the machine; square root and division are
    /// correctly rounded at every width and no multiply-add is fused, so the numbers do
    /// not depend on the instruction set.
    fn update(self, p: &mut [f64], g: &[f64], m: &mut [f64], v: &mut [f64]) {
        struct Loop<'a> {
            k: Moments,
            p: &'a mut [f64],
            g: &'a [f64],
            m: &'a mut [f64],
            v: &'a mut [f64],
        }
        impl pulp::WithSimd for Loop<'_> {
            type Output = ();
            #[inline(always)]
            fn with_simd<S: pulp::Simd>(self, _simd: S) {
                let Loop { k, p, g, m, v } = self;
                for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                    *m = k.beta1 * *m + (1.0 - k.beta1) * g;
                    *v = k.beta2 * *v + (1.0 - k.beta2) * g * g;
                    let denom = (*v * k.inv_bc2).sqrt() + k.eps;
                    let step = k.step_scale * *m / denom;
                    // denom = 0 only when v = 0 and ε = 0, where m = 0 too: no step.
                    *p += if denom > 0.0 { step } else { 0.0 };
                }
            }
        }
        pulp::Arch::new().dispatch(Loop {
            k: self,
            p,
            g,
            m,
            v,
        });
    }
}
