//! Closed-form psi-statistics of the RBF-ARD kernel `k(x, x') = α exp(−½ Σ_q (x_q − x'_q)²/ℓ_q²)`
//! under inputs `h ~ N(μ, diag v)` (Hensman & Lawrence 2014, §3–4; GPy's psi-statistics; GPy's `rbf_psi_comp`).
//!
//! With `L_q = ℓ_q²`, `d_mq = μ_q − z_mq`:
//!
//! * ψ0 = α;
//! * log ψ1_m = log α − ½ Σ_q log(1 + v_q/L_q) − ½ Σ_q d_mq² / (L_q + v_q);
//! * log Φ_mm' = 2 log α − ½ Σ_q log(1 + 2v_q/L_q) − Σ_q (z_mq − z_m'q)²/(4L_q)
//!   − Σ_q b_q (d_mq + d_m'q)²/4,  with `b_q = 1/(L_q + 2v_q)`
//!   (the spec's `(μ − z̄)²/(L + 2v)` with `μ − z̄ = (d_m + d_m')/2`).
//!
//! Everything is evaluated in the log domain and exponentiated once per entry. For Φ the
//! last sum is split as `−¼e_m − ¼e_m' − ½ Σ_q b_q d_mq d_m'q` (`e_m = Σ_q b_q d_mq²`), so
//! each of the B·M(M+1)/2 entries costs Q fused multiply-adds and one exponential; the
//! n-independent part `−Σ_q (z_mq − z_m'q)²/(4L_q)` is computed once per call. Only the
//! lower triangle is computed (Φ is symmetric) and accumulated over the points of a chunk;
//! no per-point M×M matrix is ever stored.
//!
//! ## Backward rule of Ψ2
//! With Ḡ = ∂L/∂Φ and the symmetric weights `H_n = ½(Ḡ + Ḡᵀ) ⊙ Φ_n`, `r = H_n 1`,
//! `p_q = H_n d_q`, `S_n = Σ H_n`, `V_nq = 2 Σ_m r_m d_mq² + 2 d_qᵀ H_n d_q`:
//!
//! * ∂L/∂μ_nq = −2 b_q Σ_m r_m d_mq;
//! * ∂L/∂v_nq = −b_q S_n + ½ b_q² V_nq;
//! * ∂L/∂z_mq = Σ_n b_q (r_m d_mq + p_mq) − Σ_m' (ΣH)_mm' (z_mq − z_m'q)/L_q;
//! * ∂L/∂L_q = Σ_n [v_q b_q S_n / L_q + ¼ b_q² V_nq] + Σ_mm' (ΣH)_mm' (z_mq − z_m'q)²/(4L_q²),
//!   and ∂L/∂ℓ_q = 2ℓ_q ∂L/∂L_q;
//! * ∂L/∂α = 2 S / α.
//!
//! The backward pass recomputes Φ_n point by point (cheaper than storing B·M² values),
//! writes the lower triangle W of `(Ḡ + Ḡᵀ) ⊙ Φ_n` (diagonal: `Ḡ ⊙ Φ_n`, so that
//! 2H_n = W + Wᵀ), and gets `[2H d_1 … 2H d_Q | 2H 1]` from two small matrix products;
//! `Σ_n H_n` is read off the output (`½(Ḡ + Ḡᵀ) ⊙ Ψ2`) instead of being accumulated.
//!
//! ## Speed
//! The hot loops run over contiguous columns of the lower triangle with a vectorisable
//! exponential (`fastexp`) and 8-lane reductions, compiled three times: portable, with
//! AVX2 + FMA and with AVX-512 + FMA, the widest the CPU supports selected at run time (the
//! two vector paths return the same bits). `benches/psi.rs` times Ψ1 and Ψ2 with all gradients
//! (N = 1000, M = 128, Q = 5).

use super::{assert_cols, assert_same_shape, chunk_ranges, fold_per_dim, per_dim};
use dgp_core::fastexp;
use dgp_traits::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};
use rayon::prelude::*;

/// Hyperparameter values of one call.
struct Hyp {
    ls: Vec<f64>,
    l2: Vec<f64>,
    variance: f64,
    ls_cols: usize,
}

impl Hyp {
    #[track_caller]
    fn new(ls: MatRef<'_, f64>, variance: MatRef<'_, f64>, q: usize) -> Hyp {
        assert_eq!(
            (variance.nrows(), variance.ncols()),
            (1, 1),
            "RBF psi: variance must be 1×1"
        );
        let ls_v = per_dim(ls, q);
        Hyp {
            l2: ls_v.iter().map(|l| l * l).collect(),
            ls: ls_v,
            variance: variance[(0, 0)],
            ls_cols: ls.ncols(),
        }
    }

    /// ∂L/∂ℓ from ∂L/∂L (L = ℓ²), folded onto the lengthscale row's shape.
    fn ls_grad(&self, g_l2: &[f64]) -> Mat<f64> {
        let g: Vec<f64> = g_l2
            .iter()
            .zip(&self.ls)
            .map(|(g, l)| 2.0 * l * g)
            .collect();
        fold_per_dim(&g, self.ls_cols)
    }
}

