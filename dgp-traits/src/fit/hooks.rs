//! The caller's hooks into a fit, as three separate concerns (the shape of argmin's
//! executor, where observers, checkpointing and termination are independent):
//!
//! * [`Progress`] — watches the run: every step's objective and the named phases;
//! * [`RunControl`] — steers the run: a stop request after any step, and the saved state
//!   ([`RunState`]) an interrupted run continues from;
//! * [`Checkpoints`] — keeps the run's state ([`RunState`]) every so many steps, so that
//!   an interrupted run can be continued.
//!
//! [`FitHooks`] bundles any of the three (each optional, a missing one does nothing) as
//! an option of the fit: `model.fit(&data, &cfg, &mut FitHooks::none())` trains without
//! any; a caller supplies each separately ([`FitHooks::progress`], [`FitHooks::control`],
//! [`FitHooks::checkpoints`]), or one object that answers all three when they share state
//! ([`FitHooks::all`]: e.g. a harness that stops a run whose objective diverged and never
//! saves a diverged state). Every hook has a do-nothing default, so an implementation
//! states only what it does. Ready-made implementations — a stop flag, stopping on
//! signals, checkpoints in a locked directory with exact resume, the divergence guard —
//! are in [`crate::guard`].
//!
//! ```
//! use dgp_traits::fit::{FitHooks, Progress, RunControl};
//! struct Print;
//! impl Progress for Print {
//!     fn on_step(&mut self, step: usize, total: usize, objective: f64) {
//!         let _ = (step, total, objective);
//!     }
//! }
//! struct StopNow;
//! impl RunControl for StopNow {
//!     fn should_stop(&self) -> bool { true }
//! }
//! let (mut print, mut stop) = (Print, StopNow);
//! let hooks = FitHooks::none().progress(&mut print).control(&mut stop);
//! assert!(RunControl::should_stop(&hooks));
//! // Fits inside a fit (restarts, candidates of a selection) see the stop request only.
//! assert!(RunControl::should_stop(&hooks.stop_only()));
//! assert!(!RunControl::should_stop(&FitHooks::none()));
//! ```

use crate::error::Result;
use crate::fit::RunState;

/// Watches a run: called after every step and when a phase begins.
pub trait Progress {
    /// After every step with its index, the steps of the run and the step's objective.
    fn on_step(&mut self, _step: usize, _total: usize, _objective: f64) {}

    /// When the run enters a named phase (a sampler's `"burn-in"`, `"sampling"`), before
    /// the phase's first [`Progress::on_step`].
    fn on_phase(&mut self, _phase: &str) {}
}

/// Steers a run: a stop request, and the saved state to continue from.
pub trait RunControl {
    /// Whether the caller asks the run to stop after the current step (e.g. on SIGINT);
    /// polled after every step. Default `false`.
    fn should_stop(&self) -> bool {
        false
    }

    /// The saved state of an interrupted run that this run continues from instead of
    /// starting fresh (taken once, before the first step); `None` by default.
    fn take_resume_state(&mut self) -> Option<RunState> {
        None
    }
}

/// Keeps a run's state so that an interrupted run can be continued: the checkpoints of a
/// run.
pub trait Checkpoints {
    /// Save the run's state through [`Checkpoints::save`] every this many steps, after the
    /// last step, and when a stop is requested; `0` (the default) saves nothing.
    fn every(&self) -> usize {
        0
    }

    /// Receives a run's state to keep (see [`Checkpoints::every`]).
    ///
    /// # Errors
    /// A failure to keep it, which ends the run with that error.
    fn save(&mut self, _state: &RunState) -> Result<()> {
        Ok(())
    }
}

/// Anything that answers all three hooks: what a training driver talks to
/// ([`FitHooks`], or an adapter that renumbers steps around it).
pub trait Hooks: Progress + RunControl + Checkpoints {}

impl<T: Progress + RunControl + Checkpoints + ?Sized> Hooks for T {}

/// The run-control hook as a [`FitHooks`] holds it: the caller's own, or only its stop
/// request ([`FitHooks::stop_only`]).
#[derive(Default)]
enum Control<'a> {
    #[default]
    None,
    Full(&'a mut dyn RunControl),
    StopOnly(&'a dyn RunControl),
}

/// The caller's hooks into a fit, each optional (see the module docs); built with
/// [`FitHooks::none`] or [`FitHooks::all`] and the setters.
#[derive(Default)]
pub struct FitHooks<'a> {
    /// The object answering every hook that no setter replaced ([`FitHooks::all`]).
    all: Option<&'a mut dyn Hooks>,
    progress: Option<&'a mut dyn Progress>,
    control: Control<'a>,
    checkpoints: Option<&'a mut dyn Checkpoints>,
}

