//! The joint q(f_M) = N(μ_M, LLᵀ) over the inducing outputs of all layers (Lindinger et al. 2020, §2 and §3.2,
//! §5): its parameter blocks, the blocks S_M^{(i),(j)} of LLᵀ it implies, and its KL
//! against the block-diagonal prior (Lindinger et al. 2020, eq. 8).
//!
//! Blocks are indexed by the global GP index g = Σ_{l'<l} T_{l'} + t of the core's
//! [`JointQ`] layout. The fully-coupled family stores one dense n×n factor (n = MT) and
//! uses the core's [`JointQ::kl`]; the mean-field and STAR families store only their
//! non-zero M×M blocks of L, never an n×n matrix.

use crate::config::Family;
use dgp_core::linalg::Tri;
use dgp_core::transforms::raw_lower_factor;
use dgp_core::{Error, Result};
use dgp_traits::joint_q::{JointQ, JointQVars};
use dgp_traits::kl::PriorBlock;
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};
use serde::{Deserialize, Serialize};

/// Lower bound of the diagonal of the diagonal blocks of L (softplus + floor), as for the
/// svi backend's q(u) factors.
pub const Q_SQRT_FLOOR: f64 = 1e-10;

/// One stored M×M block of L: row block `row`, column block `col` (global GP indices,
/// `col ≤ row`); diagonal blocks are lower triangular with a positive diagonal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactorBlock {
    /// Row block (global GP index).
    pub row: usize,
    /// Column block (global GP index).
    pub col: usize,
    /// The raw parameter block.
    pub id: ParamId,
}

/// Parameter blocks of the joint q.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum QParams {
    /// Fully coupled: the mean (n×1) and one raw dense n×n factor.
    Dense {
        /// μ_M, n×1.
        mean: ParamId,
        /// Raw factor (strict lower part as is, diagonal through softplus).
        factor: ParamId,
    },
    /// Block-sparse (mean-field, STAR): the mean and the non-zero blocks of L.
    Blocks {
        /// μ_M, n×1.
        mean: ParamId,
        /// The stored blocks, sorted by (row, col).
        blocks: Vec<FactorBlock>,
    },
}

/// The (row, col) blocks of L that exist for `family` (Lindinger et al. 2020, §3.2): every diagonal block;
/// for STAR with `stripes` the blocks (l, t)–(l', t) between hidden layers l' < l; with
/// `arrow` the blocks from the output GP to every hidden GP. Fully coupled: all.
pub fn block_pattern(
    layout: &JointQ,
    family: Family,
    stripes: bool,
    arrow: bool,
) -> Vec<(usize, usize)> {
    let nl = layout.num_layers();
    let total = layout.blocks().len();
    let mut out = Vec::new();
    for row in 0..total {
        let rb = layout.blocks()[row];
        for col in 0..=row {
            let cb = layout.blocks()[col];
            let keep = match family {
                Family::FullyCoupled => true,
                Family::MeanField => row == col,
                Family::Star => {
                    row == col
                        || (stripes && rb.layer + 1 < nl && cb.layer < rb.layer && cb.gp == rb.gp)
                        || (arrow && rb.layer + 1 == nl && cb.layer + 1 < nl)
                }
            };
            if keep {
                out.push((row, col));
            }
        }
    }
    out
}

/// The lower factor a raw block stands for: strict lower part as is, diagonal
/// `softplus + floor` (the value of `Tape::lower_cholesky_factor`).
pub fn lower_factor(raw: MatRef<'_, f64>) -> Mat<f64> {
    Mat::from_fn(raw.nrows(), raw.ncols(), |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Equal => dgp_core::transforms::softplus(raw[(i, i)]) + Q_SQRT_FLOOR,
        std::cmp::Ordering::Greater => raw[(i, j)],
        std::cmp::Ordering::Less => 0.0,
    })
}

/// The joint q on the tape.
#[derive(Clone, Debug)]
pub struct QTape {
    /// μ_M, n×1.
    pub mean: Var,
    /// The factor: dense lower n×n, or the present blocks (T×T table, row-major).
    pub factor: FactorTape,
    /// Lazily formed blocks S_M^{(i),(j)} (i ≤ j), T×T table.
    s_cache: Vec<Option<Option<Var>>>,
    /// Number of GP blocks T.
    t: usize,
    /// Block size M.
    m: usize,
}

/// L on the tape.
#[derive(Clone, Debug)]
pub enum FactorTape {
    /// Dense lower-triangular n×n.
    Dense(Var),
    /// Present blocks, `blocks[row * T + col]`.
    Blocks(Vec<Option<Var>>),
}

