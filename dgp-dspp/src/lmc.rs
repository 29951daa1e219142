//! The Gaussian likelihood of the linear model of coregionalisation (paper App. A.3,
//! eq. 24) as one fused tape operation.
//!
//! Per row r (one data point under one mixture component) the last layer's W' latent GPs
//! have independent marginals `f_w ∼ N(μ_rw, v_rw)`; the outputs are `y = fᵀA + ε`,
//! `ε ∼ N(0, diag σ²)`, with the learned mixing matrix `A` (W'×P). Integrating f out,
//!
//! `log p(y_r) = log N(y_r | Aᵀμ_r, C_r)`,  `C_r = Aᵀ diag(v_r) A + diag(σ²)`  (P×P),
//!
//! which couples the outputs within a component. [`Tape::lmc_log_density`] returns the R×1
//! column of these log densities. Backward, with `α = C⁻¹(y − Aᵀμ)` and
//! `G = ½ ḡ (ααᵀ − C⁻¹)`: `μ̄_w = ḡ (Aα)_w`, `v̄_w = a_wᵀ G a_w`,
//! `Ā_wd += ḡ μ_w α_d + 2 v_w (G a_w)_d`, `σ̄²_d += G_dd` (a_w is row w of A).

use dgp_core::special::LN_SQRT_2PI;
use dgp_traits::skeleton::ChunkMoments;
use dgp_traits::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::{Mat, MatRef};

/// In-place Cholesky of a small dense SPD matrix stored row-major in `c` (P×P); returns
/// false when a pivot is not positive.
fn small_cholesky(c: &mut [f64], p: usize) -> bool {
    for j in 0..p {
        let mut d = c[j * p + j];
        for k in 0..j {
            d -= c[j * p + k] * c[j * p + k];
        }
        if d.is_nan() || d <= 0.0 {
            return false;
        }
        let d = d.sqrt();
        c[j * p + j] = d;
        for i in j + 1..p {
            let mut s = c[i * p + j];
            for k in 0..j {
                s -= c[i * p + k] * c[j * p + k];
            }
            c[i * p + j] = s / d;
        }
    }
    true
}

/// Solves `L Lᵀ x = b` in place with the lower factor `l` (row-major P×P).
fn small_chol_solve(l: &[f64], p: usize, x: &mut [f64]) {
    for i in 0..p {
        let mut s = x[i];
        for k in 0..i {
            s -= l[i * p + k] * x[k];
        }
        x[i] = s / l[i * p + i];
    }
    for i in (0..p).rev() {
        let mut s = x[i];
        for k in i + 1..p {
            s -= l[k * p + i] * x[k];
        }
        x[i] = s / l[i * p + i];
    }
}

/// Forward pass for one row: fills `alpha` (P) and `cinv` (P×P, row-major) and returns the
/// log density; `None` when `C_r` is not positive definite.
#[allow(clippy::too_many_arguments)]
fn row_forward(
    y: MatRef<'_, f64>,
    mu: MatRef<'_, f64>,
    var: MatRef<'_, f64>,
    a: MatRef<'_, f64>,
    noise: MatRef<'_, f64>,
    r: usize,
    alpha: &mut [f64],
    cinv: &mut [f64],
) -> Option<f64> {
    let (wl, p) = (a.nrows(), a.ncols());
    let mut c = vec![0.0; p * p];
    for d in 0..p {
        let mut m = 0.0;
        for w in 0..wl {
            m += mu[(r, w)] * a[(w, d)];
        }
        alpha[d] = y[(r, d)] - m;
        for e in 0..=d {
            let mut s = 0.0;
            for w in 0..wl {
                s += var[(r, w)] * a[(w, d)] * a[(w, e)];
            }
            c[d * p + e] = s;
            c[e * p + d] = s;
        }
        c[d * p + d] += noise[(0, d)];
    }
    if !small_cholesky(&mut c, p) {
        return None;
    }
    let logdet: f64 = (0..p).map(|i| 2.0 * c[i * p + i].ln()).sum();
    let resid = alpha.to_vec();
    small_chol_solve(&c, p, alpha);
    let quad: f64 = resid.iter().zip(alpha.iter()).map(|(u, v)| u * v).sum();
    for j in 0..p {
        let mut e = vec![0.0; p];
        e[j] = 1.0;
        small_chol_solve(&c, p, &mut e);
        for i in 0..p {
            cinv[i * p + j] = e[i];
        }
    }
    Some(-(p as f64) * LN_SQRT_2PI - 0.5 * logdet - 0.5 * quad)
}

