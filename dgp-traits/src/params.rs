//! Named parameter blocks with a flat view.
//!
//! A model keeps all of its parameters, in unconstrained space, in one [`ParamStore`]:
//! named matrix blocks for humans and checkpoints, and a flat `Vec<f64>` view (trainable
//! blocks only, column-major, in insertion order) for optimisers and samplers. Recording a
//! store on a [`Tape`] gives one leaf per block, indexed by [`ParamId`].

use crate::error::{Error, Result};
use crate::tape::{Gradients, Tape, Var};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Index of a block in a [`ParamStore`] and of its leaf in [`ParamStore::record`]'s output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ParamId(pub usize);

impl ParamId {
    /// The tape variable of this block among the leaves returned by [`ParamStore::record`].
    pub fn var(self, leaves: &[Var]) -> Var {
        leaves[self.0]
    }
}

/// One named parameter block.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ParamBlock {
    /// Human-readable name, e.g. `"layer1.kernel.lengthscales"`.
    pub name: String,
    /// Value in unconstrained space.
    #[serde(with = "crate::data::serde_mat")]
    pub value: Mat<f64>,
    /// Whether optimisers and samplers change it.
    pub trainable: bool,
}

/// All parameters of a model; see the module docs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ParamStore {
    blocks: Vec<ParamBlock>,
}