/// Z transposed into a flat Q×M array (`zt[q·M + m] = z_mq`).
fn transpose_z(z: MatRef<'_, f64>) -> Vec<f64> {
    let (m, q) = (z.nrows(), z.ncols());
    let mut zt = vec![0.0; m * q];
    for k in 0..q {
        for j in 0..m {
            zt[k * m + j] = z[(j, k)];
        }
    }
    zt
}

// =======================================================================================
// ψ0
// =======================================================================================

struct Psi0RbfOp;

impl Backward for Psi0RbfOp {
    fn name(&self) -> &'static str {
        "psi0_rbf"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad();
            let s: f64 = (0..g.nrows()).map(|i| g[(i, 0)]).sum();
            sink.acc(0)[(0, 0)] += s;
        }
    }
}

/// ψ0 of the RBF kernel: `E[k(h, h)] = α` for every point (B×1; B = rows of `mean`).
/// Differentiable in the variance α only (it does not depend on μ, v, Z or ℓ).
#[track_caller]
pub fn psi0_rbf(tape: &mut Tape, mean: Var, variance: Var) -> Var {
    assert_eq!(
        tape.shape(variance),
        (1, 1),
        "psi0_rbf: variance must be 1×1"
    );
    let b = tape.shape(mean).0;
    let a = tape.value(variance)[(0, 0)];
    tape.push(Mat::from_fn(b, 1, |_, _| a), &[variance], Psi0RbfOp)
}

// =======================================================================================
// Ψ1
// =======================================================================================

/// Ψ1 values (B×M), rows in parallel chunks.
fn psi1_values(mu: MatRef<'_, f64>, v: MatRef<'_, f64>, z: MatRef<'_, f64>, h: &Hyp) -> Mat<f64> {
    let (b, q, m) = (mu.nrows(), mu.ncols(), z.nrows());
    let zt = transpose_z(z);
    let log_a = h.variance.ln();
    let parts: Vec<Mat<f64>> = chunk_ranges(b)
        .into_par_iter()
        .map(|(n0, n1)| {
            let mut out = Mat::zeros(n1 - n0, m);
            let mut s = vec![0.0; m];
            for n in n0..n1 {
                let mut c = log_a;
                for k in 0..q {
                    c -= 0.5 * (v[(n, k)] / h.l2[k]).ln_1p();
                }
                s.fill(c);
                for k in 0..q {
                    let hinv = 0.5 / (h.l2[k] + v[(n, k)]);
                    let mk = mu[(n, k)];
                    for (sj, zj) in s.iter_mut().zip(&zt[k * m..(k + 1) * m]) {
                        let d = mk - zj;
                        *sj -= hinv * d * d;
                    }
                }
                for (j, sj) in s.iter().enumerate() {
                    out[(n - n0, j)] = fastexp::exp(*sj);
                }
            }
            out
        })
        .collect();
    let mut out = Mat::zeros(b, m);
    for ((n0, n1), p) in chunk_ranges(b).into_iter().zip(parts) {
        out.subrows_mut(n0, n1 - n0).copy_from(p.as_ref());
    }
    out
}

struct Psi1RbfOp;

struct Psi1Chunk {
    gmu: Mat<f64>,
    gv: Mat<f64>,
    gz: Vec<f64>,
    gl2: Vec<f64>,
    wsum: f64,
}

