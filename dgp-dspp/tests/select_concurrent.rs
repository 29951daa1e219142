//! The selection's candidates trained side by side ([`dgp_dspp::select_model`]): the same
//! scores bit for bit on one thread (one after another) and on two (side by side), and
//! the caller's stop request reaching every running candidate.

use std::cell::Cell;
use std::time::{Duration, Instant};

use dgp_core::Error;
use dgp_dspp::{DsppConfig, select_model};
use dgp_traits::fit::RunControl;
use dgp_traits::model::{FitConfig, FitHooks};
use dgp_traits::testing::{StopAfter, assert_same_on_one_and_two_threads, toy_regression};

fn base() -> DsppConfig {
    DsppConfig {
        num_inducing: 6,
        sites: 3,
        learning_rate: 0.05,
        ..Default::default()
    }
}

fn on_threads<T: Send>(threads: usize, run: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(run)
}

#[test]
fn candidates_score_the_same_on_one_and_two_threads() {
    let data = toy_regression(90, 2, 1.0, 7);
    let fit = FitConfig {
        steps: 120,
        ..Default::default()
    };
    assert_same_on_one_and_two_threads(|| {
        let sel = select_model(
            &data,
            &base(),
            &[0.01, 0.2, 1.0],
            &[2, 3],
            true,
            &fit,
            3,
            &FitHooks::none(),
        )
        .unwrap();
        assert_eq!(sel.scores.len(), 6 + 3);
        assert!(sel.scores.iter().all(|s| s.val_nll.is_finite()), "{sel:?}");
        sel
    });
}

/// Asks to stop from its `after`-th poll on.
struct StopAfterPolls {
    polls: Cell<usize>,
    after: usize,
}

impl RunControl for StopAfterPolls {
    fn should_stop(&self) -> bool {
        self.polls.set(self.polls.get() + 1);
        self.polls.get() >= self.after
    }
}

fn endless() -> (DsppConfig, FitConfig) {
    let base = DsppConfig {
        early_stopping: None,
        ..base()
    };
    let fit = FitConfig {
        steps: 100_000_000,
        ..Default::default()
    };
    (base, fit)
}

#[test]
fn a_stop_before_the_search_reaches_the_candidates_side_by_side() {
    let data = toy_regression(60, 2, 1.0, 4);
    let (base, fit) = endless();
    let (e, polls) = on_threads(2, || {
        let mut stop = StopAfter::new(0);
        let hooks = FitHooks::all(&mut stop);
        let e =
            select_model(&data, &base, &[0.01, 1.0], &[2, 3], false, &fit, 0, &hooks).unwrap_err();
        (e, stop.polls.get())
    });
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    assert!(e.to_string().contains("candidate 1 of 4"), "{e}");
    // The calling thread asked once, before any candidate started; every candidate then
    // ended after its first step.
    assert_eq!(polls, 1);
}

#[test]
fn a_stop_during_the_search_ends_every_running_candidate() {
    let data = toy_regression(60, 2, 1.0, 4);
    let (base, fit) = endless();
    let started = Instant::now();
    let (e, polls) = on_threads(2, || {
        let mut stop = StopAfterPolls {
            polls: Cell::new(0),
            after: 5,
        };
        let hooks = FitHooks::none().control(&mut stop);
        let e =
            select_model(&data, &base, &[0.01, 1.0], &[2, 3], true, &fit, 0, &hooks).unwrap_err();
        (e, stop.polls.get())
    });
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    assert!(e.to_string().contains("during candidate"), "{e}");
    assert_eq!(polls, 5);
    // 10⁸ steps per candidate would take hours; the relayed request ends them in
    // milliseconds.
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}