impl QParams {
    /// The mean block.
    pub fn mean(&self) -> ParamId {
        match self {
            QParams::Dense { mean, .. } | QParams::Blocks { mean, .. } => *mean,
        }
    }

    /// Every parameter block of q (the mean first).
    pub fn ids(&self) -> Vec<ParamId> {
        match self {
            QParams::Dense { mean, factor } => vec![*mean, *factor],
            QParams::Blocks { mean, blocks } => std::iter::once(*mean)
                .chain(blocks.iter().map(|b| b.id))
                .collect(),
        }
    }

    /// New parameters: μ = 0 and L = blockdiag(`diag_factors[g]`) (off-diagonal blocks 0).
    pub fn init(
        params: &mut ParamStore,
        layout: &JointQ,
        pattern: &[(usize, usize)],
        dense: bool,
        diag_factors: &[Mat<f64>],
    ) -> Result<Self> {
        let n = layout.size();
        let mean = params.add("q.mean", Mat::zeros(n, 1), Role::Optimised)?;
        let blocks = layout.blocks();
        if dense {
            let mut l = Mat::<f64>::zeros(n, n);
            for (g, b) in blocks.iter().enumerate() {
                l.submatrix_mut(b.start, b.start, b.len, b.len)
                    .copy_from(diag_factors[g].as_ref());
            }
            let factor = params.add(
                "q.factor",
                raw_lower_factor(l.as_ref(), Q_SQRT_FLOOR),
                Role::Optimised,
            )?;
            return Ok(QParams::Dense { mean, factor });
        }
        let mut out = Vec::with_capacity(pattern.len());
        for &(row, col) in pattern {
            let m = blocks[row].len;
            let value = if row == col {
                raw_lower_factor(diag_factors[row].as_ref(), Q_SQRT_FLOOR)
            } else {
                Mat::zeros(m, blocks[col].len)
            };
            let id = params.add(format!("q.L{row}.{col}"), value, Role::Optimised)?;
            out.push(FactorBlock { row, col, id });
        }
        Ok(QParams::Blocks { mean, blocks: out })
    }

    /// This q on the tape.
    pub fn record(&self, tape: &mut Tape, leaves: &[Var], layout: &JointQ) -> QTape {
        let t = layout.blocks().len();
        let m = layout.blocks()[0].len;
        let (mean, factor) = match self {
            QParams::Dense { mean, factor } => (
                mean.var(leaves),
                FactorTape::Dense(tape.lower_cholesky_factor(factor.var(leaves), Q_SQRT_FLOOR)),
            ),
            QParams::Blocks { mean, blocks } => {
                let mut table = vec![None; t * t];
                for b in blocks {
                    let raw = b.id.var(leaves);
                    table[b.row * t + b.col] = Some(if b.row == b.col {
                        tape.lower_cholesky_factor(raw, Q_SQRT_FLOOR)
                    } else {
                        raw
                    });
                }
                (mean.var(leaves), FactorTape::Blocks(table))
            }
        };
        QTape {
            mean,
            factor,
            s_cache: vec![None; t * t],
            t,
            m,
        }
    }

    /// The dense mean (n×1) and lower factor (n×n) of this q (for tests and for moving a
    /// q between families).
    pub fn dense(&self, params: &ParamStore, layout: &JointQ) -> (Mat<f64>, Mat<f64>) {
        let n = layout.size();
        let mean = params.get(self.mean()).to_owned();
        let mut l = Mat::<f64>::zeros(n, n);
        match self {
            QParams::Dense { factor, .. } => {
                l = lower_factor(params.get(*factor));
            }
            QParams::Blocks { blocks, .. } => {
                for b in blocks {
                    let (rb, cb) = (layout.blocks()[b.row], layout.blocks()[b.col]);
                    let raw = params.get(b.id);
                    let v = if b.row == b.col {
                        lower_factor(raw)
                    } else {
                        raw.to_owned()
                    };
                    l.submatrix_mut(rb.start, cb.start, rb.len, cb.len)
                        .copy_from(v.as_ref());
                }
            }
        }
        (mean, l)
    }

