//! KL divergences between Gaussians on the tape, in the shape of GPflow's `gauss_kl`:
//!
//! * [`kl_divergence`]: Σ_d KL(q(u_d) ‖ p(u_d)) for the independent per-output Gaussians of
//!   one layer (full or diagonal factors), against N(0, I) (whitened) or N(0, Kuu);
//! * [`gauss_kl_block_diag`]: one Gaussian N(m, L_S L_Sᵀ) of any size n against a
//!   block-diagonal prior (identity blocks for whitened GPs, Kuu = L Lᵀ blocks otherwise) —
//!   the KL of a joint q over all layers' inducing outputs (structured DGPs, Lindinger et
//!   al. 2020), whose blocks [`crate::joint_q::JointQ`] lays out.
//!
//! For N(m, S) against N(0, P): `KL = ½ [tr(P⁻¹S) + mᵀP⁻¹m − n + log|P| − log|S|]`, with
//! `tr(P⁻¹S) = ‖L_P⁻¹L_S‖²_F` and `mᵀP⁻¹m = ‖L_P⁻¹m‖²`.

use crate::conditional::{QSqrt, QVars};
use crate::tape::{Tape, Var};
use dgp_core::linalg::Tri;
use dgp_core::{Error, Result};

/// Σ_d KL(q(u_d) ‖ p(u_d)) for one layer (whitened: against N(0, I); non-whitened: against
/// N(0, Kuu) with `chol` = chol(Kuu)); Salimbeni & Deisenroth 2017, eqs. 7–8.
pub fn kl_divergence(tape: &mut Tape, chol: Var, q: &QVars, whiten: bool) -> Var {
    let (m_rows, d_out) = tape.shape(q.mean);
    let m = m_rows as f64;
    // Mean term: ‖m‖² (whitened) or ‖L⁻¹m‖².
    let mean_term = if whiten {
        tape.sum_squares(q.mean)
    } else {
        let lm = tape.tri_solve(chol, q.mean, Tri::Lower);
        tape.sum_squares(lm)
    };
    // Trace term ‖L_S‖² or ‖L⁻¹L_S‖², and Σ log diag(L_S)².
    let (trace_term, logdet_s) = match &q.sqrt {
        QSqrt::Full(factors) => full_trace_logdet(tape, chol, factors, whiten),
        QSqrt::Diag(sd) => {
            let t = if whiten {
                tape.sum_squares(*sd)
            } else {
                let cols: Vec<Var> = (0..d_out)
                    .map(|d| {
                        let c = tape.slice_cols(*sd, d, 1);
                        let dm = tape.diag_matrix(c);
                        let x = tape.tri_solve(chol, dm, Tri::Lower);
                        tape.sum_squares(x)
                    })
                    .collect();
                let mut acc = cols[0];
                for &c in &cols[1..] {
                    acc = tape.add(acc, c);
                }
                acc
            };
            let s2 = tape.square(*sd);
            let logs2 = tape.log(s2);
            (t, tape.sum(logs2))
        }
    };
    // 0.5 (tr + mean − M·D − logdet S) [+ 0.5·D·logdet Kuu when non-whitened]
    let mut kl = tape.add(trace_term, mean_term);
    kl = tape.sub(kl, logdet_s);
    kl = tape.add_scalar(kl, -m * d_out as f64);
    if !whiten {
        let ldk = tape.logdet_chol(chol);
        let ldk = tape.scale(ldk, d_out as f64);
        kl = tape.add(kl, ldk);
    }
    tape.scale(kl, 0.5)
}

/// Σ_d ‖L_S,d‖² (or ‖L⁻¹L_S,d‖²) and Σ_d log|S_d| over full factors, accumulated in
/// output order. A layer always has at least one output; with none, both sums are 0.
fn full_trace_logdet(tape: &mut Tape, chol: Var, factors: &[Var], whiten: bool) -> (Var, Var) {
    let mut acc: Option<(Var, Var)> = None;
    for &ls in factors {
        let t = if whiten {
            tape.sum_squares(ls)
        } else {
            let x = tape.tri_solve(chol, ls, Tri::Lower);
            tape.sum_squares(x)
        };
        let l = tape.logdet_chol(ls);
        acc = Some(match acc {
            None => (t, l),
            Some((tr, ld)) => (tape.add(tr, t), tape.add(ld, l)),
        });
    }
    acc.unwrap_or_else(|| (tape.constant_scalar(0.0), tape.constant_scalar(0.0)))
}

