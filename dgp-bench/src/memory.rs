//! The memory budget of `run` and `time` (issue 37): before any allocation, the peak
//! memory of each experiment (of `run`) or timed backend (of `time`) is estimated from its
//! shapes and one whose estimate exceeds the budget is refused with an error naming the
//! flag that dominates the estimate (as the subcommand spells it), so that no flag value
//! the command line accepts ends in an allocation failure inside the linear algebra or
//! the allocator.
//!
//! * **Budget.** `--memory-budget SIZE` (`800M`, `4G`, `1.5GiB`, bytes), default 90 % of
//!   the machine's available memory (`MemAvailable` of `/proc/meminfo`); where that cannot
//!   be read, no budget is enforced.
//! * **Estimate**: each backend's own conservative upper bound
//!   ([`dgp_traits::backend::Backend::memory_estimate`], the mathematics in
//!   [`dgp_traits::memory`]), split into parts by the setting that controls them
//!   ([`MemoryPart`]); an error names the flag of the largest part.

use crate::error::{BenchError, Result};
use dgp_traits::memory::{MemoryEstimate, MemoryPart, MemoryShape};

/// `MemAvailable` of `/proc/meminfo` in bytes, `None` where unavailable.
pub fn mem_available() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: f64 = line["MemAvailable:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024.0)
}

/// Parses a `--memory-budget` value: a number of bytes with an optional unit (K, M, G, T,
/// with or without `B`/`iB`, powers of 1024).
///
/// # Errors
/// [`BenchError::Usage`] for anything else or a budget that is not positive.
pub fn parse_size(text: &str) -> Result<f64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0_f64.powi(4),
        _ => f64::NAN,
    };
    let v: f64 = num.parse().unwrap_or(f64::NAN) * scale;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(BenchError::Usage(format!(
            "--memory-budget: '{text}' is not a size (give bytes or a number with K, M, G or T, e.g. 4G)"
        )))
    }
}

/// The budget: `--memory-budget` if given, else 90 % of `MemAvailable`; `None` = no
/// budget known.
///
/// # Errors
/// [`BenchError::Usage`] for a malformed `--memory-budget`.
pub fn budget(flag: Option<&str>) -> Result<Option<(f64, String)>> {
    match flag {
        Some(t) => Ok(Some((parse_size(t)?, format!("--memory-budget {t}")))),
        None => Ok(mem_available().map(|a| {
            (
                0.9 * a,
                "90 % of MemAvailable in /proc/meminfo; --memory-budget to change".to_string(),
            )
        })),
    }
}

/// Bytes as text (`1.2 GiB`).
pub fn fmt_bytes(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i + 1 == units.len() && v >= 1024.0 {
        return format!("{b:.3e} B");
    }
    format!("{v:.1} {}", units[i])
}

/// Refuses an experiment (`label`) whose estimate `e` exceeds `budget`; `flag_of` gives,
/// for a part of the estimate, the flag as the subcommand spells it and its value.
///
/// # Errors
/// [`BenchError::Usage`] naming the dominating flag, the estimate and the budget.
pub fn check(
    label: &str,
    e: &MemoryEstimate,
    budget: Option<&(f64, String)>,
    flag_of: impl Fn(MemoryPart) -> (String, String),
) -> Result<()> {
    let Some((limit, origin)) = budget else {
        return Ok(());
    };
    if e.total <= *limit {
        return Ok(());
    }
    let Some((part_of, part)) = e.dominant() else {
        return Ok(());
    };
    let (flag, value) = flag_of(part_of);
    Err(BenchError::Usage(format!(
        "{flag} {value}: {label} would need about {} of memory ({} of it for {flag}), over the \
         budget of {} ({origin}); lower {flag}",
        fmt_bytes(e.total),
        fmt_bytes(part),
        fmt_bytes(*limit)
    )))
}

/// One model of a subcommand, as the memory check sees it.
#[derive(Clone, Copy, Debug)]
pub struct Experiment<'a> {
    /// The backend.
    pub backend: &'a crate::backends::BackendEntry,
    /// Its architecture and sample counts.
    pub arch: &'a crate::backends::ArchSpec,
    /// Input columns of the data.
    pub input_dim: usize,
    /// Training rows (the largest split's).
    pub n_train: usize,
    /// Test rows (the largest split's).
    pub n_test: usize,
    /// Minibatch rows (at most `n_train`).
    pub batch: usize,
}

/// Which subcommand's flags an error names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flags {
    /// `run`: `--train-samples` (training), `--samples` (prediction).
    Run,
    /// `time`: `--samples` (training), `--predict-samples` (prediction).
    Time,
}

/// [`check`] for one experiment, before anything of it is allocated.
///
/// # Errors
/// [`BenchError::Usage`] naming the flag (as `flags` spells it) that dominates the
/// estimate.
pub fn check_experiment(
    budget: Option<&(f64, String)>,
    e: &Experiment<'_>,
    flags: Flags,
) -> Result<()> {
    let a = e.arch;
    let components = e.backend.capabilities().samples_are_components;
    let shape = MemoryShape {
        layers: a.layers,
        m: a.num_inducing,
        d: e.input_dim,
        hidden: a.hidden_width,
        n_train: e.n_train,
        n_test: e.n_test,
        batch: e.batch.min(e.n_train.max(1)),
        train_samples: a.train_samples,
        predict_samples: a.predict_samples,
    };
    let estimate = e.backend.backend.memory_estimate(&shape);
    let label = format!(
        "{} {}",
        e.backend.name(),
        crate::experiment::model_label(a.layers)
    );
    check(&label, &estimate, budget, |part| {
        let (flag, value) = match part {
            MemoryPart::Inducing => ("--inducing", a.num_inducing),
            MemoryPart::Batch => ("--batch", shape.batch),
            MemoryPart::TrainSamples if !components => (
                if flags == Flags::Time {
                    "--samples"
                } else {
                    "--train-samples"
                },
                a.train_samples,
            ),
            // `--samples`: dspp's sites (training and prediction alike), or prediction.
            MemoryPart::TrainSamples | MemoryPart::PredictSamples if components => {
                ("--samples", a.predict_samples)
            }
            MemoryPart::TrainSamples | MemoryPart::PredictSamples => (
                if flags == Flags::Time {
                    "--predict-samples"
                } else {
                    "--samples"
                },
                a.predict_samples,
            ),
        };
        (flag.to_string(), value.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_huge_shapes_do_not_overflow() {
        assert_eq!(parse_size("4G").unwrap(), 4.0 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(parse_size("1500").unwrap(), 1500.0);
        assert_eq!(parse_size("1.5MiB").unwrap(), 1.5 * 1024.0 * 1024.0);
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        let s = MemoryShape {
            layers: usize::MAX,
            m: usize::MAX,
            d: 3,
            hidden: None,
            n_train: 10,
            n_test: 2,
            batch: 10,
            train_samples: usize::MAX,
            predict_samples: usize::MAX,
        };
        let fc = crate::backends::find_backend("fc").unwrap();
        let e = fc.backend.memory_estimate(&s);
        assert!(e.total.is_finite() || e.total == f64::INFINITY);
        assert!(e.total > 1e30);
        assert!(!fmt_bytes(e.total).is_empty());
    }
}
