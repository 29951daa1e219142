//! Interruption, checkpoints and exact resume of `dgp-bench run`.
//!
//! * **Interruption.** [`install_interrupt_handler`] (SIGINT, SIGTERM, SIGHUP through the
//!   `ctrlc` crate, version pinned to 3.5.1 in `Cargo.toml`) sets a flag; every training
//!   loop on the core executor polls it after each step
//!   ([`dgp_traits::fit::RunControl::should_stop`]) and stops there. The split being
//!   trained is then not recorded; `run` writes the outputs of the splits finished so far,
//!   prints what it saved and how to resume, and exits with 130
//!   ([`BenchError::Interrupted`]). A second signal exits at once.
//! * **A stuck step** (issue 37) does not hold the stop request forever: once
//!   max([`STUCK_STEP_MULTIPLE`] (20) × the median of the split's earlier steps,
//!   [`STUCK_STEP_MIN_SECONDS`] (5 s)) has passed since the first signal and since the last
//!   step or checkpoint save ended (a save being written is never cut short), the process
//!   exits with 130 and a message saying that the last checkpoint (named, with its step)
//!   is intact — it is, as a checkpoint is only ever replaced by an atomic rename — or
//!   that nothing of the split was saved. Exiting rather than waiting longer: a step 20
//!   times slower than its predecessors is not about to end, and the user asked to stop.
//!   The rule applies while a split trains (its model's build included); a signal during
//!   prediction still waits for it.
//! * **Checkpoints.** With `--checkpoint DIR`, each split's training state (the core's
//!   [`RunState`]: parameters, Adam moments and step count, the noise generator, the
//!   position in the batch order, the report so far) is written atomically to
//!   `DIR/<backend>-L<layers>-split<k>.json` every `--checkpoint-every` steps, on an
//!   interruption and at the end of the split, together with a fingerprint of every
//!   setting that affects the numbers ([`fingerprint`]).
//! * **Resume.** `--resume DIR` (with the same other flags; the fingerprint is checked)
//!   rebuilds each split's model as a fresh run does and lets the executor continue from
//!   the saved state: a finished split replays no step, an interrupted one continues
//!   where it stopped, a split without a state starts fresh. The records are those of a
//!   run that was never interrupted, bit for bit (timing fields aside).
//! * **A saved state is never overwritten by a fresh start** (issue 37). `--checkpoint
//!   DIR` on a directory that holds a saved state of this run's backends, layers and
//!   splits is refused, naming `--resume DIR` (refusing rather than resuming: the user
//!   asked for a fresh start, and guessing would either lose the state or silently mix
//!   two runs); `--resume DIR` with nothing of this run in DIR is an error, never a
//!   silent fresh start. Both directories are probed for writing before training.
//! * **Integrity** (issue 37). A checkpoint file (layout [`FILE_VERSION`]) carries a
//!   [`checksum`] of its fingerprint and state as written; `--resume` verifies it, then
//!   checks the state for impossible values ([`RunState::validate`]: non-finite
//!   parameters or moments, negative Adam second moments, step counters that disagree,
//!   an all-zero xoshiro state, on which the normal sampler would spin forever), for
//!   every split before any trains, with an error naming the file and the field. A
//!   numerical failure or divergence of a resumed split names the checkpoint as the
//!   likely cause. The checksum costs about 0.4 ms per MB of state (about a tenth of
//!   the serialisation a save does anyway; a boston-sized svi state is well under 1 ms).
//! * **Divergence** (issue 37). A split whose objective turns non-finite or grows by
//!   [`DIVERGENCE_FACTOR`] over its first value stops at that step with an error naming
//!   `--lr` (an error, not a warning: the numbers of a diverged fit are not a result), or
//!   the backend's step settings when it uses no learning rate. A resumed split compares
//!   with the first objective of the whole run (kept in the state's report), as a run
//!   that was never interrupted does. **A diverged state is never saved**: a state handed
//!   over for saving after k steps is written only once the objective of its parameters
//!   (step k's) is known not to have diverged, or when the fit ends without a failure
//!   (the last state, or a stop request), so the checkpoint keeps the last good state and
//!   the error says which step that is (or that nothing was saved yet).
//! * **Scope.** Backends whose whole fit is one executor run with an Adam-type stepper
//!   (those whose [`dgp_traits::backend::Capabilities::resumable`] is set) resume; any other backend is refused
//!   before training ([`check_backend`]), and a fit that never reached the executor's
//!   checkpoint hooks is an error after the split, never a silent fresh start.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use clap::Args;
use dgp_traits::fit::{Checkpoints, Progress, RunControl};
use dgp_traits::train::RunState;

use crate::error::{BenchError, Result};
use crate::spec::ExperimentSpec;

/// Default of `--checkpoint-every`.
pub const DEFAULT_EVERY: usize = 500;

