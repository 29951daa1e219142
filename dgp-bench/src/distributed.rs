//! Data-parallel training over MPI (cargo feature `mpi`).
//!
//! `mpirun -np P dgp-bench run ...` starts P copies of the benchmark ("ranks"). Every rank
//! loads the same data, builds the same model and draws the same minibatch indices from
//! the seed; [`MpiRunner`], installed as the process-wide
//! [`dgp_traits::distribute::ChunkRunner`], makes each rank compute only its share of
//! every minibatch's chunks (chunk `c` on rank `c mod P`) and then gives every rank every
//! chunk's value and gradient exactly as their owner computed them. Each chunk's noise
//! comes from its own stream, so the run is **bit for bit** the run of one process; only
//! the time per step changes.
//!
//! [`Launch`] is the launch itself, used by the binary:
//!
//! * MPI is initialised only when the process was started by an MPI launcher (one of the
//!   environment variables of [`LAUNCHER_VARS`] is set); otherwise the binary runs as a
//!   plain process and never touches MPI. A launch of one rank installs nothing.
//! * Before anything else the ranks compare their command lines ([`Launch::check_args`]):
//!   ranks launched with different arguments refuse to run, with an error naming the
//!   ranks that differ from rank 0.
//! * Rank 0 alone prints and writes outputs (records, reports, plots, checkpoints): the
//!   other ranks get standard output redirected to `/dev/null` and their output flags
//!   cleared ([`Launch::is_writer`]); they keep standard error for errors of their own.
//! * The decision to stop after a SIGINT/SIGTERM is collective: every stop poll of the
//!   benchmark (`should_stop` after each step, and the checks around each split) asks all
//!   ranks ([`stop_agreement`]), so a signal seen by any rank stops every rank after the
//!   same step, and an interrupted run can be resumed from rank 0's checkpoint.
//! * A rank that fails ends the whole launch: its error is printed and it calls
//!   `MPI_Abort`, which makes the launcher kill the other ranks ([`Launch::abort`]). A rank
//!   that dies without a word (killed, crashed) is noticed by the launcher: Open MPI's
//!   `mpirun` terminates the remaining ranks as soon as one exits abnormally and returns a
//!   non-zero status. No rank waits forever for a dead peer, as long as the launcher
//!   enforces this (Open MPI's and MPICH's do by default).
//!
//! # Collectives and their checks
//!
//! Every collective operation of this module starts with a fixed-size header that every
//! rank contributes to the same all-gather: what the rank is doing (combine, stop poll,
//! argument check) and the sizes it expects. The header exchange cannot itself mismatch
//! (every rank sends the same number of integers), and every rank compares all headers
//! before the payload moves: ranks that disagree (a different number of chunks or
//! parameters, or one rank combining while another polls the stop flag) fail with an
//! error naming the ranks and the sizes instead of handing MPI mismatched buffers, which
//! could hang or corrupt memory.
//!
//! The payload of [`ChunkRunner::combine`] is an all-gather (`MPI_Allgatherv`) of the rows
//! each rank owns: rank r sends its rows `r, r + P, r + 2P, ...` and every rank copies
//! each received row into its place. Rows are moved, never added, so every rank holds
//! every row bit for bit as its owner computed it (signed zeros and NaN markers of failed
//! chunks included), and the sum in chunk order that
//! [`dgp_traits::model::chunked_value_and_grad`] forms afterwards is the single-process
//! sum. Per step, every rank receives `chunks × (1 + parameters)` numbers of 8 bytes.

use std::ffi::OsString;
use std::os::fd::AsRawFd;

use dgp_traits::distribute::ChunkRunner;
use dgp_traits::guard::StopFlag;
use mpi::Threading;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

use crate::error::{BenchError, Result};
use crate::session::Process;