impl<'a> FitHooks<'a> {
    /// No hooks: the fit reports nothing, never stops early and saves nothing.
    pub fn none() -> Self {
        FitHooks::default()
    }

    /// One object answering all three hooks (progress, run control, checkpoints); a
    /// setter called afterwards replaces that one role.
    pub fn all(hooks: &'a mut dyn Hooks) -> Self {
        FitHooks {
            all: Some(hooks),
            ..FitHooks::default()
        }
    }

    /// Reports progress to `progress`.
    pub fn progress(mut self, progress: &'a mut dyn Progress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Takes stop requests and the state to resume from from `control`.
    pub fn control(mut self, control: &'a mut dyn RunControl) -> Self {
        self.control = Control::Full(control);
        self
    }

    /// Hands the run's state to `checkpoints` at its cadence.
    pub fn checkpoints(mut self, checkpoints: &'a mut dyn Checkpoints) -> Self {
        self.checkpoints = Some(checkpoints);
        self
    }

    /// Whether the caller asks the run to stop ([`RunControl::should_stop`]; callable
    /// without importing the trait).
    pub fn should_stop(&self) -> bool {
        RunControl::should_stop(self)
    }

    /// Reports a step ([`Progress::on_step`]; callable without importing the trait).
    pub fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        Progress::on_step(self, step, total, objective);
    }

    /// Announces a phase ([`Progress::on_phase`]; callable without importing the trait).
    pub fn on_phase(&mut self, phase: &str) {
        Progress::on_phase(self, phase);
    }

    /// Only the stop request of these hooks: the hooks of a fit *inside* a fit or a
    /// build — random restarts, the candidates of a hyper-parameter search — whose steps,
    /// phases and checkpoints are not the caller's run but which must still end when the
    /// caller asks (e.g. on SIGTERM).
    pub fn stop_only(&self) -> FitHooks<'_> {
        let control = match (&self.control, &self.all) {
            (Control::Full(c), _) => Control::StopOnly(&**c),
            (Control::StopOnly(c), _) => Control::StopOnly(*c),
            (Control::None, Some(h)) => Control::StopOnly(&**h as &dyn RunControl),
            (Control::None, None) => Control::None,
        };
        FitHooks {
            all: None,
            progress: None,
            control,
            checkpoints: None,
        }
    }
}

impl Progress for FitHooks<'_> {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        if let Some(p) = self.progress.as_mut() {
            p.on_step(step, total, objective);
        } else if let Some(h) = self.all.as_mut() {
            h.on_step(step, total, objective);
        }
    }

    fn on_phase(&mut self, phase: &str) {
        if let Some(p) = self.progress.as_mut() {
            p.on_phase(phase);
        } else if let Some(h) = self.all.as_mut() {
            h.on_phase(phase);
        }
    }
}

impl RunControl for FitHooks<'_> {
    fn should_stop(&self) -> bool {
        match &self.control {
            Control::None => self.all.as_ref().is_some_and(|h| h.should_stop()),
            Control::Full(c) => c.should_stop(),
            Control::StopOnly(c) => c.should_stop(),
        }
    }

    fn take_resume_state(&mut self) -> Option<RunState> {
        match &mut self.control {
            Control::Full(c) => c.take_resume_state(),
            Control::None => self.all.as_mut().and_then(|h| h.take_resume_state()),
            Control::StopOnly(_) => None,
        }
    }
}

impl Checkpoints for FitHooks<'_> {
    fn every(&self) -> usize {
        match (&self.checkpoints, &self.all) {
            (Some(c), _) => c.every(),
            (None, Some(h)) => h.every(),
            (None, None) => 0,
        }
    }

    fn save(&mut self, state: &RunState) -> Result<()> {
        match (self.checkpoints.as_mut(), self.all.as_mut()) {
            (Some(c), _) => c.save(state),
            (None, Some(h)) => h.save(state),
            (None, None) => Ok(()),
        }
    }
}