    /// Sets this q from a dense mean and lower factor (positive diagonal); the blocks a
    /// sparse family does not store are ignored.
    pub fn set_dense(
        &self,
        params: &mut ParamStore,
        layout: &JointQ,
        mean: MatRef<'_, f64>,
        factor: MatRef<'_, f64>,
    ) -> Result<()> {
        let n = layout.size();
        if mean.nrows() != n || mean.ncols() != 1 || factor.nrows() != n || factor.ncols() != n {
            return Err(Error::shape(
                "joint q: mean n×1 and factor n×n",
                n,
                mean.nrows(),
            ));
        }
        params.set(self.mean(), mean.to_owned())?;
        match self {
            QParams::Dense { factor: id, .. } => {
                params.set(*id, raw_lower_factor(factor, Q_SQRT_FLOOR))?;
            }
            QParams::Blocks { blocks, .. } => {
                for b in blocks {
                    let (rb, cb) = (layout.blocks()[b.row], layout.blocks()[b.col]);
                    let v = factor.submatrix(rb.start, cb.start, rb.len, cb.len);
                    let raw = if b.row == b.col {
                        raw_lower_factor(v, Q_SQRT_FLOOR)
                    } else {
                        v.to_owned()
                    };
                    params.set(b.id, raw)?;
                }
            }
        }
        Ok(())
    }
}

impl QTape {
    /// The stored block L_{ik} of a block factor (its lower factor for i = k); `None` when
    /// the family does not store it, and always for the dense factor.
    pub fn block(&self, i: usize, k: usize) -> Option<Var> {
        match &self.factor {
            FactorTape::Blocks(table) => table[i * self.t + k],
            FactorTape::Dense(_) => None,
        }
    }

    /// Maps a block factor of the non-whitened prior to whitened coordinates, the q of
    /// v = L_K⁻¹ f_M (L_K = blockdiag of chol(K_l) per GP, `chols[l]` per layer):
    /// μ_g ← L_{K,l}⁻¹ μ_g and L_ik ← L_{K,l}⁻¹ L_ik with l the layer of row block i. The
    /// block sparsity is kept (row blocks are scaled) and diagonal blocks stay lower
    /// triangular. Then `a_iᵀ S_ij a_j = (L_K⁻¹k_i)ᵀ S^w_ij (L_K⁻¹k_j)` and mũ = m + (L_K⁻¹k)ᵀμ^w
    /// (Lindinger et al. 2020, §2: the whitened variant), and KL(q ‖ N(0, K)) = KL(q^w ‖ N(0, I)) because both
    /// Gaussians map through the same L_K⁻¹: the ELBO is unchanged, each layer needs one
    /// solve with the data instead of two, and the KL's solves are these. Call before any
    /// [`Self::s_block`]; returns `false` (nothing done) for the dense factor.
    pub fn whiten(&mut self, tape: &mut Tape, layout: &JointQ, chols: &[Var]) -> bool {
        let t = self.t;
        let FactorTape::Blocks(table) = &mut self.factor else {
            return false;
        };
        debug_assert!(self.s_cache.iter().all(Option::is_none));
        let mut means = Vec::with_capacity(t);
        for (g, b) in layout.blocks().iter().enumerate() {
            let c = chols[b.layer];
            let mu = tape.slice_rows(self.mean, b.start, b.len);
            means.push(tape.tri_solve(c, mu, Tri::Lower));
            for x in table[g * t..=g * t + g].iter_mut().flatten() {
                *x = tape.tri_solve(c, *x, Tri::Lower);
            }
        }
        self.mean = tape.concat_rows(&means);
        true
    }

    /// Whether the factor is the dense (fully-coupled) one.
    pub fn is_dense(&self) -> bool {
        matches!(self.factor, FactorTape::Dense(_))
    }

    /// μ_M of block g (M×1).
    pub fn mean_block(&self, tape: &mut Tape, g: usize) -> Var {
        tape.slice_rows(self.mean, g * self.m, self.m)
    }

    /// S_M^{(i),(j)} = Σ_k L_{ik} L_{jk}ᵀ for i ≤ j (Lindinger et al. 2020, §3.2's sums for STAR, stripe×stripe
    /// terms included; the reference's `Fully_Coupled_Layers`'s row-block products for FC); `None` when it is
    /// structurally zero. Formed once per tape.
    pub fn s_block(&mut self, tape: &mut Tape, i: usize, j: usize) -> Option<Var> {
        debug_assert!(i <= j);
        let key = i * self.t + j;
        if let Some(s) = self.s_cache[key] {
            return s;
        }
        let m = self.m;
        let s = match &self.factor {
            FactorTape::Dense(l) => Some(dense_s_block(tape, *l, i, j, m)),
            FactorTape::Blocks(table) => {
                let mut acc: Option<Var> = None;
                for k in 0..=i {
                    if let (Some(a), Some(b)) = (table[i * self.t + k], table[j * self.t + k]) {
                        let p = tape.matmul_nt(a, b);
                        acc = Some(match acc {
                            None => p,
                            Some(x) => tape.add(x, p),
                        });
                    }
                }
                acc
            }
        };
        self.s_cache[key] = Some(s);
        s
    }

