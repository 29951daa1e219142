//! `dgp-bench`: see `dgp-bench --help` and the library docs.

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use dgp_bench::cli::{Cli, clap_error_line, execute};

/// Training allocates large per-step matrices; glibc's allocator returned them to the OS
/// every step (page faults were ~20 % of a small model's step), mimalloc keeps them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Replaces the panic message + backtrace by one line (a panic is a bug in the library,
/// never the user's fault). With `RUST_BACKTRACE` set, the default hook runs instead.
fn install_panic_hook() {
    if std::env::var_os("RUST_BACKTRACE").is_some() {
        return;
    }
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "error: internal error (a bug in dgp-bench or a backend; rerun with RUST_BACKTRACE=1 to report it): {}{at}",
            msg.replace('\n', "; ")
        );
    }));
}

fn main() -> ExitCode {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                _ => {
                    eprintln!("error: {}", clap_error_line(&e));
                    ExitCode::from(2)
                }
            };
        }
    };
    // Run inside rayon's pool, so that the library's parallel regions start on one of its
    // workers instead of handing work over from an outside thread at every region.
    let outcome = match rayon::ThreadPoolBuilder::new().build() {
        Ok(pool) => pool.install(|| execute(cli)),
        Err(_) => execute(cli),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.one_line());
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
