//! The refit on every training row ([`crate::DsppConfig::refit_all_rows`]): the
//! parameters the main loop started from, trained again on all rows for the `k` steps the
//! held-out rule kept, with the same learning-rate schedule and seed.
//!
//! Two ways to the same model. After the main loop ([`refit_after`]), or beside it
//! ([`Alongside`]): when a full batch of every row is one gradient chunk
//! ([`GRAD_CHUNK_ROWS`]), the main loop's steps leave a second thread idle, so the refit
//! runs on it while the main loop runs, up to at most one evaluation period ahead of it,
//! and keeps its parameters at every evaluation step from the main loop's best so far
//! on. When the main loop ends at its kept step `k`, the refit's parameters at step `k`
//! are the model; the refit runs on to `k` if it is behind. Its steps are the same
//! computation as those of a refit started after the main loop (the step does not depend
//! on the run's length: the learning-rate schedule is the main loop's, the batches are
//! full), so both ways give the same model bit for bit.

use crate::model::{DsppModel, GRAD_CHUNK_ROWS};
use dgp_core::{Error, Result};
use dgp_data::{Dataset, RowSource};
use dgp_traits::model::{FitConfig, FitHooks, FitReport, Model, Objective};
use dgp_traits::optim::AdamConfig;
use dgp_traits::train::{
    AdamStepper, CallerHooks, Control, Executor, HeldOutStopping, Observer, StepInfo,
};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How long the refit waits before looking again when it is a period ahead of the main loop.
const AHEAD_WAIT: Duration = Duration::from_micros(200);

/// No target yet: the main loop is running.
const OPEN: usize = usize::MAX;

/// The refit after the main loop: replaces `model` by `start` trained on every row of
/// `data` for the `kept` steps the held-out rule chose, with the main loop's
/// learning-rate schedule (`adam`) and the fit's seed.
pub(crate) fn refit_after(
    model: &mut DsppModel,
    mut start: DsppModel,
    data: &dyn RowSource,
    cfg: &FitConfig,
    adam: AdamConfig,
    kept: usize,
    hooks: &mut FitHooks<'_>,
) -> Result<FitReport> {
    let refit_cfg = FitConfig {
        steps: kept,
        ..cfg.clone()
    };
    let mut progress = CallerHooks::new(hooks);
    let report = Executor::new(AdamStepper::new(adam), &refit_cfg)
        .observe(&mut progress)
        .run(&mut start, data)?;
    *model = start;
    Ok(report)
}

/// Whether the refit on every row of `data` can run beside the main loop: the rows are in
/// memory, a full batch of them is one gradient chunk, the caller's rayon pool has a
/// second thread, the process computes alone (a distributed launch keeps its collective
/// calls in one order) and no convergence stop could end the refit on its own.
pub(crate) fn can_run_alongside<'a>(
    data: &'a dyn RowSource,
    cfg: &FitConfig,
) -> Option<&'a Dataset> {
    let ok = data.n() <= GRAD_CHUNK_ROWS
        && rayon::current_num_threads() > 1
        && dgp_traits::distribute::runner().processes() == 1
        && cfg.convergence.is_none();
    data.in_memory().filter(|_| ok)
}

/// What the main loop tells the refit running beside it.
pub(crate) struct Alongside {
    /// Steps the main loop has finished.
    main_done: AtomicUsize,
    /// The main loop's best step so far (snapshots before it are not needed).
    best: AtomicUsize,
    /// The step whose parameters the refit ends with; [`OPEN`] while the main loop runs.
    target: AtomicUsize,
    /// The refit's parameters at the evaluation steps from `best` on.
    snaps: Mutex<Vec<(usize, Vec<f64>)>>,
    period: usize,
}

impl Alongside {
    /// For a main loop whose held-out rule evaluates every `period` steps.
    pub(crate) fn new(period: usize) -> Self {
        Alongside {
            main_done: AtomicUsize::new(0),
            best: AtomicUsize::new(0),
            target: AtomicUsize::new(OPEN),
            snaps: Mutex::new(Vec::new()),
            period: period.max(1),
        }
    }

