//! Psi-statistics: expectations of kernel quantities under Gaussian inputs.
//!
//! For a point whose input is uncertain, `h ~ N(μ, diag v)` (μ, v ∈ ℝ^Q), and inducing
//! inputs Z (M×Q), the nested bound (Hensman & Lawrence 2014, §4.2, the quantities below
//! eq. 17; Hensman & Lawrence 2014, §3–4; GPy's psi-statistics) needs
//!
//! * ψ0 = E[k(h, h)]                       (one scalar per point, stacked B×1),
//! * Ψ1 = E[k(h, Z)]                       (1×M per point, stacked B×M; the paper's Ψ),
//! * Ψ2 = Σ_n E[k(Z, h_n) k(h_n, Z)]       (M×M, summed over the batch; the paper's Φ).
//!
//! Ψ2 is only ever needed summed over points (the bound is a sum over points and every
//! term is linear in Φ_n), so it is accumulated and never stored per point.
//!
//! Each statistic is one fused tape operation with its own backward rule, differentiable
//! in the input means, the input variances, Z and the kernel hyperparameters:
//!
//! | kernel | ψ0 | Ψ1 | Ψ2 |
//! |---|---|---|---|
//! | RBF-ARD ([`rbf`]) | [`psi0_rbf`] | [`psi1_rbf`] | [`psi2_rbf`] |
//! | linear ARD ([`linear`]) | [`psi0_linear`] | [`psi1_linear`] | [`psi2_linear`] |
//!
//! The linear mean function of Salimbeni & Deisenroth 2017 (not in the nested paper) also needs the input–kernel
//! covariance `C_nmq = Cov(h_nq, k(h_n, z_m)) = E[h_q k(h, z_m)] − μ_q ψ1_m`, only ever
//! contracted with an M×Q matrix P: [`input_cov_contract`] records `Σ_nmq C_nmq P_mq`
//! (closed forms for RBF and linear kernels, the same quadrature rule otherwise).
//!
//! Kernels without closed forms (Matérn) use the documented quadrature fallback of
//! [`quadrature`] (tensor Gauss–Hermite or Monte Carlo with fixed draws), composed from
//! the shared kernel operations; [`psi_stats`] dispatches on the kernel.
//!
//! All operations split the points into fixed chunks of [`CHUNK`] rows processed in
//! parallel with rayon and reduce the per-chunk results in chunk order, so results are
//! bit-identical whatever the number of threads.

pub mod linear;
pub mod quadrature;
pub mod rbf;

pub use linear::{psi0_linear, psi1_linear, psi2_linear};
pub use quadrature::{ExpectationRule, input_cov_by_quadrature};
pub use rbf::{psi0_rbf, psi1_rbf, psi2_rbf, psi2_rbf_contract};

use dgp_core::{Error, Result};
use dgp_traits::kernels::{Kernel, KernelHyperRef, KernelKind, KernelVars};
use dgp_traits::tape::{Tape, Var};
use faer::{Mat, MatRef};

/// Rows per parallel work item. Fixed (not derived from the thread count) so that the
/// reduction order, and hence every bit of the result, is the same on any machine.
pub const CHUNK: usize = 32;

/// The three statistics on a tape.
#[derive(Clone, Copy, Debug)]
pub struct PsiVars {
    /// ψ0, B×1.
    pub psi0: Var,
    /// Ψ1, B×M.
    pub psi1: Var,
    /// Ψ2 summed over the B points, M×M.
    pub psi2: Var,
}

/// The three statistics as plain matrices.
#[derive(Clone, Debug, PartialEq)]
pub struct PsiValues {
    /// ψ0, B×1.
    pub psi0: Mat<f64>,
    /// Ψ1, B×M.
    pub psi1: Mat<f64>,
    /// Ψ2 summed over the points, M×M.
    pub psi2: Mat<f64>,
}

/// Whether `kind` has closed-form psi-statistics here (RBF, linear); the others use the
/// [`quadrature`] fallback.
pub fn has_closed_form(kind: KernelKind) -> bool {
    matches!(kind, KernelKind::Rbf | KernelKind::Linear)
}

