//! How the runs of a command are controlled: the process's part in the run ([`Process`]:
//! its stop flag, whether it writes) and the [`Session`] of its checkpoints, started by
//! [`crate::checkpointing::start_session`] and carried by every
//! [`crate::spec::ExperimentSpec`]. No state lives outside these values: the only
//! process-wide state is the library's signal handler ([`dgp_traits::guard::signals`]).

use dgp_traits::guard::signals::{self, Announce};
use dgp_traits::guard::{CheckpointDir, StopFlag};

/// How this process takes part in a run: its stop flag and whether it writes checkpoints
/// and prints interruption notes. One process: its own flag, writing. A distributed launch
/// (`crate::distributed`): a collective flag ([`StopFlag::collective`]) on every process,
/// and one writer.
#[derive(Clone, Debug)]
pub struct Process {
    /// The stop flag every training loop of the run polls.
    pub stop: StopFlag,
    /// Whether this process writes checkpoints and prints interruption notes.
    pub writer: bool,
}

impl Default for Process {
    fn default() -> Self {
        Process {
            stop: StopFlag::new(),
            writer: true,
        }
    }
}

impl Process {
    /// Makes SIGINT/SIGTERM/SIGHUP ask the run to stop ([`signals::stop_on_signals`];
    /// announced by the writer). A handler that cannot be installed is reported and the
    /// run goes on (a signal then ends it without saving).
    pub fn stop_on_signals(&self) {
        let announce = if self.writer {
            Announce::Stderr
        } else {
            Announce::Quiet
        };
        if let Err(e) = signals::stop_on_signals(&self.stop, announce)
            && self.writer
        {
            eprintln!("warning: {e}; a signal ends the run without saving");
        }
    }

    /// Whether a stop was requested (in a distributed launch: the agreed answer, so every
    /// process must ask at the same points).
    pub fn stop_requested(&self) -> bool {
        self.stop.is_requested()
    }
}

/// The test hooks of the environment (not user settings; for the tests of the watchdog,
/// of exact resume and of divergence with checkpoints), read once per run:
/// `DGP_BENCH_TEST_STALL_AT_STEP=K`: step K (0-based) of every split never returns to the
/// executor, as a stuck step; `DGP_BENCH_TEST_DIVERGE_AT_STEP=K`: from step K on the
/// objective reads as infinite, as after a divergence (the Adam steps of the fixtures
/// diverge at their first step or never).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TestHooks {
    pub(crate) stall_at: Option<usize>,
    pub(crate) diverge_at: Option<usize>,
}

impl TestHooks {
    pub(crate) fn from_env() -> Self {
        let read = |n: &str| std::env::var(n).ok().and_then(|v| v.parse().ok());
        TestHooks {
            stall_at: read("DGP_BENCH_TEST_STALL_AT_STEP"),
            diverge_at: read("DGP_BENCH_TEST_DIVERGE_AT_STEP"),
        }
    }
}

/// How the runs of a command are controlled: the process's stop flag, and the checkpoint
/// directory (locked by the writer) when `--checkpoint` or `--resume` was given. Started
/// once per command ([`crate::checkpointing::start_session`]); [`Session::default`] stops on nothing a signal
/// sends and checkpoints nothing.
#[derive(Clone, Debug, Default)]
pub struct Session {
    pub(crate) process: Process,
    pub(crate) dir: Option<CheckpointDir>,
    pub(crate) every: usize,
    pub(crate) resume: bool,
    pub(crate) test: TestHooks,
}

impl Session {
    /// Whether a stop was requested ([`Process::stop_requested`]).
    pub fn stop_requested(&self) -> bool {
        self.process.stop_requested()
    }

    /// The process this session runs in.
    pub fn process(&self) -> &Process {
        &self.process
    }
}