impl Backward for Psi1RbfOp {
    fn name(&self) -> &'static str {
        "psi1_rbf"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (mu, v, z) = (ctx.input(0), ctx.input(1), ctx.input(2));
        let h = Hyp::new(ctx.input(3), ctx.input(4), mu.ncols());
        let (psi, g) = (ctx.output(), ctx.grad());
        let (b, q, m) = (mu.nrows(), mu.ncols(), z.nrows());
        let zt = transpose_z(z);
        let ranges = chunk_ranges(b);
        let parts: Vec<Psi1Chunk> = ranges
            .par_iter()
            .map(|&(n0, n1)| {
                let mut out = Psi1Chunk {
                    gmu: Mat::zeros(n1 - n0, q),
                    gv: Mat::zeros(n1 - n0, q),
                    gz: vec![0.0; q * m],
                    gl2: vec![0.0; q],
                    wsum: 0.0,
                };
                let mut w = vec![0.0; m];
                for n in n0..n1 {
                    for (j, wj) in w.iter_mut().enumerate() {
                        *wj = g[(n, j)] * psi[(n, j)];
                    }
                    let s: f64 = w.iter().sum();
                    out.wsum += s;
                    for k in 0..q {
                        let (l2, vk, mk) = (h.l2[k], v[(n, k)], mu[(n, k)]);
                        let inv = 1.0 / (l2 + vk);
                        let (mut a1, mut a2) = (0.0, 0.0);
                        let gz = &mut out.gz[k * m..(k + 1) * m];
                        for ((wj, zj), gzj) in w.iter().zip(&zt[k * m..(k + 1) * m]).zip(gz) {
                            let d = mk - zj;
                            let wd = wj * d;
                            a1 += wd;
                            a2 += wd * d;
                            *gzj += wd * inv;
                        }
                        out.gmu[(n - n0, k)] = -inv * a1;
                        out.gv[(n - n0, k)] = -0.5 * inv * s + 0.5 * inv * inv * a2;
                        out.gl2[k] += 0.5 * vk * inv / l2 * s + 0.5 * inv * inv * a2;
                    }
                }
                out
            })
            .collect();
        let mut gmu = Mat::zeros(b, q);
        let mut gv = Mat::zeros(b, q);
        let mut gz = vec![0.0; q * m];
        let mut gl2 = vec![0.0; q];
        let mut wsum = 0.0;
        for (&(n0, n1), p) in ranges.iter().zip(&parts) {
            gmu.subrows_mut(n0, n1 - n0).copy_from(p.gmu.as_ref());
            gv.subrows_mut(n0, n1 - n0).copy_from(p.gv.as_ref());
            for (a, c) in gz.iter_mut().zip(&p.gz) {
                *a += c;
            }
            for (a, c) in gl2.iter_mut().zip(&p.gl2) {
                *a += c;
            }
            wsum += p.wsum;
        }
        sink.add_owned(0, gmu);
        sink.add_owned(1, gv);
        if sink.wants(2) {
            sink.add_owned(2, Mat::from_fn(m, q, |j, k| gz[k * m + j]));
        }
        if sink.wants(3) {
            sink.add_owned(3, h.ls_grad(&gl2));
        }
        if sink.wants(4) {
            sink.acc(4)[(0, 0)] += wsum / h.variance;
        }
    }
}

/// Ψ1 of the RBF kernel, `E[k(h_n, z_m)]` (B×M), for input means `mean` and variances
/// `var` (B×Q, v ≥ 0), inducing inputs `z` (M×Q), lengthscales (1×Q or 1×1, > 0) and
/// variance α (1×1, > 0). One fused operation; differentiable in all five inputs.
///
/// # Panics
/// On inconsistent shapes (validate user data with [`super::psi_values`]' checks first).
#[track_caller]
pub fn psi1_rbf(
    tape: &mut Tape,
    mean: Var,
    var: Var,
    z: Var,
    lengthscales: Var,
    variance: Var,
) -> Var {
    let (mu, v, zv) = (tape.value(mean), tape.value(var), tape.value(z));
    assert_same_shape(mu, v, "psi1_rbf: mean vs var");
    assert_cols(zv, mu.ncols(), "psi1_rbf: inducing inputs");
    let h = Hyp::new(tape.value(lengthscales), tape.value(variance), mu.ncols());
    let out = psi1_values(mu, v, zv, &h);
    tape.push(out, &[mean, var, z, lengthscales, variance], Psi1RbfOp)
}

// =======================================================================================
// Ψ2
// =======================================================================================

/// Lanes of the blocked loops (two AVX2 vectors).
const L: usize = fastexp::LANES;
/// Exponent of masked entries (upper triangle, padding): its exponential is exactly 0.
const MASK: f64 = -1e300;

#[inline(always)]
fn ld(s: &[f64], i: usize) -> [f64; L] {
    s[i..i + L].try_into().expect("block of L entries")
}

/// Per-call quantities of Ψ2 that do not depend on the point. Every per-inducing-point
/// array has stride `mp` (M rounded up to a multiple of [`L`]), so each column of the lower
/// triangle is processed in whole blocks starting at `8⌊c/8⌋`; entries above the diagonal
/// and in the padding get the exponent [`MASK`] and contribute exact zeros.
struct Psi2Setup {
    q: usize,
    m: usize,
    mp: usize,
    /// `zt[q·mp + m] = z_mq` (padding 0).
    zt: Vec<f64>,
    l2: Vec<f64>,
    log_var2: f64,
    /// `a0[c·mp + j] = −Σ_q (z_cq − z_jq)²/(4L_q)` for c ≤ j < M, else [`MASK`].
    a0: Vec<f64>,
}

/// Per-point work space.
struct PointWs {
    /// `d[q·mp + m] = μ_q − z_mq`.
    d: Vec<f64>,
    /// `hb[q·mp + m] = −½ b_q d_mq`.
    hb: Vec<f64>,
    /// `base[m] = −¼ Σ_q b_q d_mq²`.
    base: Vec<f64>,
    /// `b_q = 1/(L_q + 2v_q)`.
    b: Vec<f64>,
    /// `2 log α − ½ Σ_q log(1 + 2v_q/L_q)`.
    c: f64,
}

