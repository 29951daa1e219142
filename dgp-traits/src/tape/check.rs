//! Finite-difference checks of tape gradients.
//!
//! Used by the property tests of every operation in this crate and by every backend's
//! whole-objective gradient test. The reference derivative is the fourth-order central
//! difference `[8(f(x+h) − f(x−h)) − (f(x+2h) − f(x−2h))] / 12h` with a step relative to
//! the entry's magnitude, so truncation error is O(h⁴) and the comparison can be tight.

use super::{Tape, Var};
use faer::Mat;

/// Settings of [`check_gradient`].
#[derive(Clone, Copy, Debug)]
pub struct GradCheck {
    /// Base step; the step for entry x is `h · max(1, |x|)`.
    pub h: f64,
    /// Largest allowed relative error `max_i |a_i − n_i| / max(max_i |n_i|, floor)`.
    pub rel_tol: f64,
    /// Denominator floor, so that all-zero gradients compare absolutely.
    pub floor: f64,
}

impl Default for GradCheck {
    fn default() -> Self {
        GradCheck {
            h: 1e-3,
            rel_tol: 1e-6,
            floor: 1e-6,
        }
    }
}

/// Outcome of a gradient check.
#[derive(Clone, Debug)]
pub struct GradCheckReport {
    /// Relative error as defined in [`GradCheck::rel_tol`].
    pub rel_error: f64,
    /// Largest reference (finite-difference) gradient entry.
    pub max_reference: f64,
    /// (input, row, col) of the worst entry.
    pub worst: (usize, usize, usize),
    /// Analytic and numerical values at the worst entry.
    pub worst_values: (f64, f64),
}

impl GradCheckReport {
    /// `Ok` when the relative error is within `tol`, else a message naming the worst entry.
    pub fn within(&self, tol: f64) -> Result<(), String> {
        if self.rel_error <= tol && self.rel_error.is_finite() {
            Ok(())
        } else {
            Err(format!(
                "gradient mismatch: relative error {:.3e} > {:.1e}; worst at input {} ({}, {}): analytic {:.12e}, numerical {:.12e}",
                self.rel_error,
                tol,
                self.worst.0,
                self.worst.1,
                self.worst.2,
                self.worst_values.0,
                self.worst_values.1
            ))
        }
    }
}