static STOP: AtomicBool = AtomicBool::new(false);
static SESSION: Mutex<Option<Session>> = Mutex::new(None);
/// Whether this process writes checkpoints and prints interruption notes (false on the
/// MPI ranks other than 0).
static WRITER: AtomicBool = AtomicBool::new(true);
/// The collective stop decision of a distributed launch ([`set_stop_agreement`]).
static AGREEMENT: OnceLock<fn(bool) -> bool> = OnceLock::new();
/// Whether the processes of a distributed launch agreed to stop (latched: once agreed,
/// later polls answer without asking again, on every process alike).
static AGREED: AtomicBool = AtomicBool::new(false);

/// The `run` flags of this module.
#[derive(Clone, Debug, Default, Args)]
pub struct CheckpointFlags {
    /// Save each split's training state to this directory (every --checkpoint-every steps,
    /// on SIGINT/SIGTERM and at the end of the split; never a diverged state) so that
    /// `--resume DIR` continues exactly (a backend that cannot resume is refused, naming
    /// those that can).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub checkpoint: Option<PathBuf>,
    /// Continue a run checkpointed to DIR (same other flags; checked) and keep
    /// checkpointing there.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Steps between periodic checkpoints.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_EVERY)]
    pub checkpoint_every: usize,
}

#[derive(Clone, Debug)]
struct Session {
    dir: PathBuf,
    every: usize,
    resume: bool,
}

/// Version of the checkpoint file layout:
/// `{"version":2,"fingerprint":F,"checksum":"C","state":S}` with `C` the [`checksum`] of
/// the bytes of `F` and `S` exactly as written.
pub const FILE_VERSION: u32 = 2;

/// A 64-bit checksum of the fingerprint's and the state's JSON text, as 16 hex digits: FNV-1a's
/// xor-multiply step over 8-byte little-endian words in four lanes (then the tail bytes), with a final
/// avalanche. It catches edits and corruption of a checkpoint (a flipped digit, a changed
/// number), not a deliberate forgery (whoever edits the state can recompute it). Word-wise
/// it runs at several GB/s, so a save costs no measurable time more.
pub fn checksum(fingerprint: &str, state: &str) -> String {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [fingerprint.as_bytes(), b"\n", state.as_bytes()] {
        // Four independent lanes over 32-byte blocks (the multiplications overlap).
        let mut lanes = [h, h ^ 0x9e37, h ^ 0x79b9, h ^ 0x7f4a];
        let mut blocks = part.chunks_exact(32);
        for block in &mut blocks {
            for (lane, w) in lanes.iter_mut().zip(block.chunks_exact(8)) {
                let mut b = [0u8; 8];
                b.copy_from_slice(w);
                *lane = (*lane ^ u64::from_le_bytes(b))
                    .wrapping_mul(PRIME)
                    .rotate_left(31);
            }
        }
        for lane in lanes {
            h = (h ^ lane).wrapping_mul(PRIME);
        }
        for &b in blocks.remainder() {
            h = (h ^ u64::from(b)).wrapping_mul(PRIME);
        }
        h = (h ^ part.len() as u64).wrapping_mul(PRIME);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    format!("{h:016x}")
}

/// The fingerprint, checksum and state texts of a checkpoint file as written by
/// [`checkpoint_text`], or `None` for any other layout.
fn split_file(text: &str) -> Option<(&str, &str, &str)> {
    let rest = text.strip_prefix(&format!("{{\"version\":{FILE_VERSION},\"fingerprint\":"))?;
    let (fingerprint, rest) = rest.split_once(",\"checksum\":\"")?;
    let (sum, rest) = rest.split_once("\",\"state\":")?;
    let state = rest.strip_suffix('}')?;
    Some((fingerprint, sum, state))
}

/// The text of a checkpoint file holding `state` (see [`FILE_VERSION`]).
///
/// # Errors
/// [`dgp_traits::Error::Serde`] when the state does not serialise.
pub fn checkpoint_text(
    fingerprint: &serde_json::Value,
    state: &RunState,
) -> dgp_traits::Result<String> {
    let state =
        serde_json::to_string(state).map_err(|e| dgp_traits::Error::Serde(e.to_string()))?;
    let fingerprint = fingerprint.to_string();
    let sum = checksum(&fingerprint, &state);
    Ok(format!(
        "{{\"version\":{FILE_VERSION},\"fingerprint\":{fingerprint},\"checksum\":\"{sum}\",\"state\":{state}}}"
    ))
}

/// Whether a stop was requested (SIGINT/SIGTERM). In a distributed launch
/// ([`set_stop_agreement`]) the answer is collective: every process calls this at the same
/// points in the same order (after each training step, before and after each split), each
/// contributes its own flag, and all get the same answer, true when any process saw a
/// signal; once true it stays true without further exchanges.
pub fn stop_requested() -> bool {
    let local = STOP.load(Ordering::SeqCst);
    let Some(agree) = AGREEMENT.get() else {
        return local;
    };
    if AGREED.load(Ordering::SeqCst) {
        return true;
    }
    let all = agree(local);
    if all {
        AGREED.store(true, Ordering::SeqCst);
    }
    all
}

/// Whether the processes of a distributed launch agreed to stop ([`stop_requested`]
/// returned true under a [`set_stop_agreement`]): then every process is ending its run
/// at the same point.
pub fn stop_agreed() -> bool {
    AGREED.load(Ordering::SeqCst)
}

/// The run-control hook of a fit that stops on SIGINT/SIGTERM ([`stop_requested`]) and
/// resumes nothing (e.g. a streamed fit).
#[derive(Clone, Copy, Debug, Default)]
pub struct StopOnSignal;

impl RunControl for StopOnSignal {
    fn should_stop(&self) -> bool {
        stop_requested()
    }
}

/// Makes [`stop_requested`] collective: `agree` receives this process's flag and returns
/// whether any process of the launch has its flag set; it must be called by all processes
/// together. Installed once, before any training; a second call is ignored.
pub fn set_stop_agreement(agree: fn(bool) -> bool) {
    let _ = AGREEMENT.set(agree);
}

/// Whether this process writes checkpoints (and prints interruption notes); a
/// distributed launch sets it to false on every process but one. A process that does not
/// write still reads `--resume` states (the directory must be visible to it) and answers
/// the executor's checkpoint questions like the writer, so all processes run the same
/// steps.
pub fn set_writer(writes: bool) {
    WRITER.store(writes, Ordering::SeqCst);
}

fn is_writer() -> bool {
    WRITER.load(Ordering::SeqCst)
}

/// Installs the SIGINT/SIGTERM handler: the first signal asks training to stop after the
/// current step and starts the watchdog of a stuck step ([`STUCK_STEP_MULTIPLE`]), a
/// second one exits at once with 130. Installing twice is harmless.
pub fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            if is_writer() {
                eprintln!("\nsecond interrupt: exiting now");
            }
            std::process::exit(130);
        }
        if is_writer() {
            eprintln!("\ninterrupt: finishing the current step, then saving (again to exit now)");
        }
        let signalled = Instant::now();
        let _ = std::thread::Builder::new()
            .name("stuck-step watchdog".into())
            .spawn(move || watch_for_a_stuck_step(signalled));
    });
}

