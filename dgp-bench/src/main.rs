//! `dgp-bench`: see `dgp-bench --help` and the library docs.

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use dgp_bench::cli::{Cli, clap_error_line, execute_in};
use dgp_bench::session::Process;

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
    #[cfg(feature = "mpi")]
    {
        mpi_launch::main()
    }
    #[cfg(not(feature = "mpi"))]
    {
        plain_main()
    }
}

/// The command line parsed, or the exit code of a parse that ends the program (help,
/// version: 0 after printing; a usage error: 2, printed when `print_errors`).
fn parse(print_errors: bool) -> Result<Cli, ExitCode> {
    Cli::try_parse().map_err(|e| match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            if print_errors {
                eprintln!("error: {}", clap_error_line(&e));
            }
            ExitCode::from(2)
        }
    })
}

/// Runs the parsed command in `process`.
fn run(cli: Cli, process: &Process) -> dgp_bench::Result<()> {
    // Run inside rayon's pool, so that the library's parallel regions start on one of its
    // workers instead of handing work over from an outside thread at every region.
    match rayon::ThreadPoolBuilder::new().build() {
        Ok(pool) => pool.install(|| execute_in(cli, process)),
        Err(_) => execute_in(cli, process),
    }
}

fn exit_code(e: &dgp_bench::BenchError) -> ExitCode {
    ExitCode::from(e.exit_code() as u8)
}

/// The program as one process.
fn plain_main() -> ExitCode {
    let cli = match parse(true) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match run(cli, &Process::default()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.one_line());
            exit_code(&e)
        }
    }
}

/// The program under an MPI launcher (feature `mpi`; see `dgp_bench::distributed`).
#[cfg(feature = "mpi")]
mod mpi_launch {
    use std::io::Write;
    use std::process::ExitCode;

    use dgp_bench::backends::{find_backend, names_where};
    use dgp_bench::cli::{Cli, Command};
    use dgp_bench::distributed::Launch;
    use dgp_bench::{BenchError, Result};

    use super::{exit_code, parse, plain_main, run};

    /// Only `run`, `time` and `stream` train; every other subcommand (and the default job)
    /// is refused under a launch of several ranks, before any work, and so is a backend
    /// that does not declare [`Capabilities::data_parallel`] (every rank would repeat
    /// the whole computation).
    ///
    /// [`Capabilities::data_parallel`]: dgp_traits::backend::Capabilities::data_parallel
    fn check_command(cli: &Cli) -> Result<()> {
        let backends = match &cli.command {
            Some(Command::Run(a)) => &a.backend,
            Some(Command::Time(a)) => &a.backend,
            Some(Command::Stream(a)) => &a.backend,
            _ => {
                return Err(BenchError::Usage(
                    "under mpirun with several ranks, dgp-bench runs only `run`, `time` and \
                     `stream` (data-parallel training); run other commands as one process"
                        .into(),
                ));
            }
        };
        for name in backends.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let b = find_backend(name)?;
            if !b.capabilities().data_parallel {
                return Err(BenchError::Usage(format!(
                    "--backend {}: it does not split its training steps across MPI ranks \
                     (full-batch or single-tape training: every rank would repeat the whole \
                     run); run it as one process, or use a data-parallel backend ({})",
                    b.name(),
                    names_where(|c| c.data_parallel)
                )));
            }
        }
        Ok(())
    }

    /// Clears the output flags of a rank that does not write (all but rank 0).
    fn without_outputs(mut cli: Cli) -> Cli {
        cli.quiet = true;
        match &mut cli.command {
            Some(Command::Run(a)) => {
                a.json = None;
                a.out = None;
                a.quiet = true;
            }
            Some(Command::Time(a)) => a.json = None,
            Some(Command::Stream(a)) => {
                a.json = None;
                a.predictions = None;
                a.quiet = true;
            }
            _ => {}
        }
        cli
    }

    /// Ends a launch on an error every rank shares (same arguments, same point): rank 0
    /// prints it, all finalise MPI and exit with its code.
    fn shared_error(launch: Launch, e: &BenchError) -> ExitCode {
        if launch.is_writer() {
            eprintln!("error: {}", e.one_line());
        }
        launch.finish();
        exit_code(e)
    }

    pub(super) fn main() -> ExitCode {
        let launch = match Launch::from_env() {
            Ok(Some(launch)) => launch,
            Ok(None) => return plain_main(),
            Err(e) => {
                eprintln!("error: {}", e.one_line());
                return exit_code(&e);
            }
        };
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        if let Err(e) = launch.check_args(&args) {
            return shared_error(launch, &e);
        }
        let process = match launch.install() {
            Ok(process) => process,
            Err(e) => {
                eprintln!("error: rank {}: {}", launch.rank(), e.one_line());
                launch.abort(e.exit_code());
            }
        };
        // Same arguments on every rank: the parse ends every rank alike.
        let cli = match parse(launch.is_writer()) {
            Ok(cli) => cli,
            Err(code) => {
                launch.finish();
                return code;
            }
        };
        let several = launch.size() > 1;
        if several && let Err(e) = check_command(&cli) {
            return shared_error(launch, &e);
        }
        let cli = if launch.is_writer() {
            cli
        } else {
            without_outputs(cli)
        };
        match run(cli, &process) {
            Ok(()) => {
                launch.finish();
                ExitCode::SUCCESS
            }
            // Every rank stopped after the same step: a shared end.
            Err(e @ BenchError::Interrupted(_)) if process.stop.agreed() || !several => {
                shared_error(launch, &e)
            }
            Err(e) if !several => shared_error(launch, &e),
            Err(e) => {
                // Possibly this rank's alone: the others may be waiting for it in a
                // collective, so end the whole launch.
                eprintln!("error: rank {}: {}", launch.rank(), e.one_line());
                let _ = std::io::stdout().flush();
                launch.abort(e.exit_code())
            }
        }
    }
}
