//! A hand-written SVGP-style forward and backward pass directly in faer, without the tape.
//!
//! For tests and benchmarks only: compiled with the `testing` cargo feature.
//!
//! It is the yardstick for the tape's overhead (benchmark `tape_overhead`): the computation
//! of a sparse-GP layer's marginal variances,
//!
//! ```text
//! K = k_RBF(Z, X)  (M×N),  A = L⁻¹K,  T = L_Sᵀ A,
//! v_n = σ² − Σ_m A_mn² + Σ_m T_mn²,   loss = Σ_n v_n,
//! ```
//!
//! with gradients with respect to Z, X, the lengthscales, σ² and L_S (L is a fixed Cholesky
//! factor of Kuu). The tests check it against the tape, so the benchmark compares equal work.

use crate::kernels::{Kernel, KernelHyperRef, KernelKind};
use dgp_core::linalg::Tri;
use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Accum, Mat, MatRef, Par};

/// Inputs of the reference computation.
#[derive(Clone, Debug)]
pub struct SvgpInputs {
    /// Inducing inputs Z (M×D).
    pub z: Mat<f64>,
    /// Inputs X (N×D).
    pub x: Mat<f64>,
    /// Lengthscales (1×D).
    pub lengthscales: Mat<f64>,
    /// Cholesky factor of Kuu (M×M).
    pub l: Mat<f64>,
    /// Lower-triangular q(u) factor L_S (M×M).
    pub ls: Mat<f64>,
}

impl SvgpInputs {
    /// Seeded random inputs of the given sizes (Z, X standard normal; L = chol Kuu at unit
    /// variance; L_S = I + 0.1·random lower triangle).
    pub fn random(m: usize, n: usize, d: usize, seed: u64) -> Self {
        use dgp_core::linalg::{JitterConfig, cholesky_jittered};
        use dgp_core::rng::{seeded, standard_normal};
        let mut rng = seeded(seed);
        let z = standard_normal(&mut rng, m, d);
        let x = standard_normal(&mut rng, n, d);
        let lengthscales = Mat::from_fn(1, d, |_, j| 1.0 + 0.1 * j as f64);
        let kern = Kernel {
            kind: KernelKind::Rbf,
            input_dim: d,
            ard: true,
        };
        let kuu = kern.gram(
            z.as_ref(),
            KernelHyperRef {
                lengthscales: lengthscales.as_ref(),
                variance: 1.0,
            },
        );
        let l = cholesky_jittered(kuu.as_ref(), "Kuu", JitterConfig::default())
            .expect("a jittered RBF Gram matrix is positive definite")
            .0;
        let raw = standard_normal(&mut rng, m, m);
        let ls = Mat::from_fn(m, m, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => 0.1 * raw[(i, j)],
            std::cmp::Ordering::Equal => 1.0 + 0.1 * raw[(i, j)],
            std::cmp::Ordering::Less => 0.0,
        });
        SvgpInputs {
            z,
            x,
            lengthscales,
            l,
            ls,
        }
    }

    /// [`svgp_tape`] on these inputs (unit kernel variance).
    pub fn tape(&self, par: Par) -> (f64, SvgpGrads) {
        svgp_tape(
            self.z.as_ref(),
            self.x.as_ref(),
            self.lengthscales.as_ref(),
            1.0,
            self.l.as_ref(),
            self.ls.as_ref(),
            par,
        )
    }

    /// [`svgp_forward_backward`] on these inputs (unit kernel variance).
    pub fn direct(&self, par: Par) -> (f64, SvgpGrads) {
        svgp_forward_backward(
            self.z.as_ref(),
            self.x.as_ref(),
            self.lengthscales.as_ref(),
            1.0,
            self.l.as_ref(),
            self.ls.as_ref(),
            par,
        )
    }
}

/// Gradients of the reference loss.
#[derive(Clone, Debug)]
pub struct SvgpGrads {
    /// ∂loss/∂Z (M×D).
    pub z: Mat<f64>,
    /// ∂loss/∂X (N×D).
    pub x: Mat<f64>,
    /// ∂loss/∂ℓ (1×D).
    pub lengthscales: Mat<f64>,
    /// ∂loss/∂σ².
    pub variance: f64,
    /// ∂loss/∂L_S (M×M, lower triangle meaningful).
    pub ls: Mat<f64>,
}

