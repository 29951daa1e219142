//! Interruption, checkpoints and exact resume of `dgp-bench run` (issue 16).
//!
//! * **Interruption.** [`install_interrupt_handler`] (SIGINT, SIGTERM, SIGHUP through the
//!   `ctrlc` crate, version pinned to 3.5.1 in `Cargo.toml`) sets a flag; every training
//!   loop on the core executor polls it after each step
//!   ([`dgp_traits::model::FitObserver::should_stop`]) and stops there. The split being
//!   trained is then not recorded; `run` writes the outputs of the splits finished so far,
//!   prints what it saved and how to resume, and exits with 130
//!   ([`BenchError::Interrupted`]). A second signal exits at once.
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
//! * **Scope.** Backends whose whole fit is one executor run with an Adam-type stepper
//!   (those whose [`dgp_traits::backend::Capabilities::resumable`] is set) resume; any other backend is refused
//!   before training ([`check_backend`]), and a fit that never reached the executor's
//!   checkpoint hooks is an error after the split, never a silent fresh start.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use clap::Args;
use dgp_traits::model::FitObserver;
use dgp_traits::train::RunState;
use serde::{Deserialize, Serialize};

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
    /// on SIGINT/SIGTERM and at the end of the split) so that `--resume DIR` continues
    /// exactly; backends: svi, nested (Adam), star, fc, mf.
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

/// The file a split's state is kept in.
#[derive(Serialize, Deserialize)]
struct SavedSplit {
    fingerprint: serde_json::Value,
    state: RunState,
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
/// current step, a second one exits at once with 130. Installing twice is harmless.
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
    });
}

/// Starts a checkpoint session from the flags, before any training: checks the flags,
/// creates the directory, refuses backends that cannot resume.
///
/// # Errors
/// [`BenchError::Usage`] for a zero interval, a directory that cannot be created, a
/// missing resume directory or a backend in `specs` that cannot resume.
pub fn start_session(flags: &CheckpointFlags, specs: &[ExperimentSpec<'_>]) -> Result<()> {
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
    for spec in specs {
        check_backend(spec)?;
    }
    if is_writer() {
        std::fs::create_dir_all(&dir).map_err(|e| {
            BenchError::Usage(format!(
                "--checkpoint {}: cannot create it: {e}",
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
    let name = spec.backend.name();
    if !spec.backend.capabilities().resumable {
        return Err(BenchError::Usage(format!(
            "--checkpoint/--resume: backend {name} cannot resume exactly yet (supported: {})",
            crate::backends::names_where(|c| c.resumable)
        )));
    }
    if spec.early_stopping.is_some() {
        return Err(BenchError::Usage(format!(
            "--checkpoint/--resume: held-out early stopping ({}) cannot be checkpointed yet; \
             use --protocol published with the published or random split kind",
            spec.protocol
        )));
    }
    Ok(())
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

/// The split's checkpoint file.
fn split_path(dir: &Path, spec: &ExperimentSpec<'_>, k: usize) -> PathBuf {
    dir.join(format!(
        "{}-L{}-split{k}.json",
        spec.backend.name(),
        spec.arch.layers
    ))
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
    write().map_err(|e| BenchError::output(path, e))
}

/// The [`FitObserver`] a split trains with: forwards progress to the bar and answers the
/// executor's stop and checkpoint questions from the session (see the module docs).
pub struct SplitControl<'a> {
    inner: &'a mut dyn FitObserver,
    path: Option<PathBuf>,
    every: usize,
    fingerprint: serde_json::Value,
    resume: Option<RunState>,
    asked: Cell<bool>,
    error: Option<BenchError>,
    /// Whether `--checkpoint` could make this split resumable ([`check_backend`]).
    resumable: bool,
}

impl<'a> SplitControl<'a> {
    /// The control of split `k` of `spec`, forwarding progress to `inner`; loads the
    /// split's saved state when resuming.
    ///
    /// # Errors
    /// [`BenchError::Usage`] for an unreadable state file or one written with other
    /// settings.
    pub fn new(
        inner: &'a mut dyn FitObserver,
        spec: &ExperimentSpec<'_>,
        k: usize,
    ) -> Result<Self> {
        if stop_requested() {
            return Err(BenchError::Interrupted(format!(
                "interrupted before training split {k}"
            )));
        }
        let session = SESSION.lock().ok().and_then(|s| s.clone());
        let fingerprint = fingerprint(spec, k);
        let mut control = SplitControl {
            inner,
            path: None,
            every: 0,
            fingerprint,
            resume: None,
            asked: Cell::new(false),
            error: None,
            resumable: check_backend(spec).is_ok(),
        };
        let Some(session) = session else {
            return Ok(control);
        };
        let path = split_path(&session.dir, spec, k);
        if session.resume && path.exists() {
            control.resume = Some(load_state(&path, &control.fingerprint)?);
        }
        control.path = Some(path);
        control.every = session.every;
        Ok(control)
    }

    /// After the fit: [`BenchError::Interrupted`] when a stop was requested (the split is
    /// not recorded), an error when checkpoints were on but the fit never reached the
    /// executor's hooks or a save failed.
    ///
    /// # Errors
    /// As described.
    pub fn finish(self, label: &str) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
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

fn load_state(path: &Path, fingerprint: &serde_json::Value) -> Result<RunState> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::Usage(format!("--resume: cannot read {}: {e}", path.display())))?;
    let saved: SavedSplit = serde_json::from_str(&text).map_err(|e| {
        BenchError::Usage(format!(
            "--resume: {} is not a checkpoint: {e}",
            path.display()
        ))
    })?;
    if &saved.fingerprint != fingerprint {
        return Err(BenchError::Usage(format!(
            "--resume: {} was written with other settings ({}); this run has {}",
            path.display(),
            saved.fingerprint,
            fingerprint
        )));
    }
    Ok(saved.state)
}

impl FitObserver for SplitControl<'_> {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        self.inner.on_step(step, total, objective);
    }

    fn on_phase(&mut self, phase: &str) {
        self.inner.on_phase(phase);
    }

    fn should_stop(&self) -> bool {
        stop_requested()
    }

    fn checkpoint_every(&self) -> usize {
        if self.path.is_some() {
            self.asked.set(true);
        }
        self.every
    }

    fn save_run_state(&mut self, state: &RunState) -> dgp_traits::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if !is_writer() {
            return Ok(());
        }
        let saved = SavedSplit {
            fingerprint: self.fingerprint.clone(),
            state: state.clone(),
        };
        let text =
            serde_json::to_string(&saved).map_err(|e| dgp_traits::Error::Serde(e.to_string()))?;
        write_atomic(path, &text).map_err(|e| {
            let msg = e.one_line();
            self.error = Some(e);
            dgp_traits::Error::Config(msg)
        })
    }

    fn take_run_state(&mut self) -> Option<RunState> {
        self.resume.take()
    }
}
