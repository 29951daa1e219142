//! Reverse-mode differentiation over dense `faer` matrices.
//!
//! A [`Tape`] records matrix-valued operations as they are evaluated. Every value is a
//! `Mat<f64>` (scalars are 1×1). Each operation owns exactly one backward rule (a type
//! implementing [`Backward`]); [`Tape::backward`] walks the tape once in reverse and returns
//! the adjoints of every node that needs them.
//!
//! Why a hand-written tape: no Rust autodiff crate differentiates Cholesky factors and
//! triangular solves on faer matrices (see the workspace notes), and every objective in the
//! workspace is built from a small set of dense operations. Recording whole matrices keeps
//! the tape's bookkeeping negligible next to the O(B·M²) algebra.
//!
//! Operations live in submodules, one family per file: [`ops`] (matrix products,
//! elementwise maps, reductions, broadcasts, softmax, structure, indexing; one file each
//! under `tape/ops/`), [`linalg`] (Cholesky, triangular solve, log-determinant). Kernels add
//! their fused operations in `crate::kernels`; backend crates add their own (for example
//! psi-statistics) by implementing [`Backward`] and calling [`Tape::push`].
//!
//! Shape errors *between tape operations* are programming errors of the caller and panic
//! with a message; user data are validated before they reach the tape.
//!
//! ```
//! use dgp_traits::tape::Tape;
//! use faer::mat;
//! let mut t = Tape::new();
//! let a = t.leaf(mat![[1.0, 2.0], [3.0, 4.0]]);
//! let b = t.constant(mat![[0.5], [-1.0]]);
//! let c = t.matmul(a, b); // 2×1
//! let s = t.sum(c); // scalar: 0.5 - 2 + 1.5 - 4 = -4
//! assert_eq!(t.scalar(s), -4.0);
//! let g = t.backward(s);
//! // d/dA sum(A b) = 1 bᵀ
//! assert_eq!(g.get(a).unwrap()[(1, 1)], -1.0);
//! ```

pub mod check;
pub mod chunked;
pub mod linalg;
pub mod ops;
pub mod pool;
mod quad_form;

pub use pool::{POOL_MIN_ENTRIES, PoolStats};

use faer::{Mat, MatMut, MatRef, Par};
use pool::SharedPool;

/// Operands with fewer entries than this run single-threaded whatever the tape's
/// parallelism (see [`Tape::par_for`] and [`BackwardCtx::par`]).
pub const PAR_MIN_ENTRIES: usize = 1 << 16;

/// `par` for a product writing a `rows × cols` output, `Par::Seq` when the output has
/// fewer than [`PAR_MIN_ENTRIES`] entries. faer parallelises large outputs over output
/// blocks (each entry summed by one thread in a fixed order) but may split the reduction
/// dimension of products with small outputs across threads, which would make results
/// depend on the number of threads.
pub fn par_for_output(par: Par, rows: usize, cols: usize) -> Par {
    if rows * cols >= PAR_MIN_ENTRIES {
        par
    } else {
        Par::Seq
    }
}

/// Handle of a value recorded on a [`Tape`]. Cheap to copy; only meaningful for the tape
/// that created it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(u32);

impl Var {
    /// Position of the node on its tape.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The backward rule of one operation.
///
/// Implementations read the operation's inputs, output and output adjoint from `ctx` and
/// add each input's adjoint contribution through `sink`. Inputs that do not need a
/// gradient (`sink.wants(i) == false`) should be skipped, which is how constants cost
/// nothing in the backward pass. Any data the rule needs beyond inputs and output is kept
/// in the implementing struct (the operation's "forward cache").
pub trait Backward: Send + Sync + 'static {
    /// Short name for diagnostics.
    fn name(&self) -> &'static str;
    /// Adds ∂L/∂input_i = (∂out/∂input_i)ᵀ ∂L/∂out for every wanted input.
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>);
}

struct Node {
    value: Mat<f64>,
    parents: Vec<Var>,
    needs_grad: bool,
    op: Option<Box<dyn Backward>>,
}

/// A recording of matrix operations; see the module docs.
pub struct Tape {
    nodes: Vec<Node>,
    par: Par,
    pool: SharedPool,
    /// Reusable tapes for objectives that record independent parts of a step in parallel
    /// ([`Tape::sub_tapes`]); kept across steps so their buffer pools are too.
    subs: Vec<Tape>,
}

impl Default for Tape {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tape")
            .field("nodes", &self.nodes.len())
            .field("par", &self.par)
            .finish()
    }
}

