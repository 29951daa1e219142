//! Named parameter blocks with a flat view and a [`Role`] per block.
//!
//! A model keeps all of its parameters, in unconstrained space, in one [`ParamStore`]:
//! named matrix blocks for humans and model files, and a flat `Vec<f64>` view (the *free*
//! blocks, i.e. every block whose role is not [`Role::Fixed`], column-major, in insertion
//! order) for optimisers and samplers. Each block's [`Role`] says who moves it: nobody
//! (fixed), a gradient optimiser (optimised), a natural-gradient step (natural) or a
//! sampler (sampled); [`ParamStore::ranges`] tells a stepper which positions of the flat
//! view are its own. Recording a store on a [`Tape`] gives one leaf per block, indexed by
//! [`ParamId`]; every free block is a leaf, so one reverse pass gives the gradient for all
//! roles at once.

use crate::tape::{Gradients, Tape, Var};
use dgp_core::{Error, Result};
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

/// Who moves a parameter block during training.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A constant: recorded on the tape without a gradient and moved by nothing.
    Fixed,
    /// Moved by a gradient optimiser (Adam, L-BFGS).
    Optimised,
    /// Part of a Gaussian variational factor that natural-gradient steps move
    /// ([`crate::optim::natural_gradient_step`]); gradient optimisers leave it alone.
    Natural,
    /// Drawn by a sampler (SGHMC's inducing outputs); gradient optimisers leave it alone.
    Sampled,
}

impl Role {
    /// Whether the block is in the flat view and receives a gradient (every role but
    /// [`Role::Fixed`]).
    pub fn is_free(self) -> bool {
        self != Role::Fixed
    }

    /// [`Role::Optimised`] when `optimised`, else [`Role::Fixed`].
    pub fn optimised_if(optimised: bool) -> Role {
        if optimised {
            Role::Optimised
        } else {
            Role::Fixed
        }
    }
}

/// One named parameter block.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "ParamBlockRepr")]
pub struct ParamBlock {
    /// Human-readable name, e.g. `"layer1.kernel.lengthscales"`.
    pub name: String,
    /// Value in unconstrained space.
    #[serde(with = "dgp_core::serde_mat")]
    pub value: Mat<f64>,
    /// Who moves it.
    pub role: Role,
}

/// The serialised form of a [`ParamBlock`]: `role`, or the `trainable` flag of
/// model files written before roles existed (`true` = optimised, `false` = fixed).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamBlockRepr {
    name: String,
    #[serde(with = "dgp_core::serde_mat")]
    value: Mat<f64>,
    #[serde(default)]
    role: Option<Role>,
    #[serde(default)]
    trainable: Option<bool>,
}

impl TryFrom<ParamBlockRepr> for ParamBlock {
    type Error = String;

    fn try_from(r: ParamBlockRepr) -> std::result::Result<Self, String> {
        let role = match (r.role, r.trainable) {
            (Some(role), None) => role,
            (None, Some(t)) => Role::optimised_if(t),
            (Some(_), Some(_)) => {
                return Err(format!("parameter {}: both `role` and `trainable`", r.name));
            }
            (None, None) => return Err(format!("parameter {}: missing `role`", r.name)),
        };
        Ok(ParamBlock {
            name: r.name,
            value: r.value,
            role,
        })
    }
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

    /// Adds a block with the given role; names must be unique and values finite.
    pub fn add(&mut self, name: impl Into<String>, value: Mat<f64>, role: Role) -> Result<ParamId> {
        let name = name.into();
        if self.id(&name).is_some() {
            return Err(Error::config(
                "name",
                format!("duplicate parameter name {name}"),
            ));
        }
        dgp_core::check_finite(&name, value.as_ref())?;
        self.blocks.push(ParamBlock { name, value, role });
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
        dgp_core::check_finite(&b.name, value.as_ref())?;
        b.value = value;
        Ok(())
    }

    /// The role of block `id`.
    pub fn role(&self, id: ParamId) -> Role {
        self.blocks[id.0].role
    }

    /// Gives block `id` a new role. Changing whether a block is free changes the layout of
    /// [`Self::flat`]; a training loop sets roles before it takes the flat view.
    pub fn set_role(&mut self, id: ParamId, role: Role) {
        self.blocks[id.0].role = role;
    }

    /// Number of scalar entries in free blocks (the length of [`Self::flat`]).
    pub fn num_free(&self) -> usize {
        self.free_blocks()
            .map(|b| b.value.nrows() * b.value.ncols())
            .sum()
    }

