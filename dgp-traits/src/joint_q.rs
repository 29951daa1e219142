//! One joint Gaussian q over the inducing outputs of all layers (structured DGPs, Lindinger
//! et al. 2020): [`JointQ`] lays the (layer, GP) blocks out as consecutive row ranges of
//! one mean vector (n×1) and one lower Cholesky factor (n×n), and gives the block-diagonal
//! prior the KL of [`crate::kl::gauss_kl_block_diag`] is taken against.

use crate::kl::{PriorBlock, gauss_kl_block_diag};
use crate::tape::{Tape, Var};
use dgp_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// The rows of one GP's inducing outputs in the joint q.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JointBlock {
    /// Layer index (0-based).
    pub layer: usize,
    /// GP (output) index within the layer.
    pub gp: usize,
    /// First row.
    pub start: usize,
    /// Number of rows (the layer's number of inducing points M).
    pub len: usize,
}

impl JointBlock {
    /// The block's row range.
    pub fn rows(&self) -> Range<usize> {
        self.start..self.start + self.len
    }
}

/// Layout of a joint q over (layer, GP) blocks: layer-major, GP-minor, each block M_l rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JointQ {
    blocks: Vec<JointBlock>,
    /// Index into `blocks` of each layer's first block, plus the total count.
    layer_starts: Vec<usize>,
}

/// The joint q's mean (n×1) and lower Cholesky factor (n×n, positive diagonal) on the tape.
#[derive(Clone, Copy, Debug)]
pub struct JointQVars {
    /// Mean, n×1.
    pub mean: Var,
    /// Lower Cholesky factor of the covariance, n×n.
    pub factor: Var,
}

impl JointQ {
    /// The layout for layers with `(number of GPs, number of inducing points)` each.
    ///
    /// # Errors
    /// [`Error::Empty`] for no layers, or a layer without GPs or inducing points.
    pub fn new(layers: &[(usize, usize)]) -> Result<Self> {
        if layers.is_empty() || layers.iter().any(|&(g, m)| g == 0 || m == 0) {
            return Err(Error::Empty(
                "joint q: every layer needs at least one GP and one inducing point".into(),
            ));
        }
        let mut blocks = Vec::new();
        let mut layer_starts = Vec::with_capacity(layers.len() + 1);
        let mut start = 0;
        for (layer, &(gps, m)) in layers.iter().enumerate() {
            layer_starts.push(blocks.len());
            for gp in 0..gps {
                blocks.push(JointBlock {
                    layer,
                    gp,
                    start,
                    len: m,
                });
                start += m;
            }
        }
        layer_starts.push(blocks.len());
        Ok(JointQ {
            blocks,
            layer_starts,
        })
    }

    /// Total size n (rows of the mean and of the factor).
    pub fn size(&self) -> usize {
        self.blocks.last().map_or(0, |b| b.start + b.len)
    }

    /// Number of layers.
    pub fn num_layers(&self) -> usize {
        self.layer_starts.len() - 1
    }

    /// Every block, layer-major.
    pub fn blocks(&self) -> &[JointBlock] {
        &self.blocks
    }

    /// The blocks of layer `layer` (empty for a layer out of range).
    pub fn layer_blocks(&self, layer: usize) -> &[JointBlock] {
        match (
            self.layer_starts.get(layer),
            self.layer_starts.get(layer + 1),
        ) {
            (Some(&a), Some(&b)) => &self.blocks[a..b],
            _ => &[],
        }
    }

    /// The block of GP `gp` of layer `layer`, if there is one.
    pub fn block(&self, layer: usize, gp: usize) -> Option<JointBlock> {
        self.layer_blocks(layer).get(gp).copied()
    }

    /// Rows of all of layer `layer`'s blocks (empty for a layer out of range).
    pub fn layer_rows(&self, layer: usize) -> Range<usize> {
        let b = self.layer_blocks(layer);
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => f.start..l.start + l.len,
            _ => 0..0,
        }
    }

    /// The block-diagonal prior: per block, the identity (whitened) or the layer's
    /// chol(Kuu) from `chols` (one per layer, shared by the layer's GPs).
    ///
    /// # Errors
    /// [`Error::Shape`] when `chols` does not have one entry per layer.
    pub fn prior_blocks(&self, whiten: bool, chols: &[Var]) -> Result<Vec<PriorBlock>> {
        if !whiten && chols.len() != self.num_layers() {
            return Err(Error::shape(
                "joint q: prior Cholesky factors per layer",
                self.num_layers(),
                chols.len(),
            ));
        }
        Ok(self
            .blocks
            .iter()
            .map(|b| {
                if whiten {
                    PriorBlock::Identity(b.len)
                } else {
                    PriorBlock::Chol(chols[b.layer])
                }
            })
            .collect())
    }

    /// KL(q ‖ p) of the joint q against the block-diagonal prior of
    /// [`JointQ::prior_blocks`].
    ///
    /// # Errors
    /// Shape errors of [`gauss_kl_block_diag`] and [`JointQ::prior_blocks`].
    pub fn kl(&self, tape: &mut Tape, q: JointQVars, whiten: bool, chols: &[Var]) -> Result<Var> {
        let prior = self.prior_blocks(whiten, chols)?;
        gauss_kl_block_diag(tape, q.mean, q.factor, &prior)
    }

    /// The rows of `v` (n×k on the tape) that belong to one block.
    ///
    /// # Errors
    /// [`Error::Config`] for a block that does not exist; [`Error::Shape`] when `v` does
    /// not have n rows.
    pub fn block_rows(&self, tape: &mut Tape, v: Var, layer: usize, gp: usize) -> Result<Var> {
        let b = self.block(layer, gp).ok_or_else(|| {
            Error::config("block", format!("no block for layer {layer}, GP {gp}"))
        })?;
        if tape.shape(v).0 != self.size() {
            return Err(Error::shape("joint q rows", self.size(), tape.shape(v).0));
        }
        Ok(tape.slice_rows(v, b.start, b.len))
    }
}