impl Psi2Setup {
    fn new(z: MatRef<'_, f64>, h: &Hyp) -> Psi2Setup {
        let (m, q) = (z.nrows(), z.ncols());
        let mp = m.div_ceil(L) * L;
        let mut zt = vec![0.0; q * mp];
        for k in 0..q {
            for j in 0..m {
                zt[k * mp + j] = z[(j, k)];
            }
        }
        let mut a0 = vec![MASK; mp * mp];
        for c in 0..m {
            for j in c..m {
                let mut a = 0.0;
                for k in 0..q {
                    let dz = zt[k * mp + c] - zt[k * mp + j];
                    a -= 0.25 / h.l2[k] * dz * dz;
                }
                a0[c * mp + j] = a;
            }
        }
        Psi2Setup {
            q,
            m,
            mp,
            zt,
            l2: h.l2.clone(),
            log_var2: 2.0 * h.variance.ln(),
            a0,
        }
    }

    fn workspace(&self) -> PointWs {
        let (q, mp) = (self.q, self.mp);
        PointWs {
            d: vec![0.0; q * mp],
            hb: vec![0.0; q * mp],
            base: vec![0.0; mp],
            b: vec![0.0; q],
            c: 0.0,
        }
    }

    /// Fills the per-point quantities for the point with input mean `mu` and variance `v`.
    #[inline(always)]
    fn point(&self, mu: impl Fn(usize) -> f64, v: impl Fn(usize) -> f64, ws: &mut PointWs) {
        let mp = self.mp;
        ws.c = self.log_var2;
        ws.base.fill(0.0);
        for k in 0..self.q {
            let (l2, vk, mk) = (self.l2[k], v(k), mu(k));
            ws.c -= 0.5 * (2.0 * vk / l2).ln_1p();
            let bk = 1.0 / (l2 + 2.0 * vk);
            ws.b[k] = bk;
            let zk = &self.zt[k * mp..(k + 1) * mp];
            let dk = &mut ws.d[k * mp..(k + 1) * mp];
            let hk = &mut ws.hb[k * mp..(k + 1) * mp];
            for (((dj, hj), zj), bj) in dk.iter_mut().zip(hk).zip(zk).zip(ws.base.iter_mut()) {
                let d = mk - zj;
                *dj = d;
                *hj = -0.5 * bk * d;
                *bj -= 0.25 * bk * d * d;
            }
        }
    }

    /// Exponents `log Φ_n(j, c)` for the block j = j0..j0+L of column c (`cm = c_n + base_c`).
    #[inline(always)]
    fn exponents<const FMA: bool>(&self, ws: &PointWs, c: usize, cm: f64, j0: usize) -> [f64; L] {
        let mp = self.mp;
        let a = ld(&self.a0, c * mp + j0);
        let bs = ld(&ws.base, j0);
        let mut s = [0.0; L];
        for i in 0..L {
            s[i] = a[i] + cm + bs[i];
        }
        for k in 0..self.q {
            let h = ws.hb[k * mp + c];
            let d = ld(&ws.d, k * mp + j0);
            for i in 0..L {
                s[i] = fastexp::madd::<FMA>(h, d[i], s[i]);
            }
        }
        s
    }

    /// First block of column c.
    #[inline(always)]
    fn start(c: usize) -> usize {
        c / L * L
    }
}

/// Lower triangle (column-major with stride mp, `acc[c·mp + j]`, j ≥ c) of Σ_{n in rows} Φ_n.
#[inline(always)]
fn psi2_forward_chunk_body<const FMA: bool>(
    st: &Psi2Setup,
    mu: MatRef<'_, f64>,
    v: MatRef<'_, f64>,
    rows: (usize, usize),
) -> Vec<f64> {
    let (m, mp) = (st.m, st.mp);
    let mut acc = vec![0.0; mp * mp];
    let mut ws = st.workspace();
    for n in rows.0..rows.1 {
        st.point(|k| mu[(n, k)], |k| v[(n, k)], &mut ws);
        for c in 0..m {
            let cm = ws.c + ws.base[c];
            for j0 in (Psi2Setup::start(c)..mp).step_by(L) {
                let e = fastexp::exp_lanes::<FMA>(st.exponents::<FMA>(&ws, c, cm, j0));
                let a = &mut acc[c * mp + j0..c * mp + j0 + L];
                for i in 0..L {
                    a[i] += e[i];
                }
            }
        }
    }
    acc
}

/// Per-chunk results of the Ψ2 backward pass.
struct Psi2Chunk {
    /// ∂L/∂μ and ∂L/∂v of the chunk's rows (rows×Q).
    gmu: Mat<f64>,
    gv: Mat<f64>,
    /// The point-dependent part of ∂L/∂Z (Q×M flat).
    gz: Vec<f64>,
    /// The point-dependent part of ∂L/∂L_q.
    gl2: Vec<f64>,
}

