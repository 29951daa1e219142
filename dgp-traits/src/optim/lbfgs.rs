//! L-BFGS (Nocedal 1980; Liu & Nocedal 1989) with the Moré–Thuente line search, through
//! `argmin` on `Vec<f64>` parameters.

use std::cell::{Cell, RefCell};

use argmin::core::{
    CostFunction, Error as ArgminError, Executor, Gradient, State, TerminationReason,
};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use serde::{Deserialize, Serialize};

use dgp_core::{Error, Result};

/// Settings of [`lbfgs_minimise`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LbfgsConfig {
    /// Maximum number of L-BFGS iterations (line searches), summed over restarts.
    pub max_iters: u64,
    /// Number of correction pairs kept (the "m" of L-BFGS), ≥ 1.
    pub memory: usize,
    /// Stop when the Euclidean norm of the gradient falls below this (≥ 0).
    pub tol_grad: f64,
    /// Stop when the objective changes by less than this between iterations (absolute,
    /// ≥ 0; argmin's default is machine epsilon, which only fires on exact stalls).
    pub tol_cost: f64,
    /// How many times the solver may recover from a failed line search (a non-finite
    /// objective or gradient at a trial point, or a lost descent direction) by a
    /// backtracking steepest-descent step and a restart with empty memory.
    pub max_restarts: usize,
}

impl Default for LbfgsConfig {
    fn default() -> Self {
        LbfgsConfig {
            max_iters: 1000,
            memory: 10,
            tol_grad: 1e-6,
            tol_cost: f64::EPSILON,
            max_restarts: 20,
        }
    }
}

impl LbfgsConfig {
    /// Checks the documented ranges.
    pub fn validate(&self) -> Result<()> {
        if self.memory == 0 {
            return Err(Error::config(
                "lbfgs.memory",
                "L-BFGS memory must be at least 1",
            ));
        }
        if !(self.tol_grad >= 0.0 && self.tol_cost >= 0.0) {
            return Err(Error::config(
                "lbfgs.tol",
                format!(
                    "L-BFGS tolerances must be non-negative, got tol_grad={}, tol_cost={}",
                    self.tol_grad, self.tol_cost
                ),
            ));
        }
        Ok(())
    }
}

/// Outcome of [`lbfgs_minimise`] / [`lbfgs_maximise`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LbfgsReport {
    /// The best point found (lowest objective among all evaluations; highest for
    /// [`lbfgs_maximise`]).
    pub x: Vec<f64>,
    /// The objective at `x` (in the caller's sign convention).
    pub value: f64,
    /// Euclidean norm of the gradient at `x`.
    pub grad_norm: f64,
    /// L-BFGS iterations performed (including recovery steps).
    pub iterations: u64,
    /// Objective evaluations (each returns value and gradient).
    pub evaluations: u64,
    /// Line-search failures recovered from.
    pub restarts: usize,
    /// Whether a convergence criterion (`tol_grad`, or `tol_cost` on an exact stall)
    /// was met, as opposed to running out of iterations or restarts.
    pub converged: bool,
    /// Human-readable reason for stopping.
    pub termination: String,
}

/// A finite evaluation: point, value, gradient.
#[derive(Clone)]
struct Eval {
    x: Vec<f64>,
    f: f64,
    g: Vec<f64>,
}

enum Failure {
    /// Non-finite value or gradient at this point.
    NonFinite(Vec<f64>),
    /// The user's objective returned an error (or a gradient of the wrong length).
    User(Error),
}

struct Inner<F> {
    f: F,
    n: usize,
    last: Option<Eval>,
    best: Option<Eval>,
    evals: u64,
    failure: Option<Failure>,
}

/// The objective as argmin sees it: one cached evaluation serves both `cost` and
/// `gradient` at the same point; failures are recorded for the driver and turned into
/// argmin errors, which end the current line search.
///
/// argmin sees the objective multiplied by `scale` = 1 / max(1, ‖∇f‖) at the start of each
/// run. L-BFGS is invariant to that factor after its first iteration (the initial inverse
/// Hessian γI, γ = sᵀy / yᵀy, absorbs it), but the first iteration is a steepest-descent
/// step whose trial length is ‖∇f‖: on a bound summed over hundreds of points that is a
/// jump of thousands in the raw parameters. Scaled, the first trial step has length at
/// most 1, as in L-BFGS-B's first iteration (step 1/‖d‖).
struct Objective<F> {
    inner: RefCell<Inner<F>>,
    scale: Cell<f64>,
}