    /// KL(q ‖ p) against the block-diagonal prior (Lindinger et al. 2020, eq. 8): the core's
    /// [`JointQ::kl`] for the dense factor; for block factors the same formula summed over
    /// the stored blocks (`tr = Σ_{(i,j)} ‖P_i⁻¹ L_ij‖²_F`, `log|S| = Σ_i log|L_ii|²`).
    ///
    /// # Errors
    /// Shape errors of the core KL.
    pub fn kl(&self, tape: &mut Tape, layout: &JointQ, whiten: bool, chols: &[Var]) -> Result<Var> {
        match &self.factor {
            FactorTape::Dense(l) => layout.kl(
                tape,
                JointQVars {
                    mean: self.mean,
                    factor: *l,
                },
                whiten,
                chols,
            ),
            FactorTape::Blocks(table) => {
                let prior = layout.prior_blocks(whiten, chols)?;
                kl_blocks(tape, self, table, &prior)
            }
        }
    }
}

/// Backward of [`dense_s_block`]: parent the dense factor L.
struct DenseSBlockOp {
    i: usize,
    j: usize,
    m: usize,
}

impl Backward for DenseSBlockOp {
    fn name(&self) -> &'static str {
        "dense_s_block"
    }

    /// With `R_g = L_{g,0..=i}`: `R̄_i += S̄ R_j`, `R̄_j += S̄ᵀ R_i` (both rows of L's adjoint
    /// for i = j).
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if !sink.wants(0) {
            return;
        }
        let (i, j, m) = (self.i, self.j, self.m);
        let w = (i + 1) * m;
        let (l, g) = (ctx.input(0), ctx.grad());
        let (ri, rj) = (l.submatrix(i * m, 0, m, w), l.submatrix(j * m, 0, m, w));
        let mut acc = sink.acc(0);
        matmul(
            acc.as_mut().submatrix_mut(i * m, 0, m, w),
            Accum::Add,
            g,
            rj,
            1.0,
            Par::Seq,
        );
        matmul(
            acc.as_mut().submatrix_mut(j * m, 0, m, w),
            Accum::Add,
            g.transpose(),
            ri,
            1.0,
            Par::Seq,
        );
    }
}

/// `S_M^{(i),(j)} = L_{i,0..=i} L_{j,0..=i}ᵀ` (i ≤ j) of the dense factor `l` in one
/// product on views of L (columns beyond block i are zero in row block i), without
/// slicing rows or columns onto the tape; the adjoint goes straight into L's.
fn dense_s_block(tape: &mut Tape, l: Var, i: usize, j: usize, m: usize) -> Var {
    let w = (i + 1) * m;
    let mut out = tape.alloc(m, m);
    {
        let lv = tape.value(l);
        matmul(
            out.as_mut(),
            Accum::Replace,
            lv.submatrix(i * m, 0, m, w),
            lv.submatrix(j * m, 0, m, w).transpose(),
            1.0,
            Par::Seq,
        );
    }
    tape.push(out, &[l], DenseSBlockOp { i, j, m })
}

/// The block-sparse KL of [`QTape::kl`].
fn kl_blocks(
    tape: &mut Tape,
    q: &QTape,
    table: &[Option<Var>],
    prior: &[PriorBlock],
) -> Result<Var> {
    let t = q.t;
    let mut terms: Vec<Var> = Vec::new();
    for (i, p) in prior.iter().enumerate().take(t) {
        let mu = q.mean_block(tape, i);
        let solve = |tape: &mut Tape, v: Var| match p {
            PriorBlock::Identity(_) => v,
            PriorBlock::Chol(l) => tape.tri_solve(*l, v, Tri::Lower),
        };
        let sm = solve(tape, mu);
        terms.push(tape.sum_squares(sm));
        for k in 0..=i {
            if let Some(b) = table[i * t + k] {
                let sb = solve(tape, b);
                terms.push(tape.sum_squares(sb));
            }
        }
        if let PriorBlock::Chol(l) = p {
            terms.push(tape.logdet_chol(*l));
        }
        let d =
            table[i * t + i].ok_or_else(|| Error::config("q", "a diagonal block is missing"))?;
        let ld = tape.logdet_chol(d);
        terms.push(tape.neg(ld));
    }
    let mut kl = terms[0];
    for &x in &terms[1..] {
        kl = tape.add(kl, x);
    }
    let kl = tape.add_scalar(kl, -((t * q.m) as f64));
    Ok(tape.scale(kl, 0.5))
}
