//! Interruption, checkpoints and exact resume of `dgp-bench run` and `stream`: the flags
//! (`--checkpoint`, `--resume`, `--checkpoint-every`), the file of each run in the
//! directory (`<backend>-L<layers>-split<k>.json`, `stream-<backend>-L<layers>.json`),
//! its identity ([`fingerprint`]: every setting that affects the numbers) and the
//! messages that name the flags. The mechanics — and their contract: what is saved and
//! when, the atomic checksummed files, the lock, what a resume verifies and guarantees,
//! the divergence guard, the watchdog of a stuck step — are the library's
//! ([`dgp_traits::guard`]); each split trains under a [`dgp_traits::guard::Guard`]
//! ([`SplitControl`]). What `run` adds:
//!
//! * An interrupted split is not recorded; `run` writes the outputs of the splits
//!   finished so far, prints what it saved and how to resume, and exits with 130
//!   ([`BenchError::Interrupted`]).
//! * `--checkpoint DIR` refuses a directory holding a saved state of this run's backends,
//!   layers and splits, naming `--resume DIR` (refusing rather than resuming: the user
//!   asked for a fresh start, and guessing would either lose the state or silently mix
//!   two runs); `--resume DIR` with nothing of this run in DIR is an error, never a silent
//!   fresh start; a split without a state starts fresh. Every saved state is verified
//!   for every split before any trains.
//! * A diverged split names `--lr` (or the backend's step settings when it uses no
//!   learning rate) and the last good checkpoint; a numerical failure of a resumed split
//!   names the checkpoint as the likely cause.
//! * Backends that do not declare [`dgp_traits::backend::Capabilities::resumable`], and
//!   held-out early stopping, are refused before training ([`check_backend`]).
//! * In a distributed launch ([`crate::session::Process`]) the stop decision is agreed
//!   after every step; only rank 0 locks and writes the directory, the others read the
//!   states to resume from.

use std::path::{Path, PathBuf};

use clap::Args;
use dgp_traits::fit::{Checkpoints, Progress, RunControl};
use dgp_traits::guard::{CheckpointDir, Divergence, Guard, Start, Stuck};
use dgp_traits::train::RunState;
use dgp_traits::{CheckpointError, Error};

use crate::error::{BenchError, Result};
use crate::session::{Process, Session, TestHooks};
use crate::spec::ExperimentSpec;

pub use dgp_traits::guard::{
    CHECKPOINT_FILE_VERSION as FILE_VERSION, DIVERGENCE_FACTOR, STUCK_STEP_MIN_SECONDS,
    STUCK_STEP_MULTIPLE, checkpoint_text, checksum,
};

/// Default of `--checkpoint-every`.
pub const DEFAULT_EVERY: usize = 500;

