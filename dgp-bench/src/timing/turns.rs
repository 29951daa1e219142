//! The interleaving machinery of `dgp-bench time`: one thread per backend runs that
//! backend's own [`Model::fit`], and a baton passed over channels lets exactly one of them
//! compute at a time, for a block of steps, in the order the coordinator chooses.
//!
//! A backend's thread waits for its first turn before it builds the model, so building
//! (k-means, Cholesky factors) never overlaps another backend's timed steps. Inside `fit`
//! the [`TurnObserver`] (a [`Progress`] hook) timestamps every `on_step`: the interval from
//! the previous step's `on_step` (or from the moment the turn was granted) to this one is
//! exactly one step of the backend's real training loop — minibatch gather, the stepper
//! (Adam; natural gradient + Adam; SGHMC with its MCEM hyper step during burn-in), the
//! executor's observers. At the end of its block the observer hands the baton back and
//! blocks until its next turn, so waiting is never timed. The first step of a fit also
//! carries the fit's set-up (allocating buffers, starting the stepper) and is not kept.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Instant;

use dgp_data::Dataset;
use dgp_traits::fit::{FitHooks, LrSchedule, Progress};
use dgp_traits::model::{FitConfig, Model};

use crate::backends::{ArchSpec, BackendEntry};
use crate::error::{BenchError, Result};

/// One timed step: the turn it ran in (0 = warm-up), its phase (index into
/// [`WorkerOutput::phases`], `None` before any `on_phase`) and its milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct StepTime {
    /// Turn (0 = the warm-up turn, then one per round).
    pub turn: usize,
    /// Phase index, if the backend announced phases.
    pub phase: Option<usize>,
    /// Milliseconds of the step.
    pub ms: f64,
}

/// What one backend's thread hands back.
pub(crate) struct WorkerOutput {
    /// The model after its fit (for the prediction timing).
    pub model: Box<dyn Model>,
    /// Every step after the first, in order.
    pub times: Vec<StepTime>,
    /// Names of the phases the backend announced (`Progress::on_phase`), in order.
    pub phases: Vec<String>,
    /// Steps the fit ran.
    pub steps_run: usize,
}

/// One backend to run: its entry, architecture and the fit settings of its whole run.
pub(crate) struct Job<'a> {
    /// Backend.
    pub backend: &'static BackendEntry,
    /// Architecture.
    pub arch: &'a ArchSpec,
    /// Learning rate of the backend's optimiser (constant schedule).
    pub learning_rate: f64,
    /// Fit settings (`steps` = warm-up + timed steps).
    pub fit: FitConfig,
    /// Standardised training data.
    pub train: &'a Dataset,
}

enum Event {
    /// The backend finished its block and waits.
    TurnDone,
    /// The backend's fit returned.
    Finished,
    /// Building or training failed (or the thread panicked).
    Failed(BenchError),
}

/// Sends [`Event::Failed`] if the worker ends without reporting (a panic).
struct Guard {
    tx: Sender<Event>,
    armed: bool,
}

impl Guard {
    fn send(&mut self, e: Event) {
        self.armed = false;
        let _ = self.tx.send(e);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.tx.send(Event::Failed(BenchError::Usage(
                "time: a backend's thread panicked".into(),
            )));
        }
    }
}

/// Timestamps steps and passes the baton (see the module docs).
struct TurnObserver {
    go: Receiver<usize>,
    events: Sender<Event>,
    /// Steps left in the current turn.
    remaining: usize,
    /// The fit's planned steps: after the last one the observer does not wait.
    total: usize,
    turn: usize,
    /// The coordinator has gone (an error elsewhere): run on without waiting.
    detached: bool,
    last: Instant,
    steps: usize,
    phase: Option<usize>,
    phases: Vec<String>,
    times: Vec<StepTime>,
}

impl Progress for TurnObserver {
    fn on_step(&mut self, _step: usize, _total: usize, _objective: f64) {
        let ms = self.last.elapsed().as_secs_f64() * 1e3;
        if self.steps > 0 {
            self.times.push(StepTime {
                turn: self.turn,
                phase: self.phase,
                ms,
            });
        }
        self.steps += 1;
        self.remaining = self.remaining.saturating_sub(1);
        if !self.detached && self.remaining == 0 && self.steps < self.total {
            let _ = self.events.send(Event::TurnDone);
            match self.go.recv() {
                Ok(n) => {
                    self.remaining = n;
                    self.turn += 1;
                }
                Err(_) => self.detached = true,
            }
        }
        self.last = Instant::now();
    }

    fn on_phase(&mut self, phase: &str) {
        let k = match self.phases.iter().position(|p| p == phase) {
            Some(k) => k,
            None => {
                self.phases.push(phase.to_string());
                self.phases.len() - 1
            }
        };
        self.phase = Some(k);
    }
}

