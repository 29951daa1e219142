//! The per-entry chain state and the adaptive SGHMC update of cambridge-mlg/sghmc_dgp, `sghmc_base.py` ([`SghmcChain::update`]).

use dgp_core::rng::Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

/// The per-entry state of the sampler's chain (the update of cambridge-mlg/sghmc_dgp, `sghmc_base.py`): momenta `p` and the adapted
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

    /// One update of the update of cambridge-mlg/sghmc_dgp, `sghmc_base.py` (see the module docs) of `theta` given `grad` = ∂nll/∂θ
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