/// The `run` flags of this module.
#[derive(Clone, Debug, Default, Args)]
pub struct CheckpointFlags {
    /// Save each split's training state to this directory (every --checkpoint-every steps,
    /// on SIGINT/SIGTERM and at the end of the split; never a diverged state) so that
    /// `--resume DIR` continues exactly (a backend that cannot resume is refused, naming
    /// those that can). The directory is locked while the run lasts.
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

/// Starts the session of the runs of `specs` in `process`, before any training: checks
/// the flags, opens (creates and locks) the directory, refuses backends that cannot
/// resume.
///
/// # Errors
/// [`BenchError::Usage`] for a zero interval, a directory that cannot be created or is in
/// use by another run, a missing resume directory or a backend in `specs` that cannot
/// resume.
pub fn start_session(
    flags: &CheckpointFlags,
    specs: &[ExperimentSpec<'_>],
    process: &Process,
) -> Result<Session> {
    let targets: Vec<CheckpointTarget> = specs
        .iter()
        .flat_map(|s| {
            s.splits
                .iter()
                .map(move |&k| CheckpointTarget::of_split(s, k))
        })
        .collect();
    start_session_for(flags, &targets, process)
}

/// [`start_session`] for the runs `targets` (see the module docs): a saved state of one
/// of them is never overwritten by `--checkpoint`, `--resume` needs one of them saved,
/// and every saved one is verified before any training.
///
/// # Errors
/// As [`start_session`].
pub fn start_session_for(
    flags: &CheckpointFlags,
    targets: &[CheckpointTarget],
    process: &Process,
) -> Result<Session> {
    let mut session = Session {
        process: process.clone(),
        test: TestHooks::from_env(),
        ..Session::default()
    };
    let (dir, resume) = match (&flags.checkpoint, &flags.resume) {
        (Some(d), _) => (d.clone(), false),
        (None, Some(d)) => (d.clone(), true),
        (None, None) => return Ok(session),
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
    // Only the writing process (rank 0 of a distributed launch) creates, locks and writes.
    let ck = if process.writer {
        CheckpointDir::open(&dir).map_err(|e| match e {
            Error::Checkpoint(CheckpointError::Write { message, .. }) => {
                BenchError::Usage(format!("{flag} {}: {message}", dir.display()))
            }
            e => BenchError::Usage(format!("{flag} {}: {}", dir.display(), inner_message(&e))),
        })?
    } else {
        CheckpointDir::for_reading(&dir)
    };
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
            ck.load(&t.file, &t.fingerprint).map_err(resume_error)?;
        }
    }
    session.dir = Some(ck);
    session.every = flags.checkpoint_every;
    session.resume = resume;
    Ok(session)
}

/// A core error's message without its generic prefix ("checkpoint: ", "invalid
/// configuration: ").
fn inner_message(e: &Error) -> String {
    match e {
        Error::Checkpoint(c) => c.to_string(),
        Error::Config(c) => c.to_string(),
        e => e.to_string(),
    }
}

/// A saved state that `--resume` cannot use, as a usage error naming the flag.
fn resume_error(e: Error) -> BenchError {
    let hint = match &e {
        Error::Checkpoint(CheckpointError::Damaged { .. }) => {
            " (restore the file, or start afresh in another --checkpoint directory)"
        }
        Error::Checkpoint(CheckpointError::OtherRun { .. }) => {
            " (resume with the settings it was written with, or start afresh in another \
             --checkpoint directory)"
        }
        _ => "",
    };
    match e {
        Error::Io { path, source } => BenchError::Usage(format!(
            "--resume: I/O error reading {}: {source}",
            path.display()
        )),
        e => BenchError::Usage(format!("--resume: {}{hint}", inner_message(&e))),
    }
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

/// What the watchdog of a stuck step prints (the writer only), naming `--resume`.
fn stuck_message(writer: bool) -> impl Fn(&Stuck) -> Option<String> + Send + Sync + 'static {
    move |s: &Stuck| {
        if !writer {
            return None;
        }
        let kept = match &s.checkpoint {
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
        Some(format!(
            "error: interrupted: the training step in progress has not ended {:.1} s after \
             the stop request (the limit is {}): it looks stuck, so the run ends without it. \
             {kept}",
            s.waited,
            s.limit_text()
        ))
    }
}

/// The hooks a split trains with (all three, passed with
/// [`dgp_traits::fit::FitHooks::all`]): the library's [`Guard`] with the session's stop
/// flag and checkpoint file, forwarding progress to the bar — and the test hooks of the
/// environment — with the messages of a failure naming the flags.
pub struct SplitControl<'a> {
    guard: Guard<'a>,
    test: TestHooks,
    /// Whether `--checkpoint` could make this split resumable ([`check_backend`]).
    resumable: bool,
    /// The checkpoint this split resumed from.
    resumed_from: Option<PathBuf>,
    /// Learning rate of the split (named when training diverges); `None` for a backend
    /// that does not use one.
    learning_rate: Option<f64>,
}

impl<'a> SplitControl<'a> {
    /// The control of split `k` of `spec` (in its session), forwarding progress to
    /// `inner`; loads the split's saved state when resuming.
    ///
    /// # Errors
    /// [`BenchError::Interrupted`] when a stop was requested already; [`BenchError::Usage`]
    /// for an unreadable state file or one written with other settings.
    pub fn new(inner: &'a mut dyn Progress, spec: &ExperimentSpec<'_>, k: usize) -> Result<Self> {
        if spec.session.stop_requested() {
            return Err(BenchError::Interrupted(format!(
                "interrupted before training split {k}"
            )));
        }
        Self::for_target(inner, &spec.session, CheckpointTarget::of_split(spec, k))
    }