impl Tape {
    /// An empty tape whose large products run single-threaded.
    pub fn new() -> Self {
        Self::with_par(Par::Seq)
    }

    /// An empty tape whose large matrix products use `par`.
    ///
    /// faer partitions products over output blocks, so results do not depend on `par`.
    pub fn with_par(par: Par) -> Self {
        Tape {
            nodes: Vec::with_capacity(64),
            par,
            pool: SharedPool::default(),
            subs: Vec::new(),
        }
    }

    /// `n` further tapes owned by this one, for an objective that records independent
    /// parts of one step (e.g. chunks of a minibatch) on separate tapes in parallel. They
    /// persist across calls, so their buffer pools make later steps allocation-free like
    /// this tape's own; each runs its products single-threaded (`Par::Seq`), the
    /// parallelism being across the sub-tapes. The caller clears them before recording.
    pub fn sub_tapes(&mut self, n: usize) -> &mut [Tape] {
        if self.subs.len() < n {
            self.subs.resize_with(n, Tape::new);
        }
        &mut self.subs[..n]
    }

    /// The parallelism configured for large matrix products. Operations should call
    /// [`Tape::par_for`] instead, which falls back to `Par::Seq` for small operands.
    pub fn par(&self) -> Par {
        self.par
    }

    /// The parallelism for an operation on `vars`: the tape's setting when the largest
    /// operand has at least [`PAR_MIN_ENTRIES`] entries, else `Par::Seq` (for M ≤ 256-sized
    /// matrices a parallel dispatch costs more than it saves, see the workspace notes).
    pub fn par_for(&self, vars: &[Var]) -> Par {
        let largest = vars
            .iter()
            .map(|v| {
                let m = &self.nodes[v.index()].value;
                m.nrows() * m.ncols()
            })
            .max()
            .unwrap_or(0);
        self.par_for_size(largest)
    }

    /// The parallelism for an operation whose largest operand (often its output) has
    /// `entries` entries; see [`Tape::par_for`].
    pub fn par_for_size(&self, entries: usize) -> Par {
        if entries >= PAR_MIN_ENTRIES {
            self.par
        } else {
            Par::Seq
        }
    }

    /// Sets the parallelism used for large matrix products.
    pub fn set_par(&mut self, par: Par) {
        self.par = par;
    }

    /// Forgets every node but keeps the allocated memory, so one tape can be reused across
    /// optimisation steps: node values go to the tape's buffer pool (see [`pool`]), from
    /// which the next step's operations take their outputs and adjoints.
    pub fn clear(&mut self) {
        self.pool
            .recycle_all(self.nodes.drain(..).map(|node| node.value));
        self.pool.trim();
    }

    /// Number of recorded nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Records a differentiable input (a parameter).
    pub fn leaf(&mut self, value: Mat<f64>) -> Var {
        self.push_node(value, Vec::new(), true, None)
    }

    /// Records a constant input (data, fixed noise draws); it gets no gradient.
    pub fn constant(&mut self, value: Mat<f64>) -> Var {
        self.push_node(value, Vec::new(), false, None)
    }

    /// Records a differentiable 1×1 input.
    pub fn leaf_scalar(&mut self, x: f64) -> Var {
        self.leaf(Mat::from_fn(1, 1, |_, _| x))
    }

    /// Records a constant 1×1 input.
    pub fn constant_scalar(&mut self, x: f64) -> Var {
        self.constant(Mat::from_fn(1, 1, |_, _| x))
    }

    /// Records the result `value` of an operation on `parents` with backward rule `op`.
    ///
    /// This is the extension point for operations defined outside this module. The node
    /// needs a gradient when any parent does; otherwise `op` is dropped at once.
    pub fn push(&mut self, value: Mat<f64>, parents: &[Var], op: impl Backward) -> Var {
        let needs = parents.iter().any(|p| self.nodes[p.index()].needs_grad);
        let op: Option<Box<dyn Backward>> = if needs { Some(Box::new(op)) } else { None };
        self.push_node(value, parents.to_vec(), needs, op)
    }

    fn push_node(
        &mut self,
        value: Mat<f64>,
        parents: Vec<Var>,
        needs_grad: bool,
        op: Option<Box<dyn Backward>>,
    ) -> Var {
        let idx = u32::try_from(self.nodes.len()).expect("tape holds more than u32::MAX nodes");
        self.nodes.push(Node {
            value,
            parents,
            needs_grad,
            op,
        });
        Var(idx)
    }