/// Environment variables that MPI launchers set in the processes they start: Open MPI's
/// `mpirun` (`OMPI_COMM_WORLD_SIZE`), MPICH / Intel MPI's Hydra (`PMI_SIZE`, `PMI_RANK`)
/// and PMIx launchers (`PMIX_RANK`; Open MPI 5, `srun --mpi=pmix`). One of them set means
/// "launched under MPI".
pub const LAUNCHER_VARS: &[&str] = &["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"];

/// What a rank is doing in a checked collective (the first word of its header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Combine = 1,
    Stop = 2,
    Args = 3,
}

impl Op {
    fn name(tag: u64) -> &'static str {
        match tag {
            1 => "combining a minibatch's chunks",
            2 => "polling the stop flag",
            3 => "comparing command lines",
            _ => "an unknown operation",
        }
    }
}

/// Words in a header: the operation and three operation-specific numbers.
const HEADER: usize = 4;

/// The world communicator (a handle to `MPI_COMM_WORLD`; MPI must be initialised).
fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

/// All-gathers this rank's header `[op, a, b, c]`; fails when any rank is at another
/// operation. Returns every rank's header, rank by rank.
fn exchange_headers(rank: usize, op: Op, vals: [u64; 3]) -> dgp_traits::Result<Vec<[u64; 4]>> {
    let comm = world();
    let size = comm.size() as usize;
    let send = [op as u64, vals[0], vals[1], vals[2]];
    let mut recv = vec![0u64; HEADER * size];
    comm.all_gather_into(&send[..], &mut recv[..]);
    let headers: Vec<[u64; 4]> = recv
        .chunks_exact(HEADER)
        .map(|h| [h[0], h[1], h[2], h[3]])
        .collect();
    if let Some((r, h)) = headers.iter().enumerate().find(|(_, h)| h[0] != op as u64) {
        return Err(dgp_traits::Error::config(
            "mpi",
            format!(
                "MPI ranks out of step: rank {rank} is {} while rank {r} is {} (the ranks must \
             run the same command on the same data)",
                Op::name(op as u64),
                Op::name(h[0])
            ),
        ));
    }
    Ok(headers)
}

/// Rows of `chunks` owned by `rank` of `size` (chunks `rank`, `rank + size`, ...).
fn owned_count(rank: usize, size: usize, chunks: usize) -> usize {
    if rank >= chunks {
        0
    } else {
        (chunks - rank).div_ceil(size)
    }
}

/// Receive counts and displacements (in numbers) of the all-gather of owned rows.
fn layout(size: usize, chunks: usize, width: usize) -> (Vec<usize>, Vec<usize>) {
    let counts: Vec<usize> = (0..size)
        .map(|r| owned_count(r, size, chunks) * width)
        .collect();
    let displs = counts
        .iter()
        .scan(0, |acc, &n| {
            let d = *acc;
            *acc += n;
            Some(d)
        })
        .collect();
    (counts, displs)
}

/// The rows of `slots` owned by `rank`, concatenated in chunk order.
fn pack(slots: &[f64], rank: usize, size: usize, chunks: usize, width: usize) -> Vec<f64> {
    (rank..chunks)
        .step_by(size)
        .flat_map(|c| slots[c * width..(c + 1) * width].iter().copied())
        .collect()
}

/// Copies every rank's packed rows (`recv`, laid out by [`layout`]) into their places in
/// `slots`.
fn unpack(recv: &[f64], slots: &mut [f64], size: usize, chunks: usize, width: usize) {
    let (_, displs) = layout(size, chunks, width);
    for (r, &d) in displs.iter().enumerate() {
        for (j, c) in (r..chunks).step_by(size).enumerate() {
            let from = d + j * width;
            slots[c * width..(c + 1) * width].copy_from_slice(&recv[from..from + width]);
        }
    }
}