impl<F> Objective<F>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>)>,
{
    fn eval(&self, x: &[f64]) -> std::result::Result<Eval, ()> {
        let mut inner = self.inner.borrow_mut();
        if let Some(last) = &inner.last
            && last.x.len() == x.len()
            && last
                .x
                .iter()
                .zip(x)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        {
            return Ok(last.clone());
        }
        inner.evals += 1;
        let n = inner.n;
        match (inner.f)(x) {
            Err(e) => {
                inner.failure = Some(Failure::User(e));
                Err(())
            }
            Ok((_, g)) if g.len() != n => {
                inner.failure = Some(Failure::User(Error::shape(
                    "L-BFGS objective gradient",
                    n,
                    g.len(),
                )));
                Err(())
            }
            Ok((f, g)) => {
                if !f.is_finite() || g.iter().any(|v| !v.is_finite()) {
                    inner.failure = Some(Failure::NonFinite(x.to_vec()));
                    return Err(());
                }
                let e = Eval {
                    x: x.to_vec(),
                    f,
                    g,
                };
                if inner.best.as_ref().is_none_or(|b| e.f < b.f) {
                    inner.best = Some(e.clone());
                }
                inner.last = Some(e.clone());
                Ok(e)
            }
        }
    }
}

fn argmin_failure() -> ArgminError {
    ArgminError::msg("objective evaluation failed (see the L-BFGS driver)")
}

impl<F> CostFunction for &Objective<F>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>)>,
{
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, x: &Vec<f64>) -> std::result::Result<f64, ArgminError> {
        let c = self.scale.get();
        self.eval(x).map(|e| c * e.f).map_err(|()| argmin_failure())
    }
}

impl<F> Gradient for &Objective<F>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>)>,
{
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, x: &Vec<f64>) -> std::result::Result<Vec<f64>, ArgminError> {
        let c = self.scale.get();
        self.eval(x)
            .map(|e| e.g.iter().map(|g| c * g).collect())
            .map_err(|()| argmin_failure())
    }
}

/// argmin's L-BFGS with Moré–Thuente on `Vec<f64>`.
type Solver = LBFGS<MoreThuenteLineSearch<Vec<f64>, Vec<f64>, f64>, Vec<f64>, Vec<f64>, f64>;

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// Minimises `f` from `x0` by L-BFGS (memory `cfg.memory`) with the Moré–Thuente line
/// search (argmin 0.11 on `Vec<f64>`).
///
/// `f(x)` returns the objective and its gradient. A returned error aborts the run and is
/// passed through. A non-finite value or gradient is never a panic: at the starting point
/// it is an [`Error::Numerical`]; at a line-search trial point it ends that line search,
/// and the driver backtracks from the best point along the steepest-descent direction
/// (halving from half the distance to the failed trial point until the value is finite
/// and satisfies the Armijo condition) and restarts L-BFGS with empty memory — at most
/// `cfg.max_restarts` times, after which it returns [`Error::Numerical`]. A line search
/// that fails for other reasons (e.g. no descent direction left near the optimum) either
/// ends the run (gradient below `tol_grad`, or no progress since the last restart) or
/// triggers the same restart.
///
/// ```
/// use dgp_traits::optim::{lbfgs_minimise, LbfgsConfig};
/// let r = lbfgs_minimise(
///     |x: &[f64]| Ok(((x[0] - 1.0).powi(2) + 10.0 * (x[1] + 2.0).powi(2),
///                     vec![2.0 * (x[0] - 1.0), 20.0 * (x[1] + 2.0)])),
///     &[0.0, 0.0],
///     &LbfgsConfig::default(),
/// ).unwrap();
/// assert!(r.converged && (r.x[0] - 1.0).abs() < 1e-6 && (r.x[1] + 2.0).abs() < 1e-6);
/// ```
pub fn lbfgs_minimise<F>(f: F, x0: &[f64], cfg: &LbfgsConfig) -> Result<LbfgsReport>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>)>,
{
    cfg.validate()?;
    if x0.is_empty() {
        return Err(Error::Empty("L-BFGS needs at least one parameter".into()));
    }
    if let Some(i) = x0.iter().position(|v| !v.is_finite()) {
        return Err(Error::NonFinite {
            context: "L-BFGS starting point".into(),
            row: i,
            col: 0,
        });
    }
    let obj = Objective {
        inner: RefCell::new(Inner {
            f,
            n: x0.len(),
            last: None,
            best: None,
            evals: 0,
            failure: None,
        }),
        scale: Cell::new(1.0),
    };
    let mut start = evaluate_start(&obj, x0)?;
    let mut iterations = 0u64;
    let mut restarts = 0usize;
    let (converged, termination) = loop {
        if norm(&start.g) <= cfg.tol_grad {
            break (true, "gradient norm below tol_grad".to_string());
        }
        let remaining = cfg.max_iters.saturating_sub(iterations);
        if remaining == 0 {
            break (false, "maximum number of iterations reached".to_string());
        }
        let best_before = start.f;
        let (ran, reason) = run_segment(&obj, cfg, &start, remaining)?;
        iterations += ran;
        let best = obj.inner.borrow().best.clone().expect("x0 was evaluated");
        match reason {
            Some(TerminationReason::SolverConverged) => {
                break (
                    true,
                    "converged (gradient or cost-change tolerance)".to_string(),
                );
            }
            Some(TerminationReason::MaxItersReached) => {
                break (false, "maximum number of iterations reached".to_string());
            }
            Some(TerminationReason::SolverExit(msg)) => match take_failure(&obj) {
                Some(Failure::User(e)) => return Err(e),
                Some(Failure::NonFinite(bad)) => {
                    if restarts >= cfg.max_restarts {
                        return Err(Error::Numerical(format!(
                            "L-BFGS: non-finite objective or gradient at a trial point after {restarts} recoveries"
                        )));
                    }
                    restarts += 1;
                    iterations += 1;
                    start = backtrack(&obj, &best, Some(&bad))?;
                }
                None => {
                    if norm(&best.g) <= cfg.tol_grad {
                        break (true, "gradient norm below tol_grad".to_string());
                    }
                    if best.f >= best_before || restarts >= cfg.max_restarts {
                        break (false, format!("line search failed: {msg}"));
                    }
                    restarts += 1;
                    start = best;
                }
            },
            Some(other) => break (false, other.text().to_string()),
            None => break (false, "stopped without a termination reason".to_string()),
        }
    };
    let inner = obj.inner.into_inner();
    let best = inner.best.expect("x0 was evaluated");
    Ok(LbfgsReport {
        grad_norm: norm(&best.g),
        value: best.f,
        x: best.x,
        iterations,
        evaluations: inner.evals,
        restarts,
        converged,
        termination,
    })
}