/// A step that has not ended this many times the median of the split's earlier steps
/// after a stop request counts as stuck (the module docs say what then happens).
pub const STUCK_STEP_MULTIPLE: f64 = 20.0;

/// The least time a stop request waits for the step in progress, seconds (also the wait
/// when no step has ended yet, e.g. during a split's first step).
pub const STUCK_STEP_MIN_SECONDS: f64 = 5.0;

/// Durations of a split's steps kept for the median (the most recent ones).
const STEP_WINDOW: usize = 256;

/// What the watchdog of a stuck step knows of the split in training.
struct StepClock {
    /// A split is training: between [`SplitControl::new`] and its drop.
    training: bool,
    /// When the last step or checkpoint save of the split ended.
    last: Option<Instant>,
    /// Seconds of the split's most recent steps.
    durations: std::collections::VecDeque<f64>,
    /// A checkpoint save is being written (never cut short).
    saving: bool,
    /// The split's checkpoint file and the step of the state it holds, when checkpointing.
    checkpoint: Option<(PathBuf, Option<usize>)>,
}

static CLOCK: Mutex<StepClock> = Mutex::new(StepClock {
    training: false,
    last: None,
    durations: std::collections::VecDeque::new(),
    saving: false,
    checkpoint: None,
});

fn clock() -> std::sync::MutexGuard<'static, StepClock> {
    CLOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long a stop request waits for the step in progress: [`STUCK_STEP_MULTIPLE`] times
/// the median of `durations` (seconds), at least [`STUCK_STEP_MIN_SECONDS`].
fn stuck_after(durations: &std::collections::VecDeque<f64>) -> (f64, Option<f64>) {
    let mut v: Vec<f64> = durations.iter().copied().collect();
    v.sort_by(f64::total_cmp);
    let median = (!v.is_empty()).then(|| {
        let k = v.len() / 2;
        if v.len() % 2 == 1 {
            v[k]
        } else {
            0.5 * (v[k - 1] + v[k])
        }
    });
    let wait = median.map_or(STUCK_STEP_MIN_SECONDS, |m| {
        (STUCK_STEP_MULTIPLE * m).max(STUCK_STEP_MIN_SECONDS)
    });
    (wait, median)
}

