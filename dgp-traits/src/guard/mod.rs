//! A fit that protects itself: ready-made implementations of the fit hooks
//! ([`crate::fit::Progress`], [`crate::fit::RunControl`], [`crate::fit::Checkpoints`]) —
//! a stop flag, stopping on SIGINT/SIGTERM, checkpoints in a directory with exact resume,
//! and a divergence guard — composed in one [`Guard`].
//!
//! One line gives a fit that survives `kill -9` and, run again, continues bit for bit:
//!
//! ```no_run
//! # fn demo<C: dgp_traits::fitted::Estimator + serde::Serialize>(config: C, data: dgp_traits::data::Dataset) -> dgp_traits::Result<()> {
//! use dgp_traits::guard::Guard;
//! let fitted = Guard::checkpoint_dir("ckpt")?.stop_on_signals()?.fit(&config, &data)?;
//! # let _ = fitted; Ok(()) }
//! ```
//!
//! The pieces are separate and each optional (the shape of argmin's executor, whose
//! observers, checkpointing and ctrl-c handling are separate slots): a [`StopFlag`] alone
//! is a [`crate::fit::RunControl`]; [`signals::stop_on_signals`] makes signals set one;
//! a [`CheckpointDir`] reads and writes verified states; [`Guard`] combines them with the
//! divergence guard and, on request, the watchdog of a stuck step.
//!
//! # The contract
//!
//! * **What is saved.** A checkpoint file holds the whole state of the executor run
//!   ([`RunState`]: the free parameters, the stepper's state — Adam's moments and step
//!   count, hence the schedule's position —, the Monte Carlo noise generator, every
//!   observer's state, the report so far; the position in the minibatch order is the
//!   number of steps done, as the order is a pure function of the seed), the run's
//!   *identity* (any JSON the caller supplies; [`Guard::fit`] uses [`fit_identity`]: the
//!   estimator's type and configuration, the training settings, the data's shape and a
//!   checksum of its values) and a [`checksum`] of both, in the layout of
//!   [`CHECKPOINT_FILE_VERSION`].
//! * **When.** Every [`Guard::save_every`] steps (default [`DEFAULT_EVERY`]), when a stop is
//!   requested (after the step in progress) and after the last step. A state after k steps
//!   is written only once the objective of its parameters (step k's) is known not to have
//!   diverged, or when the fit ends without a failure; **a diverged state is never saved**,
//!   so the file keeps the last good state.
//! * **Atomicity.** A file is written to a temporary file in the same directory, synced,
//!   renamed over the old one, and the directory synced: at every moment, `kill -9` and a
//!   crash included, the file holds the previous complete state or the new one, never a
//!   part. One run writes a directory at a time: [`CheckpointDir::open`] holds an advisory
//!   lock (`DIR/.lock`) for the run's lifetime, released by the operating system when the
//!   process ends however it ends; a second run or a second resume on the directory is
//!   refused ([`CheckpointError::Locked`]) while the first runs.
//! * **Resume.** Before its first step a guarded fit reads its file and verifies it: the
//!   layout and version, the checksum (an edited or damaged file is refused), the identity
//!   (a state of another backend, configuration, data set or training setting is refused,
//!   naming the first field that differs), and the values (finite parameters and moments,
//!   non-negative second moments, step counters that agree, a noise generator that is not
//!   stuck). A verified state is continued: the fit replays no step, and its parameters,
//!   report history and predictions equal those of a fit that was never interrupted, bit
//!   for bit (the fit being deterministic for a seed, whatever the number of threads). A
//!   finished state returns the finished model at once. Nothing is ever written over a
//!   state that was refused: a fresh start ([`Start::Fresh`]) on a file holding a state is
//!   refused too ([`CheckpointError::WouldOverwrite`]).
//! * **Stop.** A stop request ([`StopFlag::request`], a signal registered with
//!   [`Guard::stop_on_signals`]) ends the run after the step in progress, saving its state
//!   first; [`Guard::fit`] then returns [`Error::Interrupted`] saying what was saved. A
//!   stop requested before the first step is [`Error::Interrupted`] with nothing trained
//!   and nothing written.
//! * **Divergence.** A run whose objective turns non-finite or grows [`DIVERGENCE_FACTOR`]
//!   times over its first value (the first of the whole run, for a resumed one) stops at
//!   that step with [`Error::Numerical`] naming the step and the last good checkpoint.
//! * **Scope.** Every backend whose fit is one executor run whose stepper and observers
//!   save their state is resumable through these hooks
//!   ([`crate::backend::Capabilities::resumable`]); a fit that cannot save its state is
//!   refused before its first step with an error naming what cannot, and a fit that never
//!   reached the executor's hooks is an error after it, never a silent fresh start.
//!
//! The only process-wide state is the signal handler's registry ([`signals`]).

