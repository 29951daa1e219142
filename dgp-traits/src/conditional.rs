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
//! Notation (Salimbeni & Deisenroth 2017, eqs. 7–8): Kuu = k(Z, Z) + σ²_white·I + jitter·I,
//! L = chol(Kuu), Kuf = k(Z, X), A = L⁻¹Kuf. Whitened (u = L v, q and the given u are over
//! v): Ã = A. Non-whitened: Ã = L⁻ᵀA = Kuu⁻¹Kuf. Then, per output d, eqs. (7)–(8) read
//!
//! * mean `μ = m(x) + Ãᵀ m_d` (or `Ãᵀ u_d`);
//! * variance `σ² = k(x, x) − aᵀa + ‖L_S,dᵀ Ã‖²` (full), `+ (Ã²)ᵀ s_d²` (diagonal), or the
//!   base `k(x, x) − aᵀa` alone (no q).
//!
//! Two routes compute the same moments ([`Route`]), chosen per call from the shapes by a
//! cost model ([`Route::choose`]), so the choice never depends on values or threads:
//!
//! * [`Route::Solve`] forms `A` (a triangular solve with the B right-hand sides) and
//!   assembles the variance as `kff − aᵀa + ‖L_Sᵀ·‖²` — never as `k − α(Kuu − S)α`, which
//!   loses positive-definiteness numerically. Cost with the adjoints: `1.5·M²B` for the
//!   solve (twice when not whitened) and `1.5·M²B` per full factor.
//! * [`Route::Forms`] never solves with the batch: with the M×M forms
//!   `α_d = L⁻ᵀm_d` (whitened) or `Kuu⁻¹m_d`, and `Q_d = Kuu⁻¹ − R_d R_dᵀ`,
//!   `R_d = L⁻ᵀL_S,d` (whitened) or `Kuu⁻¹L_S,d` (L_S,d = diag s_d for a diagonal q;
//!   `Q = Kuu⁻¹` for a given u), the moments are `μ = m(x) + Kufᵀα_d` and
//!   `σ² = k(x, x) − kᵀQ_d k` ([`Tape::quad_form_cols`]): `1.5·M²B` per form with the
//!   adjoints, plus O(M³) per layer and output to build the forms. It wins when B ≫ M and
//!   the layer has few outputs (DSVI's last layer with S samples: about 2× fewer
//!   multiply-adds, all in dense products). Its price is accuracy: the forms hold `Kuu⁻¹`,
//!   so the variance carries an absolute error of order `u·cond(Kuu)·k(x, x)`
//!   (u = 1.1·10⁻¹⁶; the jitter rule keeps `cond(Kuu)` below about `M·10⁶`), against
//!   `u·√cond(Kuu)·k(x, x)` through `A`. Measured at the worst conditioning the jitter
//!   rule allows (test `forms_route_is_accurate_at_the_jitter_rules_worst_conditioning`:
//!   64 inducing inputs 0.01 apart, RBF lengthscale 1, a concentrated q): the routes'
//!   variances differ by 2·10⁻⁹·k(x, x) whitened, which the backends absorb (a sampling
//!   jitter of 10⁻⁶ before the square root of hidden layers, a noise floor in the
//!   likelihood), and by 4·10⁻⁷·k(x, x) non-whitened, where `Kuu⁻¹SKuu⁻¹` cancels against
//!   `Kuu⁻¹`: the non-whitened parameterisation therefore always takes the solve route.
//!
//! [`Tape::quad_form_cols`]: crate::tape::Tape::quad_form_cols

use crate::tape::{Tape, Var};
use dgp_core::linalg::Tri;

/// What a layer's projection of a batch onto its inducing points yields (all on the tape).
#[derive(Clone, Copy, Debug)]
pub struct Projection {
    /// Lower Cholesky factor L of `Kuu + jitter·I` (M×M).
    pub chol: Var,
    /// `Kuf = k(Z, X)` (M×B).
    pub kuf: Var,
    /// `diag Kff` (B×1), including any white-noise variance of the layer.
    pub kff_diag: Var,
    /// The mean function at the inputs (B×D_out); `None` for the zero mean.
    pub mean: Option<Var>,
}