    /// The refit: `start` trained on every row of `all` with the main loop's `steps`,
    /// schedule `adam` and seed, until the main loop has ended and the refit has reached
    /// the target; returns it with the parameters of the target step (`None` when the
    /// main loop ended without a kept step).
    pub(crate) fn refit(
        &self,
        mut start: DsppModel,
        all: &Dataset,
        cfg: &FitConfig,
        steps: usize,
        adam: AdamConfig,
    ) -> Result<Option<DsppModel>> {
        self.keep(0, &start)?;
        let refit_cfg = FitConfig {
            steps,
            ..cfg.clone()
        };
        let mut shadow = Shadow {
            link: self,
            failed: None,
        };
        let outcome = Executor::new(AdamStepper::new(adam), &refit_cfg)
            .observe(&mut shadow)
            .run(&mut start, all);
        // The refit must not outlive the main loop's decision, whatever happened to it.
        let target = self.wait_for_target();
        outcome?;
        if target == OPEN {
            return Ok(None);
        }
        let snaps = self.snaps.lock().map_err(|_| poisoned())?;
        let Some((_, flat)) = snaps.iter().find(|(at, _)| *at == target) else {
            // Only a step that failed before the target ends the refit short of it: the
            // refit after the held-out run would have failed there too.
            return Err(Error::Numerical(format!(
                "dspp refit on every row, before step {target}: {}",
                shadow.failed.as_deref().unwrap_or("the refit ended early")
            )));
        };
        start.params_mut().set_flat(flat)?;
        Ok(Some(start))
    }

    /// Called by the main loop after each step with its held-out rule.
    fn publish<F>(&self, done: usize, stop: &HeldOutStopping<F>) {
        if let Some(b) = stop.best_step() {
            self.best.store(b, Ordering::Release);
        }
        self.main_done.store(done, Ordering::Release);
    }

    /// The main loop has ended: the refit ends at `kept` (`None`: the refit is not used).
    /// Only the first call counts.
    pub(crate) fn finish(&self, kept: Option<usize>) {
        let _ = self.target.compare_exchange(
            OPEN,
            kept.unwrap_or(OPEN - 1),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    fn wait_for_target(&self) -> usize {
        loop {
            match self.target.load(Ordering::Acquire) {
                OPEN => std::thread::sleep(AHEAD_WAIT),
                t if t == OPEN - 1 => return OPEN,
                t => return t,
            }
        }
    }

    /// Keeps the refit's parameters after `done` steps, dropping those before the main
    /// loop's best step (its best only moves later).
    fn keep(&self, done: usize, model: &DsppModel) -> Result<()> {
        let best = self.best.load(Ordering::Acquire);
        let mut snaps = self.snaps.lock().map_err(|_| poisoned())?;
        snaps.retain(|(at, _)| *at >= best);
        snaps.push((done, model.params().flat()));
        Ok(())
    }
}

/// Ends the refit unused unless the main loop has told it its target: held by the main
/// loop's side, so that an error or a panic there never leaves the refit waiting.
pub(crate) struct FinishOnDrop<'a>(pub(crate) &'a Alongside);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.finish(None);
    }
}

fn poisoned() -> Error {
    Error::Numerical("dspp refit: a thread panicked while holding the refit's snapshots".into())
}

/// The refit's observer: keeps its parameters at the evaluation steps and ends it at the
/// target, never more than a period ahead of the main loop while that runs. A step that
/// fails numerically ends the refit without an error, the failure kept: it matters only
/// if it came before the target (the refit runs up to a period past the main loop).
struct Shadow<'a> {
    link: &'a Alongside,
    failed: Option<String>,
}

impl Observer<DsppModel> for Shadow<'_> {
    fn on_step(&mut self, model: &DsppModel, info: &StepInfo) -> Result<Control> {
        let done = info.step + 1;
        let link = self.link;
        if done.is_multiple_of(link.period) || done == info.steps {
            link.keep(done, model)?;
        }
        loop {
            let target = link.target.load(Ordering::Acquire);
            if target == OPEN - 1 || target != OPEN && done >= target {
                return Ok(Control::Stop);
            }
            if target != OPEN || done < link.main_done.load(Ordering::Acquire) + link.period {
                return Ok(Control::Continue);
            }
            std::thread::sleep(AHEAD_WAIT);
        }
    }

    fn absorbs_failure(&mut self, _model: &DsppModel, error: &Error) -> bool {
        self.failed = Some(error.to_string());
        true
    }
}