/// Records ψ0, Ψ1, Ψ2 of `kernel` for inputs N(`mean`, diag `var`) (both B×Q) and inducing
/// inputs `z` (M×Q): closed forms for RBF and linear kernels, `fallback` otherwise.
///
/// # Errors
/// Only from the fallback (an invalid rule).
pub fn psi_stats(
    tape: &mut Tape,
    kernel: &Kernel,
    mean: Var,
    var: Var,
    z: Var,
    hyp: KernelVars,
    fallback: &ExpectationRule,
) -> Result<PsiVars> {
    Ok(match kernel.kind {
        KernelKind::Rbf => PsiVars {
            psi0: psi0_rbf(tape, mean, hyp.variance),
            psi1: psi1_rbf(tape, mean, var, z, hyp.lengthscales, hyp.variance),
            psi2: psi2_rbf(tape, mean, var, z, hyp.lengthscales, hyp.variance),
        },
        KernelKind::Linear => PsiVars {
            psi0: psi0_linear(tape, mean, var, hyp.lengthscales),
            psi1: psi1_linear(tape, mean, z, hyp.lengthscales),
            psi2: psi2_linear(tape, mean, var, z, hyp.lengthscales),
        },
        _ => quadrature::psi_by_quadrature(tape, kernel, mean, var, z, hyp, fallback)?,
    })
}

/// Records `Σ_n Σ_m Σ_q Cov(h_nq, k(h_n, z_m)) P_mq` (1×1) for inputs N(`mean`, diag `var`)
/// (B×Q), inducing inputs `z` and a weight matrix `p` (both M×Q); `psi1` is Ψ1 of the same
/// inputs (B×M). Differentiable in every argument.
///
/// * RBF: `Cov(h_q, k(h, z_m)) = ψ1_m v_q (z_mq − μ_q)/(ℓ_q² + v_q)` (the Gaussian factor
///   of the kernel shifts the mean of h_q to `(μ_q ℓ_q² + z_mq v_q)/(ℓ_q² + v_q)`), so the
///   sum is `Σ Ψ1 ⊙ [c (Z ⊙ P)ᵀ − (c ⊙ μ) Pᵀ]` with `c = v/(ℓ² + v)`;
/// * linear (`k = Σ_q g_q h_q z_q`): `Cov = g_q v_q z_mq`, so the sum is
///   `Σ_q g_q (Σ_n v_nq)(Σ_m z_mq P_mq)` (`psi1` unused);
/// * otherwise the nodes of `fallback`: with `h_j = μ + √v ⊙ ξ_j`,
///   `Σ_j w_j Σ k(h_j, Z) ⊙ ((√v ⊙ ξ_j) Pᵀ)` (`psi1` unused).
///
/// # Errors
/// Only from the fallback (an invalid rule).
#[allow(clippy::too_many_arguments)]
pub fn input_cov_contract(
    tape: &mut Tape,
    kernel: &Kernel,
    mean: Var,
    var: Var,
    z: Var,
    hyp: KernelVars,
    psi1: Var,
    p: Var,
    fallback: &ExpectationRule,
) -> Result<Var> {
    Ok(match kernel.kind {
        KernelKind::Rbf => {
            let l2 = tape.square(hyp.lengthscales);
            let den = if tape.shape(l2).1 == 1 {
                tape.add_scalar_var(var, l2)
            } else {
                tape.add_row(var, l2)
            };
            let c = tape.div(var, den);
            let zp = tape.mul(z, p);
            let t1 = tape.matmul_nt(c, zp);
            let cm = tape.mul(c, mean);
            let t2 = tape.matmul_nt(cm, p);
            let d = tape.sub(t1, t2);
            let g = tape.mul(psi1, d);
            tape.sum(g)
        }
        KernelKind::Linear => {
            let vs = tape.col_sums(var);
            let zp = tape.mul(z, p);
            let zs = tape.col_sums(zp);
            let prod = tape.mul(vs, zs);
            let g = hyp.lengthscales;
            if tape.shape(g).1 == 1 {
                let s = tape.sum(prod);
                tape.mul(s, g)
            } else {
                let w = tape.mul(prod, g);
                tape.sum(w)
            }
        }
        _ => quadrature::input_cov_by_quadrature(tape, kernel, mean, var, z, hyp, p, fallback)?,
    })
}