/// The [`ChunkRunner`] of an MPI launch of several ranks: chunk `c` of a minibatch is
/// computed by rank `c mod P`, and [`ChunkRunner::combine`] all-gathers the rows (see the
/// module docs: a checked header, then `MPI_Allgatherv` of each rank's own rows, copied,
/// never summed, so the result is bit-identical to one process).
///
/// Obtained from [`Launch::runner`] (MPI must be initialised while it is used).
#[derive(Clone, Copy, Debug)]
pub struct MpiRunner {
    rank: usize,
    size: usize,
}

impl ChunkRunner for MpiRunner {
    fn owns(&self, c: usize, _chunks: usize) -> bool {
        c % self.size == self.rank
    }

    /// # Errors
    /// [`dgp_traits::Error::Shape`] when the ranks disagree on the number of chunks, the
    /// row width or the slot count, or `slots` does not hold `chunks × width` numbers;
    /// [`dgp_traits::Error::Config`] when another rank is at a different operation or the
    /// rows exceed what one MPI call can move. Every rank that takes part sees the same
    /// headers and so returns the same error; none waits for a payload that will not come.
    fn combine(&self, slots: &mut [f64], chunks: usize, width: usize) -> dgp_traits::Result<()> {
        let mine = [chunks as u64, width as u64, slots.len() as u64];
        let headers = exchange_headers(self.rank, Op::Combine, mine)?;
        for (r, h) in headers.iter().enumerate() {
            if h[1..] != mine {
                return Err(dgp_traits::Error::shape(
                    format!("MPI chunk combine (rank {} against rank {r})", self.rank),
                    format!("{chunks} chunks × {width} numbers in {} slots", slots.len()),
                    format!("{} chunks × {} numbers in {} slots", h[1], h[2], h[3]),
                ));
            }
        }
        if chunks.checked_mul(width) != Some(slots.len()) {
            return Err(dgp_traits::Error::shape(
                "MPI chunk combine (slots)",
                format!("{chunks} × {width}"),
                slots.len(),
            ));
        }
        if slots.len() > mpi::Count::MAX as usize {
            return Err(dgp_traits::Error::config(
                "mpi",
                format!(
                    "MPI chunk combine: {} numbers exceed one MPI call's count",
                    slots.len()
                ),
            ));
        }
        let (counts, displs) = layout(self.size, chunks, width);
        let counts: Vec<mpi::Count> = counts.iter().map(|&n| n as mpi::Count).collect();
        let displs: Vec<mpi::Count> = displs.iter().map(|&n| n as mpi::Count).collect();
        let send = pack(slots, self.rank, self.size, chunks, width);
        let mut recv = vec![0.0f64; slots.len()];
        {
            let mut part = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
            world().all_gather_varcount_into(&send[..], &mut part);
        }
        unpack(&recv, slots, self.size, chunks, width);
        Ok(())
    }

    fn processes(&self) -> usize {
        self.size
    }

    fn describe(&self) -> String {
        format!(
            "mpi: {} ranks, chunk c on rank c mod {}",
            self.size, self.size
        )
    }
}

/// The collective stop decision installed by [`Launch::install`]: all ranks contribute
/// their own SIGINT/SIGTERM flag, and every rank learns whether any rank saw one. Called
/// by every rank at the same points (once per training step and around each split), in
/// the same order. A failed exchange ends the launch ([`Launch::abort`] semantics): the
/// ranks are no longer in step, and continuing could only hang.
pub fn stop_agreement(local: bool) -> bool {
    let comm = world();
    let rank = comm.rank() as usize;
    match exchange_headers(rank, Op::Stop, [u64::from(local), 0, 0]) {
        Ok(headers) => headers.iter().any(|h| h[1] != 0),
        Err(e) => {
            eprintln!("error: rank {rank}: {e}");
            comm.abort(1)
        }
    }
}

