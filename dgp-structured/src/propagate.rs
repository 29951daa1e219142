//! Theorem 1 (Lindinger et al. 2020) as a layer loop: per layer the entries mũ^l, S̃^{ll} and
//! B = S̃^{<l,l} on 1×R rows, then the conditional of eqs. 10–11 and the sample of step 6.
//! The entries come from the S-block route of [`crate::sparse`] (every family).

use crate::fields::{self, Field};
use crate::model::{Proj, SAMPLE_JITTER, StructuredDgp};
use crate::q::QTape;
use crate::sparse::SparseState;
use dgp_traits::error::{Error, Result};
use dgp_traits::rng::{Rng, standard_normal};
use dgp_traits::tape::{Tape, Var};
use faer::Mat;

/// What the propagation of a batch yields.
pub(crate) struct Prop {
    /// Last layer's mû^L (1×R, R = reps·B, column `s·B + i`).
    pub mean: Var,
    /// Last layer's Σ̂^L (1×R).
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

impl StructuredDgp {
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
                let var =
                    cond.cov[0][0].ok_or_else(|| Error::Empty("structured: no variance".into()))?;
                return Ok(Prop {
                    mean: cond.mean[0],
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