impl Projection {
    /// Records `A = L⁻¹Kuf` (M×B), the whitened projection, for callers that need it
    /// itself (the conditionals of [`crate::conditional`] work with `Kuf` and M×M forms
    /// instead, and never solve with the batch).
    pub fn a(&self, tape: &mut Tape) -> Var {
        tape.tri_solve(self.chol, self.kuf, Tri::Lower)
    }
}

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

/// How [`conditional`] computes the moments (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Through `A = L⁻¹Kuf` (a triangular solve with the batch).
    Solve,
    /// Through M×M forms `α_d`, `Q_d` and [`Tape::quad_form_cols`] on `Kuf`.
    ///
    /// [`Tape::quad_form_cols`]: crate::tape::Tape::quad_form_cols
    Forms,
}

/// Weight of an M³ multiply-add against an M²B one in [`Route::choose`]: the forms' small
/// products and solves run single-threaded and at a fraction of the speed of the long
/// column-chunked ones.
const SMALL_PRODUCT_WEIGHT: f64 = 2.0;

impl Route {
    /// The cheaper route, in multiply-adds with the adjoints (module docs), for M inducing
    /// points, B inputs, `outputs` columns of u and the q part's shape: `full` factors,
    /// diagonal ones, or none (a given u). Always [`Route::Solve`] when not whitened
    /// (accuracy, module docs).
    pub fn choose(m: usize, b: usize, outputs: usize, q: QShape, whiten: bool) -> Route {
        if !whiten {
            // Non-whitened forms hold Kuu⁻¹SKuu⁻¹, whose cancellation costs two orders of
            // magnitude more accuracy (module docs): never chosen.
            return Route::Solve;
        }
        let (m, b, d) = (m as f64, b as f64, outputs as f64);
        let batch = m * m * b;
        let small = SMALL_PRODUCT_WEIGHT * m * m * m;
        let solves = if whiten { 1.0 } else { 2.0 };
        let (solve, forms) = match q {
            QShape::Full => (
                batch * 1.5 * (solves + d),
                batch * 1.5 * d + small * (4.0 + 4.5 * d),
            ),
            QShape::Diag => (
                batch * 1.5 * solves,
                batch * 1.5 * d + small * (4.0 + 4.5 * d),
            ),
            QShape::Given => (batch * 1.5 * solves, batch * 1.5 + small * 4.0),
        };
        if forms < solve {
            Route::Forms
        } else {
            Route::Solve
        }
    }
}

/// The shape of a q part, for [`Route::choose`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QShape {
    /// Full M×M factors.
    Full,
    /// Diagonal factors.
    Diag,
    /// No q: a given u.
    Given,
}

impl QPart<'_> {
    /// The shape of this q part.
    pub fn shape(&self) -> QShape {
        match self {
            QPart::Gaussian(QVars {
                sqrt: QSqrt::Full(_),
                ..
            }) => QShape::Full,
            QPart::Gaussian(_) => QShape::Diag,
            QPart::Given(_) => QShape::Given,
        }
    }

    /// The inducing values or q means (M×D).
    fn values(&self) -> Var {
        match self {
            QPart::Gaussian(q) => q.mean,
            QPart::Given(u) => *u,
        }
    }
}

/// Means and variances (each B×D) of f at the projected inputs given the q part `q`
/// (see the module docs), through the route [`Route::choose`] picks.
pub fn conditional(tape: &mut Tape, proj: &Projection, q: QPart<'_>, whiten: bool) -> (Var, Var) {
    let (m, b) = tape.shape(proj.kuf);
    let outputs = tape.shape(q.values()).1;
    conditional_via(
        tape,
        proj,
        q,
        whiten,
        Route::choose(m, b, outputs, q.shape(), whiten),
    )
}

/// [`conditional`] through the given route (both give the same moments up to rounding;
/// tests compare them).
pub fn conditional_via(
    tape: &mut Tape,
    proj: &Projection,
    q: QPart<'_>,
    whiten: bool,
    route: Route,
) -> (Var, Var) {
    let (mu, var) = match route {
        Route::Solve => via_solve(tape, proj, q, whiten),
        Route::Forms => via_forms(tape, proj, q, whiten),
    };
    (add_mean(tape, proj.mean, mu), var)
}

/// `m(x) + μ` when the layer has a mean function.
fn add_mean(tape: &mut Tape, mean: Option<Var>, mu: Var) -> Var {
    match mean {
        Some(m) => tape.add(m, mu),
        None => mu,
    }
}