mod checkpoint_dir;
mod identity;
pub mod signals;
mod stop;
#[cfg(test)]
mod tests;
mod watchdog;

pub use checkpoint_dir::{
    CHECKPOINT_FILE_VERSION, CheckpointDir, LOCK_FILE, Start, checkpoint_text, checksum,
    verify_checkpoint,
};
pub use identity::{data_checksum, first_difference, fit_identity};
pub use stop::StopFlag;
pub use watchdog::{EXIT_WHEN_STUCK, STUCK_STEP_MIN_SECONDS, STUCK_STEP_MULTIPLE, Stuck};

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use crate::data::Dataset;
use crate::error::{CheckpointError, Error, Result};
use crate::fit::{Checkpoints, FitHooks, Progress, RunControl, RunState};
use crate::fitted::{Estimator, Fitted};
use watchdog::{Clock, StepClock, StuckMessage};

/// Default number of steps between periodic checkpoints of a [`Guard`].
pub const DEFAULT_EVERY: usize = 100;

/// The checkpoint file of [`Guard::checkpoint_dir`].
pub const DEFAULT_FILE: &str = "state.json";

/// Factor by which the objective's magnitude may grow over its first value before a run
/// counts as diverged (a run at a learning rate of 10⁶ reaches 10⁹; converging runs stay
/// within a factor of a few).
pub const DIVERGENCE_FACTOR: f64 = 1e6;

/// Where a run diverged ([`Guard::divergence`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Divergence {
    /// The step whose objective diverged (0-based).
    pub step: usize,
    /// That objective.
    pub objective: f64,
    /// The run's first objective it was compared with.
    pub first: f64,
}

/// The checkpoint file of a guarded run.
#[derive(Debug)]
struct Slot {
    dir: CheckpointDir,
    name: String,
    file: PathBuf,
    /// The run's identity; `None` until [`Guard::fit`] or [`Guard::identity`] gives
    /// one (`null` if neither does).
    identity: Option<Value>,
    start: Start,
    /// The saved state was read and verified ([`Guard::begin`]).
    prepared: bool,
}

/// A fit's guard: stop requests, checkpoints with exact resume, the divergence guard and,
/// on request, the watchdog of a stuck step, as ONE object answering all three fit hooks
/// (they share state: a diverged objective stops the run and is never saved). See the
/// module docs for the contract.
///
/// Use it through [`Guard::fit`] / [`Guard::fit`] (which also check before the
/// first step and turn what happened into the result), or as raw hooks:
/// [`Guard::begin`], then `model.fit(&data, &cfg, &mut FitHooks::all(&mut guard))`, then
/// [`Guard::finish`] on the fit's result. A guard serves one fit (one executor run): a
/// checkpointing guard refuses a second one ([`Error::Unsupported`]).
pub struct Guard<'a> {
    progress: Option<&'a mut dyn Progress>,
    stop: StopFlag,
    slot: Option<Slot>,
    every: usize,
    divergence_factor: Option<f64>,
    /// The verified saved state, until the executor takes it.
    resume: Option<RunState>,
    /// The step of the state this run continued from.
    resumed_step: Option<usize>,
    /// The step of the state in the checkpoint file (continued from or saved).
    saved_step: Option<usize>,
    /// A state handed over by the executor, not yet written: its text and its step.
    pending: Option<(String, usize)>,
    /// The executor asked for the checkpoint cadence: the fit reached the hooks.
    asked: Cell<bool>,
    /// Executor runs that took the resume state (one per fit).
    runs: usize,
    /// Steps done and the run's steps, after the last reported step.
    progress_at: Option<(usize, usize)>,
    first_objective: Option<f64>,
    diverged: Option<Divergence>,
    /// A failure to report after the fit (a write that failed, a state that was refused).
    failure: Option<Error>,
    clock: Option<Clock>,
    stuck_message: Option<StuckMessage>,
    watching: bool,
}