/// The main loop's held-out rule, publishing its progress and best step to the refit
/// beside it; otherwise exactly the rule.
pub(crate) struct Publishing<'a, F> {
    pub(crate) rule: HeldOutStopping<F>,
    pub(crate) link: &'a Alongside,
}

impl<F: FnMut(&DsppModel) -> f64> Observer<DsppModel> for Publishing<'_, F> {
    fn on_start(&mut self, model: &DsppModel, steps: usize) -> Result<()> {
        self.rule.on_start(model, steps)
    }

    fn on_step(&mut self, model: &DsppModel, info: &StepInfo) -> Result<Control> {
        let control = self.rule.on_step(model, info)?;
        self.link.publish(info.step + 1, &self.rule);
        Ok(control)
    }

    fn absorbs_failure(&mut self, model: &DsppModel, error: &Error) -> bool {
        self.rule.absorbs_failure(model, error)
    }

    fn on_finish(&mut self, model: &mut DsppModel) -> Result<()> {
        self.rule.on_finish(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DsppConfig;
    use dgp_traits::testing::toy_regression;

    /// A small model on `toy_regression(n, d, 1.5, seed)`, a full-batch fit of `steps`
    /// steps and its learning-rate schedule.
    fn set_up(
        n: usize,
        d: usize,
        seed: u64,
        steps: usize,
    ) -> (Dataset, DsppModel, FitConfig, AdamConfig) {
        let data = toy_regression(n, d, 1.5, seed);
        let cfg = DsppConfig {
            num_inducing: 10,
            sites: 3,
            ..Default::default()
        };
        let start = DsppModel::new(cfg, &data).unwrap();
        let fit = FitConfig {
            steps,
            seed: 3,
            ..Default::default()
        };
        let adam = start.adam_config(start.config().learning_rate, steps);
        (data, start, fit, adam)
    }

    /// A refit a period ahead of the main loop, whose target turns out to be behind it,
    /// returns its parameters at the target: those of a refit run for the target's steps.
    #[test]
    fn a_refit_past_its_target_returns_the_parameters_of_the_target_step() {
        let (data, start, fit, adam) = set_up(50, 2, 1, 200);
        let link = Alongside::new(10);
        link.best.store(30, Ordering::Release);
        link.main_done.store(100, Ordering::Release);
        let got = std::thread::scope(|s| {
            let side = s.spawn(|| link.refit(start.clone(), &data, &fit, 200, adam.clone()));
            // The refit goes one period past the main loop's 100 steps, then waits.
            while link.snaps.lock().unwrap().last().is_none_or(|s| s.0 < 110) {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(20));
            link.finish(Some(40));
            side.join().unwrap()
        });
        let got = got.unwrap().expect("a target step");
        let steps_kept: Vec<usize> = link.snaps.lock().unwrap().iter().map(|s| s.0).collect();
        assert_eq!(steps_kept, (3..=11).map(|k| 10 * k).collect::<Vec<_>>());
        let mut expected = start.clone();
        refit_after(
            &mut expected,
            start,
            &data,
            &fit,
            adam,
            40,
            &mut FitHooks::none(),
        )
        .unwrap();
        assert_eq!(got.params().flat(), expected.params().flat());
    }

    /// A main loop that ends without a kept step (an error, a panic) leaves the refit
    /// unused, and the refit does not wait for it.
    #[test]
    fn a_main_loop_without_a_kept_step_ends_the_refit_unused() {
        let (data, start, fit, adam) = set_up(30, 1, 2, 50);
        let link = Alongside::new(5);
        let got = std::thread::scope(|s| {
            let side = s.spawn(|| link.refit(start, &data, &fit, 50, adam));
            drop(FinishOnDrop(&link));
            side.join().unwrap()
        });
        assert!(got.unwrap().is_none());
    }
}