    /// The value of `v`.
    pub fn value(&self, v: Var) -> MatRef<'_, f64> {
        self.nodes[v.index()].value.as_ref()
    }

    /// The value of a 1×1 node.
    #[track_caller]
    pub fn scalar(&self, v: Var) -> f64 {
        let m = self.value(v);
        assert!(
            m.nrows() == 1 && m.ncols() == 1,
            "scalar() on a {}×{} node",
            m.nrows(),
            m.ncols()
        );
        m[(0, 0)]
    }

    /// `(rows, cols)` of `v`.
    pub fn shape(&self, v: Var) -> (usize, usize) {
        let m = self.value(v);
        (m.nrows(), m.ncols())
    }

    /// Shapes of every recorded node, in recording order (for tests that bound memory, e.g.
    /// "no N×N matrix on a minibatch path").
    pub fn shapes(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.nodes
            .iter()
            .map(|n| (n.value.nrows(), n.value.ncols()))
    }

    /// Whether `v` depends on a differentiable input.
    pub fn needs_grad(&self, v: Var) -> bool {
        self.nodes[v.index()].needs_grad
    }

    /// Moves the value of `v` out of the tape, leaving an empty matrix. Use after the
    /// backward pass, to keep a large intermediate without copying it.
    pub fn take_value(&mut self, v: Var) -> Mat<f64> {
        std::mem::replace(&mut self.nodes[v.index()].value, Mat::new())
    }

    /// Reverse pass from the 1×1 node `out`; returns the adjoint of every node on which
    /// `out` depends through differentiable paths.
    #[track_caller]
    pub fn backward(&self, out: Var) -> Gradients {
        assert_eq!(self.shape(out), (1, 1), "backward() needs a scalar output");
        let n = out.index() + 1;
        let mut adj: Vec<Option<Mat<f64>>> = (0..n).map(|_| None).collect();
        adj[out.index()] = Some(Mat::from_fn(1, 1, |_, _| 1.0));
        let pool = &self.pool;
        for k in (0..n).rev() {
            let node = &self.nodes[k];
            let Some(op) = node.op.as_ref() else { continue };
            let Some(g) = adj[k].take() else { continue };
            {
                let (lower, _) = adj.split_at_mut(k);
                let ctx = BackwardCtx {
                    nodes: &self.nodes,
                    parents: &node.parents,
                    out: node.value.as_ref(),
                    grad: g.as_ref(),
                    par: self.par,
                    pool,
                };
                let mut sink = GradSink {
                    nodes: &self.nodes,
                    parents: &node.parents,
                    adj: lower,
                    pool,
                };
                op.backward(&ctx, &mut sink);
            }
            adj[k] = Some(g);
        }
        Gradients {
            adj,
            pool: self.pool.clone(),
        }
    }
}

/// What a backward rule may read: the operation's inputs, its output and the output's
/// adjoint.
pub struct BackwardCtx<'a> {
    nodes: &'a [Node],
    parents: &'a [Var],
    out: MatRef<'a, f64>,
    grad: MatRef<'a, f64>,
    par: Par,
    pool: &'a SharedPool,
}

impl<'a> BackwardCtx<'a> {
    /// Value of input `i`.
    pub fn input(&self, i: usize) -> MatRef<'a, f64> {
        self.nodes[self.parents[i].index()].value.as_ref()
    }
    /// Number of inputs.
    pub fn num_inputs(&self) -> usize {
        self.parents.len()
    }
    /// Value of the operation's output.
    pub fn output(&self) -> MatRef<'a, f64> {
        self.out
    }
    /// Adjoint ∂L/∂output.
    pub fn grad(&self) -> MatRef<'a, f64> {
        self.grad
    }
    /// The parallelism for this backward rule: the tape's setting when the output, its
    /// adjoint or an input has at least [`PAR_MIN_ENTRIES`] entries, else `Par::Seq`.
    pub fn par(&self) -> Par {
        let size = |m: MatRef<'_, f64>| m.nrows() * m.ncols();
        let largest = (0..self.parents.len())
            .map(|i| size(self.input(i)))
            .chain([size(self.out), size(self.grad)])
            .max()
            .unwrap_or(0);
        if largest >= PAR_MIN_ENTRIES {
            self.par
        } else {
            Par::Seq
        }
    }
    /// A scratch or result matrix with **unspecified** contents from the tape's buffer
    /// pool (see [`Tape::alloc`]); every entry must be overwritten.
    pub fn alloc(&self, rows: usize, cols: usize) -> Mat<f64> {
        self.pool.alloc(rows, cols)
    }
    /// A matrix of zeros from the tape's buffer pool.
    pub fn alloc_zeros(&self, rows: usize, cols: usize) -> Mat<f64> {
        self.pool.alloc_zeros(rows, cols)
    }
    /// A copy of `src` in a buffer from the tape's buffer pool.
    pub fn alloc_copy(&self, src: MatRef<'_, f64>) -> Mat<f64> {
        self.pool.alloc_copy(src)
    }
    /// Gives a scratch matrix back to the tape's buffer pool.
    pub fn recycle(&self, m: Mat<f64>) {
        self.pool.recycle(m)
    }
}

