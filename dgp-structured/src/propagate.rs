//! Theorem 1 (Lindinger et al. 2020) as a layer loop: per layer the entries mũ^l, S̃^{ll} and
//! B = S̃^{<l,l} on 1×R rows, then the conditional of eqs. 10–11 and the sample of step 6.
//! The entries come from the S-block route of [`crate::sparse`] (every family).

use crate::fields::{self, Field};
use crate::model::{Proj, SAMPLE_JITTER, StructuredModel};
use crate::q::QTape;
use crate::sparse::SparseState;
use dgp_core::rng::{Rng, standard_normal};
use dgp_core::{Error, Result};
use dgp_traits::tape::{Tape, Var};
use faer::Mat;

/// What the propagation of a batch yields.
pub(crate) struct Prop {
    /// Means of the last layer's T_L latent functions (T_L×R, R = reps·B, column
    /// `s·B + i`): mû^L, or for coupled functions mû^L plus the drawn q part (see
    /// [`StructuredModel::last_layer`]).
    pub mean: Var,
    /// Their variances (T_L×R): diag Σ̂^L, or the residual k − aᵀKa when coupled.
    pub var: Var,
    /// Samples per point (1 for L = 1).
    pub reps: usize,
    /// chol(K_l) per layer.
    pub chols: Vec<Var>,
    /// Whether `q` is in whitened coordinates (its KL is against N(0, I)).
    pub whitened: bool,
    /// The joint q on the tape.
    pub q: QTape,
}

/// What the layer loop carries between layers (Lindinger et al. 2020, Theorem 1 "state").
#[derive(Default)]
struct State {
    /// The earlier layers' a's and layer 1's products.
    sparse: SparseState,
    /// Factor C of S̃^{<l,<l} (row i has i+1 entries).
    c: Vec<Vec<Field>>,
    /// C⁻¹(f^{<l} − mũ^{<l}), the stacked draws ε.
    r: Vec<Var>,
}

impl StructuredModel {
    /// Theorem 1 (Lindinger et al. 2020) for a batch `x` (B×D) with `samples` draws of the hidden
    /// layers: returns the last layer's mû^L and Σ̂^L per (sample, point). Layer 1's inputs
    /// are the same in every sample, so it is evaluated on B columns and tiled.
    pub(crate) fn propagate(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        x: Var,
        samples: usize,
        rng: &mut Rng,
    ) -> Result<Prop> {
        let nl = self.layers.len();
        let reps = if nl > 1 { samples.max(1) } else { 1 };
        let rows = tape.shape(x).0 * reps;
        let chols = self.chols_kuu(tape, leaves)?;
        let mut q = self.q.record(tape, leaves, &self.layout);
        // A non-whitened block factor is mapped to whitened coordinates once per step
        // (M³ per stored block, no data factor), so that each layer needs one solve with
        // the data (L_K⁻¹k) instead of two (K⁻¹k).
        let whitened = self.config.whitened || q.whiten(tape, &self.layout, &chols);
        let mut st = State::default();
        let mut input = x;
        for l in 0..nl {
            let proj = self.project(tape, leaves, l, input, chols[l], whitened)?;
            let r = if l == 0 { reps } else { 1 };
            let (b, mt, s) = self.sparse_terms(tape, &mut q, l, &proj, r, &mut st.sparse);
            let cond = fields::condition(tape, &st.c, &st.r, &b, &s, &mt);
            if l + 1 == nl {
                let (mean, var) = last_layer(tape, &cond, proj.base, rows, rng)?;
                return Ok(Prop {
                    mean,
                    var,
                    reps,
                    chols,
                    whitened,
                    q,
                });
            }
            let l22 = fields::cholesky(tape, &cond.cov, SAMPLE_JITTER);
            let tl = mt.len();
            let eps = standard_normal(rng, rows, tl);
            let eps: Vec<Var> = (0..tl)
                .map(|t| tape.constant(Mat::from_fn(1, rows, |_, r| eps[(r, t)])))
                .collect();
            let mut f = Vec::with_capacity(tl);
            for (t, lrow) in l22.iter().enumerate() {
                let noise = fields::dot(tape, lrow.iter().zip(&eps).map(|(&l, &e)| (l, Some(e))));
                f.push(fields::add(tape, Some(cond.mean[t]), noise).unwrap_or(cond.mean[t]));
            }
            let p = st.c.len();
            for (t, lrow) in l22.into_iter().enumerate() {
                let mut row: Vec<Field> = (0..p).map(|i| cond.w[i][t]).collect();
                row.extend(lrow);
                st.c.push(row);
            }
            st.r.extend(eps);
            let stacked = tape.concat_rows(&f);
            input = tape.transpose(stacked);
        }
        Err(Error::Empty("a deep GP needs at least one layer".into()))
    }