#[inline(always)]
fn psi2_backward_chunk_body<const FMA: bool>(
    st: &Psi2Setup,
    mu: MatRef<'_, f64>,
    v: MatRef<'_, f64>,
    gs: &[f64],
    rows: (usize, usize),
) -> Psi2Chunk {
    let (m, mp, q) = (st.m, st.mp, st.q);
    let nr = rows.1 - rows.0;
    let mut out = Psi2Chunk {
        gmu: Mat::zeros(nr, q),
        gv: Mat::zeros(nr, q),
        gz: vec![0.0; q * m],
        gl2: vec![0.0; q],
    };
    let mut ws = st.workspace();
    // W_low: the lower triangle of the point's Ḡ_sym ⊙ Φ_n (off-diagonal entries doubled),
    // so that 2H = W_low + W_lowᵀ. Entries above the blocks of each column are never
    // written and stay 0; masked entries inside the blocks are written as exact zeros.
    let mut wlow = vec![0.0; mp * mp];
    // [d_1 … d_Q | 1] and (W_low + W_lowᵀ)[d_1 … d_Q | 1] = [2H d_q | 2H 1].
    let mut dext = Mat::<f64>::zeros(m, q + 1);
    for j in 0..m {
        dext[(j, q)] = 1.0;
    }
    let mut pext = Mat::<f64>::zeros(m, q + 1);
    for n in rows.0..rows.1 {
        st.point(|k| mu[(n, k)], |k| v[(n, k)], &mut ws);
        for c in 0..m {
            let cm = ws.c + ws.base[c];
            for j0 in (Psi2Setup::start(c)..mp).step_by(L) {
                let e = fastexp::exp_lanes::<FMA>(st.exponents::<FMA>(&ws, c, cm, j0));
                let g = ld(gs, c * mp + j0);
                let w = &mut wlow[c * mp + j0..c * mp + j0 + L];
                for i in 0..L {
                    w[i] = g[i] * e[i];
                }
            }
        }
        for k in 0..q {
            for j in 0..m {
                dext[(j, k)] = ws.d[k * mp + j];
            }
        }
        let wl = MatRef::from_column_major_slice_with_stride(&wlow, m, m, mp);
        matmul(
            pext.as_mut(),
            Accum::Replace,
            wl,
            dext.as_ref(),
            1.0,
            Par::Seq,
        );
        matmul(
            pext.as_mut(),
            Accum::Add,
            wl.transpose(),
            dext.as_ref(),
            1.0,
            Par::Seq,
        );
        let rr = pext.col(q);
        let s_n = 0.5 * (0..m).map(|j| rr[j]).sum::<f64>();
        let i = n - rows.0;
        for k in 0..q {
            let bk = ws.b[k];
            let dk = &ws.d[k * mp..k * mp + m];
            let pk = pext.col(k);
            let gz = &mut out.gz[k * m..(k + 1) * m];
            let (mut rd, mut vq) = (0.0, 0.0);
            for (j, (dj, g)) in dk.iter().zip(gz).enumerate() {
                let (r, p) = (rr[j], pk[j]);
                rd += r * dj;
                vq += (r * dj + p) * dj;
                *g += 0.5 * bk * (r * dj + p);
            }
            let vk = v[(n, k)];
            out.gmu[(i, k)] = -bk * rd;
            out.gv[(i, k)] = -bk * s_n + 0.5 * bk * bk * vq;
            out.gl2[k] += vk * bk / st.l2[k] * s_n + 0.25 * bk * bk * vq;
        }
    }
    out
}