/// Where a backward rule adds its inputs' adjoints.
pub struct GradSink<'a> {
    nodes: &'a [Node],
    parents: &'a [Var],
    adj: &'a mut [Option<Mat<f64>>],
    pool: &'a SharedPool,
}

impl GradSink<'_> {
    /// Whether input `i` needs a gradient.
    pub fn wants(&self, i: usize) -> bool {
        self.nodes[self.parents[i].index()].needs_grad
    }

    /// Mutable adjoint of input `i`, zero-initialised on first use; add into it.
    pub fn acc(&mut self, i: usize) -> MatMut<'_, f64> {
        let p = self.parents[i].index();
        let slot = &mut self.adj[p];
        if slot.is_none() {
            let v = &self.nodes[p].value;
            *slot = Some(self.pool.alloc_zeros(v.nrows(), v.ncols()));
        }
        slot.as_mut().expect("initialised above").as_mut()
    }

    /// Adjoint of input `i` for a rule that writes **every** entry: `(buffer, fresh)`. When
    /// `fresh` is true this is the first contribution and the buffer's contents are
    /// unspecified (assign, e.g. with `Accum::Replace`); otherwise add into it. Saves the
    /// zero fill of [`GradSink::acc`] for large adjoints.
    pub fn acc_or_new(&mut self, i: usize) -> (MatMut<'_, f64>, bool) {
        let p = self.parents[i].index();
        let slot = &mut self.adj[p];
        let fresh = slot.is_none();
        if fresh {
            let v = &self.nodes[p].value;
            *slot = Some(self.pool.alloc(v.nrows(), v.ncols()));
        }
        (slot.as_mut().expect("initialised above").as_mut(), fresh)
    }

    /// Adds `g` to the adjoint of input `i` (skipped when the input wants no gradient).
    #[track_caller]
    pub fn add(&mut self, i: usize, g: MatRef<'_, f64>) {
        if !self.wants(i) {
            return;
        }
        let p = self.parents[i].index();
        let slot = &mut self.adj[p];
        match slot {
            None => *slot = Some(self.pool.alloc_copy(g)),
            Some(a) => {
                assert_eq!(
                    (a.nrows(), a.ncols()),
                    (g.nrows(), g.ncols()),
                    "adjoint shape mismatch"
                );
                *a += g;
            }
        }
    }

    /// Adds the owned matrix `g` to the adjoint of input `i`, without a copy when it is
    /// the first contribution.
    #[track_caller]
    pub fn add_owned(&mut self, i: usize, g: Mat<f64>) {
        if !self.wants(i) {
            return;
        }
        let p = self.parents[i].index();
        let slot = &mut self.adj[p];
        match slot {
            None => *slot = Some(g),
            Some(a) => {
                assert_eq!(
                    (a.nrows(), a.ncols()),
                    (g.nrows(), g.ncols()),
                    "adjoint shape mismatch"
                );
                *a += &g;
                self.pool.recycle(g);
            }
        }
    }
}

/// Adjoints produced by [`Tape::backward`]. Dropping it gives the adjoint buffers back to
/// the tape's buffer pool ([`pool`]).
pub struct Gradients {
    adj: Vec<Option<Mat<f64>>>,
    pool: SharedPool,
}

impl Drop for Gradients {
    fn drop(&mut self) {
        self.pool.recycle_all(self.adj.drain(..).flatten());
    }
}

impl Gradients {
    /// ∂out/∂v, or `None` when `v` does not influence the output differentiably.
    pub fn get(&self, v: Var) -> Option<MatRef<'_, f64>> {
        self.adj.get(v.index())?.as_ref().map(|m| m.as_ref())
    }

    /// ∂out/∂v as an owned matrix; zeros of shape `shape` when `v` has no adjoint.
    pub fn take_or_zeros(&mut self, v: Var, shape: (usize, usize)) -> Mat<f64> {
        match self.adj.get_mut(v.index()).and_then(|s| s.take()) {
            Some(m) => m,
            None => Mat::zeros(shape.0, shape.1),
        }
    }
}