/// Plain-value ψ0, Ψ1, Ψ2 (same code as [`psi_stats`], on a throw-away tape).
///
/// # Errors
/// [`Error::Shape`] when the shapes disagree, [`Error::NonFinite`] for non-finite inputs,
/// [`Error::Config`] for negative variances or invalid hyperparameters.
pub fn psi_values(
    kernel: &Kernel,
    mean: MatRef<'_, f64>,
    var: MatRef<'_, f64>,
    z: MatRef<'_, f64>,
    hyper: KernelHyperRef<'_>,
    fallback: &ExpectationRule,
) -> Result<PsiValues> {
    check_inputs(kernel, mean, var, z)?;
    kernel.check_hyper(hyper)?;
    let mut t = Tape::new();
    let (mv, vv, zv) = (
        t.constant(mean.to_owned()),
        t.constant(var.to_owned()),
        t.constant(z.to_owned()),
    );
    let hyp = KernelVars {
        lengthscales: t.constant(hyper.lengthscales.to_owned()),
        variance: t.constant_scalar(hyper.variance),
    };
    let p = psi_stats(&mut t, kernel, mv, vv, zv, hyp, fallback)?;
    Ok(PsiValues {
        psi0: t.value(p.psi0).to_owned(),
        psi1: t.value(p.psi1).to_owned(),
        psi2: t.value(p.psi2).to_owned(),
    })
}

