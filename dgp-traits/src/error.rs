//! The workspace's one error type.
//!
//! Every fallible library call returns [`Result<T>`]. User input (data files, matrices,
//! configurations) is validated and reported through these variants; library code never
//! panics on user input. Shape mismatches *between tape operations* are programming errors
//! inside a backend and panic with a message (the faer policy); shapes of user-supplied
//! data are checked at the API boundary and return [`Error::Shape`].

use std::path::PathBuf;

/// Errors returned by every crate of the workspace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two inputs that must agree in size do not.
    #[error("shape mismatch in {context}: expected {expected}, got {got}")]
    Shape {
        /// Where the mismatch was found.
        context: String,
        /// The shape that was required.
        expected: String,
        /// The shape that was given.
        got: String,
    },
    /// A NaN or infinite value where finite numbers are required.
    #[error("non-finite value in {context} at row {row}, column {col}")]
    NonFinite {
        /// What held the value (a data set, a parameter block, ...).
        context: String,
        /// 0-based row of the offending entry.
        row: usize,
        /// 0-based column of the offending entry.
        col: usize,
    },
    /// Data with no rows or no columns where some are required.
    #[error("empty data: {0}")]
    Empty(String),
    /// A matrix that stayed non positive-definite after the bounded jitter retries.
    #[error(
        "matrix {context} is not positive definite (pivot {pivot}) after {retries} jitter retries up to {jitter:e}"
    )]
    NotPositiveDefinite {
        /// Which matrix (e.g. `"Kuu of layer 2"`).
        context: String,
        /// The failing pivot of the last attempt.
        pivot: usize,
        /// How many jitter increases were tried.
        retries: usize,
        /// The largest jitter that was tried.
        jitter: f64,
    },
    /// A file that could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A file whose contents could not be parsed.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// 1-based column (field) number; 0 when it does not apply.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A configuration value outside its allowed range, or settings that contradict each
    /// other: [`ConfigError`] names the field.
    #[error("invalid configuration: {0}")]
    Config(ConfigError),
    /// A computation produced NaN or infinity (an objective, a gradient, a prediction).
    #[error("numerical failure: {0}")]
    Numerical(String),
    /// (De)serialisation of a model or a run's state failed.
    #[error("serialisation: {0}")]
    Serde(String),
    /// A model file ([`crate::fitted::Fitted::load`]) that cannot be used: not a model
    /// file, another layout version, another backend's model, a checksum mismatch.
    #[error("model file {path}: {message}")]
    ModelFile {
        /// The file (empty when read from text).
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A request this backend or code path does not support (e.g. a full-batch backend
    /// given rows that are not in memory); names what and why.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// Class labels that a classification likelihood or loader cannot use.
    #[error("class labels: {0}")]
    Label(#[from] LabelError),
    /// A run stopped because the caller asked it to ([`crate::fit::RunControl::should_stop`])
    /// at a point where it has no usable result to return (a hyper-parameter search between
    /// candidates, an L-BFGS run between evaluations); names what was stopped.
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// A checkpoint directory or file of a guarded fit ([`crate::guard`]) that cannot be
    /// used: in use by another run, written by another run, damaged, or one that a fresh
    /// start would overwrite; [`CheckpointError`] names the file and what is wrong.
    #[error("checkpoint: {0}")]
    Checkpoint(#[from] CheckpointError),
}

/// What is wrong with a checkpoint directory or file ([`crate::guard`]). Every variant
/// names the file or directory; none is raised after anything was written over.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Another run holds the directory's advisory lock (a second run, or a second resume,
    /// on the same directory while the first is running).
    #[error(
        "{dir} is in use by another run{}, which holds its lock; wait for that run to end, or use another directory",
        holder.map_or(String::new(), |p| format!(" (process {p})"))
    )]
    Locked {
        /// The checkpoint directory.
        dir: PathBuf,
        /// The process holding the lock, where the system tells (Linux).
        holder: Option<u32>,
    },
    /// The saved state belongs to another run: another backend, configuration, data set
    /// or training setting (the first field of the identity that differs).
    #[error("{file} was written with other settings: {field} is {saved} there, {now} in this run")]
    OtherRun {
        /// The checkpoint file.
        file: PathBuf,
        /// The path of the first identity field that differs (`config.adam.lr`, `fit.seed`,
        /// `estimator`, ...; empty when the identities differ as a whole).
        field: String,
        /// Its value in the saved file.
        saved: String,
        /// Its value in this run.
        now: String,
    },
    /// A file that is not a checkpoint this build wrote, was changed after it was written
    /// (checksum), or holds a state no run can be in (non-finite parameters, negative
    /// second moments, counters that disagree, a stuck generator).
    #[error("{file}: {}{message}; refusing to resume from it", field.as_ref().map_or(String::new(), |f| format!("field {f}: ")))]
    Damaged {
        /// The checkpoint file.
        file: PathBuf,
        /// The field that is wrong (`checksum`, `version`, `params[3]`, ...), when one is.
        field: Option<String>,
        /// What is wrong with it.
        message: String,
    },
    /// A fresh start asked for a file that already holds a saved state.
    #[error(
        "{file} holds a saved training state that a fresh start would overwrite; refusing (resume it, or use another directory)"
    )]
    WouldOverwrite {
        /// The checkpoint file.
        file: PathBuf,
    },
    /// A resume asked for a file that holds no saved state.
    #[error("nothing to resume: {file} does not exist")]
    NothingToResume {
        /// The checkpoint file that was expected.
        file: PathBuf,
    },
    /// A directory or file that cannot be created, locked or written.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The directory or file.
        path: PathBuf,
        /// The operating system's error.
        message: String,
    },
}