impl std::fmt::Debug for Guard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("stop", &self.stop)
            .field("slot", &self.slot)
            .field("every", &self.every)
            .field("divergence_factor", &self.divergence_factor)
            .field("saved_step", &self.saved_step)
            .field("diverged", &self.diverged)
            .finish_non_exhaustive()
    }
}

impl Default for Guard<'_> {
    fn default() -> Self {
        Guard::new()
    }
}

impl<'a> Guard<'a> {
    /// A guard with its own [`StopFlag`] (not tied to signals), the divergence guard on
    /// ([`DIVERGENCE_FACTOR`]) and no checkpoints.
    pub fn new() -> Self {
        Guard {
            progress: None,
            stop: StopFlag::new(),
            slot: None,
            every: DEFAULT_EVERY,
            divergence_factor: Some(DIVERGENCE_FACTOR),
            resume: None,
            resumed_step: None,
            saved_step: None,
            pending: None,
            asked: Cell::new(false),
            runs: 0,
            progress_at: None,
            first_objective: None,
            diverged: None,
            failure: None,
            clock: None,
            stuck_message: None,
            watching: false,
        }
    }

    /// A guard ([`Guard::new`]) that checkpoints to `DIR/`[`DEFAULT_FILE`] in the
    /// directory `dir` (created and locked now, [`CheckpointDir::open`]), continuing the
    /// state saved there if there is one ([`Start::Auto`]); the run's identity is that of
    /// the fit ([`Guard::fit`]) unless [`Guard::identity`] gives one.
    ///
    /// # Errors
    /// Those of [`CheckpointDir::open`].
    pub fn checkpoint_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = CheckpointDir::open(dir)?;
        let file = dir.file(DEFAULT_FILE)?;
        let mut g = Guard::new();
        g.slot = Some(Slot {
            dir,
            name: DEFAULT_FILE.into(),
            file,
            identity: None,
            start: Start::Auto,
            prepared: false,
        });
        Ok(g)
    }

    /// Checkpoints to the file `name` of `dir` for the run `identity`, treating a saved
    /// state as `start` says; the state is read and verified now.
    ///
    /// # Errors
    /// [`CheckpointError::WouldOverwrite`], [`CheckpointError::NothingToResume`], and
    /// those of [`CheckpointDir::load`].
    pub fn with_checkpoints(
        mut self,
        dir: &CheckpointDir,
        name: &str,
        identity: Value,
        start: Start,
    ) -> Result<Self> {
        self.slot = Some(Slot {
            dir: dir.clone(),
            name: name.into(),
            file: dir.file(name)?,
            identity: Some(identity),
            start,
            prepared: false,
        });
        self.prepare()?;
        Ok(self)
    }

    /// The run's identity, checked against the saved state's (for a guard whose state was
    /// not read yet: [`Guard::checkpoint_dir`]).
    pub fn identity(mut self, identity: Value) -> Self {
        if let Some(s) = self.slot.as_mut().filter(|s| !s.prepared) {
            s.identity = Some(identity);
        }
        self
    }

    /// How a saved state is treated (for a guard whose state was not read yet:
    /// [`Guard::checkpoint_dir`]; [`Start::Auto`] by default).
    pub fn start(mut self, start: Start) -> Self {
        if let Some(s) = self.slot.as_mut().filter(|s| !s.prepared) {
            s.start = start;
        }
        self
    }

    /// Saves a checkpoint every `steps` steps (as well as on a stop request and after the
    /// last step); `0`: only on a stop request and after the last step.
    pub fn save_every(mut self, steps: usize) -> Self {
        self.every = if steps == 0 { usize::MAX } else { steps };
        self
    }

    /// Polls `flag` (a clone) for stop requests instead of the guard's own flag.
    pub fn stop_flag(mut self, flag: &StopFlag) -> Self {
        self.stop = flag.clone();
        self
    }

    /// Makes SIGINT, SIGTERM and SIGHUP request a stop of this guard's flag, announced
    /// on standard error ([`signals::stop_on_signals`]).
    ///
    /// # Errors
    /// As [`signals::stop_on_signals`].
    pub fn stop_on_signals(self) -> Result<Self> {
        signals::stop_on_signals(&self.stop, signals::Announce::Stderr)?;
        Ok(self)
    }

    /// Forwards every step and phase to `progress` (a progress bar, a logger).
    pub fn progress(mut self, progress: &'a mut dyn Progress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The factor of the divergence guard ([`DIVERGENCE_FACTOR`] by default); `None`
    /// turns the guard off.
    pub fn divergence_factor(mut self, factor: Option<f64>) -> Self {
        self.divergence_factor = factor;
        self
    }

    /// Ends the process when a step is stuck after a stop request (see
    /// [`STUCK_STEP_MULTIPLE`]), printing [`Stuck::message`]; watched from
    /// [`Guard::begin`] until the guard is dropped.
    pub fn exit_when_stuck(self) -> Self {
        self.exit_when_stuck_with(|s| Some(s.message()))
    }

    /// [`Guard::exit_when_stuck`] printing what `message` returns (nothing for `None`).
    pub fn exit_when_stuck_with(
        mut self,
        message: impl Fn(&Stuck) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.stuck_message = Some(Arc::new(message));
        self.clock = Some(Arc::new(Mutex::new(StepClock::default())));
        self
    }

    /// The guard's stop flag (e.g. to hand a clone to another thread that may stop the
    /// fit).
    pub fn stop_handle(&self) -> &StopFlag {
        &self.stop
    }

    /// Before the fit (and before building its model, so that the checks come first):
    /// reads and verifies the saved state, refuses a stop already requested, and starts
    /// the watchdog of a stuck step when asked for. [`Guard::fit`] calls it.
    ///
    /// # Errors
    /// [`Error::Interrupted`] when a stop was requested before the first step (nothing is
    /// trained or written); those of the saved state ([`Guard::with_checkpoints`]).
    pub fn begin(&mut self) -> Result<()> {
        if self.stop.is_requested() {
            return Err(Error::Interrupted(
                "a stop was requested before the first step: nothing was trained and nothing \
                 written"
                    .into(),
            ));
        }
        self.prepare()?;
        if let (Some(clock), Some(message), false) =
            (&self.clock, &self.stuck_message, self.watching)
        {
            watchdog::spawn(clock.clone(), self.stop.clone(), message.clone());
            self.watching = true;
        }
        Ok(())
    }

    /// [`Estimator::fit_with`] under this guard: standardises `data`, builds and trains
    /// `estimator`'s model with its own training settings ([`Estimator::fit_config`]); the
    /// run's identity defaults to [`fit_identity`] of `estimator`, those settings and
    /// `data`; [`Guard::begin`] before, and [`Guard::finish`] on the result.
    ///
    /// # Errors
    /// Those of [`Guard::begin`], of the fit, and of [`Guard::finish`].
    pub fn fit<E: Estimator + Serialize>(
        &mut self,
        estimator: &E,
        data: &Dataset,
    ) -> Result<Fitted<E::Model>> {
        if let Some(s) = self.slot.as_mut().filter(|s| s.identity.is_none()) {
            s.identity = Some(fit_identity(
                estimator,
                &estimator.fit_config(data.n()),
                data,
            )?);
        }
        self.begin()?;
        let fitted = estimator.fit_with(data, &mut FitHooks::all(self));
        self.finish(fitted)
    }

    /// After the fit: its result, unless the guard has something to say first — a write
    /// or a saved state that failed (that error), a divergence ([`Error::Numerical`]
    /// naming the step and the last good checkpoint), a stop request
    /// ([`Error::Interrupted`] saying what was saved), a checkpointed fit that never
    /// reached the executor's hooks ([`Error::Unsupported`]). Writes the last state
    /// first (the end of the run, or a stop request).
    ///
    /// # Errors
    /// As described.
    pub fn finish<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Some(e) = self.failure.take() {
            return Err(e);
        }
        if let Some(d) = self.diverged {
            return Err(Error::Numerical(self.divergence_message(d)));
        }
        let value = result?;
        self.flush()?;
        if self.stop.is_requested() {
            return Err(Error::Interrupted(self.stopped_message()));
        }
        if let Some(s) = &self.slot
            && !self.asked.get()
        {
            return Err(Error::Unsupported(format!(
                "checkpoints: this fit did not train through the core executor's hooks, so \
                 nothing was saved to {} (this backend or setting cannot be checkpointed)",
                s.file.display()
            )));
        }
        Ok(value)
    }

    /// Writes the state handed over last and not written yet (after a fit that ended
    /// without a failure: its last state, or that of a stop request).
    ///
    /// # Errors
    /// [`CheckpointError::Write`].
    pub fn flush(&mut self) -> Result<()> {
        let Some((text, done)) = self.pending.take() else {
            return Ok(());
        };
        let Some(slot) = &self.slot else {
            return Ok(());
        };
        if let Some(c) = &self.clock {
            watchdog::lock(c).saving = true;
        }
        let written = slot.dir.write_text(&slot.name, &text);
        if written.is_ok() {
            self.saved_step = Some(done);
        }
        if let Some(c) = &self.clock {
            let mut c = watchdog::lock(c);
            c.saving = false;
            c.last = Some(std::time::Instant::now());
            c.checkpoint = Some((slot.file.clone(), self.saved_step));
        }
        written
    }

    /// The checkpoint file, when the guard checkpoints.
    pub fn checkpoint_file(&self) -> Option<&Path> {
        self.slot.as_ref().map(|s| s.file.as_path())
    }

    /// The step of the state in the checkpoint file (the one continued from, or the last
    /// one written), if any.
    pub fn saved_step(&self) -> Option<usize> {
        self.saved_step
    }

    /// The step of the saved state this run continued from, if it continued one.
    pub fn resumed_step(&self) -> Option<usize> {
        self.resumed_step
    }

    /// Where the run diverged, if it did.
    pub fn divergence(&self) -> Option<Divergence> {
        self.diverged
    }

    /// Takes the failure the guard keeps for after the fit (a failed write, a refused
    /// state), if any.
    pub fn take_failure(&mut self) -> Option<Error> {
        self.failure.take()
    }

    /// Whether the fit reached the executor's checkpoint hooks (asked for the cadence).
    pub fn reached_executor(&self) -> bool {
        self.asked.get()
    }

    /// Steps done after the last reported step, and the run's steps.
    pub fn progress_at(&self) -> Option<(usize, usize)> {
        self.progress_at
    }

    /// Reads and verifies the saved state (once).
    fn prepare(&mut self) -> Result<()> {
        let Some(slot) = self.slot.as_mut().filter(|s| !s.prepared) else {
            return Ok(());
        };
        let identity = slot.identity.get_or_insert(Value::Null);
        if slot.start == Start::Fresh && slot.file.exists() {
            return Err(Error::Checkpoint(CheckpointError::WouldOverwrite {
                file: slot.file.clone(),
            }));
        }
        let state = slot.dir.load(&slot.name, identity)?;
        if slot.start == Start::Resume && state.is_none() {
            return Err(Error::Checkpoint(CheckpointError::NothingToResume {
                file: slot.file.clone(),
            }));
        }
        slot.prepared = true;
        if let Some(state) = state {
            self.resumed_step = Some(state.steps_done);
            self.saved_step = Some(state.steps_done);
            // The divergence test compares with the first objective of the whole run, as
            // in a run that was never interrupted.
            self.first_objective = state.report.history.first().map(|&(_, v)| v);
            self.resume = Some(state);
        }
        if let Some(c) = &self.clock {
            watchdog::lock(c).checkpoint = Some((slot.file.clone(), self.saved_step));
        }
        Ok(())
    }

    fn divergence_message(&self, d: Divergence) -> String {
        let kept = match (&self.slot, self.saved_step) {
            (Some(s), Some(step)) => format!(
                " The checkpoint {} holds the last good state (step {step}), not the diverged \
                 one; continuing it with the same settings would diverge again",
                s.file.display()
            ),
            (Some(s), None) => format!(
                " Nothing was saved to {} (the run diverged before its first checkpoint)",
                s.file.display()
            ),
            (None, _) => String::new(),
        };
        format!(
            "the objective diverged at step {} ({:e}, from {:e} at the start); stopped there \
             (a smaller learning rate or gentler step settings usually help).{kept}",
            d.step, d.objective, d.first
        )
    }

    fn stopped_message(&self) -> String {
        let at = self
            .progress_at
            .map_or("before its first step".to_string(), |(done, total)| {
                format!("after step {done} of {total}")
            });
        let kept = match (&self.slot, self.saved_step) {
            (Some(s), Some(step)) => format!(
                "its state is saved in {} (step {step}); run the same fit on the same \
                 checkpoint directory to continue exactly",
                s.file.display()
            ),
            (Some(s), None) => format!("nothing was saved to {}", s.file.display()),
            (None, _) => "nothing was saved (the fit does not checkpoint)".into(),
        };
        format!("the fit was stopped on request {at}: {kept}")
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(c) = &self.clock {
            watchdog::lock(c).done = true;
        }
    }
}