    /// The positions of block `id` in [`Self::flat`] (column-major), or `None` for a
    /// fixed block or an unknown id.
    pub fn flat_range(&self, id: ParamId) -> Option<std::ops::Range<usize>> {
        let b = self.blocks.get(id.0)?;
        if !b.role.is_free() {
            return None;
        }
        let start: usize = self.blocks[..id.0]
            .iter()
            .filter(|b| b.role.is_free())
            .map(|b| b.value.nrows() * b.value.ncols())
            .sum();
        Some(start..start + b.value.nrows() * b.value.ncols())
    }

    /// The positions in [`Self::flat`] of every block with role `role`, in block order
    /// (empty for [`Role::Fixed`], which has no positions).
    pub fn ranges(&self, role: Role) -> Vec<std::ops::Range<usize>> {
        let mut out = Vec::new();
        let mut k = 0;
        for b in self.free_blocks() {
            let len = b.value.nrows() * b.value.ncols();
            if b.role == role {
                out.push(k..k + len);
            }
            k += len;
        }
        out
    }

    /// Whether any block has role `role`.
    pub fn has_role(&self, role: Role) -> bool {
        self.blocks.iter().any(|b| b.role == role)
    }

    fn free_blocks(&self) -> impl Iterator<Item = &ParamBlock> {
        self.blocks.iter().filter(|b| b.role.is_free())
    }

    /// Free entries, block by block, column-major.
    pub fn flat(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.num_free()];
        self.flat_into(&mut out);
        out
    }

    /// [`Self::flat`] written into `out` (no allocation, for training loops).
    ///
    /// # Panics
    /// When `out.len()` is not [`Self::num_free`].
    pub fn flat_into(&self, out: &mut [f64]) {
        assert_eq!(out.len(), self.num_free(), "flat_into length");
        let mut k = 0;
        for b in self.free_blocks() {
            let (r, c) = (b.value.nrows(), b.value.ncols());
            for j in 0..c {
                out[k..k + r].copy_from_slice(b.value.col_as_slice(j));
                k += r;
            }
        }
    }

    /// Writes a flat vector (as produced by [`Self::flat`]) back into the free blocks.
    pub fn set_flat(&mut self, flat: &[f64]) -> Result<()> {
        self.check_flat("ParamStore::set_flat", flat)?;
        let mut k = 0;
        for b in self.blocks.iter_mut().filter(|b| b.role.is_free()) {
            let (r, c) = (b.value.nrows(), b.value.ncols());
            for j in 0..c {
                b.value.col_as_slice_mut(j).copy_from_slice(&flat[k..k + r]);
                k += r;
            }
        }
        Ok(())
    }

    /// Records every block on `tape` (free blocks as leaves, fixed ones as constants);
    /// the result is indexed by [`ParamId`].
    pub fn record(&self, tape: &mut Tape) -> Vec<Var> {
        self.blocks
            .iter()
            .map(|b| {
                let value = tape.alloc_copy(b.value.as_ref());
                if b.role.is_free() {
                    tape.leaf(value)
                } else {
                    tape.constant(value)
                }
            })
            .collect()
    }

    /// Records the store on `tape` as [`Self::record`] does, but with the free blocks'
    /// values taken from `flat` (in the layout of [`Self::flat`]) instead of the store's
    /// own: an objective evaluated at given parameters (e.g. MCEM at a window sample of a
    /// chain) without writing them into the model. Fixed blocks keep their values.
    ///
    /// # Errors
    /// As [`Self::set_flat`]: a length other than [`Self::num_free`] or a non-finite entry.
    pub fn record_at(&self, tape: &mut Tape, flat: &[f64]) -> Result<Vec<Var>> {
        self.check_flat("ParamStore::record_at", flat)?;
        let mut k = 0;
        Ok(self
            .blocks
            .iter()
            .map(|b| {
                if b.role.is_free() {
                    let (r, c) = (b.value.nrows(), b.value.ncols());
                    let src = MatRef::from_column_major_slice(&flat[k..k + r * c], r, c);
                    k += r * c;
                    let value = tape.alloc_copy(src);
                    tape.leaf(value)
                } else {
                    let value = tape.alloc_copy(b.value.as_ref());
                    tape.constant(value)
                }
            })
            .collect())
    }

    /// Checks that `flat` has the length of [`Self::flat`] and finite entries.
    fn check_flat(&self, context: &str, flat: &[f64]) -> Result<()> {
        if flat.len() != self.num_free() {
            return Err(Error::shape(context, self.num_free(), flat.len()));
        }
        if let Some(k) = flat.iter().position(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                context: "flat parameter vector".into(),
                row: k,
                col: 0,
            });
        }
        Ok(())
    }

    /// The gradient of the free blocks in the layout of [`Self::flat`]; blocks the
    /// output does not depend on get zeros.
    pub fn flat_grad(&self, grads: &Gradients, leaves: &[Var]) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.num_free());
        for (b, v) in self.blocks.iter().zip(leaves) {
            if !b.role.is_free() {
                continue;
            }
            match grads.get(*v) {
                Some(g) => extend_col_major(&mut out, g),
                None => out.extend(std::iter::repeat_n(0.0, b.value.nrows() * b.value.ncols())),
            }
        }
        out
    }
}