    /// mũ^l = m_l + a_lᵀ μ_M^{l,t} per GP of layer l (1×R each, not tiled).
    pub(crate) fn layer_means(
        &self,
        tape: &mut Tape,
        q: &QTape,
        l: usize,
        proj: &Proj,
    ) -> Vec<Var> {
        let g0 = self.first_block(l);
        (0..self.layers[l].output_dim)
            .map(|t| {
                let mu = q.mean_block(tape, g0 + t);
                let v = tape.matmul_tn(mu, proj.a);
                match &proj.mean {
                    Some(m) => tape.add(v, m[t]),
                    None => v,
                }
            })
            .collect()
    }
}

/// The last layer's T_L latent functions as independent Gaussians per row, `(means,
/// variances)`, T_L×R each, whose expectation under the likelihood is the ELBO's data term.
///
/// Given the hidden draws, f^L is jointly Gaussian `N(mû^L, Σ̂^L)` (eqs. 10–11). When
/// Σ̂^L is diagonal by structure (T_L = 1, and the mean-field family for any T_L) these
/// are its mean and diagonal, and nothing is drawn. Otherwise (star's arrow and fc's dense
/// factor couple the last layer's functions through the shared hidden blocks) Σ̂^L splits
/// exactly into the kernel residual and the q part, `Σ̂^L = (k − aᵀKa)·I + A` with
/// `A = a_Lᵀ S^{LL} a_L − WᵀW` ⪰ 0 (the conditional covariance of `a_Lᵀ f_M^L`), so
/// `f^L = mû^L + chol(A) η + √(k − aᵀKa) ε` with η, ε ∼ N(0, I): one η per row is drawn
/// from `rng` (a Monte Carlo draw, like the hidden layers' ones) and the returned
/// moments are `(mû^L + chol(A) η, k − aᵀKa)` for every function — the likelihood then
/// integrates the independent residual ε (closed form, quadrature or its own Monte
/// Carlo). The estimate of `E log p(y | f^L)` stays unbiased, with the cross-covariances
/// kept instead of dropped. A's pivots are floored at [`fields::PIVOT_FLOOR`].
pub(crate) fn last_layer(
    tape: &mut Tape,
    cond: &fields::Conditional,
    base: Var,
    rows: usize,
    rng: &mut Rng,
) -> Result<(Var, Var)> {
    let tl = cond.mean.len();
    let coupled = (0..tl).any(|t| (0..t).any(|t2| cond.cov[t][t2].is_some()));
    let (means, vars): (Vec<Var>, Vec<Var>) = if coupled {
        // The last layer is evaluated on all R rows (layer 1 alone is tiled, and a
        // one-layer model has one sample), so `base` is already 1×R.
        let a: Vec<Vec<Field>> = (0..tl)
            .map(|t| {
                (0..=t)
                    .map(|t2| {
                        if t2 == t {
                            fields::sub(tape, cond.cov[t][t], Some(base))
                        } else {
                            cond.cov[t][t2]
                        }
                    })
                    .collect()
            })
            .collect();
        let chol = fields::cholesky(tape, &a, 0.0);
        let eta = standard_normal(rng, rows, tl);
        let eta: Vec<Var> = (0..tl)
            .map(|t| tape.constant(Mat::from_fn(1, rows, |_, r| eta[(r, t)])))
            .collect();
        let means = chol
            .iter()
            .enumerate()
            .map(|(t, lrow)| {
                let shift = fields::dot(tape, lrow.iter().zip(&eta).map(|(&l, &e)| (l, Some(e))));
                fields::add(tape, Some(cond.mean[t]), shift).unwrap_or(cond.mean[t])
            })
            .collect();
        (means, vec![base; tl])
    } else {
        let vars = (0..tl)
            .map(|t| cond.cov[t][t].ok_or_else(|| Error::Empty("structured: no variance".into())))
            .collect::<Result<Vec<_>>>()?;
        (cond.mean.clone(), vars)
    };
    if tl == 1 {
        return Ok((means[0], vars[0]));
    }
    Ok((tape.concat_rows(&means), tape.concat_rows(&vars)))
}