impl Progress for Guard<'_> {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        if let Some(c) = &self.clock {
            watchdog::lock(c).step_ended();
        }
        if let Some(p) = self.progress.as_mut() {
            p.on_step(step, total, objective);
        }
        self.progress_at = Some((step + 1, total));
        if let Some(factor) = self.divergence_factor {
            let first = *self.first_objective.get_or_insert(objective);
            let exploded =
                !objective.is_finite() || objective.abs() > factor * first.abs().max(1.0);
            if exploded && self.diverged.is_none() {
                self.diverged = Some(Divergence {
                    step,
                    objective,
                    first,
                });
            }
        }
        // The objective of step `step` is that of the parameters after `step` steps: a
        // state saved after them is good when it did not diverge, and is written now.
        if self.pending.as_ref().is_some_and(|(_, done)| *done <= step) {
            if self.diverged.is_some() {
                self.pending = None;
            } else if let Err(e) = self.flush() {
                self.failure.get_or_insert(e);
            }
        }
    }

    fn on_phase(&mut self, phase: &str) {
        self.first_objective = None;
        if let Some(p) = self.progress.as_mut() {
            p.on_phase(phase);
        }
    }
}

impl RunControl for Guard<'_> {
    fn should_stop(&self) -> bool {
        // The stop flag first, always: a collective flag must be polled at the same
        // points by every process.
        self.stop.is_requested() || self.diverged.is_some() || self.failure.is_some()
    }

    fn take_resume_state(&mut self) -> Option<RunState> {
        self.runs += 1;
        if self.slot.is_some() && self.runs > 1 {
            self.failure.get_or_insert(Error::Unsupported(
                "checkpoints: this fit runs the training executor more than once with the \
                 caller's hooks, and a checkpoint holds one run; it cannot be checkpointed"
                    .into(),
            ));
            return None;
        }
        if let Err(e) = self.prepare() {
            self.failure.get_or_insert(e);
            return None;
        }
        self.resume.take()
    }
}

impl Checkpoints for Guard<'_> {
    fn every(&self) -> usize {
        match &self.slot {
            Some(_) => {
                self.asked.set(true);
                self.every
            }
            None => 0,
        }
    }

    /// Keeps `state` to be written once the objective of its parameters is known not to
    /// have diverged (the next step's), or when the fit ends without a failure
    /// ([`Guard::finish`]): a diverged state never replaces the last good one.
    fn save(&mut self, state: &RunState) -> Result<()> {
        if let Some(e) = self.failure.take() {
            return Err(e);
        }
        let Some(slot) = &self.slot else {
            return Ok(());
        };
        if !slot.dir.writes() || self.diverged.is_some() {
            return Ok(());
        }
        let identity = slot.identity.as_ref().unwrap_or(&Value::Null);
        self.pending = Some((checkpoint_text(identity, state)?, state.steps_done));
        Ok(())
    }
}
