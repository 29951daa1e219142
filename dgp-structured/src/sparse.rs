//! The S-block route of Theorem 1 (every family; Lindinger et al. 2020, Theorem 1 and §3.1–3.2):
//! S̃ and B entries from the blocks of S_M themselves, `a_iᵀ S_ij a_j` as column sums of
//! `a_i ⊙ (S_ij a_j)`, with every block formed once per step by the sums of Lindinger et al. 2020, §3.2
//! ([`QTape::s_block`], an M³ cost with no data factor).
//!
//! Per layer l ≥ 2 (R = points × samples columns) all blocks that meet `a_l` — the
//! layer's own `S_jj` and the cross blocks `S_ij` with GPs i of earlier layers ≥ 2 — go
//! through one fused pass ([`forms::stacked_forms`]): one M×M product per block and
//! column instead of one per stored block of L (for STAR L = 3: the arrow row's 11 blocks
//! become 1 + 5). Cross terms with a layer-1 GP i use `S_ji a_1 = Σ_k L_jk (L_ikᵀ a_1)`,
//! formed on the B points and shared by every sample ([`forms::tiled_col_dots`]). A GP's
//! own quadratic form `a_lᵀ S_jj a_l` is `‖C_jᵀ a_l‖²` with `C_j = chol(S_jj)` (a
//! triangular product, half the multiply-adds of a form; the fused form when S_jj is
//! not numerically positive definite), and a GP whose row of L is only its diagonal block
//! takes `C_j = L_jj` itself (the mean-field case). Layer 1 itself works on the B points: its products
//! `W_ik = L_ikᵀ a_1` give its entries and are kept for the later cross terms.
//!
//! The dense factor of the fully-coupled family (the reference's `Fully_Coupled_Layers`) takes the same route with
//! every block present: `S_ij = L_{i,0..=i} L_{j,0..=i}ᵀ` (one product per block, no data
//! factor), layer 1's entries as fused forms on the B points, and the layer-1 cross
//! terms as `S_ijᵀ a_1` on the B points. Per step that is one M×M product per pair of
//! GPs and column, where products of the rows of L with the data
//! (`L_{g,0..=g}ᵀ a`, (g+1)M×R each) and their pairwise column dots cost (g+1) times as
//! much and ran at memory speed.

use crate::fields::{self, Field};
use crate::forms::{self, Partner};
use crate::model::{Proj, StructuredModel};
use crate::q::QTape;
use dgp_traits::tape::{Tape, Var};

/// The per-layer entries of Lindinger et al. 2020, Theorem 1: B (P×T_l), mũ^l, lower triangle of S̃^{ll}.
type LayerTerms = (Vec<Vec<Field>>, Vec<Var>, Vec<Vec<Field>>);

/// What the block-sparse route keeps from earlier layers.
#[derive(Default)]
pub(crate) struct SparseState {
    /// `a_l` of every earlier layer (layer 1 on the B points, the others on R columns).
    a: Vec<Var>,
    /// Layer 1's products `W_ik = L_ikᵀ a_1` (B columns), per GP i of layer 1.
    w1: Vec<Vec<(usize, Var)>>,
}

/// Where the output of one form goes.
#[derive(Clone, Copy)]
enum Slot {
    /// S̃^{ll}_{t,t2} (t2 ≤ t).
    S(usize, usize),
    /// B_{i,t}: earlier GP i, this layer's GP t.
    B(usize, usize),
}

/// Σ of the present fields.
fn sum(tape: &mut Tape, xs: impl IntoIterator<Item = Var>) -> Field {
    xs.into_iter()
        .fold(None, |acc, x| fields::add(tape, acc, Some(x)))
}

impl StructuredModel {
    /// Spec §3 steps 2–4 for layer `l` on the block-sparse route: (B, mũ^l, S̃^{ll}) on
    /// R columns (layer 1's tiled `reps` times).
    pub(crate) fn sparse_terms(
        &self,
        tape: &mut Tape,
        q: &mut QTape,
        l: usize,
        proj: &Proj,
        reps: usize,
        st: &mut SparseState,
    ) -> LayerTerms {
        let mt = self.layer_means(tape, q, l, proj);
        let (b, mt, s) = if l == 0 {
            let s = if q.is_dense() {
                self.dense_first_layer_terms(tape, q, proj)
            } else {
                self.first_layer_terms(tape, q, proj, st)
            };
            let (mt, s) = if reps > 1 {
                tile_terms(tape, mt, s, reps)
            } else {
                (mt, s)
            };
            (Vec::new(), mt, s)
        } else {
            let (b, s) = self.later_layer_terms(tape, q, l, proj, st);
            (b, mt, s)
        };
        st.a.push(proj.a);
        (b, mt, s)
    }