impl ParamStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a block; names must be unique.
    pub fn add(
        &mut self,
        name: impl Into<String>,
        value: Mat<f64>,
        trainable: bool,
    ) -> Result<ParamId> {
        let name = name.into();
        if self.id(&name).is_some() {
            return Err(Error::Config(format!("duplicate parameter name {name}")));
        }
        crate::error::check_finite(&name, value.as_ref())?;
        self.blocks.push(ParamBlock {
            name,
            value,
            trainable,
        });
        Ok(ParamId(self.blocks.len() - 1))
    }

    /// Id of the block called `name`.
    pub fn id(&self, name: &str) -> Option<ParamId> {
        self.blocks.iter().position(|b| b.name == name).map(ParamId)
    }

    /// All blocks in insertion order.
    pub fn blocks(&self) -> &[ParamBlock] {
        &self.blocks
    }

    /// Value of block `id`.
    pub fn get(&self, id: ParamId) -> MatRef<'_, f64> {
        self.blocks[id.0].value.as_ref()
    }

    /// Replaces the value of block `id` (same shape, finite entries).
    pub fn set(&mut self, id: ParamId, value: Mat<f64>) -> Result<()> {
        let b = &mut self.blocks[id.0];
        if (b.value.nrows(), b.value.ncols()) != (value.nrows(), value.ncols()) {
            return Err(Error::shape(
                format!("parameter {}", b.name),
                format!("{}×{}", b.value.nrows(), b.value.ncols()),
                format!("{}×{}", value.nrows(), value.ncols()),
            ));
        }
        crate::error::check_finite(&b.name, value.as_ref())?;
        b.value = value;
        Ok(())
    }

    /// Marks block `id` trainable or fixed.
    pub fn set_trainable(&mut self, id: ParamId, trainable: bool) {
        self.blocks[id.0].trainable = trainable;
    }

    /// Number of scalar entries in trainable blocks (the length of [`Self::flat`]).
    pub fn num_trainable(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| b.trainable)
            .map(|b| b.value.nrows() * b.value.ncols())
            .sum()
    }

    /// The positions of block `id` in [`Self::flat`] (column-major), or `None` for a
    /// fixed block.
    pub fn flat_range(&self, id: ParamId) -> Option<std::ops::Range<usize>> {
        let b = self.blocks.get(id.0)?;
        if !b.trainable {
            return None;
        }
        let start: usize = self.blocks[..id.0]
            .iter()
            .filter(|b| b.trainable)
            .map(|b| b.value.nrows() * b.value.ncols())
            .sum();
        Some(start..start + b.value.nrows() * b.value.ncols())
    }

    /// Trainable entries, block by block, column-major.
    pub fn flat(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.num_trainable()];
        self.flat_into(&mut out);
        out
    }

    /// [`Self::flat`] written into `out` (no allocation, for training loops).
    ///
    /// # Panics
    /// When `out.len()` is not [`Self::num_trainable`].
    pub fn flat_into(&self, out: &mut [f64]) {
        assert_eq!(out.len(), self.num_trainable(), "flat_into length");
        let mut k = 0;
        for b in self.blocks.iter().filter(|b| b.trainable) {
            for j in 0..b.value.ncols() {
                for i in 0..b.value.nrows() {
                    out[k] = b.value[(i, j)];
                    k += 1;
                }
            }
        }
    }

    /// Writes a flat vector (as produced by [`Self::flat`]) back into the trainable blocks.
    pub fn set_flat(&mut self, flat: &[f64]) -> Result<()> {
        if flat.len() != self.num_trainable() {
            return Err(Error::shape(
                "ParamStore::set_flat",
                self.num_trainable(),
                flat.len(),
            ));
        }
        if let Some(k) = flat.iter().position(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                context: "flat parameter vector".into(),
                row: k,
                col: 0,
            });
        }
        let mut k = 0;
        for b in self.blocks.iter_mut().filter(|b| b.trainable) {
            for j in 0..b.value.ncols() {
                for i in 0..b.value.nrows() {
                    b.value[(i, j)] = flat[k];
                    k += 1;
                }
            }
        }
        Ok(())
    }

    /// Records every block on `tape` (trainable blocks as leaves, fixed ones as constants);
    /// the result is indexed by [`ParamId`].
    pub fn record(&self, tape: &mut Tape) -> Vec<Var> {
        self.blocks
            .iter()
            .map(|b| {
                let value = tape.alloc_copy(b.value.as_ref());
                if b.trainable {
                    tape.leaf(value)
                } else {
                    tape.constant(value)
                }
            })
            .collect()
    }

    /// The gradient of the trainable blocks in the layout of [`Self::flat`]; blocks the
    /// output does not depend on get zeros.
    pub fn flat_grad(&self, grads: &Gradients, leaves: &[Var]) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.num_trainable());
        for (b, v) in self.blocks.iter().zip(leaves) {
            if !b.trainable {
                continue;
            }
            match grads.get(*v) {
                Some(g) => {
                    for j in 0..g.ncols() {
                        for i in 0..g.nrows() {
                            out.push(g[(i, j)]);
                        }
                    }
                }
                None => out.extend(std::iter::repeat_n(0.0, b.value.nrows() * b.value.ncols())),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::mat;

    #[test]
    fn flat_round_trip_skips_fixed_blocks() {
        let mut s = ParamStore::new();
        let a = s.add("a", mat![[1.0, 2.0], [3.0, 4.0]], true).unwrap();
        s.add("w", mat![[9.0]], false).unwrap();
        let c = s.add("c", mat![[5.0]], true).unwrap();
        assert_eq!(s.flat(), vec![1.0, 3.0, 2.0, 4.0, 5.0]);
        s.set_flat(&[0.0, 1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.get(a)[(1, 0)], 1.0);
        assert_eq!(s.get(c)[(0, 0)], 4.0);
        assert_eq!(s.flat_range(a), Some(0..4));
        assert_eq!(s.flat_range(ParamId(1)), None);
        assert_eq!(s.flat_range(c), Some(4..5));
        assert_eq!(s.flat_range(ParamId(9)), None);
        assert!(s.set_flat(&[1.0]).is_err());
        assert!(s.set_flat(&[0.0, 1.0, f64::NAN, 3.0, 4.0]).is_err());
        assert!(s.add("a", mat![[0.0]], true).is_err());
        let json = serde_json::to_string(&s).unwrap();
        let back: ParamStore = serde_json::from_str(&json).unwrap();
        assert_eq!(back.flat(), s.flat());
        assert_eq!(back.get(ParamId(1))[(0, 0)], 9.0);
    }

    #[test]
    fn flat_grad_matches_layout() {
        let mut s = ParamStore::new();
        s.add("a", mat![[1.0, 2.0]], true).unwrap();
        s.add("fixed", mat![[3.0]], false).unwrap();
        s.add("unused", mat![[3.0]], true).unwrap();
        let mut t = Tape::new();
        let v = s.record(&mut t);
        let p = t.matmul_nt(v[0], v[0]); // a aᵀ = 5
        let g = t.backward(p);
        assert_eq!(s.flat_grad(&g, &v), vec![2.0, 4.0, 0.0]);
    }
}
