//! Progress of a sampler run: the global step within the whole schedule, the phase
//! (burn-in / sampling) and the running objective, forwarded to the caller's
//! [`FitHooks`].

use crate::sghmc::sampler::SghmcSchedule;
use dgp_core::Result;
use dgp_traits::fit::FitHooks;
#[cfg(doc)]
use dgp_traits::fit::{Progress, RunControl};
use dgp_traits::train::{Control, Observer, StepInfo};

/// Forwards each step to the caller's [`Progress`] as `on_step(global step, schedule
/// total, objective)` — a resumed run continues the count — and announces each phase with
/// [`Progress::on_phase`] (`"burn-in"`, then `"sampling"`); ends the run after the
/// current step when the caller's [`RunControl::should_stop`] turns true.
pub struct PhaseProgress<'a, 'h> {
    inner: &'a mut FitHooks<'h>,
    schedule: SghmcSchedule,
    offset: usize,
    phase: Option<&'static str>,
}

impl<'a, 'h> PhaseProgress<'a, 'h> {
    /// Progress of a run of `schedule` that starts after `done` steps.
    pub fn new(inner: &'a mut FitHooks<'h>, schedule: SghmcSchedule, done: usize) -> Self {
        PhaseProgress {
            inner,
            schedule,
            offset: done,
            phase: None,
        }
    }

    fn phase_of(&self, t: usize) -> &'static str {
        if self.schedule.is_burn_in(t) {
            "burn-in"
        } else {
            "sampling"
        }
    }
}

impl<M: ?Sized> Observer<M> for PhaseProgress<'_, '_> {
    fn on_start(&mut self, _model: &M, _steps: usize) -> Result<()> {
        let p = self.phase_of(self.offset);
        self.phase = Some(p);
        self.inner.on_phase(p);
        Ok(())
    }

    fn on_step(&mut self, _model: &M, info: &StepInfo) -> Result<Control> {
        let t = self.offset + info.step;
        self.inner.on_step(t, self.schedule.total(), info.value);
        let next = self.phase_of(t + 1);
        if t + 1 < self.schedule.total() && self.phase != Some(next) {
            self.phase = Some(next);
            self.inner.on_phase(next);
        }
        // The sampler keeps what it has drawn; the caller learns of the stop from its own
        // flag (the executor polls `should_stop` only through `caller_hooks`, which this
        // observer does not offer: the sampler resumes from its model JSON).
        if self.inner.should_stop() {
            return Ok(Control::Stop);
        }
        Ok(Control::Continue)
    }
}