    /// Layer 1 of the dense (fully-coupled) factor on the B points: every entry
    /// `a_1ᵀ S_{t2,t} a_1` of S̃^{11} (t2 ≤ t) through one fused pass over the S_M blocks
    /// (+ the base variance on the diagonal).
    fn dense_first_layer_terms(
        &self,
        tape: &mut Tape,
        q: &mut QTape,
        proj: &Proj,
    ) -> Vec<Vec<Field>> {
        let tl = self.layers[0].output_dim;
        let a = proj.a;
        let (mut blocks, mut partners, mut slots) = (Vec::new(), Vec::new(), Vec::new());
        for t in 0..tl {
            for t2 in 0..=t {
                if let Some(sb) = q.s_block(tape, t2, t) {
                    blocks.push(sb);
                    partners.push(if t2 == t {
                        Partner::Quad
                    } else {
                        Partner::With(a)
                    });
                    slots.push((t, t2));
                }
            }
        }
        let mut s: Vec<Vec<Field>> = (0..tl).map(|t| vec![None; t + 1]).collect();
        if !blocks.is_empty() {
            let g = tape.concat_rows(&blocks);
            let e = forms::stacked_forms(tape, g, a, &partners);
            for (p, &(t, t2)) in slots.iter().enumerate() {
                s[t][t2] = Some(tape.slice_rows(e, p, 1));
            }
        }
        for (t, row) in s.iter_mut().enumerate() {
            row[t] = fields::add(tape, row[t], Some(proj.base));
        }
        s
    }

    /// Layer 1 on the B points: `W_ik = L_ikᵀ a_1` for the stored blocks of each row,
    /// S̃^{11} entries `Σ_k W_ik · W_jk` (+ the base variance on the diagonal).
    fn first_layer_terms(
        &self,
        tape: &mut Tape,
        q: &QTape,
        proj: &Proj,
        st: &mut SparseState,
    ) -> Vec<Vec<Field>> {
        let tl = self.layers[0].output_dim;
        let a = proj.a;
        let mut s: Vec<Vec<Field>> = Vec::with_capacity(tl);
        for g in 0..tl {
            let ws: Vec<(usize, Var)> = (0..=g)
                .filter_map(|k| {
                    let blk = q.block(g, k)?;
                    Some((
                        k,
                        if k == g {
                            tape.lower_matmul_tn(blk, a)
                        } else {
                            tape.matmul_tn(blk, a)
                        },
                    ))
                })
                .collect();
            let mut row = Vec::with_capacity(g + 1);
            for (g2, w2) in st.w1.iter().enumerate() {
                let terms: Vec<Var> = ws
                    .iter()
                    .filter_map(|&(k, w)| {
                        let &(_, x) = w2.iter().find(|(k2, _)| *k2 == k)?;
                        let p = tape.mul(x, w);
                        Some(tape.col_sums(p))
                    })
                    .collect();
                debug_assert!(g2 < g);
                row.push(sum(tape, terms));
            }
            let norms: Vec<Var> = ws
                .iter()
                .map(|&(_, w)| {
                    let n = tape.col_sq_norms(w);
                    tape.transpose(n)
                })
                .collect();
            let own = sum(tape, norms);
            row.push(fields::add(tape, own, Some(proj.base)));
            s.push(row);
            st.w1.push(ws);
        }
        s
    }