/// Compares the tape gradient of `f` with finite differences at `inputs`.
///
/// `f` records a computation on a fresh tape from leaves holding `inputs` and returns its
/// output. A non-scalar output is reduced to `Σ W ⊙ out` with a fixed pseudo-random `W`
/// (entries in [0.5, 1.5) with alternating signs), so every output entry is exercised.
pub fn check_gradient<F>(
    inputs: &[Mat<f64>],
    f: F,
    cfg: GradCheck,
) -> Result<GradCheckReport, String>
where
    F: Fn(&mut Tape, &[Var]) -> Var,
{
    let eval = |xs: &[Mat<f64>], with_grad: bool| -> (f64, Option<Vec<Mat<f64>>>) {
        let mut t = Tape::new();
        let vars: Vec<Var> = xs.iter().map(|x| t.leaf(x.clone())).collect();
        let out = f(&mut t, &vars);
        let (r, c) = t.shape(out);
        let scalar = if (r, c) == (1, 1) {
            out
        } else {
            t.weighted_sum(out, projection_weights(r, c))
        };
        let value = t.scalar(scalar);
        if !with_grad {
            return (value, None);
        }
        let mut g = t.backward(scalar);
        let grads = vars
            .iter()
            .zip(xs)
            .map(|(v, x)| g.take_or_zeros(*v, (x.nrows(), x.ncols())))
            .collect();
        (value, Some(grads))
    };
    let (f0, analytic) = eval(inputs, true);
    if !f0.is_finite() {
        return Err(format!("function value is not finite: {f0}"));
    }
    let analytic = analytic.expect("requested");
    let mut xs: Vec<Mat<f64>> = inputs.to_vec();
    let mut numeric: Vec<Mat<f64>> = inputs
        .iter()
        .map(|x| Mat::zeros(x.nrows(), x.ncols()))
        .collect();
    for k in 0..xs.len() {
        for j in 0..xs[k].ncols() {
            for i in 0..xs[k].nrows() {
                let x0 = xs[k][(i, j)];
                let h = cfg.h * x0.abs().max(1.0);
                let at = |d: f64, xs: &mut Vec<Mat<f64>>| {
                    xs[k][(i, j)] = x0 + d;
                    eval(xs, false).0
                };
                let (p1, m1) = (at(h, &mut xs), at(-h, &mut xs));
                let (p2, m2) = (at(2.0 * h, &mut xs), at(-2.0 * h, &mut xs));
                xs[k][(i, j)] = x0;
                numeric[k][(i, j)] = (8.0 * (p1 - m1) - (p2 - m2)) / (12.0 * h);
            }
        }
    }
    let mut max_ref: f64 = 0.0;
    for n in &numeric {
        for j in 0..n.ncols() {
            for i in 0..n.nrows() {
                max_ref = max_ref.max(n[(i, j)].abs());
            }
        }
    }
    let denom = max_ref.max(cfg.floor);
    let mut worst = (0, 0, 0);
    let mut worst_err = -1.0;
    for (k, (a, n)) in analytic.iter().zip(&numeric).enumerate() {
        for j in 0..n.ncols() {
            for i in 0..n.nrows() {
                let e = (a[(i, j)] - n[(i, j)]).abs();
                let e = if e.is_nan() { f64::INFINITY } else { e };
                if e > worst_err {
                    worst_err = e;
                    worst = (k, i, j);
                }
            }
        }
    }
    let worst_values = if analytic.is_empty() {
        (0.0, 0.0)
    } else {
        (
            analytic[worst.0][(worst.1, worst.2)],
            numeric[worst.0][(worst.1, worst.2)],
        )
    };
    Ok(GradCheckReport {
        rel_error: worst_err.max(0.0) / denom,
        max_reference: max_ref,
        worst,
        worst_values,
    })
}

/// Fixed projection weights used to reduce a matrix output to a scalar.
pub fn projection_weights(r: usize, c: usize) -> Mat<f64> {
    Mat::from_fn(r, c, |i, j| {
        let k = (i * 31 + j * 17 + 7) % 11;
        let sign = if (i + j) % 2 == 0 { 1.0 } else { -1.0 };
        sign * (0.5 + k as f64 / 11.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::mat;

    #[test]
    fn matmul_gradient_matches_finite_differences() {
        let a = mat![[1.0, -2.0, 0.5], [0.3, 0.7, -1.1]];
        let b = mat![[0.2, 1.0], [-0.4, 0.9], [1.5, -0.3]];
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let a0 = if ta {
                a.transpose().to_owned()
            } else {
                a.clone()
            };
            let b0 = if tb {
                b.transpose().to_owned()
            } else {
                b.clone()
            };
            let r = check_gradient(
                &[a0, b0],
                |t, v| t.matmul_t(v[0], ta, v[1], tb),
                GradCheck::default(),
            )
            .unwrap();
            r.within(1e-8).unwrap();
        }
    }

    #[test]
    fn detects_a_wrong_gradient() {
        // A deliberately wrong rule must be caught: d/dx of (x·x) computed as if x were constant on one side.
        struct Wrong;
        impl crate::tape::Backward for Wrong {
            fn name(&self) -> &'static str {
                "wrong"
            }
            fn backward(
                &self,
                ctx: &crate::tape::BackwardCtx<'_>,
                sink: &mut crate::tape::GradSink<'_>,
            ) {
                let g = ctx.grad().to_owned();
                sink.add(0, g.as_ref()); // should be 2x·g
            }
        }
        let r = check_gradient(
            &[mat![[1.7]]],
            |t, v| {
                let x = t.value(v[0])[(0, 0)];
                t.push(mat![[x * x]], &[v[0]], Wrong)
            },
            GradCheck::default(),
        )
        .unwrap();
        assert!(r.within(1e-6).is_err());
    }
}