/// The first evaluation, at `x0`; a user error is passed on, a non-finite value or
/// gradient is [`Error::Numerical`].
fn evaluate_start<F>(obj: &Objective<F>, x0: &[f64]) -> Result<Eval>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>)>,
{
    obj.eval(x0).map_err(|()| match take_failure(obj) {
        Some(Failure::User(e)) => e,
        _ => Error::Numerical(
            "L-BFGS: objective or gradient is not finite at the starting point".into(),
        ),
    })
}

/// One run of argmin's L-BFGS from `start` for at most `remaining` iterations, with the
/// objective scaled by `1/max(1, ‖∇f(start)‖)`: the iterations it took and why it stopped.
fn run_segment<F>(
    obj: &Objective<F>,
    cfg: &LbfgsConfig,
    start: &Eval,
    remaining: u64,
) -> Result<(u64, Option<TerminationReason>)>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>)>,
{
    let scale = 1.0 / norm(&start.g).max(1.0);
    obj.scale.set(scale);
    let solver: Solver = LBFGS::new(MoreThuenteLineSearch::new(), cfg.memory)
        .with_tolerance_grad(scale * cfg.tol_grad)
        .and_then(|s| s.with_tolerance_cost(scale * cfg.tol_cost))
        .map_err(|e| Error::config("lbfgs", format!("{e}")))?;
    // Only the point is passed: a preset cost would make argmin's cost-change test fire at
    // once (init copies it into `prev_cost`); the cached evaluation makes the
    // re-evaluation free.
    let x_s = start.x.clone();
    let run = Executor::new(obj, solver)
        .configure(|s| s.param(x_s).max_iters(remaining))
        .ctrlc(false)
        .timer(false)
        .run();
    Ok(match run {
        Ok(res) => (
            res.state().get_iter(),
            res.state().get_termination_reason().cloned(),
        ),
        // Failures while (re)initialising; count nothing, report below.
        Err(e) => (0, Some(TerminationReason::SolverExit(e.to_string()))),
    })
}

fn take_failure<F>(obj: &Objective<F>) -> Option<Failure> {
    obj.inner.borrow_mut().failure.take()
}

/// Armijo backtracking along −∇f from `from`, starting at half the distance to the failed
/// trial point `bad` (or a unit step in gradient units when there is none).
fn backtrack<F>(obj: &Objective<F>, from: &Eval, bad: Option<&[f64]>) -> Result<Eval>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>)>,
{
    let gn = norm(&from.g);
    let dist = bad.map_or(gn, |b| {
        b.iter()
            .zip(&from.x)
            .map(|(a, c)| (a - c) * (a - c))
            .sum::<f64>()
            .sqrt()
    });
    let mut t = (0.5 * dist / gn).min(1.0);
    let mut x = vec![0.0; from.x.len()];
    for _ in 0..80 {
        for ((xi, &x0), &g) in x.iter_mut().zip(&from.x).zip(&from.g) {
            *xi = x0 - t * g;
        }
        match obj.eval(&x) {
            Ok(e) if e.f <= from.f - 1e-4 * t * gn * gn => return Ok(e),
            Ok(_) => t *= 0.5,
            Err(()) => match take_failure(obj) {
                Some(Failure::User(e)) => return Err(e),
                _ => t *= 0.25,
            },
        }
    }
    Err(Error::Numerical(
        "L-BFGS: backtracking from a non-finite trial point found no finite decrease".into(),
    ))
}

/// Maximises `f` (value and gradient of an objective to **maximise**) by running
/// [`lbfgs_minimise`] on `−f`; the report's `value` is in the sign of `f`.
pub fn lbfgs_maximise<F>(mut f: F, x0: &[f64], cfg: &LbfgsConfig) -> Result<LbfgsReport>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>)>,
{
    let mut r = lbfgs_minimise(
        |x: &[f64]| {
            let (v, mut g) = f(x)?;
            g.iter_mut().for_each(|gi| *gi = -*gi);
            Ok((-v, g))
        },
        x0,
        cfg,
    )?;
    r.value = -r.value;
    Ok(r)
}
