//! Theorem 1 (spec §3) as a layer loop: per layer the entries mũ^l, S̃^{ll} and
//! B = S̃^{<l,l} on 1×R rows, then the conditional of eqs. 10–11 and the sample of step 6.
//! The entries come from one of two routes: the dense factor's row products
//! ([`QTape::row_products`], fully coupled) or the block-sparse route of
//! [`crate::sparse`] (STAR, mean field).

use crate::fields::{self, Field};
use crate::model::{Proj, SAMPLE_JITTER, StructuredDgp};
use crate::q::{QTape, RowProducts};
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
    /// The joint q on the tape.
    pub q: QTape,
}

/// The per-layer entries of spec §3 steps 2–4: B (P×T_l), mũ^l, lower triangle of S̃^{ll}.
pub(crate) type LayerTerms = (Vec<Vec<Field>>, Vec<Var>, Vec<Vec<Field>>);

/// What the layer loop carries between layers (spec §3 "state").
#[derive(Default)]
struct State {
    /// Dense route: W_{g,k} = L_{gk}ᵀ a of every GP g of the earlier layers (R columns).
    w: Vec<RowProducts>,
    /// Block-sparse route: the earlier layers' a's and layer 1's products.
    sparse: SparseState,
    /// Factor C of S̃^{<l,<l} (row i has i+1 entries).
    c: Vec<Vec<Field>>,
    /// C⁻¹(f^{<l} − mũ^{<l}), the stacked draws ε.
    r: Vec<Var>,
}

impl StructuredDgp {
    /// Theorem 1 (spec §3) for a batch `x` (B×D) with `samples` draws of the hidden
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
        let mut q = self.q.record(tape, leaves, &self.layout);
        let dense = q.is_dense();
        let mut chols = Vec::with_capacity(nl);
        let mut st = State::default();
        let mut input = x;
        for l in 0..nl {
            let proj = self.project(tape, leaves, l, input)?;
            chols.push(proj.chol);
            let r = if l == 0 { reps } else { 1 };
            let (b, mt, s) = if dense {
                let (ws, mt, s) = self.layer_terms(tape, &mut q, l, &proj, r);
                let b = cross_terms(tape, &st.w, &ws);
                st.w.extend(ws);
                (b, mt, s)
            } else {
                self.sparse_terms(tape, &mut q, l, &proj, r, &mut st.sparse)
            };
            let cond = fields::condition(tape, &st.c, &st.r, &b, &s, &mt);
            if l + 1 == nl {
                let var =
                    cond.cov[0][0].ok_or_else(|| Error::Empty("structured: no variance".into()))?;
                return Ok(Prop {
                    mean: cond.mean[0],
                    var,
                    reps,
                    chols,
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

    /// Dense route, spec §3 steps 2–3: the products W_{g,k} = L_{gk}ᵀ a_l of the layer's
    /// GPs (layer 1's on the B points, not tiled), mũ^l and the lower triangle of S̃^{ll}
    /// (tiled `reps` times).
    fn layer_terms(
        &self,
        tape: &mut Tape,
        q: &mut QTape,
        l: usize,
        proj: &Proj,
        reps: usize,
    ) -> (Vec<RowProducts>, Vec<Var>, Vec<Vec<Field>>) {
        let g0 = self.first_block(l);
        let tl = self.layers[l].output_dim;
        let mt = self.layer_means(tape, q, l, proj);
        let ws: Vec<RowProducts> = (0..tl)
            .map(|t| q.row_products(tape, g0 + t, proj.a))
            .collect();
        let mut s: Vec<Vec<Field>> = Vec::with_capacity(tl);
        for t in 0..tl {
            let mut row = Vec::with_capacity(t + 1);
            for t2 in 0..t {
                row.push(ws[t2].cross_entry(tape, &ws[t]));
            }
            let e = ws[t].self_entry(tape);
            row.push(fields::add(tape, e, Some(proj.base)));
            s.push(row);
        }
        if reps == 1 {
            return (ws, mt, s);
        }
        // The products stay on the B points: the cross terms of later layers pair them
        // with every sample's columns in one fused pass (`forms::prefix_col_dots`).
        let (mt, s) = tile_terms(tape, mt, s, reps);
        (ws, mt, s)
    }
}

/// mũ and S̃ entries repeated `reps` times along the columns (layer 1 is evaluated on the
/// B points and shared by every sample).
pub(crate) fn tile_terms(
    tape: &mut Tape,
    mt: Vec<Var>,
    s: Vec<Vec<Field>>,
    reps: usize,
) -> (Vec<Var>, Vec<Vec<Field>>) {
    let mut tile = |v: Var| tape.concat_cols(&vec![v; reps]);
    let mt = mt.into_iter().map(&mut tile).collect();
    let s = s
        .into_iter()
        .map(|row| row.into_iter().map(|e| e.map(&mut tile)).collect())
        .collect();
    (mt, s)
}

/// Dense route, spec §3 step 4: B = S̃^{<l,l}, entries a_{l'}ᵀ S_M^{(l',t'),(l,t)} a_l =
/// Σ_k W_{(l',t'),k} · W_{(l,t),k}, each at the same row's own a's (pitfall 1).
fn cross_terms(tape: &mut Tape, earlier: &[RowProducts], ws: &[RowProducts]) -> Vec<Vec<Field>> {
    earlier
        .iter()
        .map(|wp| ws.iter().map(|w| wp.cross_entry(tape, w)).collect())
        .collect()
}
