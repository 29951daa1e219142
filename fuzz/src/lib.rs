//! What every fuzz target of the workspace checks, shared by the targets in
//! `fuzz_targets/`: scratch files for loaders that read paths, and the properties an
//! accepted or a refused input must have.
//!
//! The contract each target asserts (issue 56): no panic, no abort, no hang and no
//! unbounded allocation on any input (libFuzzer's `-timeout` and `-rss_limit_mb` catch the
//! last two); an accepted input loads to finite values and round-trips where the format
//! has a writer; a refused input is a typed [`dgp_traits::Error`] (or the bench's
//! `BenchError`) whose position, when it names one, lies inside the input.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dgp_traits::Error;
use dgp_traits::data::Dataset;

/// A scratch folder of this process (in `/dev/shm` when it exists, so a file written per
/// input costs no disk write), removed by nobody: the fuzzer's process is short-lived and
/// each target writes the same few names over and over.
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("dgp-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch folder");
        d
    })
}

/// Writes `bytes` to `scratch_dir()/name` and returns the path.
pub fn scratch_file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = scratch_dir().join(name);
    std::fs::write(&p, bytes).expect("scratch file");
    p
}

/// Every value of the data set is finite and its shape is non-empty.
pub fn assert_finite_dataset(d: &Dataset) {
    assert!(d.n() >= 1 && d.input_dim() >= 1 && d.output_dim() >= 1);
    for i in 0..d.n() {
        for j in 0..d.input_dim() {
            assert!(d.x()[(i, j)].is_finite(), "x[{i},{j}] not finite");
        }
        for j in 0..d.output_dim() {
            assert!(d.y()[(i, j)].is_finite(), "y[{i},{j}] not finite");
        }
    }
    if let Some(names) = d.feature_names() {
        assert_eq!(names.len(), d.input_dim());
    }
    if let Some(names) = d.target_names() {
        assert_eq!(names.len(), d.output_dim());
    }
}

/// A refused text input: a parse error names a line of the text (1-based, at most one past
/// its last line: the end of the input) or line 0 (the file as a whole), and its message
/// is not empty.
pub fn assert_text_error(e: &Error, text: &[u8]) {
    let lines = text.iter().filter(|&&b| b == b'\n').count() + 1;
    if let Error::Parse { line, message, .. } = e {
        assert!(
            *line <= lines + 1,
            "error on line {line} of a {lines}-line input: {e}"
        );
        assert!(!message.is_empty());
    }
    assert!(!e.to_string().is_empty());
}

/// The part of `data` after its first byte, and that byte (0 for empty input): targets
/// that exercise several entry points let the first byte choose one.
pub fn selector(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&b, rest)) => (b, rest),
        None => (0, data),
    }
}
