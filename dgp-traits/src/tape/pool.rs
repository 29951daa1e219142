//! Recycled matrix buffers: the allocation-free steady state of a reused [`Tape`].
//!
//! A training loop records the same operations on the same shapes at every step. Without
//! recycling, every node value and every adjoint is a fresh allocation that is freed again
//! at [`Tape::clear`]; large buffers then go back to the operating system and are
//! page-faulted (and zeroed by the kernel) at the next step, which cost about a third of a
//! DSVI step. The pool keeps them instead:
//!
//! * [`Tape::clear`] hands every node value to the pool, and dropping a [`Gradients`]
//!   hands back every adjoint;
//! * operations obtain their outputs and adjoints through [`Tape::alloc`],
//!   [`Tape::alloc_zeros`], [`Tape::alloc_copy`] (and the same methods of
//!   [`BackwardCtx`](super::BackwardCtx)), which take a buffer of the exact shape from the
//!   pool when one is free;
//! * at each [`Tape::clear`] the pool keeps, per shape, at most as many buffers as were
//!   requested since the previous clear, so it never holds more than one step's worth of
//!   memory, and shapes that stopped being used are released.
//!
//! Recycling never changes results: a pooled buffer is either fully overwritten
//! ([`Tape::alloc`], whose callers write every entry) or explicitly zeroed or copied into.
//!
//! Backward rules that write every entry of an input's adjoint take it with
//! [`GradSink::acc_or_new`](super::GradSink::acc_or_new) and *assign* the first
//! contribution (products with `Accum::Replace`, elementwise rules with `=`), instead of
//! zero-filling a buffer and adding into it: the same values (up to the sign of an exact
//! zero) without a memset pass per adjoint.
//!
//! [`Gradients`]: super::Gradients

use super::Tape;
use faer::{Mat, MatRef};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Matrices with fewer entries than this are not pooled (the allocator handles them
/// cheaply and they are never returned to the operating system).
pub const POOL_MIN_ENTRIES: usize = 256;

/// Counters of a tape's buffer pool, for tests and diagnostics ([`Tape::pool_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Requests served by a fresh allocation (no free buffer of that shape).
    pub fresh: usize,
    /// Requests served by a recycled buffer.
    pub reused: usize,
    /// Buffers currently free in the pool.
    pub free: usize,
}

#[derive(Default)]
pub(crate) struct Pool {
    free: HashMap<(usize, usize), Vec<Mat<f64>>>,
    /// Requests per shape since the last [`Pool::trim`].
    demand: HashMap<(usize, usize), usize>,
    stats: PoolStats,
}

/// The pool shared by a tape and the [`Gradients`](super::Gradients) it returns.
#[derive(Clone, Default)]
pub(crate) struct SharedPool(Arc<Mutex<Pool>>);

fn pooled(rows: usize, cols: usize) -> bool {
    rows * cols >= POOL_MIN_ENTRIES
}

impl SharedPool {
    fn lock(&self) -> MutexGuard<'_, Pool> {
        // A panic while the lock is held cannot leave the pool inconsistent (every
        // operation is a single push, pop or counter update), so poisoning is ignored.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A `rows × cols` buffer with unspecified (but initialised) contents.
    pub(crate) fn alloc(&self, rows: usize, cols: usize) -> Mat<f64> {
        if pooled(rows, cols) {
            let mut p = self.lock();
            *p.demand.entry((rows, cols)).or_insert(0) += 1;
            if let Some(m) = p.free.get_mut(&(rows, cols)).and_then(Vec::pop) {
                p.stats.reused += 1;
                p.stats.free -= 1;
                return m;
            }
            p.stats.fresh += 1;
        }
        Mat::zeros(rows, cols)
    }

    /// A `rows × cols` buffer of zeros.
    pub(crate) fn alloc_zeros(&self, rows: usize, cols: usize) -> Mat<f64> {
        if pooled(rows, cols) {
            let mut m = self.alloc(rows, cols);
            m.fill(0.0);
            m
        } else {
            Mat::zeros(rows, cols)
        }
    }

    /// A copy of `src`.
    pub(crate) fn alloc_copy(&self, src: MatRef<'_, f64>) -> Mat<f64> {
        if pooled(src.nrows(), src.ncols()) {
            let mut m = self.alloc(src.nrows(), src.ncols());
            m.copy_from(src);
            m
        } else {
            src.to_owned()
        }
    }

    /// Returns a buffer to the pool (small ones are simply dropped).
    pub(crate) fn recycle(&self, m: Mat<f64>) {
        if pooled(m.nrows(), m.ncols()) {
            let mut p = self.lock();
            p.stats.free += 1;
            p.free.entry((m.nrows(), m.ncols())).or_default().push(m);
        }
    }

    /// Returns many buffers under one lock.
    pub(crate) fn recycle_all(&self, ms: impl Iterator<Item = Mat<f64>>) {
        let mut p = self.lock();
        for m in ms {
            if pooled(m.nrows(), m.ncols()) {
                p.stats.free += 1;
                p.free.entry((m.nrows(), m.ncols())).or_default().push(m);
            }
        }
    }

    /// Keeps at most as many free buffers per shape as were requested since the last
    /// trim, and starts a new count.
    pub(crate) fn trim(&self) {
        let mut guard = self.lock();
        let p = &mut *guard;
        let demand = std::mem::take(&mut p.demand);
        p.free.retain(|shape, list| {
            list.truncate(demand.get(shape).copied().unwrap_or(0));
            !list.is_empty()
        });
        p.stats.free = p.free.values().map(Vec::len).sum();
    }

    pub(crate) fn stats(&self) -> PoolStats {
        self.lock().stats
    }
}

impl Tape {
    /// A `rows × cols` matrix for an operation's output, taken from the tape's buffer pool
    /// when possible. Its contents are **unspecified** (stale values of an earlier step):
    /// the caller must overwrite every entry. See the [module docs](self).
    pub fn alloc(&self, rows: usize, cols: usize) -> Mat<f64> {
        self.pool.alloc(rows, cols)
    }

    /// A `rows × cols` matrix of zeros, taken from the tape's buffer pool when possible.
    pub fn alloc_zeros(&self, rows: usize, cols: usize) -> Mat<f64> {
        self.pool.alloc_zeros(rows, cols)
    }

    /// A copy of `src`, in a buffer taken from the tape's buffer pool when possible.
    pub fn alloc_copy(&self, src: MatRef<'_, f64>) -> Mat<f64> {
        self.pool.alloc_copy(src)
    }

    /// Gives a scratch matrix back to the tape's buffer pool (for temporaries of an
    /// operation obtained with [`Tape::alloc`]).
    pub fn recycle(&self, m: Mat<f64>) {
        self.pool.recycle(m)
    }

    /// Counters of the buffer pool: how many requests were served fresh or recycled.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }
}