impl std::fmt::Debug for FitHooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let control = match self.control {
            Control::None => "none",
            Control::Full(_) => "full",
            Control::StopOnly(_) => "stop only",
        };
        f.debug_struct("FitHooks")
            .field("all", &self.all.is_some())
            .field("progress", &self.progress.is_some())
            .field("control", &control)
            .field("checkpoints", &self.checkpoints.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::FitReport;

    /// Answers all three hooks and records what it was told.
    #[derive(Default)]
    struct Everything {
        steps: Vec<usize>,
        phases: Vec<String>,
        stop: bool,
        resume: Option<RunState>,
        saved: Vec<usize>,
    }

    impl Progress for Everything {
        fn on_step(&mut self, step: usize, _total: usize, _objective: f64) {
            self.steps.push(step);
        }
        fn on_phase(&mut self, phase: &str) {
            self.phases.push(phase.into());
        }
    }

    impl RunControl for Everything {
        fn should_stop(&self) -> bool {
            self.stop
        }
        fn take_resume_state(&mut self) -> Option<RunState> {
            self.resume.take()
        }
    }

    impl Checkpoints for Everything {
        fn every(&self) -> usize {
            7
        }
        fn save(&mut self, state: &RunState) -> Result<()> {
            self.saved.push(state.steps_done);
            Ok(())
        }
    }

    fn state(done: usize) -> RunState {
        RunState {
            version: crate::fit::RUN_STATE_VERSION,
            steps_done: done,
            steps: 10,
            seed: 0,
            batch_size: 1,
            n: 1,
            params: vec![],
            noise: crate::rng::seeded(1),
            stepper: serde_json::Value::Null,
            observers: vec![],
            report: FitReport::default(),
        }
    }

    #[test]
    fn no_hooks_do_nothing() {
        let mut h = FitHooks::none();
        h.on_step(0, 1, 0.0);
        h.on_phase("burn-in");
        assert!(!h.should_stop());
        assert!(h.take_resume_state().is_none());
        assert_eq!(h.every(), 0);
        assert!(h.save(&state(1)).is_ok());
        assert!(!h.stop_only().should_stop());
    }

    #[test]
    fn one_object_answers_every_role_and_a_setter_replaces_one() {
        let mut all = Everything {
            stop: true,
            resume: Some(state(3)),
            ..Everything::default()
        };
        let mut other = Everything::default();
        {
            let mut h = FitHooks::all(&mut all).progress(&mut other);
            h.on_step(4, 10, 1.0);
            h.on_phase("sampling");
            assert!(h.should_stop());
            assert_eq!(h.take_resume_state().map(|s| s.steps_done), Some(3));
            assert!(h.take_resume_state().is_none(), "taken once");
            assert_eq!(h.every(), 7);
            h.save(&state(5)).unwrap();
        }
        assert_eq!(
            (all.steps.len(), all.phases.len()),
            (0, 0),
            "progress replaced"
        );
        assert_eq!(
            (other.steps, other.phases),
            (vec![4], vec!["sampling".into()])
        );
        assert_eq!(all.saved, vec![5]);
    }

    #[test]
    fn separate_hooks_each_see_their_own_role() {
        let (mut p, mut c, mut k) = (
            Everything::default(),
            Everything {
                stop: true,
                ..Everything::default()
            },
            Everything::default(),
        );
        {
            let mut h = FitHooks::none()
                .progress(&mut p)
                .control(&mut c)
                .checkpoints(&mut k);
            h.on_step(0, 2, 0.5);
            assert!(h.should_stop());
            h.save(&state(2)).unwrap();
            assert_eq!(h.every(), 7);
        }
        assert_eq!((p.steps, c.steps.len(), k.steps.len()), (vec![0], 0, 0));
        assert_eq!((p.saved.len(), c.saved.len(), k.saved), (0, 0, vec![2]));
    }

    #[test]
    fn stop_only_forwards_the_stop_request_and_nothing_else() {
        let mut all = Everything {
            stop: true,
            resume: Some(state(1)),
            ..Everything::default()
        };
        let outer = FitHooks::all(&mut all);
        let mut inner = outer.stop_only();
        inner.on_step(0, 1, 0.0);
        assert!(inner.should_stop());
        assert!(inner.take_resume_state().is_none());
        assert_eq!(inner.every(), 0);
        inner.save(&state(1)).unwrap();
        assert!(inner.stop_only().should_stop(), "nested restarts stop too");
        assert!(all.steps.is_empty() && all.saved.is_empty() && all.resume.is_some());
    }
}