/// The body of one backend's thread.
fn worker(job: Job<'_>, go: Receiver<usize>, events: Sender<Event>) -> Option<WorkerOutput> {
    let mut guard = Guard {
        tx: events.clone(),
        armed: true,
    };
    let Ok(first) = go.recv() else {
        guard.armed = false;
        return None;
    };
    let label = format!("time {} L={}", job.backend.name(), job.arch.layers);
    let mut model = match job.backend.build_model(
        job.arch,
        job.learning_rate,
        &LrSchedule::Constant,
        &job.fit,
        job.train,
        &FitHooks::none(),
    ) {
        Ok(m) => m,
        Err(e) => {
            guard.send(Event::Failed(e));
            return None;
        }
    };
    let mut obs = TurnObserver {
        go,
        events,
        remaining: first,
        total: job.fit.steps,
        turn: 0,
        detached: false,
        last: Instant::now(),
        steps: 0,
        phase: None,
        phases: Vec::new(),
        times: Vec::new(),
    };
    match model.fit(
        job.train,
        &job.fit,
        &mut FitHooks::none().progress(&mut obs),
    ) {
        Ok(_) => {
            guard.send(Event::Finished);
            Some(WorkerOutput {
                model,
                times: obs.times,
                phases: obs.phases,
                steps_run: obs.steps,
            })
        }
        Err(e) => {
            guard.send(Event::Failed(BenchError::run(
                format!("{label}: training"),
                e,
            )));
            None
        }
    }
}

/// The turns of a run: the warm-up turn (every backend in registration order, `warmup`
/// steps), then `⌈steps/block⌉` rounds in which backend `(r + j) mod k` goes `j`-th (so
/// every backend is first, second, … equally often), each for `block` steps (the last
/// round the rest).
pub(crate) fn schedule(k: usize, warmup: usize, steps: usize, block: usize) -> Vec<(usize, usize)> {
    let mut turns: Vec<(usize, usize)> = (0..k).map(|i| (i, warmup)).collect();
    let block = block.max(1);
    let rounds = steps.div_ceil(block);
    for r in 0..rounds {
        let n = block.min(steps - r * block);
        turns.extend((0..k).map(|j| ((r + j) % k, n)));
    }
    turns
}

/// Runs `jobs` interleaved by [`schedule`] (warm-up turn of `warmup ≥ 1` steps, then
/// blocks of `block`) and returns each backend's output in job order.
///
/// # Errors
/// The first build or training error of any backend (the other threads then finish their
/// fits without waiting and are joined).
pub(crate) fn run_interleaved(
    jobs: Vec<Job<'_>>,
    warmup: usize,
    steps: usize,
    block: usize,
) -> Result<Vec<WorkerOutput>> {
    let k = jobs.len();
    std::thread::scope(|s| {
        let (ev_tx, ev_rx) = channel::<Event>();
        let mut gos: Vec<Option<Sender<usize>>> = Vec::with_capacity(k);
        let mut handles = Vec::with_capacity(k);
        for job in jobs {
            let (gtx, grx) = channel::<usize>();
            gos.push(Some(gtx));
            let tx = ev_tx.clone();
            handles.push(s.spawn(move || worker(job, grx, tx)));
        }
        drop(ev_tx);
        let driven = drive(&mut gos, &ev_rx, &schedule(k, warmup.max(1), steps, block));
        drop(gos);
        let mut out = Vec::with_capacity(k);
        for h in handles {
            out.push(h.join().ok().flatten());
        }
        driven?;
        out.into_iter()
            .map(|o| o.ok_or_else(|| BenchError::Usage("time: a backend did not finish".into())))
            .collect()
    })
}

/// Grants the turns of `turns` one at a time and waits for each to end.
fn drive(
    gos: &mut [Option<Sender<usize>>],
    events: &Receiver<Event>,
    turns: &[(usize, usize)],
) -> Result<()> {
    for &(i, n) in turns {
        let Some(tx) = &gos[i] else { continue };
        if tx.send(n).is_err() {
            gos[i] = None;
            continue;
        }
        match events.recv() {
            Ok(Event::TurnDone) => {}
            Ok(Event::Finished) => gos[i] = None,
            Ok(Event::Failed(e)) => return Err(e),
            Err(_) => {
                return Err(BenchError::Usage(
                    "time: every backend's thread ended early".into(),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::schedule;

    #[test]
    fn schedule_rotates_the_order_and_covers_every_step() {
        let t = schedule(3, 2, 7, 3);
        assert_eq!(&t[..3], &[(0, 2), (1, 2), (2, 2)]);
        assert_eq!(&t[3..6], &[(0, 3), (1, 3), (2, 3)]);
        assert_eq!(&t[6..9], &[(1, 3), (2, 3), (0, 3)]);
        assert_eq!(&t[9..], &[(2, 1), (0, 1), (1, 1)]);
        for b in 0..3 {
            let timed: usize = t[3..].iter().filter(|x| x.0 == b).map(|x| x.1).sum();
            assert_eq!(timed, 7);
        }
    }
}