struct LmcLogDensityOp {
    /// α per row, R×P.
    alpha: Mat<f64>,
    /// C⁻¹ per row, row-major P×P blocks, R·P² entries.
    cinv: Vec<f64>,
}

impl Backward for LmcLogDensityOp {
    fn name(&self) -> &'static str {
        "lmc_log_density"
    }

    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (mu, var, a) = (ctx.input(1), ctx.input(2), ctx.input(3));
        let g = ctx.grad();
        let (rows, wl, p) = (mu.nrows(), a.nrows(), a.ncols());
        let mut gy = Mat::<f64>::zeros(rows, p);
        let mut gmu = Mat::<f64>::zeros(rows, wl);
        let mut gvar = Mat::<f64>::zeros(rows, wl);
        let mut ga = Mat::<f64>::zeros(wl, p);
        let mut gnoise = Mat::<f64>::zeros(1, p);
        let mut gm = vec![0.0; p * p];
        let mut ga_w = vec![0.0; p];
        for r in 0..rows {
            let gr = g[(r, 0)];
            if gr == 0.0 {
                continue;
            }
            let ci = &self.cinv[r * p * p..(r + 1) * p * p];
            for i in 0..p {
                for j in 0..p {
                    gm[i * p + j] =
                        0.5 * gr * (self.alpha[(r, i)] * self.alpha[(r, j)] - ci[i * p + j]);
                }
                gy[(r, i)] = -gr * self.alpha[(r, i)];
                gnoise[(0, i)] += gm[i * p + i];
            }
            for w in 0..wl {
                // G a_w
                for d in 0..p {
                    let mut s = 0.0;
                    for e in 0..p {
                        s += gm[d * p + e] * a[(w, e)];
                    }
                    ga_w[d] = s;
                }
                let mut amu = 0.0;
                let mut quad = 0.0;
                for d in 0..p {
                    amu += a[(w, d)] * self.alpha[(r, d)];
                    quad += a[(w, d)] * ga_w[d];
                    ga[(w, d)] +=
                        gr * mu[(r, w)] * self.alpha[(r, d)] + 2.0 * var[(r, w)] * ga_w[d];
                }
                gmu[(r, w)] = gr * amu;
                gvar[(r, w)] = quad;
            }
        }
        sink.add_owned(0, gy);
        sink.add_owned(1, gmu);
        sink.add_owned(2, gvar);
        sink.add_owned(3, ga);
        sink.add_owned(4, gnoise);
    }
}

/// Error of [`Tape::lmc_log_density`]: row `row` has a covariance that is not positive
/// definite.
#[derive(Clone, Copy, Debug)]
pub struct LmcNotPd {
    /// The offending row.
    pub row: usize,
}

/// Extension trait adding the LMC log density to the tape.
pub trait LmcTape {
    /// Per-row `log N(y_r | Aᵀμ_r, Aᵀ diag(v_r) A + diag(σ²))` (R×1) for targets `y` (R×P),
    /// latent means `mu` and variances `var` (R×W'), mixing matrix `a` (W'×P) and noise
    /// variances `noise` (1×P); App. A.3, eq. (24). See the module docs for the gradient.
    ///
    /// # Errors
    /// [`LmcNotPd`] when a row's covariance is not positive definite (impossible for
    /// positive noise variances and non-negative latent variances).
    fn lmc_log_density(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        a: Var,
        noise: Var,
    ) -> std::result::Result<Var, LmcNotPd>;
}