/// Runs after the first stop request (see the module docs): while a split trains, once
/// the wait of [`stuck_after`] has passed since the request AND since the last step or
/// checkpoint save ended, with no save being written, the step in progress is stuck;
/// the process then exits with 130 and says that the last checkpoint is intact. Ends
/// without a word when no split is training.
fn watch_for_a_stuck_step(signalled: Instant) {
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let c = clock();
        if !c.training {
            return;
        }
        if c.saving {
            continue;
        }
        let (wait, median) = stuck_after(&c.durations);
        let now = Instant::now();
        let since_signal = (now - signalled).as_secs_f64();
        let since_step = c.last.map_or(since_signal, |t| (now - t).as_secs_f64());
        if since_signal < wait || since_step < wait {
            continue;
        }
        if is_writer() {
            let limit = median.map_or(
                format!("{STUCK_STEP_MIN_SECONDS} s: no step of this split has ended yet"),
                |m| {
                    format!(
                        "{STUCK_STEP_MULTIPLE} × the median step of {:.3} ms, at least \
                         {STUCK_STEP_MIN_SECONDS} s",
                        m * 1e3
                    )
                },
            );
            let kept = match &c.checkpoint {
                Some((p, Some(step))) => format!(
                    "The last checkpoint, {} (step {step}), is intact (a checkpoint is replaced \
                     atomically, never written in place); rerun the same command with --resume \
                     {} to continue from it",
                    p.display(),
                    p.parent()
                        .map_or(String::new(), |d| d.display().to_string())
                ),
                Some((p, None)) => format!(
                    "No checkpoint of this split had been saved yet ({} was not written); the \
                     records of finished splits are kept",
                    p.display()
                ),
                None => "Nothing of this split was saved (use --checkpoint DIR to make runs \
                         resumable); the records of finished splits are kept"
                    .to_string(),
            };
            eprintln!(
                "error: interrupted: the training step in progress has not ended {since_signal:.1} s \
                 after the stop request (the limit is {limit}): it looks stuck, so the run ends \
                 without it. {kept}"
            );
        }
        std::process::exit(130);
    }
}

/// The step K of a test hook in the environment (not user settings; for the tests of the
/// watchdog, of exact resume and of divergence with checkpoints):
/// `DGP_BENCH_TEST_STALL_AT_STEP=K`: step K (0-based) of every split never returns to the
/// executor, as a stuck step; `DGP_BENCH_TEST_DIVERGE_AT_STEP=K`: from step K on the
/// objective reads as infinite, as after a divergence (the Adam steps of the fixtures
/// diverge at their first step or never).
fn test_hook(hook: Hook) -> Option<usize> {
    static HOOKS: OnceLock<[Option<usize>; 2]> = OnceLock::new();
    let read = |n: &str| std::env::var(n).ok().and_then(|v| v.parse().ok());
    HOOKS.get_or_init(|| {
        [
            read("DGP_BENCH_TEST_STALL_AT_STEP"),
            read("DGP_BENCH_TEST_DIVERGE_AT_STEP"),
        ]
    })[hook as usize]
}

/// The test hooks of [`test_hook`].
#[derive(Clone, Copy)]
enum Hook {
    Stall = 0,
    Diverge = 1,
}

/// One checkpointed training run: the file its state is saved to in the session's
/// directory, every setting that affects its numbers (checked on resume), why it cannot
/// resume (if it cannot) and its learning rate (named when it diverges). A split of `run`
/// ([`CheckpointTarget::of_split`]) or a `stream` run.
#[derive(Clone, Debug)]
pub struct CheckpointTarget {
    /// File name of the state in the checkpoint directory.
    pub file: String,
    /// The settings that must match for a resume ([`fingerprint`] for a split).
    pub fingerprint: serde_json::Value,
    /// Why this run cannot be checkpointed (a usage message), or `None`.
    pub refusal: Option<String>,
    /// Learning rate of the run; `None` for a backend that does not use one.
    pub learning_rate: Option<f64>,
}

impl CheckpointTarget {
    /// Split `k` of `spec`: `<backend>-L<layers>-split<k>.json`.
    pub fn of_split(spec: &ExperimentSpec<'_>, k: usize) -> Self {
        CheckpointTarget {
            file: format!(
                "{}-L{}-split{k}.json",
                spec.backend.name(),
                spec.arch.layers
            ),
            fingerprint: fingerprint(spec, k),
            refusal: refusal(spec),
            learning_rate: spec.recorded_learning_rate(),
        }
    }
}

