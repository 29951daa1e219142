//! Sparse-GP conditionals as functions, in the shape of GPflow's `base_conditional`: the
//! **prior conditional** p(f | u) at a batch of inputs — the projection Ã, the base variance
//! `k(x, x) − aᵀa` and the mean function — kept apart from the **q part**, which says what
//! is known about the inducing outputs u:
//!
//! * a Gaussian q(u) = N(m, S) with full Cholesky factors (one M×M factor per output) or a
//!   diagonal one (M×D standard deviations) — the marginals of q(f), eqs. (7)–(8) of
//!   Salimbeni & Deisenroth (2017);
//! * **no q**: a given (sampled, or fixed) u of size M×D — the mean Ãᵀu and the base
//!   variance only, as SGHMC (Havasi et al. 2018) needs for its sampled inducing outputs.
//!
//! Notation (`shared/specs/dsvi.md` §2): Kuu = k(Z, Z) + σ²_white·I + jitter·I,
//! L = chol(Kuu), Kuf = k(Z, X), A = L⁻¹Kuf. Whitened (u = L v, q and the given u are over
//! v): Ã = A. Non-whitened: Ã = L⁻ᵀA = Kuu⁻¹Kuf. Then, per output d,
//!
//! * mean `μ = m(x) + Ãᵀ m_d` (or `Ãᵀ u_d`);
//! * variance `σ² = k(x, x) − aᵀa + ‖L_S,dᵀ Ã‖²` (full), `+ (Ã²)ᵀ s_d²` (diagonal), or the
//!   base `k(x, x) − aᵀa` alone (no q).
//!
//! The variance is assembled as `kff − aᵀa + ‖L_Sᵀ·‖²`, never as `k − α(Kuu − S)α`, which
//! loses positive-definiteness numerically.

use crate::layer::Projection;
use crate::linalg::Tri;
use crate::tape::{Tape, Var};

/// The Cholesky factor(s) of q(u)'s covariance on the tape, already transformed.
#[derive(Clone, Debug)]
pub enum QSqrt {
    /// One lower-triangular M×M factor per output, with positive diagonal.
    Full(Vec<Var>),
    /// Standard deviations, M×D (mean-field q).
    Diag(Var),
}

/// q(u) of one layer on the tape: means (M×D) and covariance factors.
#[derive(Clone, Debug)]
pub struct QVars {
    /// Means, M×D.
    pub mean: Var,
    /// Covariance factors.
    pub sqrt: QSqrt,
}

/// What is known about the inducing outputs u of one layer (the q part of a conditional).
#[derive(Clone, Copy, Debug)]
pub enum QPart<'a> {
    /// A Gaussian q(u) (full or diagonal factors).
    Gaussian(&'a QVars),
    /// A given u (M×D; whitened: the v with u = L v), e.g. an SGHMC sample: no q.
    Given(Var),
}

/// The prior side of p(f | u) at a batch of inputs (on the tape).
#[derive(Clone, Copy, Debug)]
pub struct PriorConditional {
    /// `A = L⁻¹Kuf` (M×B).
    pub a: Var,
    /// The projection `Ã` (M×B): `A` whitened, `L⁻ᵀA = Kuu⁻¹Kuf` otherwise.
    pub at: Var,
    /// `diag Kff` (B×1), including any white-noise variance of the layer.
    pub kff_diag: Var,
    /// The mean function at the inputs (B×D), `None` for the zero mean.
    pub mean: Option<Var>,
}

impl PriorConditional {
    /// The projection Ã of `proj` for the given parameterisation (one triangular solve
    /// when not whitened).
    pub fn new(tape: &mut Tape, proj: &Projection, whiten: bool) -> Self {
        let at = if whiten {
            proj.a
        } else {
            tape.tri_solve(proj.chol, proj.a, Tri::LowerT)
        };
        PriorConditional {
            a: proj.a,
            at,
            kff_diag: proj.kff_diag,
            mean: proj.mean,
        }
    }

    /// The conditional mean `m(x) + Ãᵀu` (B×D) for inducing values (or q means) `u` (M×D).
    pub fn mean(&self, tape: &mut Tape, u: Var) -> Var {
        let proj_mean = tape.matmul_tn(self.at, u);
        match self.mean {
            Some(m) => tape.add(m, proj_mean),
            None => proj_mean,
        }
    }

    /// The base variance `k(x, x) − aᵀa` (B×1), the conditional variance given u.
    pub fn base_variance(&self, tape: &mut Tape) -> Var {
        let qff = tape.col_sq_norms(self.a);
        tape.sub(self.kff_diag, qff)
    }

    /// The base variance plus the variance q(u) contributes through `Ã` (B×D): per
    /// output `‖L_S,dᵀÃ‖²` (full factors) or `(Ã²)ᵀ s_d²` (diagonal).
    pub fn q_variance(&self, tape: &mut Tape, base: Var, sqrt: &QSqrt) -> Var {
        match sqrt {
            QSqrt::Full(factors) => {
                let cols: Vec<Var> = factors
                    .iter()
                    .map(|&ls| {
                        let s = tape.lower_tn_col_sq_norms(ls, self.at);
                        tape.add(base, s)
                    })
                    .collect();
                tape.concat_cols(&cols)
            }
            QSqrt::Diag(sd) => {
                let at2 = tape.square(self.at);
                let s2 = tape.square(*sd);
                let extra = tape.matmul_tn(at2, s2);
                tape.add_col(extra, base)
            }
        }
    }
}

/// Means and variances (each B×D) of f at the projected inputs given the q part `q`
/// (see the module docs). The tape operations are recorded in the order Ã, mean, base
/// variance, q variance.
pub fn conditional(tape: &mut Tape, proj: &Projection, q: QPart<'_>, whiten: bool) -> (Var, Var) {
    let prior = PriorConditional::new(tape, proj, whiten);
    match q {
        QPart::Gaussian(q) => {
            let mu = prior.mean(tape, q.mean);
            let base = prior.base_variance(tape);
            let var = prior.q_variance(tape, base, &q.sqrt);
            (mu, var)
        }
        QPart::Given(u) => {
            let mu = prior.mean(tape, u);
            let base = prior.base_variance(tape);
            let width = tape.shape(u).1;
            (mu, tape.broadcast_cols(base, width))
        }
    }
}

/// Marginal means and variances (each B×D) of q(f) at the projected inputs, eqs. (7)–(8):
/// [`conditional`] with a Gaussian q.
pub fn marginals(tape: &mut Tape, proj: &Projection, q: &QVars, whiten: bool) -> (Var, Var) {
    conditional(tape, proj, QPart::Gaussian(q), whiten)
}