/// An MPI launch of this process (initialised MPI, with this rank and the world size).
/// Dropping it finalises MPI, which every rank must then do too (use [`Launch::abort`]
/// when only this rank fails).
pub struct Launch {
    universe: Universe,
    rank: usize,
    size: usize,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl Launch {
    /// Whether an MPI launcher started this process (one of [`LAUNCHER_VARS`] is set).
    pub fn launched() -> bool {
        LAUNCHER_VARS.iter().any(|v| std::env::var_os(v).is_some())
    }

    /// Initialises MPI when an MPI launcher started this process; `None` otherwise (the
    /// binary then runs as a plain process). MPI calls may come from any one thread at a
    /// time (`MPI_THREAD_SERIALIZED`; the training loop runs on a worker thread).
    ///
    /// # Errors
    /// [`BenchError::Usage`] when MPI is initialised already, or the library does not
    /// provide serialised multi-threaded use.
    pub fn from_env() -> Result<Option<Launch>> {
        if !Self::launched() {
            return Ok(None);
        }
        let (universe, provided) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| BenchError::Usage("MPI was initialised twice".into()))?;
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let launch = Launch {
            universe,
            rank,
            size,
        };
        if provided < Threading::Serialized {
            // Every rank sees the same library, so every rank fails here.
            return Err(BenchError::Usage(format!(
                "the MPI library provides thread level {provided:?}; dgp-bench needs \
                 Serialized (MPI calls from one thread at a time, not only the main one)"
            )));
        }
        Ok(Some(launch))
    }

    /// This process's rank (0-based).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks in the launch.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether this rank prints and writes outputs (rank 0).
    pub fn is_writer(&self) -> bool {
        self.rank == 0
    }

    /// The runner of this launch ([`MpiRunner`]).
    pub fn runner(&self) -> MpiRunner {
        MpiRunner {
            rank: self.rank,
            size: self.size,
        }
    }

    /// Checks, collectively, that every rank was started with the same arguments
    /// (`args` without the program name, and the same benchmark version): each rank
    /// contributes a hash of them, and all ranks compare all hashes.
    ///
    /// # Errors
    /// [`BenchError::Usage`] on every rank, naming the ranks whose arguments differ from
    /// rank 0's.
    pub fn check_args(&self, args: &[OsString]) -> Result<()> {
        let (hash, count) = args_hash(args);
        let headers = exchange_headers(self.rank, Op::Args, [hash, count, 0])
            .map_err(|e| BenchError::Usage(e.to_string()))?;
        let differ: Vec<String> = headers
            .iter()
            .enumerate()
            .filter(|(_, h)| h[1..3] != headers[0][1..3])
            .map(|(r, _)| r.to_string())
            .collect();
        if differ.is_empty() {
            Ok(())
        } else {
            Err(BenchError::Usage(format!(
                "the MPI ranks were launched with different arguments (rank(s) {} differ \
                 from rank 0); every rank must run the same dgp-bench command",
                differ.join(", ")
            )))
        }
    }

    /// Installs [`MpiRunner`] as the process-wide chunk runner when the launch has more
    /// than one rank, and returns how this process takes part in the run: a stop flag
    /// decided by [`stop_agreement`] after every step, and on ranks other than 0 no
    /// writing (checkpoints are read only, standard output is silenced). One rank: a
    /// process of its own. Call once, before any training.
    ///
    /// # Errors
    /// [`BenchError::Usage`] when a runner was installed already or standard output cannot
    /// be redirected.
    pub fn install(&self) -> Result<Process> {
        if self.size <= 1 {
            return Ok(Process::default());
        }
        dgp_traits::distribute::install(Box::new(self.runner()))
            .map_err(|e| BenchError::Usage(e.to_string()))?;
        if !self.is_writer() {
            silence_stdout()?;
        }
        Ok(Process {
            stop: StopFlag::collective(stop_agreement),
            writer: self.is_writer(),
        })
    }

    /// Ends the whole launch from this rank with exit status `code` (`MPI_Abort`): the
    /// launcher terminates every other rank. For failures that not every rank shares.
    pub fn abort(self, code: i32) -> ! {
        self.universe.world().abort(code)
    }

    /// Finalises MPI (every rank must reach this; see [`Launch::abort`] otherwise).
    pub fn finish(self) {
        drop(self.universe);
    }
}