/// Starts a checkpoint session from the flags, before any training: checks the flags,
/// creates the directory, refuses backends that cannot resume.
///
/// # Errors
/// [`BenchError::Usage`] for a zero interval, a directory that cannot be created, a
/// missing resume directory or a backend in `specs` that cannot resume.
pub fn start_session(flags: &CheckpointFlags, specs: &[ExperimentSpec<'_>]) -> Result<()> {
    let targets: Vec<CheckpointTarget> = specs
        .iter()
        .flat_map(|s| {
            s.splits
                .iter()
                .map(move |&k| CheckpointTarget::of_split(s, k))
        })
        .collect();
    start_session_for(flags, &targets)
}

/// [`start_session`] for the runs `targets` (see the module docs): a saved state of one
/// of them is never overwritten by `--checkpoint`, `--resume` needs one of them saved,
/// and every saved one is verified before any training.
///
/// # Errors
/// As [`start_session`].
pub fn start_session_for(flags: &CheckpointFlags, targets: &[CheckpointTarget]) -> Result<()> {
    let (dir, resume) = match (&flags.checkpoint, &flags.resume) {
        (Some(d), _) => (d.clone(), false),
        (None, Some(d)) => (d.clone(), true),
        (None, None) => return Ok(()),
    };
    if flags.checkpoint_every == 0 {
        return Err(BenchError::Usage(
            "--checkpoint-every must be at least 1".into(),
        ));
    }
    if resume && !dir.is_dir() {
        return Err(BenchError::Usage(format!(
            "--resume {}: no such checkpoint directory",
            dir.display()
        )));
    }
    if let Some(msg) = targets.iter().find_map(|t| t.refusal.clone()) {
        return Err(BenchError::Usage(msg));
    }
    let flag = if resume { "--resume" } else { "--checkpoint" };
    // The states this run would read and write.
    let saved: Vec<PathBuf> = targets
        .iter()
        .map(|t| dir.join(&t.file))
        .filter(|p| p.exists())
        .collect();
    if resume && saved.is_empty() {
        let expected = targets.first().map_or(String::new(), |t| {
            format!(" (expected e.g. {})", dir.join(&t.file).display())
        });
        return Err(BenchError::Usage(format!(
            "--resume {}: nothing to resume: the directory holds no saved state of this \
             run's backends, layers and splits{expected}; use --checkpoint {} to start a \
             checkpointed run",
            dir.display(),
            dir.display()
        )));
    }
    if !resume && let Some(p) = saved.first() {
        return Err(BenchError::Usage(format!(
            "--checkpoint {}: the directory holds a saved training state ({}) that a fresh \
             start would overwrite; refusing. Rerun with --resume {} to continue it, or give \
             another --checkpoint directory (or delete the state) to start over",
            dir.display(),
            p.display(),
            dir.display()
        )));
    }
    if resume {
        // Every saved state is verified now, before any split trains.
        for t in targets {
            let p = dir.join(&t.file);
            if p.exists() {
                load_state(&p, &t.fingerprint)?;
            }
        }
    }
    // Only the writing process (rank 0 of a distributed launch) creates and writes.
    if is_writer() {
        std::fs::create_dir_all(&dir).map_err(|e| {
            BenchError::Usage(format!("{flag} {}: cannot create it: {e}", dir.display()))
        })?;
        crate::probe::probe_dir(&dir).map_err(|e| {
            BenchError::Usage(format!(
                "{flag} {}: cannot write a checkpoint into it: {e}",
                dir.display()
            ))
        })?;
    }
    let session = Session {
        dir,
        every: flags.checkpoint_every,
        resume,
    };
    if let Ok(mut s) = SESSION.lock() {
        *s = Some(session);
    }
    Ok(())
}

/// Refuses a backend or setting that cannot resume exactly.
///
/// # Errors
/// [`BenchError::Usage`] naming the backend or setting.
pub fn check_backend(spec: &ExperimentSpec<'_>) -> Result<()> {
    refusal(spec).map_or(Ok(()), |m| Err(BenchError::Usage(m)))
}

/// Why `spec` cannot be checkpointed, or `None`.
fn refusal(spec: &ExperimentSpec<'_>) -> Option<String> {
    if let Some(m) = backend_refusal(spec.backend) {
        return Some(m);
    }
    spec.early_stopping.is_some().then(|| {
        format!(
            "--checkpoint/--resume: held-out early stopping cannot be checkpointed yet; \
             add --early-stopping none (with --protocol published and the published or \
             random split kind){}",
            if spec.protocol.is_empty() {
                String::new()
            } else {
                format!("; this run's protocol: {}", spec.protocol)
            }
        )
    })
}

/// Why backend `b` cannot be checkpointed (it does not declare
/// [`dgp_traits::backend::Capabilities::resumable`]), or `None`.
pub fn backend_refusal(b: &crate::backends::BackendEntry) -> Option<String> {
    (!b.capabilities().resumable).then(|| {
        format!(
            "--checkpoint/--resume: backend {} cannot resume exactly yet (supported: {})",
            b.name(),
            crate::backends::names_where(|c| c.resumable)
        )
    })
}

/// Every setting of `spec` and split `k` that affects the numbers.
pub fn fingerprint(spec: &ExperimentSpec<'_>, k: usize) -> serde_json::Value {
    serde_json::json!({
        "data": spec.data.name,
        "n": spec.data.data().n(),
        "backend": spec.backend.name(),
        "arch": serde_json::to_value(&spec.arch).unwrap_or_default(),
        "steps": spec.steps,
        "batch_size": spec.batch_size,
        "learning_rate": spec.learning_rate,
        "seed": spec.seed,
        "split": k,
        "protocol": spec.protocol,
        "lr_schedule": format!("{:?}", spec.lr_schedule),
    })
}

/// Writes `text` to `path` atomically (a temporary file in the same directory, synced,
/// then renamed over it).
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| BenchError::output(path, format!("I/O error: {e}")))
}

