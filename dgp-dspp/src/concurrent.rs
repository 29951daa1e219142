//! Independent fits run side by side — the candidates of a selection on validation rows
//! ([`crate::select_model`]) — with the caller's stop request relayed to each of them.
//!
//! The caller's [`FitHooks`] are not thread-safe (a harness keeps counters in cells), so
//! the jobs never see them: the calling thread polls [`FitHooks::should_stop`] every
//! [`STOP_POLL`] while the jobs run on a pool of as many threads as the caller's rayon
//! pool, and a set flag is what each job's own hooks answer. Every job owns its seeds,
//! so the results, returned in job order, do not depend on the number of threads or on
//! which thread ran which job.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dgp_traits::fit::RunControl;
use dgp_traits::model::FitHooks;
use rayon::prelude::*;

/// How often the calling thread polls the caller's stop request while jobs run.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(10);

/// A job's run control: the relayed stop request.
struct Relay<'a>(&'a AtomicBool);

impl RunControl for Relay<'_> {
    fn should_stop(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// `job(i, item, hooks)` for every item, in item order. With more than one thread in the
/// caller's rayon pool and a process that computes alone
/// ([`dgp_traits::distribute::runner`]: a distributed launch needs every process to make
/// its collective calls in the same order, so its jobs run one after another), the jobs
/// run concurrently on a pool of that many threads; `hooks` then answer only the relayed
/// stop request of `stop`, and a job started after the request sees it at once.
/// Otherwise the jobs run in order with `stop`'s stop request ([`FitHooks::stop_only`]),
/// and the items after one whose result `is_final` says ends the run are not run.
///
/// Either way the result of each job that ran is what it returns for its item, whatever
/// the thread count; a job that did not run (sequential runs after a final result) is
/// absent, so the returned vector is a prefix of the items.
pub(crate) fn run_all<T, R, F>(
    items: &[T],
    stop: &FitHooks<'_>,
    is_final: impl Fn(&R) -> bool,
    job: F,
) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(usize, &T, &FitHooks<'_>) -> R + Sync,
{
    let threads = rayon::current_num_threads();
    let alone = dgp_traits::distribute::runner().processes() == 1;
    let pool = (threads > 1 && alone && items.len() > 1)
        .then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .ok()
        })
        .flatten();
    let Some(pool) = pool else {
        let hooks = stop.stop_only();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let r = job(i, item, &hooks);
            let done = is_final(&r);
            out.push(r);
            if done {
                break;
            }
        }
        return out;
    };
    let flag = AtomicBool::new(stop.should_stop());
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            pool.install(|| {
                // One item per job: the jobs are long and of unequal cost (a deep
                // candidate costs several one-layer ones), so idle threads steal single
                // jobs instead of waiting on a thread that holds a run of them.
                items
                    .par_iter()
                    .with_max_len(1)
                    .enumerate()
                    .map(|(i, item)| {
                        let mut relay = Relay(&flag);
                        let hooks = FitHooks::none().control(&mut relay);
                        job(i, item, &hooks)
                    })
                    .collect::<Vec<R>>()
            })
        });
        while !worker.is_finished() {
            if !flag.load(Ordering::Relaxed) && stop.should_stop() {
                flag.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(STOP_POLL);
        }
        match worker.join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