/// Validates user-supplied Gaussian inputs and inducing inputs for `kernel`.
pub(crate) fn check_inputs(
    kernel: &Kernel,
    mean: MatRef<'_, f64>,
    var: MatRef<'_, f64>,
    z: MatRef<'_, f64>,
) -> Result<()> {
    kernel.check_inputs("psi-statistics input means", mean)?;
    kernel.check_inputs("psi-statistics inducing inputs", z)?;
    if (var.nrows(), var.ncols()) != (mean.nrows(), mean.ncols()) {
        return Err(Error::shape(
            "psi-statistics input variances",
            format!("{}×{}", mean.nrows(), mean.ncols()),
            format!("{}×{}", var.nrows(), var.ncols()),
        ));
    }
    dgp_core::check_finite("psi-statistics input variances", var)?;
    for j in 0..var.ncols() {
        for i in 0..var.nrows() {
            if var[(i, j)] < 0.0 {
                return Err(Error::config(
                    "input_variance",
                    format!(
                        "psi-statistics input variance ({i}, {j}) is negative: {}",
                        var[(i, j)]
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Per-dimension values (length `q`) from a 1×1 (shared) or 1×q (ARD) row.
#[track_caller]
pub(crate) fn per_dim(row: MatRef<'_, f64>, q: usize) -> Vec<f64> {
    assert!(
        row.nrows() == 1 && (row.ncols() == 1 || row.ncols() == q),
        "psi-statistics: lengthscales/weights must be 1×1 or 1×{q}, got {}×{}",
        row.nrows(),
        row.ncols()
    );
    (0..q)
        .map(|k| row[(0, if row.ncols() == 1 { 0 } else { k })])
        .collect()
}

/// Folds a per-dimension gradient back onto a 1×1 or 1×q row.
pub(crate) fn fold_per_dim(g: &[f64], cols: usize) -> Mat<f64> {
    if cols == 1 {
        Mat::from_fn(1, 1, |_, _| g.iter().sum())
    } else {
        Mat::from_fn(1, cols, |_, k| g[k])
    }
}

/// Half-open row ranges of the fixed chunks covering `n` rows.
pub(crate) fn chunk_ranges(n: usize) -> Vec<(usize, usize)> {
    (0..n.div_ceil(CHUNK))
        .map(|c| (c * CHUNK, ((c + 1) * CHUNK).min(n)))
        .collect()
}

#[track_caller]
pub(crate) fn assert_same_shape(a: MatRef<'_, f64>, b: MatRef<'_, f64>, what: &str) {
    assert!(
        a.nrows() == b.nrows() && a.ncols() == b.ncols(),
        "{what}: {}×{} vs {}×{}",
        a.nrows(),
        a.ncols(),
        b.nrows(),
        b.ncols()
    );
}

#[track_caller]
pub(crate) fn assert_cols(a: MatRef<'_, f64>, q: usize, what: &str) {
    assert_eq!(
        a.ncols(),
        q,
        "{what}: expected {q} columns, got {}",
        a.ncols()
    );
}

/// Per-point contractions `out[n, k] = Σ_{m,m'} W_k(m, m') Φ_n(m, m')` (B×K) of each point's
/// Ψ2 statistic with the weight matrices `weights` (M×M each), without forming Σ_n Φ_n.
/// Closed forms for RBF ([`psi2_rbf_contract`]) and linear kernels
/// (`ψ1_n W ψ1_nᵀ + Σ_q g_q² v_nq (ZᵀWZ)_qq`); the `fallback` rule otherwise. Plain values
/// (prediction), not recorded on a tape.
///
/// # Errors
/// As [`psi_values`], plus weights that are not M×M.
pub fn psi2_contract(
    kernel: &Kernel,
    mean: MatRef<'_, f64>,
    var: MatRef<'_, f64>,
    z: MatRef<'_, f64>,
    hyper: KernelHyperRef<'_>,
    fallback: &ExpectationRule,
    weights: &[MatRef<'_, f64>],
) -> Result<Mat<f64>> {
    check_inputs(kernel, mean, var, z)?;
    kernel.check_hyper(hyper)?;
    let m = z.nrows();
    for w in weights {
        if (w.nrows(), w.ncols()) != (m, m) {
            return Err(Error::shape(
                "psi2_contract weights",
                format!("{m}×{m}"),
                format!("{}×{}", w.nrows(), w.ncols()),
            ));
        }
    }
    let (b, q) = (mean.nrows(), mean.ncols());
    Ok(match kernel.kind {
        KernelKind::Rbf => {
            psi2_rbf_contract(mean, var, z, hyper.lengthscales, hyper.variance, weights)
        }
        KernelKind::Linear => {
            let g = per_dim(hyper.lengthscales, q);
            let psi1 = kernel.matrix(mean, z, hyper);
            let mut out = Mat::zeros(b, weights.len());
            for (k, w) in weights.iter().enumerate() {
                let pw = &psi1 * w;
                let ztwz = z.transpose() * w * z;
                for n in 0..b {
                    let mut s: f64 = (0..m).map(|j| pw[(n, j)] * psi1[(n, j)]).sum();
                    for (qq, gq) in g.iter().enumerate() {
                        s += gq * gq * var[(n, qq)] * ztwz[(qq, qq)];
                    }
                    out[(n, k)] = s;
                }
            }
            out
        }
        _ => {
            let (xi, wts) = fallback.nodes(q)?;
            let mut out = Mat::zeros(b, weights.len());
            for n in 0..b {
                let h = Mat::from_fn(xi.nrows(), q, |j, k| {
                    mean[(n, k)] + var[(n, k)].sqrt() * xi[(j, k)]
                });
                let kh = kernel.matrix(h.as_ref(), z, hyper);
                for (k, w) in weights.iter().enumerate() {
                    let kw = &kh * w;
                    let mut s = 0.0;
                    for (j, wj) in wts.iter().enumerate() {
                        s += wj * (0..m).map(|c| kw[(j, c)] * kh[(j, c)]).sum::<f64>();
                    }
                    out[(n, k)] = s;
                }
            }
            out
        }
    })
}
