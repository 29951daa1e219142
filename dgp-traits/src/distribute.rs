//! Where the chunks of a minibatch gradient are computed: this process alone, or several
//! processes that each compute a share and combine them (data-parallel training).
//!
//! [`crate::model::chunked_value_and_grad`] splits a minibatch into chunks of consecutive
//! rows and sums their values and gradients in chunk order. The chunking depends on the
//! batch size only, and each chunk's noise comes from its own stream, so *which process*
//! computes a chunk does not change its numbers. A [`ChunkRunner`] says which chunks this
//! process computes ([`ChunkRunner::owns`]) and then makes every chunk's results known to
//! every process ([`ChunkRunner::combine`]); the sum in chunk order that follows is the
//! same on every process and equal, bit for bit, to the single-process sum.
//!
//! The runner is process-wide, like the communicator of a distributed launch: the default
//! is [`Local`] (every chunk here, nothing to combine); a distributed program installs its
//! runner once at start with [`install`], before any training.

use std::sync::OnceLock;

use dgp_core::{Error, Result};

/// Which chunks this process computes, and how the results are shared.
pub trait ChunkRunner: Send + Sync {
    /// Whether this process computes chunk `c` of `chunks`. Every chunk must be owned by
    /// exactly one process of the launch, and the answer must depend only on `c`,
    /// `chunks` and the process.
    fn owns(&self, c: usize, chunks: usize) -> bool;

    /// Shares the results: `slots` holds `chunks` consecutive rows of `width` numbers, row
    /// `c` filled by the process that owns chunk c and zero elsewhere; afterwards every
    /// process holds every row exactly as its owner computed it (a failed chunk is a row
    /// whose first entry is NaN). Called by every process for every step, in the same
    /// order, whenever [`Self::processes`] is more than 1 (with one process every chunk
    /// is summed where it was computed and `combine` is not called).
    ///
    /// # Errors
    /// A communication failure (a process that died, mismatched sizes).
    fn combine(&self, slots: &mut [f64], chunks: usize, width: usize) -> Result<()>;

    /// Number of processes sharing the chunks (1 for [`Local`]); a runner with more than
    /// one must say so, or its [`Self::combine`] is never called.
    fn processes(&self) -> usize {
        1
    }

    /// A short description for records (`"local"` by default).
    fn describe(&self) -> String {
        "local".into()
    }
}

/// Every chunk in this process; nothing to combine.
#[derive(Clone, Copy, Debug, Default)]
pub struct Local;

impl ChunkRunner for Local {
    fn owns(&self, _c: usize, _chunks: usize) -> bool {
        true
    }

    fn combine(&self, _slots: &mut [f64], _chunks: usize, _width: usize) -> Result<()> {
        Ok(())
    }
}

static RUNNER: OnceLock<Box<dyn ChunkRunner>> = OnceLock::new();

/// Installs the process-wide runner (once, before any training).
///
/// # Errors
/// [`Error::Config`] when a runner was installed already or [`runner`] was read before.
pub fn install(runner: Box<dyn ChunkRunner>) -> Result<()> {
    RUNNER.set(runner).map_err(|_| {
        Error::config(
            "runner",
            "a chunk runner is already installed for this process",
        )
    })
}

/// The process-wide runner ([`Local`] unless [`install`] set another).
pub fn runner() -> &'static dyn ChunkRunner {
    RUNNER.get_or_init(|| Box::new(Local)).as_ref()
}