/// Appends `m`'s entries column by column (whole columns at a time where they are
/// contiguous).
fn extend_col_major(out: &mut Vec<f64>, m: MatRef<'_, f64>) {
    for col in m.col_iter() {
        match col.try_as_col_major() {
            Some(col) => out.extend_from_slice(col.as_slice()),
            None => out.extend(col.iter().copied()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::mat;

    #[test]
    fn flat_round_trip_skips_fixed_blocks() {
        let mut s = ParamStore::new();
        let a = s
            .add("a", mat![[1.0, 2.0], [3.0, 4.0]], Role::Optimised)
            .unwrap();
        s.add("w", mat![[9.0]], Role::Fixed).unwrap();
        let c = s.add("c", mat![[5.0]], Role::Natural).unwrap();
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
        assert_eq!(s.ranges(Role::Optimised), vec![0..4]);
        assert_eq!(s.ranges(Role::Natural), vec![4..5]);
        assert!(s.ranges(Role::Sampled).is_empty() && s.ranges(Role::Fixed).is_empty());
        assert!(s.add("a", mat![[0.0]], Role::Optimised).is_err());
        let json = serde_json::to_string(&s).unwrap();
        let back: ParamStore = serde_json::from_str(&json).unwrap();
        assert_eq!(back.flat(), s.flat());
        assert_eq!(back.get(ParamId(1))[(0, 0)], 9.0);
        assert_eq!(back.role(c), Role::Natural);
    }

    #[test]
    fn legacy_trainable_flag_loads_and_conflicts_fail() {
        let old = r#"{"blocks":[{"name":"a","value":{"nrows":1,"ncols":1,"data":[1.0]},"trainable":true},
            {"name":"b","value":{"nrows":1,"ncols":1,"data":[2.0]},"trainable":false}]}"#;
        let s: ParamStore = serde_json::from_str(old).unwrap();
        assert_eq!(s.role(ParamId(0)), Role::Optimised);
        assert_eq!(s.role(ParamId(1)), Role::Fixed);
        let both = r#"{"blocks":[{"name":"a","value":{"nrows":1,"ncols":1,"data":[1.0]},"trainable":true,"role":"fixed"}]}"#;
        assert!(serde_json::from_str::<ParamStore>(both).is_err());
        let none = r#"{"blocks":[{"name":"a","value":{"nrows":1,"ncols":1,"data":[1.0]}}]}"#;
        assert!(serde_json::from_str::<ParamStore>(none).is_err());
    }

    #[test]
    fn record_at_uses_the_given_values_for_free_blocks_only() {
        let mut s = ParamStore::new();
        s.add("a", mat![[1.0, 2.0]], Role::Optimised).unwrap();
        s.add("fixed", mat![[3.0]], Role::Fixed).unwrap();
        s.add("n", mat![[4.0]], Role::Natural).unwrap();
        let mut t = Tape::new();
        let v = s.record_at(&mut t, &[5.0, 6.0, 7.0]).unwrap();
        assert_eq!(t.value(v[0])[(0, 1)], 6.0);
        assert_eq!(t.value(v[1])[(0, 0)], 3.0);
        assert_eq!(t.value(v[2])[(0, 0)], 7.0);
        assert_eq!(s.flat(), vec![1.0, 2.0, 4.0], "the store is untouched");
        assert!(s.record_at(&mut t, &[1.0]).is_err());
        assert!(s.record_at(&mut t, &[1.0, f64::INFINITY, 0.0]).is_err());
    }

    #[test]
    fn flat_grad_matches_layout() {
        let mut s = ParamStore::new();
        s.add("a", mat![[1.0, 2.0]], Role::Optimised).unwrap();
        s.add("fixed", mat![[3.0]], Role::Fixed).unwrap();
        s.add("unused", mat![[3.0]], Role::Sampled).unwrap();
        let mut t = Tape::new();
        let v = s.record(&mut t);
        let p = t.matmul_nt(v[0], v[0]); // a aᵀ = 5
        let g = t.backward(p);
        assert_eq!(s.flat_grad(&g, &v), vec![2.0, 4.0, 0.0]);
    }
}
