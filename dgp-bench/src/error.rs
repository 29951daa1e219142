//! The benchmark's error type and the exit codes the command line maps it to.

use std::path::PathBuf;

/// Errors of the benchmark library and CLI.
///
/// Every variant renders as one line (no embedded newlines), so the binary can print
/// `error: <message>` once and exit. [`BenchError::exit_code`] separates mistakes in the
/// *input* (arguments, data files: exit code 2) from failures while *computing or writing
/// results* (exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A command-line argument or experiment setting is invalid (names the argument).
    #[error("{0}")]
    Usage(String),
    /// A data set could not be read or is malformed (the message names the file, and line
    /// and field where known).
    #[error("{0}")]
    Data(#[source] dgp_core::Error),
    /// Training, prediction or evaluation failed.
    #[error("{context}: {source}")]
    Run {
        /// What was running (backend, model, data set, split).
        context: String,
        /// The underlying error.
        #[source]
        source: dgp_core::Error,
    },
    /// Writing an output file failed.
    #[error("cannot write {path}: {message}")]
    Output {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The run was interrupted (SIGINT/SIGTERM) after finishing a step; the message says
    /// what was saved and how to resume (exit code 130).
    #[error("{0}")]
    Interrupted(String),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, BenchError>;

impl BenchError {
    /// Process exit code: 2 for bad arguments or bad data, 1 for failures while running or
    /// writing results.
    pub fn exit_code(&self) -> i32 {
        match self {
            BenchError::Usage(_) | BenchError::Data(_) => 2,
            BenchError::Run { .. } | BenchError::Output { .. } => 1,
            BenchError::Interrupted(_) => 130,
        }
    }

    /// The message as exactly one line (newlines of nested messages replaced by "; ").
    pub fn one_line(&self) -> String {
        let s = self.to_string();
        s.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Wraps a data-loading error.
    pub fn data(e: dgp_core::Error) -> Self {
        BenchError::Data(e)
    }

    /// Wraps an error raised while running `context`; a run the caller stopped
    /// ([`dgp_core::Error::Interrupted`]) becomes [`BenchError::Interrupted`].
    pub fn run(context: impl Into<String>, source: dgp_core::Error) -> Self {
        match source {
            dgp_core::Error::Interrupted(what) => BenchError::Interrupted(format!(
                "interrupted during {}: {what}; nothing of it was saved",
                context.into()
            )),
            source => BenchError::Run {
                context: context.into(),
                source,
            },
        }
    }

    /// An output error for `path`.
    pub fn output(path: impl Into<PathBuf>, message: impl ToString) -> Self {
        BenchError::Output {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