/// A configuration value that cannot be used: which field, and why.
///
/// `field` is the setting's path as a user writes it — a configuration field (`layers`,
/// `natgrad.gamma`, `early_stopping.patience`), a function argument (`chunk_rows`), or a
/// setting key (`dspp:rule`) — so that an error can be traced to the one value to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The setting's path (see the type's docs).
    pub field: String,
    /// What is wrong with its value, and what is allowed.
    pub message: String,
}

impl Error {
    /// [`Error::Config`] for `field` with `message` (what is wrong and what is allowed).
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Config(ConfigError {
            field: field.into(),
            message: message.into(),
        })
    }
}

/// What is wrong with the class labels of a classification problem (labels are the
/// integers `0, 1, …, K − 1` stored as floats in a one-column target matrix).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LabelError {
    /// A NaN or infinite label.
    #[error("label at row {row} is not finite ({value})")]
    NonFinite {
        /// 0-based row.
        row: usize,
        /// The value found.
        value: f64,
    },
    /// A finite label that is not an integer.
    #[error("label at row {row} is {value}, not an integer class index")]
    NotAnInteger {
        /// 0-based row.
        row: usize,
        /// The value found.
        value: f64,
    },
    /// An integer label outside `0..num_classes`.
    #[error("label at row {row} is {value}; classes are 0..{num_classes}")]
    OutOfRange {
        /// 0-based row.
        row: usize,
        /// The value found.
        value: f64,
        /// K.
        num_classes: usize,
    },
    /// A class with no example in the training data.
    #[error("class {class} of 0..{num_classes} has no training example")]
    MissingClass {
        /// The absent class.
        class: usize,
        /// K.
        num_classes: usize,
    },
    /// Fewer than two classes (K = 0 or 1), configured or found in the data.
    #[error("a classification problem needs at least 2 classes, got {num_classes}")]
    TooFewClasses {
        /// The number of classes given or found.
        num_classes: usize,
    },
    /// Labels given as a matrix with more than one column.
    #[error("labels must be one column, got {columns}")]
    NotOneColumn {
        /// Number of target columns.
        columns: usize,
    },
}

/// Shorthand used throughout the workspace.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Convenience constructor for [`Error::Shape`].
    pub fn shape(context: impl Into<String>, expected: impl ToString, got: impl ToString) -> Self {
        Error::Shape {
            context: context.into(),
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }
}

/// Returns [`Error::NonFinite`] for the first NaN/inf entry of `m`, scanning column by column.
pub fn check_finite(context: &str, m: faer::MatRef<'_, f64>) -> Result<()> {
    for j in 0..m.ncols() {
        for i in 0..m.nrows() {
            if !m[(i, j)].is_finite() {
                return Err(Error::NonFinite {
                    context: context.to_string(),
                    row: i,
                    col: j,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_finite_reports_position() {
        let mut m = faer::Mat::<f64>::zeros(3, 2);
        m[(2, 1)] = f64::NAN;
        match check_finite("x", m.as_ref()) {
            Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (2, 1)),
            other => panic!("expected NonFinite, got {other:?}"),
        }
        m[(2, 1)] = 0.0;
        assert!(check_finite("x", m.as_ref()).is_ok());
    }
}
