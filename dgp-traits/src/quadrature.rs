//! Gauss–Hermite quadrature.
//!
//! An `n`-point Gauss–Hermite rule integrates polynomials of degree ≤ 2n − 1 exactly against
//! a Gaussian weight. Two normalisations are offered (see [`HermiteForm`]):
//!
//! * **physicists'**: `∫ e^{−t²} f(t) dt ≈ Σ_j w_j f(t_j)` (Σ w_j = √π);
//! * **probabilists'**: `E_{ξ∼N(0,1)}[f(ξ)] ≈ Σ_j ω_j f(ξ_j)` with `ξ_j = √2 t_j`,
//!   `ω_j = w_j / √π` (Σ ω_j = 1).
//!
//! For 3 points the probabilists' rule is `ξ = −√3, 0, √3`, `ω = 1/6, 2/3, 1/6`
//! (DSPP, Jankowiak et al. 2020, §3.2).
//!
//! # Algorithm
//! Golub & Welsch (1969): the nodes are the eigenvalues of the symmetric tridiagonal Jacobi
//! matrix of the Hermite recurrence (zero diagonal, off-diagonal `√(k/2)`), computed with
//! faer. Each node is then polished by Newton's method on the orthonormal Hermite
//! recurrence, and the weight is obtained from that recurrence as `w = 2 / p'_n(t)²`
//! (Numerical Recipes §4.6), which keeps full *relative* accuracy even for the tiny weights
//! of large `n` (the eigenvector formula of Golub–Welsch loses it). The recurrence is
//! rescaled on the fly, so any `n` works (weights that underflow `f64` come out as 0).
//! The rule is exactly symmetric: `t_{n−1−j} = −t_j`, `w_{n−1−j} = w_j`, and the middle
//! node of an odd rule is exactly 0.
//!
//! [`gh_grid`] builds the tensor-product rule over several independent N(0,1) dimensions
//! (used by DSPP's Gauss–Hermite quadrature limit and `DGP_Quad`-style tests).

use dgp_core::{Error, Result};
use faer::{Mat, Side};
use serde::{Deserialize, Serialize};

/// Which Gaussian weight a [`GaussHermite`] rule is normalised for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HermiteForm {
    /// Weight `e^{−t²}` on ℝ: `∫ e^{−t²} f(t) dt ≈ Σ w_j f(t_j)`, Σ w_j = √π.
    Physicists,
    /// Weight N(0, 1): `E[f(ξ)] ≈ Σ ω_j f(ξ_j)`, Σ ω_j = 1.
    Probabilists,
}

/// An `n`-point Gauss–Hermite rule: nodes in increasing order and their weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GaussHermite {
    /// The normalisation of `nodes` and `weights`.
    pub form: HermiteForm,
    /// Nodes, strictly increasing and symmetric about 0.
    pub nodes: Vec<f64>,
    /// Positive weights, symmetric like the nodes.
    pub weights: Vec<f64>,
}

impl GaussHermite {
    /// The `n`-point rule in the given normalisation. Errors when `n == 0`.
    pub fn new(n: usize, form: HermiteForm) -> Result<Self> {
        let (t, w) = physicists_rule(n)?;
        Ok(match form {
            HermiteForm::Physicists => GaussHermite {
                form,
                nodes: t,
                weights: w,
            },
            HermiteForm::Probabilists => {
                let inv_sqrt_pi = 1.0 / std::f64::consts::PI.sqrt();
                GaussHermite {
                    form,
                    nodes: t.iter().map(|x| std::f64::consts::SQRT_2 * x).collect(),
                    weights: w.iter().map(|x| x * inv_sqrt_pi).collect(),
                }
            }
        })
    }

    /// The `n`-point physicists' rule for `∫ e^{−t²} f(t) dt`.
    pub fn physicists(n: usize) -> Result<Self> {
        Self::new(n, HermiteForm::Physicists)
    }