/// The hooks a split trains with (all three, passed with [`dgp_traits::fit::FitHooks::all`]:
/// they share state, as a diverged objective stops the run and is never saved): forwards
/// progress to the bar ([`Progress`]), answers stop requests and hands over the state to
/// resume from ([`RunControl`]) and keeps the run's checkpoints ([`Checkpoints`]) from the
/// session (see the module docs).
pub struct SplitControl<'a> {
    inner: &'a mut dyn Progress,
    path: Option<PathBuf>,
    every: usize,
    fingerprint: serde_json::Value,
    resume: Option<RunState>,
    asked: Cell<bool>,
    error: Option<BenchError>,
    /// Whether `--checkpoint` could make this split resumable ([`check_backend`]).
    resumable: bool,
    /// The checkpoint this split resumed from.
    resumed_from: Option<PathBuf>,
    /// The step of the state in the split's checkpoint file (resumed from or saved).
    saved_step: Option<usize>,
    /// A state handed over by the executor, not yet written: its text and its step.
    pending: Option<(String, usize)>,
    /// Learning rate of the split (named when training diverges); `None` for a backend
    /// that does not use one.
    learning_rate: Option<f64>,
    /// The first objective of the current phase.
    first_objective: Option<f64>,
    /// (step, objective) where training diverged.
    diverged: Option<(usize, f64, f64)>,
}

/// Factor by which the objective's magnitude may grow over its first value before the
/// run counts as diverged (a run at `--lr 1e6` reaches 10⁹; converging runs stay within
/// a factor of a few).
pub const DIVERGENCE_FACTOR: f64 = 1e6;

impl<'a> SplitControl<'a> {
    /// The control of split `k` of `spec`, forwarding progress to `inner`; loads the
    /// split's saved state when resuming.
    ///
    /// # Errors
    /// [`BenchError::Usage`] for an unreadable state file or one written with other
    /// settings.
    pub fn new(inner: &'a mut dyn Progress, spec: &ExperimentSpec<'_>, k: usize) -> Result<Self> {
        if stop_requested() {
            return Err(BenchError::Interrupted(format!(
                "interrupted before training split {k}"
            )));
        }
        Self::for_target(inner, CheckpointTarget::of_split(spec, k))
    }

    /// The control of the run `target` (of the session started with
    /// [`start_session_for`]), forwarding progress to `inner`; loads its saved state when
    /// resuming.
    ///
    /// # Errors
    /// As [`SplitControl::new`].
    pub fn for_target(inner: &'a mut dyn Progress, target: CheckpointTarget) -> Result<Self> {
        let session = SESSION.lock().ok().and_then(|s| s.clone());
        let mut control = SplitControl {
            inner,
            path: None,
            every: 0,
            fingerprint: target.fingerprint,
            resume: None,
            asked: Cell::new(false),
            error: None,
            resumable: target.refusal.is_none(),
            resumed_from: None,
            saved_step: None,
            pending: None,
            learning_rate: target.learning_rate,
            first_objective: None,
            diverged: None,
        };
        if let Some(session) = session {
            let path = session.dir.join(&target.file);
            if session.resume && path.exists() {
                let state = load_state(&path, &control.fingerprint)?;
                control.saved_step = Some(state.steps_done);
                // The divergence test compares with the first objective of the whole run,
                // as in a run that was never interrupted.
                control.first_objective = state.report.history.first().map(|&(_, v)| v);
                control.resume = Some(state);
                control.resumed_from = Some(path.clone());
            }
            control.path = Some(path);
            control.every = session.every;
        }
        let mut c = clock();
        c.training = true;
        // The first step's time includes the model's build and the fit's set-up: not a
        // step time for the median (a stop during them waits from the signal alone).
        c.last = None;
        c.durations.clear();
        c.saving = false;
        c.checkpoint = control.path.clone().map(|p| (p, control.saved_step));
        drop(c);
        Ok(control)
    }

    /// Writes the pending state (atomically), keeping the step it holds.
    fn write_pending(&mut self) -> Result<()> {
        let (Some((text, done)), Some(path)) = (self.pending.take(), &self.path) else {
            return Ok(());
        };
        clock().saving = true;
        let written = write_atomic(path, &text);
        let mut c = clock();
        c.saving = false;
        c.last = Some(Instant::now());
        if written.is_ok() {
            self.saved_step = Some(done);
            c.checkpoint = Some((path.clone(), self.saved_step));
        }
        written
    }

    /// The checkpoint file this split resumed from, if any.
    pub fn resumed_from(&self) -> Option<&Path> {
        self.resumed_from.as_deref()
    }

    /// The number of steps done in the state this split resumed from, if any.
    pub fn resumed_step(&self) -> Option<usize> {
        self.resumed_from.as_ref().and(self.saved_step)
    }

    fn divergence(&self, label: &str, step: usize, value: f64, first: f64) -> BenchError {
        let resumed = self.resumed_from.as_ref().map_or(String::new(), |p| {
            format!(
                " (or the checkpoint {} it resumed from is damaged)",
                p.display()
            )
        });
        let cause = match self.learning_rate {
            Some(lr) => format!(
                "The learning rate (--lr {lr}) is likely too large{resumed}; try one ten times \
                 smaller"
            ),
            None => format!(
                "The backend's step settings (`dgp-bench backends` lists them) are likely too \
                 aggressive{resumed}"
            ),
        };
        // The diverged parameters are never saved (`Checkpoints::save`).
        let kept = match (&self.path, self.saved_step) {
            (Some(p), Some(s)) => format!(
                ". The checkpoint {} holds the last good state (step {s}), not the diverged \
                 one; resuming it with the same settings would diverge again, so start afresh \
                 with a smaller --lr in another --checkpoint directory",
                p.display()
            ),
            (Some(p), None) => format!(
                ". Nothing was saved to {} (the run diverged before its first checkpoint)",
                p.display()
            ),
            (None, _) => String::new(),
        };
        BenchError::Run {
            context: format!("{label}: training"),
            source: dgp_traits::Error::Numerical(format!(
                "the objective diverged at step {step} ({value:e}, from {first:e} at the start); \
                 stopped there. {cause}{kept}"
            )),
        }
    }