    /// A layer l ≥ 2 on R columns: its own quadratic forms and the cross terms with every
    /// earlier GP (Lindinger et al. 2020, Theorem 1).
    fn later_layer_terms(
        &self,
        tape: &mut Tape,
        q: &mut QTape,
        l: usize,
        proj: &Proj,
        st: &SparseState,
    ) -> (Vec<Vec<Field>>, Vec<Vec<Field>>) {
        let (g0, tl) = (self.first_block(l), self.layers[l].output_dim);
        let g1 = self.first_block(1);
        let a = proj.a;
        let mut s: Vec<Vec<Field>> = (0..tl).map(|t| vec![None; t + 1]).collect();
        let mut b: Vec<Vec<Field>> = vec![vec![None; tl]; g0];
        // Forms through the fused pass: blocks, partners, slots.
        let (mut blocks, mut partners, mut slots) = (Vec::new(), Vec::new(), Vec::new());
        for (t, srow) in s.iter_mut().enumerate() {
            let g = g0 + t;
            let only_diag = (0..g).all(|k| q.block(g, k).is_none());
            match (only_diag, q.block(g, g)) {
                (true, Some(d)) => {
                    let n = tape.lower_tn_col_sq_norms(d, a);
                    srow[t] = Some(tape.transpose(n));
                }
                _ => {
                    if let Some(sb) = q.s_block(tape, g, g) {
                        match quad_by_factor(tape, sb, a) {
                            Some(n) => srow[t] = Some(n),
                            None => {
                                blocks.push(sb);
                                partners.push(Partner::Quad);
                                slots.push(Slot::S(t, t));
                            }
                        }
                    }
                }
            }
            for t2 in 0..t {
                if let Some(sb) = q.s_block(tape, g0 + t2, g) {
                    blocks.push(sb);
                    partners.push(Partner::With(a));
                    slots.push(Slot::S(t, t2));
                }
            }
            for i in g1..g0 {
                if let Some(sb) = q.s_block(tape, i, g) {
                    let li = self.layout.blocks()[i].layer;
                    blocks.push(sb);
                    partners.push(Partner::With(st.a[li]));
                    slots.push(Slot::B(i, t));
                }
            }
        }
        let mut outputs: Vec<(Slot, Var)> = Vec::new();
        if !blocks.is_empty() {
            let g = tape.concat_rows(&blocks);
            let e = forms::stacked_forms(tape, g, a, &partners);
            for (p, &slot) in slots.iter().enumerate() {
                outputs.push((slot, tape.slice_rows(e, p, 1)));
            }
        }
        // Cross terms with layer-1 GPs: v = S_ji a_1 on the B points; for a block factor
        // Σ_k L_jk W_ik from layer 1's products, for the dense one S_ijᵀ a_1 from the block.
        let (mut vs, mut vslots) = (Vec::new(), Vec::new());
        for t in 0..tl {
            let g = g0 + t;
            if q.is_dense() {
                for i in 0..g1 {
                    if let Some(sb) = q.s_block(tape, i, g) {
                        vs.push(tape.matmul_tn(sb, st.a[0]));
                        vslots.push(Slot::B(i, t));
                    }
                }
                continue;
            }
            for (i, wi) in st.w1.iter().enumerate() {
                let parts: Vec<Var> = wi
                    .iter()
                    .filter_map(|&(k, w)| q.block(g, k).map(|lk| tape.matmul(lk, w)))
                    .collect();
                if let Some(v) = sum(tape, parts) {
                    vs.push(v);
                    vslots.push(Slot::B(i, t));
                }
            }
        }
        if !vs.is_empty() {
            let e = forms::tiled_col_dots(tape, a, &vs);
            for (p, &slot) in vslots.iter().enumerate() {
                outputs.push((slot, tape.slice_rows(e, p, 1)));
            }
        }
        for (slot, v) in outputs {
            match slot {
                Slot::S(t, t2) => s[t][t2] = fields::add(tape, s[t][t2], Some(v)),
                Slot::B(i, t) => b[i][t] = fields::add(tape, b[i][t], Some(v)),
            }
        }
        for (t, row) in s.iter_mut().enumerate() {
            row[t] = fields::add(tape, row[t], Some(proj.base));
        }
        (b, s)
    }
}

/// The quadratic forms `a_jᵀ S a_j` of a symmetric block S of S_M (1×R) as `‖Cᵀ a_j‖²`
/// with C = chol(S): the triangular product costs M²R/2 multiply-adds forward and M²R
/// backward, where the fused form `colsum(a ⊙ S a)` costs M²R and 2M²R (the factor
/// itself is M³/3, no data factor). C is computed without jitter, so C Cᵀ = S to
/// rounding and the forms are the same numbers; `None` when S is not numerically positive
/// definite (a pivot ≤ 0), and the caller keeps the fused form.
fn quad_by_factor(tape: &mut Tape, s: Var, a: Var) -> Option<Var> {
    let c = tape.cholesky(s).ok()?;
    let n = tape.lower_tn_col_sq_norms(c, a);
    Some(tape.transpose(n))
}

/// mũ and S̃ entries repeated `reps` times along the columns (layer 1 is evaluated on the
/// B points and shared by every sample).
fn tile_terms(
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