/// Loss and gradients of the reference computation (see the module docs).
pub fn svgp_forward_backward(
    z: MatRef<'_, f64>,
    x: MatRef<'_, f64>,
    lengthscales: MatRef<'_, f64>,
    variance: f64,
    l: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    par: Par,
) -> (f64, SvgpGrads) {
    let (m, n, d) = (z.nrows(), x.nrows(), z.ncols());
    let kern = Kernel {
        kind: KernelKind::Rbf,
        input_dim: d,
        ard: true,
    };
    let k = kern.matrix_par(
        z,
        x,
        KernelHyperRef {
            lengthscales,
            variance,
        },
        par,
    );
    let mut a = k.clone();
    solve_lower_triangular_in_place(l, a.as_mut(), par);
    let mut t = Mat::<f64>::zeros(m, n);
    matmul(
        t.as_mut(),
        Accum::Replace,
        ls.transpose(),
        a.as_ref(),
        1.0,
        par,
    );
    let mut loss = variance * n as f64;
    for j in 0..n {
        for i in 0..m {
            loss += t[(i, j)] * t[(i, j)] - a[(i, j)] * a[(i, j)];
        }
    }
    // Backward with v̄ = 1: T̄ = 2T, L̄_S = A T̄ᵀ, Ā = L_S T̄ − 2A, K̄ = L⁻ᵀ Ā.
    let mut gls = Mat::<f64>::zeros(m, m);
    matmul(
        gls.as_mut(),
        Accum::Replace,
        a.as_ref(),
        t.transpose(),
        2.0,
        par,
    );
    let mut gk = Mat::<f64>::zeros(m, n);
    matmul(gk.as_mut(), Accum::Replace, ls, t.as_ref(), 2.0, par);
    for j in 0..n {
        for i in 0..m {
            gk[(i, j)] -= 2.0 * a[(i, j)];
        }
    }
    solve_upper_triangular_in_place(l.transpose(), gk.as_mut(), par);
    let grads = rbf_backward(gk, k.as_ref(), z, x, lengthscales, variance, par);
    (loss, SvgpGrads { ls: gls, ..grads })
}

/// The RBF kernel's share of the backward pass, from `gk` = K̄ (M×N) and K: the gradients
/// with respect to Z, X, the lengthscales and σ² (`ls` is left empty for the caller).
fn rbf_backward(
    gk: Mat<f64>,
    k: MatRef<'_, f64>,
    z: MatRef<'_, f64>,
    x: MatRef<'_, f64>,
    lengthscales: MatRef<'_, f64>,
    variance: f64,
    par: Par,
) -> SvgpGrads {
    let (m, n, d) = (z.nrows(), x.nrows(), z.ncols());
    // RBF: W = K̄ ⊙ K; Z̄ = (W X − diag(W 1) Z)/ℓ², X̄ = (Wᵀ Z − diag(Wᵀ 1) X)/ℓ²,
    // ℓ̄_q = Σ W_mn (z_mq − x_nq)²/ℓ_q³, σ̄² = n + Σ W / σ².
    let mut w = gk;
    let mut wsum = 0.0;
    for j in 0..n {
        for i in 0..m {
            w[(i, j)] *= k[(i, j)];
            wsum += w[(i, j)];
        }
    }
    let mut gz = Mat::<f64>::zeros(m, d);
    matmul(gz.as_mut(), Accum::Replace, w.as_ref(), x, 1.0, par);
    let mut gx = Mat::<f64>::zeros(n, d);
    matmul(gx.as_mut(), Accum::Replace, w.transpose(), z, 1.0, par);
    let mut row = vec![0.0; m];
    let mut col = vec![0.0; n];
    for j in 0..n {
        for i in 0..m {
            row[i] += w[(i, j)];
            col[j] += w[(i, j)];
        }
    }
    let mut gl = Mat::<f64>::zeros(1, d);
    for q in 0..d {
        let l2 = lengthscales[(0, q)] * lengthscales[(0, q)];
        // Σ W (z − x)² = Σ_m row_m z_mq² + Σ_n col_n x_nq² − 2 Σ_m z_mq (W X)_mq
        let mut s = 0.0;
        for i in 0..m {
            s += row[i] * z[(i, q)] * z[(i, q)] - 2.0 * z[(i, q)] * gz[(i, q)];
        }
        for j in 0..n {
            s += col[j] * x[(j, q)] * x[(j, q)];
        }
        gl[(0, q)] = s / (l2 * lengthscales[(0, q)]);
        for i in 0..m {
            gz[(i, q)] = (gz[(i, q)] - row[i] * z[(i, q)]) / l2;
        }
        for j in 0..n {
            gx[(j, q)] = (gx[(j, q)] - col[j] * x[(j, q)]) / l2;
        }
    }
    SvgpGrads {
        z: gz,
        x: gx,
        lengthscales: gl,
        variance: n as f64 + wsum / variance,
        ls: Mat::zeros(0, 0),
    }
}