/// One diagonal block of a block-diagonal Gaussian prior N(0, P).
#[derive(Clone, Copy, Debug)]
pub enum PriorBlock {
    /// An identity block of the given size (whitened inducing outputs).
    Identity(usize),
    /// A block `L Lᵀ` given by its lower Cholesky factor `L` (M×M on the tape), e.g.
    /// chol(Kuu) of a non-whitened GP.
    Chol(Var),
}

impl PriorBlock {
    fn size(&self, tape: &Tape) -> usize {
        match *self {
            PriorBlock::Identity(n) => n,
            PriorBlock::Chol(l) => tape.shape(l).0,
        }
    }
}

/// KL(N(m, L_S L_Sᵀ) ‖ N(0, blockdiag(P_1, …, P_K))) for one Gaussian of any size n:
/// `mean` n×1, `factor` the lower Cholesky factor L_S (n×n, positive diagonal), `prior`
/// the diagonal blocks in order (sizes summing to n). Runs of identity blocks are
/// handled together; each Cholesky block costs two triangular solves on its rows.
///
/// # Errors
/// [`Error::Shape`] when the shapes of `mean`, `factor` and the blocks do not agree.
pub fn gauss_kl_block_diag(
    tape: &mut Tape,
    mean: Var,
    factor: Var,
    prior: &[PriorBlock],
) -> Result<Var> {
    let (n, one) = tape.shape(mean);
    let total: usize = prior.iter().map(|b| b.size(tape)).sum();
    if one != 1 || tape.shape(factor) != (n, n) || total != n || n == 0 {
        return Err(Error::shape(
            "joint Gaussian KL: mean n×1, factor n×n, prior blocks summing to n",
            format!("{n}×1, {n}×{n}, {n}"),
            format!("{n}×{one}, {:?}, {total}", tape.shape(factor)),
        ));
    }
    let mut sum: Option<Var> = None;
    let mut add = |tape: &mut Tape, v: Var| {
        sum = Some(match sum {
            None => v,
            Some(acc) => tape.add(acc, v),
        });
    };
    let mut start = 0;
    let mut k = 0;
    while k < prior.len() {
        match prior[k] {
            PriorBlock::Identity(_) => {
                // A run of identity blocks: ‖m_run‖² + ‖L_S[run, :]‖².
                let mut len = 0;
                while let Some(PriorBlock::Identity(s)) = prior.get(k) {
                    len += s;
                    k += 1;
                }
                if len == 0 {
                    continue;
                }
                let (m, f) = if len == n {
                    (mean, factor)
                } else {
                    (
                        tape.slice_rows(mean, start, len),
                        tape.slice_rows(factor, start, len),
                    )
                };
                let mt = tape.sum_squares(m);
                add(tape, mt);
                let ft = tape.sum_squares(f);
                add(tape, ft);
                start += len;
            }
            PriorBlock::Chol(l) => {
                let len = tape.shape(l).0;
                let m = tape.slice_rows(mean, start, len);
                let f = tape.slice_rows(factor, start, len);
                let lm = tape.tri_solve(l, m, Tri::Lower);
                let mt = tape.sum_squares(lm);
                add(tape, mt);
                let lf = tape.tri_solve(l, f, Tri::Lower);
                let ft = tape.sum_squares(lf);
                add(tape, ft);
                let ld = tape.logdet_chol(l);
                add(tape, ld);
                start += len;
                k += 1;
            }
        }
    }
    // n > 0 and the block sizes sum to n, so some block contributed.
    let Some(kl) = sum else {
        return Err(Error::Empty("joint Gaussian KL: no prior blocks".into()));
    };
    let logdet_s = tape.logdet_chol(factor);
    let kl = tape.sub(kl, logdet_s);
    let kl = tape.add_scalar(kl, -(n as f64));
    Ok(tape.scale(kl, 0.5))
}