/// FNV-1a of the arguments (each length-prefixed) and the crate version; and their count.
fn args_hash(args: &[OsString]) -> (u64, u64) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(env!("CARGO_PKG_VERSION").as_bytes());
    for a in args {
        eat(a.as_encoded_bytes());
    }
    (h, args.len() as u64)
}

/// Points standard output at `/dev/null`.
fn silence_stdout() -> Result<()> {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|e| BenchError::Usage(format!("cannot open /dev/null: {e}")))?;
    // SAFETY: dup2 on two valid descriptors; `null` stays open until after the call, and
    // descriptor 1 then refers to its own duplicate.
    let rc = unsafe { libc::dup2(null.as_raw_fd(), 1) };
    if rc < 0 {
        return Err(BenchError::Usage(format!(
            "cannot redirect standard output: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulates the all-gather: every rank packs its own rows of a matrix that only it
    /// filled, the packs are concatenated, and every rank unpacks them.
    fn simulate(size: usize, chunks: usize, width: usize) {
        // Row c, entry k: distinctive bits, with a signed zero and a NaN marker.
        let full: Vec<f64> = (0..chunks * width)
            .map(|i| match i % 7 {
                0 => -0.0,
                3 if i / width == 1 => f64::NAN,
                _ => (i as f64 + 0.25) * if i % 2 == 0 { 1.0 } else { -1e-300 },
            })
            .collect();
        let mut packs = Vec::new();
        for r in 0..size {
            let mut own = vec![0.0; chunks * width];
            for c in (r..chunks).step_by(size) {
                own[c * width..(c + 1) * width].copy_from_slice(&full[c * width..(c + 1) * width]);
            }
            packs.push(pack(&own, r, size, chunks, width));
        }
        let (counts, displs) = layout(size, chunks, width);
        for r in 0..size {
            assert_eq!(packs[r].len(), counts[r]);
        }
        let recv: Vec<f64> = packs.concat();
        assert_eq!(recv.len(), chunks * width);
        assert_eq!(
            displs.last().copied().unwrap_or(0) + counts.last().unwrap(),
            recv.len()
        );
        for r in 0..size {
            let mut slots = vec![0.0; chunks * width];
            for c in (r..chunks).step_by(size) {
                slots[c * width..(c + 1) * width]
                    .copy_from_slice(&full[c * width..(c + 1) * width]);
            }
            unpack(&recv, &mut slots, size, chunks, width);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&slots),
                bits(&full),
                "size {size} chunks {chunks} rank {r}"
            );
        }
    }

    #[test]
    fn gathered_rows_are_bit_identical_to_their_owners() {
        for size in 1..=5 {
            for chunks in 1..=11 {
                for width in [1, 2, 9] {
                    simulate(size, chunks, width);
                }
            }
        }
    }

    #[test]
    fn every_chunk_has_exactly_one_owner() {
        for size in 1..=6 {
            for chunks in 0..=13 {
                let total: usize = (0..size).map(|r| owned_count(r, size, chunks)).sum();
                assert_eq!(total, chunks);
                for r in 0..size {
                    let runner = MpiRunner { rank: r, size };
                    let owned = (0..chunks).filter(|&c| runner.owns(c, chunks)).count();
                    assert_eq!(owned, owned_count(r, size, chunks));
                }
            }
        }
    }

    #[test]
    fn argument_hash_separates_arguments() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            args_hash(&a(&["run", "--seed", "1"])),
            args_hash(&a(&["run", "--seed", "1"]))
        );
        assert_ne!(
            args_hash(&a(&["run", "--seed", "1"])),
            args_hash(&a(&["run", "--seed", "2"]))
        );
        // Boundaries count: "ab","c" is not "a","bc".
        assert_ne!(args_hash(&a(&["ab", "c"])).0, args_hash(&a(&["a", "bc"])).0);
    }
}