    /// The error of a failed fit: a checkpoint save that failed (an I/O error, as such);
    /// a numerical failure of a resumed split names the checkpoint as the likely cause.
    pub fn fit_error(&mut self, context: String, e: dgp_traits::Error) -> BenchError {
        if let Some(saved) = self.error.take() {
            return saved;
        }
        if let Some((step, value, first)) = self.diverged {
            return self.divergence(&context, step, value, first);
        }
        match (&self.resumed_from, &e) {
            (
                Some(p),
                dgp_traits::Error::Numerical(_) | dgp_traits::Error::NotPositiveDefinite { .. },
            ) => BenchError::run(
                format!(
                    "{context} (resumed from {}: a damaged or edited checkpoint is the likely \
                     cause; restore it or start afresh)",
                    p.display()
                ),
                e,
            ),
            _ => BenchError::run(context, e),
        }
    }

    /// After the fit: [`BenchError::Interrupted`] when a stop was requested (the split is
    /// not recorded), an error when checkpoints were on but the fit never reached the
    /// executor's hooks or a save failed.
    ///
    /// # Errors
    /// As described.
    pub fn finish(mut self, label: &str) -> Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if let Some((step, value, first)) = self.diverged {
            return Err(self.divergence(label, step, value, first));
        }
        // The state after the last step (the end, or a stop request).
        self.write_pending()?;
        if stop_requested() {
            let saved = match &self.path {
                Some(p) if self.asked.get() => format!(
                    "its training state is saved in {}; rerun the same command with --resume {} \
                     (instead of --checkpoint) to continue exactly",
                    p.display(),
                    p.parent()
                        .map_or(String::new(), |d| d.display().to_string())
                ),
                _ if self.resumable => {
                    "nothing of it was saved (use --checkpoint DIR to make runs resumable)"
                        .to_string()
                }
                _ => "nothing of it was saved (this backend or setting cannot resume from a \
                      checkpoint yet)"
                    .to_string(),
            };
            return Err(BenchError::Interrupted(format!(
                "interrupted during {label}: {saved}"
            )));
        }
        if let Some(p) = &self.path
            && !self.asked.get()
        {
            return Err(BenchError::Usage(format!(
                "--checkpoint: {label} did not train on the core executor, so nothing was \
                 saved to {} (this backend or setting cannot be checkpointed)",
                p.display()
            )));
        }
        Ok(())
    }
}

impl Drop for SplitControl<'_> {
    fn drop(&mut self) {
        clock().training = false;
    }
}

/// Adds to an [`BenchError::Interrupted`] what the run kept: `finished` split records in
/// the `--json` file and the `--out` directory (other errors pass unchanged).
pub fn interrupted_note(
    e: BenchError,
    finished: usize,
    json: Option<&Path>,
    out: Option<&Path>,
) -> BenchError {
    let BenchError::Interrupted(msg) = e else {
        return e;
    };
    let mut kept = vec![format!("{finished} finished split(s) kept")];
    if let Some(p) = json {
        kept.push(format!("records in {}", p.display()));
    }
    if let Some(d) = out {
        kept.push(format!("report in {}", d.join("report.md").display()));
    }
    BenchError::Interrupted(format!("{msg}; {}", kept.join(", ")))
}

/// Reads, verifies and checks the saved state of `path` (see the module docs).
///
/// # Errors
/// [`BenchError::Usage`] naming the file and, for a state that cannot be right, the field.
pub fn load_state(path: &Path, fingerprint: &serde_json::Value) -> Result<RunState> {
    let bad = |what: String| BenchError::Usage(format!("--resume: {}: {what}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| {
        BenchError::Usage(format!(
            "--resume: I/O error reading {}: {e}",
            path.display()
        ))
    })?;
    let file: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a checkpoint: {e}")))?;
    let version = file.get("version").and_then(serde_json::Value::as_u64);
    if version != Some(u64::from(FILE_VERSION)) {
        return Err(bad(format!(
            "field version: {} (this build reads checkpoint files of version {FILE_VERSION}, \
             which carry a checksum); start afresh in another --checkpoint directory",
            version.map_or("missing".to_string(), |v| v.to_string())
        )));
    }
    let Some((fp_text, stored, state_text)) = split_file(&text) else {
        return Err(bad(
            "field checksum: missing, or the file is not laid out as this program writes it \
             (edited?); refusing to resume from it"
                .into(),
        ));
    };
    let computed = checksum(fp_text, state_text);
    if stored != computed {
        return Err(bad(format!(
            "field checksum: {stored}, but the saved settings and state hash to {computed}: \
             the file was changed or damaged after it was written; refusing to resume from it \
             (restore the file, or start afresh in another --checkpoint directory)"
        )));
    }
    let saved_fp = file.get("fingerprint").cloned().unwrap_or_default();
    if &saved_fp != fingerprint {
        return Err(BenchError::Usage(format!(
            "--resume: {} was written with other settings ({}); this run has {}",
            path.display(),
            saved_fp,
            fingerprint
        )));
    }
    let state: RunState =
        serde_json::from_str(state_text).map_err(|e| bad(format!("field state: {e}")))?;
    state.validate().map_err(|e| bad(config_message(&e)))?;
    Ok(state)
}