    /// The control of the run `target` of `session`, forwarding progress to `inner`;
    /// loads its saved state when resuming.
    ///
    /// # Errors
    /// As [`SplitControl::new`].
    pub fn for_target(
        inner: &'a mut dyn Progress,
        session: &Session,
        target: CheckpointTarget,
    ) -> Result<Self> {
        let mut guard = Guard::new()
            .stop_flag(&session.process.stop)
            .progress(inner)
            .exit_when_stuck_with(stuck_message(session.process.writer));
        if let Some(dir) = &session.dir {
            let start = if session.resume {
                Start::Auto
            } else {
                Start::Fresh
            };
            guard = guard
                .save_every(session.every)
                .with_checkpoints(dir, &target.file, target.fingerprint, start)
                .map_err(resume_error)?;
        }
        guard
            .begin()
            .map_err(|e| BenchError::run("starting the split", e))?;
        let resumed_from = guard
            .resumed_step()
            .and(guard.checkpoint_file().map(Path::to_path_buf));
        Ok(SplitControl {
            guard,
            test: session.test,
            resumable: target.refusal.is_none(),
            resumed_from,
            learning_rate: target.learning_rate,
        })
    }

    /// The checkpoint file this split resumed from, if any.
    pub fn resumed_from(&self) -> Option<&Path> {
        self.resumed_from.as_deref()
    }

    /// The number of steps done in the state this split resumed from, if any.
    pub fn resumed_step(&self) -> Option<usize> {
        self.guard.resumed_step()
    }

    fn divergence(&self, label: &str, d: Divergence) -> BenchError {
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
        // The diverged parameters are never saved (the guard's `Checkpoints::save`).
        let kept = match (self.guard.checkpoint_file(), self.guard.saved_step()) {
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
            source: Error::Numerical(format!(
                "the objective diverged at step {} ({:e}, from {:e} at the start); stopped \
                 there. {cause}{kept}",
                d.step, d.objective, d.first
            )),
        }
    }

    /// The guard's own failure (a checkpoint write that failed: an output error), if any.
    fn failure(&mut self, context: &str) -> Option<BenchError> {
        self.guard.take_failure().map(|e| match e {
            Error::Checkpoint(CheckpointError::Write { path, message }) => {
                BenchError::output(path, message)
            }
            e => BenchError::run(context, e),
        })
    }

    /// The error of a failed fit: a checkpoint save that failed (an I/O error, as such);
    /// a numerical failure of a resumed split names the checkpoint as the likely cause.
    pub fn fit_error(&mut self, context: String, e: Error) -> BenchError {
        if let Some(saved) = self.failure(&context) {
            return saved;
        }
        if let Some(d) = self.guard.divergence() {
            return self.divergence(&context, d);
        }
        match (&self.resumed_from, &e) {
            (Some(p), Error::Numerical(_) | Error::NotPositiveDefinite { .. }) => BenchError::run(
                format!(
                    "{context} (resumed from {}: a damaged or edited checkpoint is the likely \
                     cause; restore it or start afresh)",
                    p.display()
                ),
                e,
            ),
            (_, Error::Checkpoint(CheckpointError::Write { path, message })) => {
                BenchError::output(path.clone(), message.clone())
            }
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
        if let Some(e) = self.failure(label) {
            return Err(e);
        }
        if let Some(d) = self.guard.divergence() {
            return Err(self.divergence(label, d));
        }
        // The state after the last step (the end, or a stop request).
        self.guard.flush().map_err(|e| match e {
            Error::Checkpoint(CheckpointError::Write { path, message }) => {
                BenchError::output(path, message)
            }
            e => BenchError::run(label, e),
        })?;
        if self.guard.stop_handle().is_requested() {
            let saved = match self.guard.checkpoint_file() {
                Some(p) if self.guard.reached_executor() => format!(
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
        if let Some(p) = self.guard.checkpoint_file()
            && !self.guard.reached_executor()
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

impl Progress for SplitControl<'_> {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        let objective = match self.test.diverge_at {
            Some(k) if step >= k => f64::INFINITY,
            _ => objective,
        };
        self.guard.on_step(step, total, objective);
        if self.test.stall_at == Some(step) {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }

    fn on_phase(&mut self, phase: &str) {
        self.guard.on_phase(phase);
    }
}

impl RunControl for SplitControl<'_> {
    fn should_stop(&self) -> bool {
        self.guard.should_stop()
    }

    fn take_resume_state(&mut self) -> Option<RunState> {
        self.guard.take_resume_state()
    }
}

impl Checkpoints for SplitControl<'_> {
    fn every(&self) -> usize {
        self.guard.every()
    }

    fn save(&mut self, state: &RunState) -> dgp_traits::Result<()> {
        self.guard.save(state)
    }
}
