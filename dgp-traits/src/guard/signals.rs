//! SIGINT/SIGTERM/SIGHUP as stop requests (opt-in): [`stop_on_signals`] registers a
//! [`StopFlag`] with the process's one signal handler (the `ctrlc` crate, installed on
//! the first registration).
//!
//! * The **first** signal sets every registered flag that is still alive (a flag whose
//!   clones were all dropped is forgotten), so each fit polling one ends after its
//!   current step — saving its state first when it checkpoints. With
//!   [`Announce::Stderr`] a line on standard error says so.
//! * A **second** signal, or a first one while no registered flag is alive (nothing would
//!   act on it), ends the process at once with exit status 130, as the default action of
//!   an interrupt would (a checkpoint is replaced atomically, so the last one is intact).
//!
//! The handler and its registry are the only process-wide state of [`crate::guard`]: a
//! signal reaches a process, not a fit. A program that installs its own handler for these
//! signals cannot also use this one: [`stop_on_signals`] then returns an error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, Weak};

use crate::error::{Error, Result};
use crate::guard::stop::{Inner, StopFlag};

/// Whether the handler announces a signal on standard error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Announce {
    /// A line on standard error for the first signal ("finishing the current step") and
    /// the second ("exiting now").
    #[default]
    Stderr,
    /// Nothing (e.g. the processes of a distributed launch other than the one that
    /// reports).
    Quiet,
}

/// The flags the handler sets, and whether each asked for announcements.
static REGISTRY: Mutex<Vec<(Weak<Inner>, Announce)>> = Mutex::new(Vec::new());

/// The outcome of installing the handler (once per process).
static HANDLER: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Signals received so far.
static RECEIVED: AtomicUsize = AtomicUsize::new(0);

/// Exit status of a process ended by a second signal (128 + SIGINT's number, the shell's
/// convention for an interrupted program).
pub const EXIT_ON_SIGNAL: i32 = 130;

/// Makes SIGINT, SIGTERM and SIGHUP set `flag` (see the module docs); installs the
/// process's handler on the first call. Registering several flags is fine (each is set);
/// registering the same one twice is harmless.
///
/// # Errors
/// [`Error::Unsupported`] when the handler cannot be installed (another handler for these
/// signals was installed through `ctrlc` already, or the platform refuses).
pub fn stop_on_signals(flag: &StopFlag, announce: Announce) -> Result<()> {
    let installed =
        HANDLER.get_or_init(|| ctrlc::set_handler(on_signal).map_err(|e| e.to_string()));
    if let Err(e) = installed {
        return Err(Error::Unsupported(format!(
            "stopping on SIGINT/SIGTERM: cannot install the signal handler: {e}"
        )));
    }
    let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    registry.retain(|(f, _)| f.strong_count() > 0);
    registry.push((std::sync::Arc::downgrade(flag.shared()), announce));
    Ok(())
}

/// The handler (runs on `ctrlc`'s own thread, not in signal context).
fn on_signal() {
    let first = RECEIVED.fetch_add(1, Ordering::SeqCst) == 0;
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let live: Vec<_> = registry
        .iter()
        .filter_map(|(f, a)| f.upgrade().map(|f| (f, *a)))
        .collect();
    drop(registry);
    let announce = live.iter().any(|(_, a)| *a == Announce::Stderr);
    if !first || live.is_empty() {
        if announce {
            eprintln!("\nsecond interrupt: exiting now");
        }
        std::process::exit(EXIT_ON_SIGNAL);
    }
    for (f, _) in &live {
        f.request();
    }
    if announce {
        eprintln!("\ninterrupt: finishing the current step, then stopping (again to exit now)");
    }
}