/// A core error's message without the generic "invalid configuration" prefix.
fn config_message(e: &dgp_traits::Error) -> String {
    match e {
        dgp_traits::Error::Config(c) => c.to_string(),
        e => e.to_string(),
    }
}

impl Progress for SplitControl<'_> {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        {
            let mut c = clock();
            let now = Instant::now();
            if let Some(t) = c.last {
                if c.durations.len() == STEP_WINDOW {
                    c.durations.pop_front();
                }
                c.durations.push_back((now - t).as_secs_f64());
            }
            c.last = Some(now);
        }
        if test_hook(Hook::Stall) == Some(step) {
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        let objective = match test_hook(Hook::Diverge) {
            Some(k) if step >= k => f64::INFINITY,
            _ => objective,
        };
        self.inner.on_step(step, total, objective);
        let first = *self.first_objective.get_or_insert(objective);
        let exploded =
            !objective.is_finite() || objective.abs() > DIVERGENCE_FACTOR * first.abs().max(1.0);
        if exploded && self.diverged.is_none() {
            self.diverged = Some((step, objective, first));
        }
        // The objective of step `step` is that of the parameters after `step` steps: a
        // state saved after them is good when it did not diverge, and is written now.
        if self.pending.as_ref().is_some_and(|(_, done)| *done <= step) {
            if self.diverged.is_some() {
                self.pending = None;
            } else if let Err(e) = self.write_pending() {
                self.error = Some(e);
            }
        }
    }

    fn on_phase(&mut self, phase: &str) {
        self.first_objective = None;
        self.inner.on_phase(phase);
    }
}

impl RunControl for SplitControl<'_> {
    fn should_stop(&self) -> bool {
        stop_requested() || self.diverged.is_some() || self.error.is_some()
    }

    fn take_resume_state(&mut self) -> Option<RunState> {
        self.resume.take()
    }
}

impl Checkpoints for SplitControl<'_> {
    fn every(&self) -> usize {
        if self.path.is_some() {
            self.asked.set(true);
        }
        self.every
    }

    /// Keeps `state` to be written once the objective of its parameters is known not to
    /// have diverged (the next step's, see `on_step`), or when the fit ends without a
    /// failure ([`SplitControl::finish`]): a diverged state never replaces the last good
    /// one.
    fn save(&mut self, state: &RunState) -> dgp_traits::Result<()> {
        if self.path.is_none() || !is_writer() || self.diverged.is_some() {
            return Ok(());
        }
        let text = checkpoint_text(&self.fingerprint, state)?;
        self.pending = Some((text, state.steps_done));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A state of `n` parameters (and Adam moments of the same size).
    fn state(n: usize) -> RunState {
        let v: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        RunState {
            version: dgp_traits::train::RUN_STATE_VERSION,
            steps_done: 5,
            steps: 10,
            seed: 0,
            batch_size: 10,
            n: 100,
            params: v.clone(),
            noise: dgp_traits::rng::seeded(1),
            stepper: serde_json::json!({"state": {"step": 5, "m": v, "v": v}}),
            observers: vec![],
            report: dgp_traits::model::FitReport {
                steps: 5,
                ..Default::default()
            },
        }
    }

    /// The checksum round-trips, catches a one-digit edit, and costs little next to the
    /// serialisation a save does anyway (the times are printed).
    #[test]
    fn checksum_round_trips_catches_edits_and_costs_little() {
        let fp = serde_json::json!({"backend": "svi", "split": 0});
        let s = state(200_000);
        let text = checkpoint_text(&fp, &s).unwrap();
        let (f, sum, st) = split_file(&text).unwrap();
        assert_eq!(checksum(f, st), sum);
        let edited = text.replacen("0.3", "0.4", 1);
        let (f, sum, st) = split_file(&edited).unwrap();
        assert_ne!(checksum(f, st), sum);
        let reps = 5;
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(serde_json::to_string(&s).unwrap());
        }
        let serialise = t.elapsed().as_secs_f64() / reps as f64;
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(checksum(f, st));
        }
        let sum_time = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "state of {} bytes: serialise {:.2} ms, checksum {:.3} ms",
            st.len(),
            serialise * 1e3,
            sum_time * 1e3
        );
        assert!(sum_time < 0.2 * serialise, "{sum_time} vs {serialise}");
    }
}