/// The same computation recorded on a [`crate::tape::Tape`]; returns the loss and the
/// gradients in the same layout.
pub fn svgp_tape(
    z: MatRef<'_, f64>,
    x: MatRef<'_, f64>,
    lengthscales: MatRef<'_, f64>,
    variance: f64,
    l: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    par: Par,
) -> (f64, SvgpGrads) {
    use crate::kernels::KernelVars;
    let mut t = crate::tape::Tape::with_par(par);
    let kern = Kernel {
        kind: KernelKind::Rbf,
        input_dim: z.ncols(),
        ard: true,
    };
    let zv = t.leaf(z.to_owned());
    let xv = t.leaf(x.to_owned());
    let lv = t.leaf(lengthscales.to_owned());
    let sv = t.leaf_scalar(variance);
    let lsv = t.leaf(ls.to_owned());
    let lc = t.constant(l.to_owned());
    let hyp = KernelVars {
        lengthscales: lv,
        variance: sv,
    };
    let k = kern.record(&mut t, zv, xv, hyp);
    let a = t.tri_solve(lc, k, Tri::Lower);
    let tt = t.matmul_tn(lsv, a);
    let kff = kern.record_diag(&mut t, xv, hyp);
    let s_kff = t.sum(kff);
    let a2 = t.sum_squares(a);
    let t2 = t.sum_squares(tt);
    let v = t.sub(s_kff, a2);
    let loss = t.add(v, t2);
    let g = t.backward(loss);
    let get = |v| g.get(v).expect("leaf influences the loss").to_owned();
    let grads = SvgpGrads {
        z: get(zv),
        x: get(xv),
        lengthscales: get(lv),
        variance: get(sv)[(0, 0)],
        ls: get(lsv),
    };
    (t.scalar(loss), grads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_written_backward_equals_the_tape() {
        let inp = SvgpInputs::random(12, 40, 3, 5);
        let m = 12;
        let (f1, g1) = inp.direct(Par::Seq);
        let (f2, g2) = inp.tape(Par::Seq);
        let close = |a: &Mat<f64>, b: &Mat<f64>| {
            let mut e: f64 = 0.0;
            let mut s: f64 = 0.0;
            for j in 0..a.ncols() {
                for i in 0..a.nrows() {
                    e = e.max((a[(i, j)] - b[(i, j)]).abs());
                    s = s.max(b[(i, j)].abs());
                }
            }
            e <= 1e-10 * s.max(1.0)
        };
        assert!((f1 - f2).abs() <= 1e-10 * f2.abs());
        assert!(close(&g1.z, &g2.z), "dZ");
        assert!(close(&g1.x, &g2.x), "dX");
        assert!(close(&g1.lengthscales, &g2.lengthscales), "dl");
        assert!(
            (g1.variance - g2.variance).abs() <= 1e-10 * g2.variance.abs().max(1.0),
            "dvar"
        );
        // The tape's L_S gradient is dense; only the lower triangle is a parameter.
        let tril = |a: &Mat<f64>| Mat::from_fn(m, m, |i, j| if i >= j { a[(i, j)] } else { 0.0 });
        assert!(close(&tril(&g1.ls), &tril(&g2.ls)), "dLs");
    }
}
