//! [`StopFlag`]: a stop request shared between whoever asks (a signal handler, another
//! thread, a user interface) and the fits that poll it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::fit::RunControl;

/// The collective decision of a distributed launch: receives this process's flag, returns
/// whether any process of the launch has its flag set (every process calls it at the
/// same points).
type Agreement = Box<dyn Fn(bool) -> bool + Send + Sync>;

pub(crate) struct Inner {
    requested: AtomicBool,
    agreement: Option<Agreement>,
    agreed: AtomicBool,
}

impl Inner {
    /// Sets the local request (what a signal handler does).
    pub(crate) fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
    }
}

/// A stop request: a cheap, cloneable handle (clones share one flag) that answers
/// [`RunControl::should_stop`], so a fit given it ([`crate::fit::FitHooks::control`], or
/// through a [`crate::guard::Guard`]) ends after the step during which it was set.
///
/// In a distributed launch ([`StopFlag::collective`]) the answer is agreed: every
/// process polls at the same points in the same order, each contributes its own flag,
/// and all get the same answer, true when any process's flag is set; once true it stays
/// true without further exchanges, so every process stops after the same step.
///
/// ```
/// use dgp_traits::fit::RunControl;
/// use dgp_traits::guard::StopFlag;
/// let flag = StopFlag::new();
/// let other = flag.clone();
/// assert!(!flag.should_stop());
/// other.request();
/// assert!(flag.should_stop() && flag.is_requested());
/// ```
#[derive(Clone)]
pub struct StopFlag {
    inner: Arc<Inner>,
}

impl Default for StopFlag {
    fn default() -> Self {
        StopFlag::new()
    }
}

impl std::fmt::Debug for StopFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopFlag")
            .field("requested_here", &self.requested_here())
            .field("collective", &self.inner.agreement.is_some())
            .field("agreed", &self.agreed())
            .finish()
    }
}

impl StopFlag {
    /// A flag of this process alone, not set.
    pub fn new() -> Self {
        StopFlag {
            inner: Arc::new(Inner {
                requested: AtomicBool::new(false),
                agreement: None,
                agreed: AtomicBool::new(false),
            }),
        }
    }

    /// A flag whose answer is agreed between the processes of a distributed launch:
    /// `agree` receives this process's flag and returns whether any process has its flag
    /// set. It is called by [`StopFlag::is_requested`] (until the first `true`), so every
    /// process must poll at the same points in the same order — as the executor does,
    /// after every step.
    pub fn collective(agree: impl Fn(bool) -> bool + Send + Sync + 'static) -> Self {
        StopFlag {
            inner: Arc::new(Inner {
                requested: AtomicBool::new(false),
                agreement: Some(Box::new(agree)),
                agreed: AtomicBool::new(false),
            }),
        }
    }

    /// Asks every fit polling this flag (or a clone) to stop after its current step.
    pub fn request(&self) {
        self.inner.request();
    }

    /// Whether a stop was asked for: this process's request, or, for a
    /// [collective](StopFlag::collective) flag, the launch's agreed answer (an exchange
    /// with the other processes until the answer is true).
    pub fn is_requested(&self) -> bool {
        let local = self.requested_here();
        let Some(agree) = &self.inner.agreement else {
            return local;
        };
        if self.agreed() {
            return true;
        }
        let all = agree(local);
        if all {
            self.inner.agreed.store(true, Ordering::SeqCst);
        }
        all
    }

    /// Whether a stop was asked for in this process (no exchange with other processes).
    pub fn requested_here(&self) -> bool {
        self.inner.requested.load(Ordering::SeqCst)
    }

    /// Whether the processes of a distributed launch agreed to stop (a collective flag
    /// answered true): then every process is ending its run at the same point. Always
    /// `false` for a flag of one process.
    pub fn agreed(&self) -> bool {
        self.inner.agreed.load(Ordering::SeqCst)
    }

    /// The shared flag (for the signal handler's registry).
    pub(crate) fn shared(&self) -> &Arc<Inner> {
        &self.inner
    }
}

impl RunControl for StopFlag {
    fn should_stop(&self) -> bool {
        self.is_requested()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn clones_share_one_flag() {
        let a = StopFlag::new();
        let b = a.clone();
        assert!(!b.is_requested() && !b.requested_here());
        a.request();
        assert!(b.is_requested() && b.requested_here());
        assert!(!b.agreed(), "one process agrees with no one");
    }

    /// A collective flag asks the launch until the answer is true, then latches it
    /// without asking again.
    #[test]
    fn a_collective_flag_latches_the_launch_answer() {
        let calls = Arc::new(AtomicUsize::new(0));
        let others = Arc::new(AtomicBool::new(false));
        let (c, o) = (calls.clone(), others.clone());
        let flag = StopFlag::collective(move |local| {
            c.fetch_add(1, Ordering::SeqCst);
            local || o.load(Ordering::SeqCst)
        });
        assert!(!flag.is_requested());
        assert!(!flag.is_requested());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // Another process saw a signal: this one (which saw none) stops too.
        others.store(true, Ordering::SeqCst);
        assert!(flag.is_requested() && flag.agreed() && !flag.requested_here());
        assert!(flag.is_requested());
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "latched: no further exchange"
        );
    }
}