/// [`Route::Solve`]: `Ãᵀu` and `kff − aᵀa (+ ‖L_Sᵀ Ã‖² or (Ã²)ᵀs²)`.
fn via_solve(tape: &mut Tape, proj: &Projection, q: QPart<'_>, whiten: bool) -> (Var, Var) {
    let a = proj.a(tape);
    let at = if whiten {
        a
    } else {
        tape.tri_solve(proj.chol, a, Tri::LowerT)
    };
    let mu = tape.matmul_tn(at, q.values());
    let qff = tape.col_sq_norms(a);
    let base = tape.sub(proj.kff_diag, qff);
    let var = match q {
        QPart::Gaussian(QVars {
            sqrt: QSqrt::Full(factors),
            ..
        }) => {
            let cols: Vec<Var> = factors
                .iter()
                .map(|&ls| {
                    let s = tape.lower_tn_col_sq_norms(ls, at);
                    tape.add(base, s)
                })
                .collect();
            tape.concat_cols(&cols)
        }
        QPart::Gaussian(QVars {
            sqrt: QSqrt::Diag(sd),
            ..
        }) => {
            let at2 = tape.square(at);
            let s2 = tape.square(*sd);
            let extra = tape.matmul_tn(at2, s2);
            tape.add_col(extra, base)
        }
        QPart::Given(u) => {
            let width = tape.shape(u).1;
            tape.broadcast_cols(base, width)
        }
    };
    (mu, var)
}

/// [`Route::Forms`]: `Kufᵀα` and `kff − kᵀQ_d k` with the M×M forms of the module docs.
fn via_forms(tape: &mut Tape, proj: &Projection, q: QPart<'_>, whiten: bool) -> (Var, Var) {
    let m = tape.shape(proj.chol).0;
    // `L⁻ᵀb` (whitened) or `Kuu⁻¹b`: then `Ãᵀb = Kufᵀ·back(b)`.
    let back = |tape: &mut Tape, b: Var| {
        if whiten {
            tape.tri_solve(proj.chol, b, Tri::LowerT)
        } else {
            tape.chol_solve(proj.chol, b)
        }
    };
    let mut eye = tape.alloc_zeros(m, m);
    for i in 0..m {
        eye[(i, i)] = 1.0;
    }
    let eye = tape.constant(eye);
    let kuu_inv = tape.chol_solve(proj.chol, eye);
    let alpha = back(tape, q.values());
    let mu = tape.matmul_tn(proj.kuf, alpha);
    let factors: Vec<Var> = match q {
        QPart::Gaussian(QVars {
            sqrt: QSqrt::Full(factors),
            ..
        }) => factors.clone(),
        QPart::Gaussian(QVars {
            sqrt: QSqrt::Diag(sd),
            ..
        }) => {
            let width = tape.shape(*sd).1;
            (0..width)
                .map(|d| {
                    let s = tape.slice_cols(*sd, d, 1);
                    tape.diag_matrix(s)
                })
                .collect()
        }
        QPart::Given(u) => {
            let form = tape.quad_form_cols(kuu_inv, proj.kuf);
            let base = tape.sub(proj.kff_diag, form);
            let width = tape.shape(u).1;
            return (mu, tape.broadcast_cols(base, width));
        }
    };
    let cols: Vec<Var> = factors
        .iter()
        .map(|&ls| {
            // Only the factor's lower triangle counts, as in the solve route.
            let ls = tape.tril(ls, false);
            let r = back(tape, ls);
            let rrt = tape.matmul_nt(r, r);
            let qd = tape.sub(kuu_inv, rrt);
            let form = tape.quad_form_cols(qd, proj.kuf);
            tape.sub(proj.kff_diag, form)
        })
        .collect();
    let var = if cols.len() == 1 {
        cols[0]
    } else {
        tape.concat_cols(&cols)
    };
    (mu, var)
}

/// Marginal means and variances (each B×D) of q(f) at the projected inputs, eqs. (7)–(8):
/// [`conditional`] with a Gaussian q.
pub fn marginals(tape: &mut Tape, proj: &Projection, q: &QVars, whiten: bool) -> (Var, Var) {
    conditional(tape, proj, QPart::Gaussian(q), whiten)
}