/// Rows `rows` of the per-point contractions `Σ_{j ≥ c} gs_k ⊙ Φ_n` (lower weights).
#[inline(always)]
fn psi2_contract_chunk_body<const FMA: bool>(
    st: &Psi2Setup,
    mu: MatRef<'_, f64>,
    v: MatRef<'_, f64>,
    gs: &[Vec<f64>],
    rows: (usize, usize),
) -> Mat<f64> {
    let (m, mp) = (st.m, st.mp);
    let mut out = Mat::zeros(rows.1 - rows.0, gs.len());
    let mut ws = st.workspace();
    let mut lanes = vec![[0.0; L]; gs.len()];
    for n in rows.0..rows.1 {
        st.point(|k| mu[(n, k)], |k| v[(n, k)], &mut ws);
        for l in lanes.iter_mut() {
            *l = [0.0; L];
        }
        for c in 0..m {
            let cm = ws.c + ws.base[c];
            for j0 in (Psi2Setup::start(c)..mp).step_by(L) {
                let e = fastexp::exp_lanes::<FMA>(st.exponents::<FMA>(&ws, c, cm, j0));
                for (g, l) in gs.iter().zip(lanes.iter_mut()) {
                    let gb = ld(g, c * mp + j0);
                    for i in 0..L {
                        l[i] = fastexp::madd::<FMA>(gb[i], e[i], l[i]);
                    }
                }
            }
        }
        for (k, l) in lanes.iter().enumerate() {
            out[(n - rows.0, k)] = fastexp::lane_sum(l);
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
mod simd {
    //! The same loops compiled with fused multiply-adds and wider vector instructions,
    //! selected at run time by what the CPU supports: AVX-512 (8 doubles per instruction,
    //! one [`L`]-lane block each) or AVX2 (4 doubles). Both vector paths perform the same
    //! IEEE operations on every lane in the same order (each lane is computed on its own,
    //! the lane sums have a fixed order, nothing is reassociated), so they return the same
    //! bits; they differ from the portable path in the last bits (fused rounding). No path
    //! depends on the number of threads.

    /// The widest instruction set of this CPU that the loops are compiled for.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) enum Level {
        Avx512,
        Avx2,
        Portable,
    }

    pub(super) fn level() -> Level {
        let fma = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if fma && std::is_x86_feature_detected!("avx512f") {
            Level::Avx512
        } else if fma {
            Level::Avx2
        } else {
            Level::Portable
        }
    }

    /// `forward`, `backward` and `contract` compiled for one instruction set.
    macro_rules! compiled_for {
        ($name:ident, $features:literal) => {
            pub(super) mod $name {
                use super::super::*;

                #[target_feature(enable = $features)]
                pub(in super::super) fn forward(
                    st: &Psi2Setup,
                    mu: MatRef<'_, f64>,
                    v: MatRef<'_, f64>,
                    rows: (usize, usize),
                ) -> Vec<f64> {
                    psi2_forward_chunk_body::<true>(st, mu, v, rows)
                }

                #[target_feature(enable = $features)]
                pub(in super::super) fn backward(
                    st: &Psi2Setup,
                    mu: MatRef<'_, f64>,
                    v: MatRef<'_, f64>,
                    gs: &[f64],
                    rows: (usize, usize),
                ) -> Psi2Chunk {
                    psi2_backward_chunk_body::<true>(st, mu, v, gs, rows)
                }

                #[target_feature(enable = $features)]
                pub(in super::super) fn contract(
                    st: &Psi2Setup,
                    mu: MatRef<'_, f64>,
                    v: MatRef<'_, f64>,
                    gs: &[Vec<f64>],
                    rows: (usize, usize),
                ) -> Mat<f64> {
                    psi2_contract_chunk_body::<true>(st, mu, v, gs, rows)
                }
            }
        };
    }
    compiled_for!(avx2, "avx2,fma");
    compiled_for!(avx512, "avx512f,avx2,fma");
}

fn psi2_forward_chunk(
    st: &Psi2Setup,
    mu: MatRef<'_, f64>,
    v: MatRef<'_, f64>,
    rows: (usize, usize),
) -> Vec<f64> {
    #[cfg(target_arch = "x86_64")]
    match simd::level() {
        // SAFETY (both arms): the CPU supports the features the function is compiled
        // for (`simd::level` checked them at run time).
        simd::Level::Avx512 => return unsafe { simd::avx512::forward(st, mu, v, rows) },
        simd::Level::Avx2 => return unsafe { simd::avx2::forward(st, mu, v, rows) },
        simd::Level::Portable => {}
    }
    psi2_forward_chunk_body::<false>(st, mu, v, rows)
}

fn psi2_backward_chunk(
    st: &Psi2Setup,
    mu: MatRef<'_, f64>,
    v: MatRef<'_, f64>,
    gs: &[f64],
    rows: (usize, usize),
) -> Psi2Chunk {
    #[cfg(target_arch = "x86_64")]
    match simd::level() {
        // SAFETY (both arms): as in `psi2_forward_chunk`.
        simd::Level::Avx512 => return unsafe { simd::avx512::backward(st, mu, v, gs, rows) },
        simd::Level::Avx2 => return unsafe { simd::avx2::backward(st, mu, v, gs, rows) },
        simd::Level::Portable => {}
    }
    psi2_backward_chunk_body::<false>(st, mu, v, gs, rows)
}

fn psi2_contract_chunk(
    st: &Psi2Setup,
    mu: MatRef<'_, f64>,
    v: MatRef<'_, f64>,
    gs: &[Vec<f64>],
    rows: (usize, usize),
) -> Mat<f64> {
    #[cfg(target_arch = "x86_64")]
    match simd::level() {
        // SAFETY (both arms): as in `psi2_forward_chunk`.
        simd::Level::Avx512 => return unsafe { simd::avx512::contract(st, mu, v, gs, rows) },
        simd::Level::Avx2 => return unsafe { simd::avx2::contract(st, mu, v, gs, rows) },
        simd::Level::Portable => {}
    }
    psi2_contract_chunk_body::<false>(st, mu, v, gs, rows)
}

/// Σ_n Φ_n (M×M, exactly symmetric).
fn psi2_values(mu: MatRef<'_, f64>, v: MatRef<'_, f64>, z: MatRef<'_, f64>, h: &Hyp) -> Mat<f64> {
    let st = Psi2Setup::new(z, h);
    let (m, mp) = (st.m, st.mp);
    let parts: Vec<Vec<f64>> = chunk_ranges(mu.nrows())
        .into_par_iter()
        .map(|rows| psi2_forward_chunk(&st, mu, v, rows))
        .collect();
    let mut acc = vec![0.0; mp * mp];
    for p in &parts {
        for (a, x) in acc.iter_mut().zip(p) {
            *a += x;
        }
    }
    let mut out = Mat::zeros(m, m);
    for c in 0..m {
        for j in c..m {
            out[(j, c)] = acc[c * mp + j];
            out[(c, j)] = acc[c * mp + j];
        }
    }
    out
}

/// Lower-triangle weights `gs[c·mp + j]` (j ≥ c, stride `mp`) such that
/// `Σ_{all} W ⊙ Φ = Σ_{j ≥ c} gs ⊙ Φ` for a symmetric Φ: `W_jc + W_cj` off the diagonal,
/// `W_cc` on it, 0 elsewhere.
fn lower_weights(w: MatRef<'_, f64>, mp: usize) -> Vec<f64> {
    let m = w.nrows();
    let mut gs = vec![0.0; mp * mp];
    for c in 0..m {
        gs[c * mp + c] = w[(c, c)];
        for j in c + 1..m {
            gs[c * mp + j] = w[(j, c)] + w[(c, j)];
        }
    }
    gs
}

struct Psi2RbfOp;

impl Backward for Psi2RbfOp {
    fn name(&self) -> &'static str {
        "psi2_rbf"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (mu, v, z) = (ctx.input(0), ctx.input(1), ctx.input(2));
        let h = Hyp::new(ctx.input(3), ctx.input(4), mu.ncols());
        let st = Psi2Setup::new(z, &h);
        let (b, q, m, mp) = (mu.nrows(), st.q, st.m, st.mp);
        let gs = lower_weights(ctx.grad(), mp);
        let ranges = chunk_ranges(b);
        let parts: Vec<Psi2Chunk> = ranges
            .par_iter()
            .map(|&rows| psi2_backward_chunk(&st, mu, v, &gs, rows))
            .collect();
        let mut gmu = Mat::zeros(b, q);
        let mut gv = Mat::zeros(b, q);
        let mut gz = vec![0.0; q * m];
        let mut gl2 = vec![0.0; q];
        for (&(n0, n1), p) in ranges.iter().zip(&parts) {
            gmu.subrows_mut(n0, n1 - n0).copy_from(p.gmu.as_ref());
            gv.subrows_mut(n0, n1 - n0).copy_from(p.gv.as_ref());
            for (a, c) in gz.iter_mut().zip(&p.gz) {
                *a += c;
            }
            for (a, c) in gl2.iter_mut().zip(&p.gl2) {
                *a += c;
            }
        }
        // Σ_n Ḡ_sym ⊙ Φ_n = Ḡ_sym ⊙ Ψ2: read off the output instead of accumulating it.
        let out = ctx.output();
        let mut wtot = vec![0.0; mp * mp];
        for c in 0..m {
            for j in c..m {
                wtot[c * mp + j] = gs[c * mp + j] * out[(j, c)];
            }
        }
        // The point-independent part −Σ_q (z_c − z_j)²/(4L_q) of the exponent.
        let mut total = 0.0;
        for c in 0..m {
            total += wtot[c * mp + c];
            for j in c + 1..m {
                let w = wtot[c * mp + j];
                total += w;
                for k in 0..q {
                    let dz = st.zt[k * mp + c] - st.zt[k * mp + j];
                    let t = w * dz / (2.0 * st.l2[k]);
                    gz[k * m + c] -= t;
                    gz[k * m + j] += t;
                    gl2[k] += w * dz * dz / (4.0 * st.l2[k] * st.l2[k]);
                }
            }
        }
        sink.add_owned(0, gmu);
        sink.add_owned(1, gv);
        if sink.wants(2) {
            sink.add_owned(2, Mat::from_fn(m, q, |j, k| gz[k * m + j]));
        }
        if sink.wants(3) {
            sink.add_owned(3, h.ls_grad(&gl2));
        }
        if sink.wants(4) {
            sink.acc(4)[(0, 0)] += 2.0 * total / h.variance;
        }
    }
}

/// Ψ2 of the RBF kernel summed over the points, `Σ_n E[k(Z, h_n) k(h_n, Z)]` (M×M), for the
/// inputs of [`psi1_rbf`]. One fused operation, differentiable in all five inputs (backward
/// rule in the module docs); O(B·M²·Q) time, O(M²) memory per parallel chunk.
///
/// # Panics
/// On inconsistent shapes.
#[track_caller]
pub fn psi2_rbf(
    tape: &mut Tape,
    mean: Var,
    var: Var,
    z: Var,
    lengthscales: Var,
    variance: Var,
) -> Var {
    let (mu, v, zv) = (tape.value(mean), tape.value(var), tape.value(z));
    assert_same_shape(mu, v, "psi2_rbf: mean vs var");
    assert_cols(zv, mu.ncols(), "psi2_rbf: inducing inputs");
    let h = Hyp::new(tape.value(lengthscales), tape.value(variance), mu.ncols());
    let out = psi2_values(mu, v, zv, &h);
    tape.push(out, &[mean, var, z, lengthscales, variance], Psi2RbfOp)
}

/// Per-point contractions `out[n, k] = Σ_{m,m'} W_k(m, m') Φ_n(m, m')` (B×K) of the RBF Ψ2
/// statistic of each point with the weight matrices `weights` (each M×M), without forming
/// any Φ_n. Used for the per-point variance gaps of the moment-matched predictive
/// (Hensman & Lawrence 2014, §4.2, eq. 16). Not differentiable (plain values).
///
/// # Panics
/// On inconsistent shapes.
pub fn psi2_rbf_contract(
    mean: MatRef<'_, f64>,
    var: MatRef<'_, f64>,
    z: MatRef<'_, f64>,
    lengthscales: MatRef<'_, f64>,
    variance: f64,
    weights: &[MatRef<'_, f64>],
) -> Mat<f64> {
    assert_same_shape(mean, var, "psi2_rbf_contract: mean vs var");
    assert_cols(z, mean.ncols(), "psi2_rbf_contract: inducing inputs");
    let var_m = Mat::from_fn(1, 1, |_, _| variance);
    let h = Hyp::new(lengthscales, var_m.as_ref(), mean.ncols());
    let st = Psi2Setup::new(z, &h);
    let (m, mp) = (st.m, st.mp);
    let gs: Vec<Vec<f64>> = weights
        .iter()
        .map(|w| {
            assert_eq!(
                (w.nrows(), w.ncols()),
                (m, m),
                "psi2_rbf_contract: weight shape"
            );
            lower_weights(*w, mp)
        })
        .collect();
    let nk = gs.len();
    let ranges = chunk_ranges(mean.nrows());
    let parts: Vec<Mat<f64>> = ranges
        .par_iter()
        .map(|&rows| psi2_contract_chunk(&st, mean, var, &gs, rows))
        .collect();
    let mut out = Mat::zeros(mean.nrows(), nk);
    for (&(n0, n1), p) in ranges.iter().zip(parts) {
        out.subrows_mut(n0, n1 - n0).copy_from(p.as_ref());
    }
    out
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// A deterministic problem: B points, Q dimensions, M inducing inputs (M not a
    /// multiple of the lane count, so the padding is exercised).
    fn problem(b: usize, q: usize, m: usize) -> (Mat<f64>, Mat<f64>, Mat<f64>, Psi2Setup) {
        let f = |i: usize, k: usize, s: f64| ((i * 7 + k * 13) as f64 * s).sin();
        let mu = Mat::from_fn(b, q, |i, k| 1.5 * f(i, k, 0.37));
        let v = Mat::from_fn(b, q, |i, k| 0.05 + 0.4 * f(i, k, 0.11).abs());
        let z = Mat::from_fn(m, q, |i, k| 1.2 * f(i, k, 0.53));
        let ls = Mat::from_fn(1, q, |_, k| 0.8 + 0.3 * k as f64);
        let var = Mat::from_fn(1, 1, |_, _| 1.3);
        let h = Hyp::new(ls.as_ref(), var.as_ref(), q);
        let st = Psi2Setup::new(z.as_ref(), &h);
        (mu, v, z, st)
    }

    /// The AVX-512 and AVX2 paths of Ψ2's forward, backward and contraction return the
    /// same bits (checked only where the CPU has both).
    #[test]
    fn avx512_and_avx2_paths_agree_bit_for_bit() {
        if simd::level() != simd::Level::Avx512 {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        }
        let (b, q, m) = (45, 3, 37);
        let (mu, v, _, st) = problem(b, q, m);
        let mp = st.mp;
        let w = Mat::from_fn(m, m, |i, j| ((i * 3 + j * 5) as f64 * 0.29).cos());
        let gs = lower_weights(w.as_ref(), mp);
        let rows = (2, b);
        // SAFETY: `simd::level` found AVX-512, AVX2 and FMA on this CPU.
        let (f512, f256) = unsafe {
            (
                simd::avx512::forward(&st, mu.as_ref(), v.as_ref(), rows),
                simd::avx2::forward(&st, mu.as_ref(), v.as_ref(), rows),
            )
        };
        assert!(
            f512.iter()
                .zip(&f256)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        assert!(f512.iter().any(|x| *x != 0.0));
        // SAFETY: as above.
        let (b512, b256) = unsafe {
            (
                simd::avx512::backward(&st, mu.as_ref(), v.as_ref(), &gs, rows),
                simd::avx2::backward(&st, mu.as_ref(), v.as_ref(), &gs, rows),
            )
        };
        let same = |a: MatRef<'_, f64>, b: MatRef<'_, f64>| {
            (0..a.ncols())
                .all(|j| (0..a.nrows()).all(|i| a[(i, j)].to_bits() == b[(i, j)].to_bits()))
        };
        assert!(same(b512.gmu.as_ref(), b256.gmu.as_ref()));
        assert!(same(b512.gv.as_ref(), b256.gv.as_ref()));
        assert!(
            b512.gz
                .iter()
                .zip(&b256.gz)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        assert!(
            b512.gl2
                .iter()
                .zip(&b256.gl2)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        let gsv = vec![gs];
        // SAFETY: as above.
        let (c512, c256) = unsafe {
            (
                simd::avx512::contract(&st, mu.as_ref(), v.as_ref(), &gsv, rows),
                simd::avx2::contract(&st, mu.as_ref(), v.as_ref(), &gsv, rows),
            )
        };
        assert!(same(c512.as_ref(), c256.as_ref()));
    }
}
