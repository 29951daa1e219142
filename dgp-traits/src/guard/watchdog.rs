//! The watchdog of a stuck step ([`crate::guard::Guard::exit_when_stuck`]): after a stop
//! request, a step that does not end within max([`STUCK_STEP_MULTIPLE`] × the median of
//! the run's earlier steps, [`STUCK_STEP_MIN_SECONDS`]) — counted from the request and
//! from the end of the last step or checkpoint write, a write in progress never being cut
//! short — ends the process with exit status [`EXIT_WHEN_STUCK`], after printing what
//! was kept. Exiting rather than waiting longer: a step 20 times slower than its
//! predecessors is not about to end, and the user asked to stop; the last checkpoint is
//! intact, as a checkpoint is only ever replaced by an atomic rename.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::guard::stop::StopFlag;

/// A step that has not ended this many times the median of the run's earlier steps after
/// a stop request counts as stuck.
pub const STUCK_STEP_MULTIPLE: f64 = 20.0;

/// The least time a stop request waits for the step in progress, seconds (also the wait
/// when no step has ended yet, e.g. during the first step or the model's build).
pub const STUCK_STEP_MIN_SECONDS: f64 = 5.0;

/// Exit status of a process ended by the watchdog (that of an interrupted program).
pub const EXIT_WHEN_STUCK: i32 = 130;

/// Durations of the run's steps kept for the median (the most recent ones).
const STEP_WINDOW: usize = 256;

/// How often the watchdog looks.
const POLL: Duration = Duration::from_millis(50);

/// What the watchdog knows of the run, updated by the guard.
#[derive(Debug, Default)]
pub(crate) struct StepClock {
    /// The guard was dropped: the watchdog ends.
    pub(crate) done: bool,
    /// When the last step or checkpoint write ended.
    pub(crate) last: Option<Instant>,
    /// Seconds of the run's most recent steps.
    durations: VecDeque<f64>,
    /// A checkpoint write is in progress.
    pub(crate) saving: bool,
    /// The run's checkpoint file and the step of the state it holds, when checkpointing.
    pub(crate) checkpoint: Option<(PathBuf, Option<usize>)>,
}

impl StepClock {
    /// A step ended now.
    pub(crate) fn step_ended(&mut self) {
        let now = Instant::now();
        if let Some(t) = self.last {
            if self.durations.len() == STEP_WINDOW {
                self.durations.pop_front();
            }
            self.durations.push_back((now - t).as_secs_f64());
        }
        self.last = Some(now);
    }

    /// How long a stop request waits for the step in progress, and the median step.
    fn limit(&self) -> (f64, Option<f64>) {
        let mut v: Vec<f64> = self.durations.iter().copied().collect();
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
}

pub(crate) type Clock = Arc<Mutex<StepClock>>;

pub(crate) fn lock(clock: &Clock) -> MutexGuard<'_, StepClock> {
    clock.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the watchdog found: handed to the message of
/// [`crate::guard::Guard::exit_when_stuck`] before the process exits.
#[derive(Clone, Debug, PartialEq)]
pub struct Stuck {
    /// Seconds since the stop request.
    pub waited: f64,
    /// The wait that ran out, seconds.
    pub limit: f64,
    /// The median of the run's earlier steps, seconds (`None`: no step had ended).
    pub median_step: Option<f64>,
    /// The run's checkpoint file and the step of the state it holds (`None` inside: no
    /// state saved yet); `None` when the run does not checkpoint.
    pub checkpoint: Option<(PathBuf, Option<usize>)>,
}

impl Stuck {
    /// The limit in words: "20 × the median step of 1.234 ms, at least 5 s", or "5 s: no
    /// step has ended yet".
    pub fn limit_text(&self) -> String {
        self.median_step.map_or(
            format!("{STUCK_STEP_MIN_SECONDS} s: no step of this run has ended yet"),
            |m| {
                format!(
                    "{STUCK_STEP_MULTIPLE} × the median step of {:.3} ms, at least \
                     {STUCK_STEP_MIN_SECONDS} s",
                    m * 1e3
                )
            },
        )
    }

    /// The library's message: what happened and what was kept.
    pub fn message(&self) -> String {
        let kept = match &self.checkpoint {
            Some((p, Some(step))) => format!(
                "The last checkpoint, {} (step {step}), is intact (a checkpoint is replaced \
                 atomically, never written in place); run the same fit on the same checkpoint \
                 directory to continue from it",
                p.display()
            ),
            Some((p, None)) => format!(
                "No checkpoint had been saved yet ({} was not written)",
                p.display()
            ),
            None => "Nothing was saved (the fit does not checkpoint)".to_string(),
        };
        format!(
            "interrupted: the training step in progress has not ended {:.1} s after the stop \
             request (the limit is {}): it looks stuck, so the process ends without it. {kept}",
            self.waited,
            self.limit_text()
        )
    }
}

/// The message the watchdog prints before the process exits (`None`: print nothing).
pub(crate) type StuckMessage = Arc<dyn Fn(&Stuck) -> Option<String> + Send + Sync>;

/// Starts the watchdog of the run whose clock is `clock` (see the module docs); it ends
/// when the clock says `done`.
pub(crate) fn spawn(clock: Clock, stop: StopFlag, message: StuckMessage) {
    let _ = std::thread::Builder::new()
        .name("stuck-step watchdog".into())
        .spawn(move || watch(&clock, &stop, &*message));
}

fn watch(
    clock: &Clock,
    stop: &StopFlag,
    message: &(dyn Fn(&Stuck) -> Option<String> + Send + Sync),
) {
    let mut requested: Option<Instant> = None;
    loop {
        std::thread::sleep(POLL);
        let c = lock(clock);
        if c.done {
            return;
        }
        // This process's own request only: a collective answer would need the other
        // processes, which are busy training.
        if !stop.requested_here() {
            continue;
        }
        let since = *requested.get_or_insert_with(Instant::now);
        if c.saving {
            continue;
        }
        let (wait, median) = c.limit();
        let now = Instant::now();
        let since_request = (now - since).as_secs_f64();
        let since_step = c.last.map_or(since_request, |t| (now - t).as_secs_f64());
        if since_request < wait || since_step < wait {
            continue;
        }
        let stuck = Stuck {
            waited: since_request,
            limit: wait,
            median_step: median,
            checkpoint: c.checkpoint.clone(),
        };
        if let Some(text) = message(&stuck) {
            eprintln!("{text}");
        }
        std::process::exit(EXIT_WHEN_STUCK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_twenty_median_steps_and_at_least_five_seconds() {
        let mut c = StepClock::default();
        assert_eq!(c.limit(), (STUCK_STEP_MIN_SECONDS, None));
        c.durations.extend([0.1, 0.9, 0.5]);
        assert_eq!(c.limit(), (10.0, Some(0.5)));
        c.durations.clear();
        c.durations.extend([0.001, 0.003]);
        assert_eq!(c.limit(), (STUCK_STEP_MIN_SECONDS, Some(0.002)));
        for _ in 0..STEP_WINDOW + 10 {
            c.step_ended();
        }
        assert_eq!(c.durations.len(), STEP_WINDOW);
    }

    #[test]
    fn the_message_names_the_intact_checkpoint() {
        let s = Stuck {
            waited: 5.2,
            limit: 5.0,
            median_step: Some(0.001),
            checkpoint: Some((PathBuf::from("ck/state.json"), Some(10))),
        };
        let m = s.message();
        assert!(
            m.contains("looks stuck") && m.contains("ck/state.json (step 10), is intact"),
            "{m}"
        );
        assert!(s.limit_text().contains("1.000 ms"));
    }
}