    /// The `n`-point probabilists' rule for `E_{N(0,1)}[f]`.
    pub fn probabilists(n: usize) -> Result<Self> {
        Self::new(n, HermiteForm::Probabilists)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a rule has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `Σ_j w_j f(x_j)` — the integral against this rule's own weight function.
    pub fn integrate(&self, mut f: impl FnMut(f64) -> f64) -> f64 {
        self.nodes
            .iter()
            .zip(&self.weights)
            .map(|(&x, &w)| w * f(x))
            .sum()
    }

    /// `E_{f∼N(mean, var)}[g(f)]` by this rule, whichever its normalisation
    /// (`var ≥ 0`; negative values are treated as 0).
    pub fn expect_normal(&self, mean: f64, var: f64, mut g: impl FnMut(f64) -> f64) -> f64 {
        let sd = var.max(0.0).sqrt();
        let (scale, wscale) = match self.form {
            HermiteForm::Probabilists => (sd, 1.0),
            HermiteForm::Physicists => (
                std::f64::consts::SQRT_2 * sd,
                1.0 / std::f64::consts::PI.sqrt(),
            ),
        };
        self.nodes
            .iter()
            .zip(&self.weights)
            .map(|(&x, &w)| wscale * w * g(mean + scale * x))
            .sum()
    }
}

/// Tensor-product probabilists' Gauss–Hermite rule over `dims` independent N(0, 1)
/// coordinates, `n` nodes per coordinate.
///
/// Returns `(nodes, weights)`: `nodes` is `n^dims × dims`, row `r` holding the point whose
/// per-coordinate node indices `(i_0, …, i_{dims−1})` are the base-`n` digits of `r` with
/// the *last* coordinate varying fastest (`r = Σ_d i_d n^{dims−1−d}`); `weights[r] =
/// Π_d ω_{i_d}` sums to 1. `dims == 0` gives the single empty point with weight 1.
/// Errors when `n == 0` or `n^dims` overflows `usize`.
pub fn gh_grid(n: usize, dims: usize) -> Result<(Mat<f64>, Vec<f64>)> {
    let rule = GaussHermite::probabilists(n)?;
    let dims_u32 = u32::try_from(dims)
        .map_err(|_| Error::config("dims", format!("{dims} dimensions is too many")))?;
    let rows = n.checked_pow(dims_u32).ok_or_else(|| {
        Error::config(
            "dims",
            format!("{n}^{dims} grid points overflow the address space"),
        )
    })?;
    let mut nodes = Mat::zeros(rows, dims);
    let mut weights = vec![1.0; rows];
    for (r, wr) in weights.iter_mut().enumerate() {
        let mut rem = r;
        for d in (0..dims).rev() {
            let i = rem % n;
            rem /= n;
            nodes[(r, d)] = rule.nodes[i];
            *wr *= rule.weights[i];
        }
    }
    Ok((nodes, weights))
}

/// Orthonormal Hermite recurrence at `x` (physicists' weight e^{−x²}):
/// returns `(p_n(x), p'_n(x))` up to a common positive scale factor `2^k` together with
/// `k` (so the true values are `p·2^k`, `dp·2^k`). `p_0 = π^{−1/4}`,
/// `p_j = x√(2/j) p_{j−1} − √((j−1)/j) p_{j−2}`, `p'_n = √(2n) p_{n−1}`.
fn hermite_orthonormal(n: usize, x: f64) -> (f64, f64, i32) {
    let mut p1 = std::f64::consts::PI.powf(-0.25);
    let mut p2 = 0.0;
    let mut scale_exp = 0i32;
    for j in 1..=n {
        let jf = j as f64;
        let p3 = p2;
        p2 = p1;
        p1 = x * (2.0 / jf).sqrt() * p2 - ((jf - 1.0) / jf).sqrt() * p3;
        // Rescale both stored values when they grow large (exact: powers of two).
        if p1.abs() > 1e150 {
            p1 *= 2f64.powi(-500);
            p2 *= 2f64.powi(-500);
            scale_exp += 500;
        }
    }
    let dp = (2.0 * n as f64).sqrt() * p2;
    (p1, dp, scale_exp)
}

/// Physicists' nodes (increasing) and weights of the `n`-point rule.
fn physicists_rule(n: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    if n == 0 {
        return Err(Error::config(
            "nodes",
            "Gauss–Hermite rule needs at least one node",
        ));
    }
    // Golub–Welsch: eigenvalues of the Jacobi matrix J with J_{k,k+1} = √((k+1)/2).
    let jac = Mat::<f64>::from_fn(n, n, |i, j| {
        if i == j + 1 {
            (i as f64 / 2.0).sqrt()
        } else if j == i + 1 {
            (j as f64 / 2.0).sqrt()
        } else {
            0.0
        }
    });
    let mut eig = jac
        .self_adjoint_eigenvalues(Side::Lower)
        .map_err(|e| Error::Numerical(format!("Gauss–Hermite Jacobi eigenvalues: {e:?}")))?;
    eig.sort_by(f64::total_cmp);
    // Work on the non-negative half and mirror, so the rule is exactly symmetric.
    let half = n / 2;
    let mut nodes = vec![0.0; n];
    let mut weights = vec![0.0; n];
    for k in 0..n.div_ceil(2) {
        // k-th node from the top: index n-1-k; its mirror is index k.
        let hi = n - 1 - k;
        let middle = n % 2 == 1 && k == half;
        let mut x = if middle {
            0.0
        } else {
            0.5 * (eig[hi] - eig[k])
        };
        if !middle {
            // Newton polish (the eigenvalue is already accurate; a few steps suffice).
            for _ in 0..8 {
                let (p, dp, _) = hermite_orthonormal(n, x);
                if dp == 0.0 || !dp.is_finite() {
                    break;
                }
                let dx = p / dp;
                x -= dx;
                if dx.abs() <= 1e-16 * x.abs().max(1.0) {
                    break;
                }
            }
        }
        let (_, dp_last, sexp_last) = hermite_orthonormal(n, x);
        // w = 2 / (p'_n)², with p'_n = dp·2^sexp.
        let log2_w = 1.0 - 2.0 * (dp_last.abs().log2() + f64::from(sexp_last));
        let w = log2_w.exp2();
        nodes[hi] = x;
        nodes[k] = -x;
        weights[hi] = w;
        weights[k] = w;
    }
    if nodes.iter().chain(&weights).any(|v| !v.is_finite()) {
        return Err(Error::Numerical(format!(
            "Gauss–Hermite rule with {n} nodes produced a non-finite value"
        )));
    }
    Ok((nodes, weights))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// E[ξ^k] for ξ ∼ N(0, 1): (k − 1)!! for even k, 0 for odd k.
    fn normal_moment(k: usize) -> f64 {
        if k % 2 == 1 {
            0.0
        } else {
            (1..k).step_by(2).map(|j| j as f64).product()
        }
    }

    #[test]
    fn one_point_rule() {
        let r = GaussHermite::probabilists(1).unwrap();
        assert_eq!(r.nodes, vec![0.0]);
        assert!((r.weights[0] - 1.0).abs() < 1e-15);
        let r = GaussHermite::physicists(1).unwrap();
        assert!((r.weights[0] - std::f64::consts::PI.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn zero_points_is_an_error() {
        assert!(GaussHermite::physicists(0).is_err());
        assert!(gh_grid(0, 2).is_err());
        assert!(gh_grid(10, 40).is_err()); // 10^40 points overflow
    }

    #[test]
    fn three_point_probabilists_rule() {
        let r = GaussHermite::probabilists(3).unwrap();
        let s3 = 3f64.sqrt();
        let want_x = [-s3, 0.0, s3];
        let want_w = [1.0 / 6.0, 2.0 / 3.0, 1.0 / 6.0];
        for k in 0..3 {
            assert!((r.nodes[k] - want_x[k]).abs() <= 4e-16, "{:?}", r.nodes);
            assert!((r.weights[k] - want_w[k]).abs() <= 4e-16, "{:?}", r.weights);
        }
        assert_eq!(r.nodes[1], 0.0);
    }

    #[test]
    fn twenty_point_physicists_rule_matches_high_precision_values() {
        // Largest root of H_20 and its weight; a central node (mpmath, 50 digits).
        let r = GaussHermite::physicists(20).unwrap();
        let cases = [
            (19, 5.387480890011233, 2.229_393_645_534_151_3e-13),
            (10, 0.245_340_708_300_901_25, 0.462_243_669_600_610_1),
        ];
        for (k, x, w) in cases {
            assert!(
                (r.nodes[k] - x).abs() <= 2e-15 * x,
                "node {k}: {}",
                r.nodes[k]
            );
            assert!(
                (r.weights[k] - w).abs() <= 1e-14 * w,
                "weight {k}: {:e}",
                r.weights[k]
            );
        }
        for k in 0..20 {
            assert_eq!(r.nodes[k], -r.nodes[19 - k]);
            assert_eq!(r.weights[k], r.weights[19 - k]);
        }
        assert!(r.nodes.windows(2).all(|p| p[0] < p[1]));
    }

    #[test]
    fn probabilists_weights_sum_to_one() {
        for n in (1..=60).chain([100, 150, 250]) {
            let r = GaussHermite::probabilists(n).unwrap();
            let s: f64 = r.weights.iter().sum();
            assert!((s - 1.0).abs() <= 1e-14, "n={n}: sum {s}");
            let s: f64 = GaussHermite::physicists(n).unwrap().weights.iter().sum();
            assert!(
                (s - std::f64::consts::PI.sqrt()).abs() <= 2e-14,
                "n={n}: sum {s}"
            );
        }
    }

    #[test]
    fn large_rules_stay_finite_and_accurate() {
        // Beyond where the unscaled recurrence would overflow.
        let r = GaussHermite::probabilists(600).unwrap();
        assert!(r.weights.iter().all(|w| w.is_finite() && *w >= 0.0));
        let m2 = r.integrate(|x| x * x);
        let m4 = r.integrate(|x| x.powi(4));
        assert!((m2 - 1.0).abs() < 1e-12, "{m2}");
        assert!((m4 - 3.0).abs() < 1e-12, "{m4}");
    }

    #[test]
    fn expect_normal_agrees_between_forms() {
        let pr = GaussHermite::probabilists(12).unwrap();
        let ph = GaussHermite::physicists(12).unwrap();
        let g = |f: f64| (0.3 * f).sin() + f * f;
        let (m, v): (f64, f64) = (0.7, 2.5);
        let want = m * m + v + (0.3 * m).sin() * (-0.5 * 0.09 * v).exp();
        assert!((pr.expect_normal(m, v, g) - want).abs() < 1e-12);
        assert!((ph.expect_normal(m, v, g) - want).abs() < 1e-12);
    }

    #[test]
    fn grid_layout_weights_and_moments() {
        let (x, w) = gh_grid(3, 2).unwrap();
        assert_eq!((x.nrows(), x.ncols()), (9, 2));
        let r = GaussHermite::probabilists(3).unwrap();
        // Last coordinate varies fastest.
        for i0 in 0..3 {
            for i1 in 0..3 {
                let row = i0 * 3 + i1;
                assert_eq!(x[(row, 0)], r.nodes[i0]);
                assert_eq!(x[(row, 1)], r.nodes[i1]);
                assert_eq!(w[row], r.weights[i0] * r.weights[i1]);
            }
        }
        let (x, w) = gh_grid(4, 3).unwrap();
        assert_eq!(x.nrows(), 64);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        // E[x0² x1⁴ x2⁰] = 3, E[x0 x1] = 0: exact for degree ≤ 7 per coordinate.
        let e = |f: &dyn Fn(usize) -> f64| (0..64).map(|r| w[r] * f(r)).sum::<f64>();
        assert!((e(&|r| x[(r, 0)].powi(2) * x[(r, 1)].powi(4)) - 3.0).abs() < 1e-13);
        assert!(e(&|r| x[(r, 0)] * x[(r, 1)]).abs() < 1e-15);
        let (x, w) = gh_grid(5, 0).unwrap();
        assert_eq!((x.nrows(), x.ncols()), (1, 0));
        assert_eq!(w, vec![1.0]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// An n-point rule integrates every polynomial of degree ≤ 2n − 1 exactly.
        #[test]
        fn exact_for_polynomials_up_to_degree_2n_minus_1(
            n in 1usize..=25,
            frac in 0.0f64..=1.0,
            coeffs in proptest::collection::vec(-1.0f64..1.0, 50),
        ) {
            let degree = ((2 * n - 1) as f64 * frac).round() as usize;
            let c = &coeffs[..=degree];
            let r = GaussHermite::probabilists(n).unwrap();
            let quad = r.integrate(|x| c.iter().rev().fold(0.0, |acc, &ck| acc * x + ck));
            let exact: f64 = c.iter().enumerate().map(|(k, ck)| ck * normal_moment(k)).sum();
            // Rounding scale: Σ|c_k| E|ξ|^k, bounded by the next even moment.
            let scale: f64 = c.iter().enumerate().map(|(k, ck)| ck.abs() * normal_moment(k + k % 2)).sum::<f64>().max(1.0);
            prop_assert!((quad - exact).abs() <= 1e-13 * scale,
                "n={} degree={} quad={} exact={}", n, degree, quad, exact);
            // Physicists' form: ∫ e^{−t²} t^k dt = √π (k−1)!!/2^{k/2}.
            let ph = GaussHermite::physicists(n).unwrap();
            let k = degree;
            let want = std::f64::consts::PI.sqrt() * normal_moment(k) / 2f64.powi(k as i32 / 2);
            let got = ph.integrate(|t| t.powi(k as i32));
            let scale = ph.integrate(|t| t.abs().powi(k as i32)).max(1.0);
            prop_assert!((got - want).abs() <= 1e-13 * scale, "k={} got={} want={}", k, got, want);
        }
    }
}