impl LmcTape for Tape {
    #[track_caller]
    fn lmc_log_density(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        a: Var,
        noise: Var,
    ) -> std::result::Result<Var, LmcNotPd> {
        let (yv, mv, vv, av, nv) = (
            self.value(y),
            self.value(mu),
            self.value(var),
            self.value(a),
            self.value(noise),
        );
        let (rows, wl, p) = (mv.nrows(), av.nrows(), av.ncols());
        assert_eq!((yv.nrows(), yv.ncols()), (rows, p), "lmc: targets shape");
        assert_eq!(
            (mv.ncols(), vv.nrows(), vv.ncols()),
            (wl, rows, wl),
            "lmc: marginals shape"
        );
        assert_eq!((nv.nrows(), nv.ncols()), (1, p), "lmc: noise shape");
        let mut alpha = Mat::<f64>::zeros(rows, p);
        let mut cinv = vec![0.0; rows * p * p];
        let mut out = Mat::<f64>::zeros(rows, 1);
        let mut al = vec![0.0; p];
        for r in 0..rows {
            let lp = row_forward(
                yv,
                mv,
                vv,
                av,
                nv,
                r,
                &mut al,
                &mut cinv[r * p * p..(r + 1) * p * p],
            )
            .ok_or(LmcNotPd { row: r })?;
            out[(r, 0)] = lp;
            for d in 0..p {
                alpha[(r, d)] = al[d];
            }
        }
        Ok(self.push(
            out,
            &[y, mu, var, a, noise],
            LmcLogDensityOp { alpha, cinv },
        ))
    }
}

/// The per-output marginals of the LMC's mixture components: with latent moments μ_kw,
/// v_kw (per latent output w an n×K matrix), output d has means `Σ_w A_wd μ_kw` and
/// latent variances `Σ_w A_wd² v_kw` (the noise is added by the likelihood).
pub(crate) fn lmc_marginals(a: MatRef<'_, f64>, latent: ChunkMoments) -> ChunkMoments {
    let ChunkMoments { means, vars } = latent;
    let wl = means.len();
    let (n, reps) = (means[0].nrows(), means[0].ncols());
    let p = a.ncols();
    let mo = (0..p)
        .map(|d| {
            Mat::from_fn(n, reps, |i, s| {
                (0..wl).map(|w| a[(w, d)] * means[w][(i, s)]).sum()
            })
        })
        .collect();
    let vo = (0..p)
        .map(|d| {
            Mat::from_fn(n, reps, |i, s| {
                (0..wl)
                    .map(|w| a[(w, d)] * a[(w, d)] * vars[w][(i, s)])
                    .sum()
            })
        })
        .collect();
    ChunkMoments {
        means: mo,
        vars: vo,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_core::rng::{seeded, standard_normal};
    use dgp_traits::tape::check::{GradCheck, check_gradient};

    #[test]
    fn grad_lmc_log_density() {
        let mut rng = seeded(5);
        let (r, wl, p) = (6, 3, 2);
        let y = standard_normal(&mut rng, r, p);
        let mu = standard_normal(&mut rng, r, wl);
        let var = Mat::from_fn(r, wl, |i, j| 0.2 + 0.1 * ((i + 2 * j) % 5) as f64);
        let a = standard_normal(&mut rng, wl, p);
        let noise = Mat::from_fn(1, p, |_, j| 0.3 + 0.2 * j as f64);
        let rep = check_gradient(
            &[y, mu, var, a, noise],
            |t, v| t.lmc_log_density(v[0], v[1], v[2], v[3], v[4]).unwrap(),
            GradCheck::default(),
        )
        .unwrap();
        rep.within(1e-7).unwrap();
    }

    #[test]
    fn identity_mixing_is_a_product_of_gaussians() {
        let mut rng = seeded(6);
        let (r, p) = (4, 3);
        let y = standard_normal(&mut rng, r, p);
        let mu = standard_normal(&mut rng, r, p);
        let var = Mat::from_fn(r, p, |i, j| 0.1 + 0.05 * (i + j) as f64);
        let noise = Mat::from_fn(1, p, |_, j| 0.2 + 0.1 * j as f64);
        let eye = Mat::from_fn(p, p, |i, j| if i == j { 1.0 } else { 0.0 });
        let mut t = Tape::new();
        let vs: Vec<Var> = [&y, &mu, &var, &eye, &noise]
            .iter()
            .map(|m| t.constant((*m).clone()))
            .collect();
        let out = t
            .lmc_log_density(vs[0], vs[1], vs[2], vs[3], vs[4])
            .unwrap();
        for i in 0..r {
            let mut want = 0.0;
            for d in 0..p {
                let v = var[(i, d)] + noise[(0, d)];
                let e = y[(i, d)] - mu[(i, d)];
                want += -LN_SQRT_2PI - 0.5 * v.ln() - 0.5 * e * e / v;
            }
            assert!((t.value(out)[(i, 0)] - want).abs() < 1e-12);
        }
    }
}
