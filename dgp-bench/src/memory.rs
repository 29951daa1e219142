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
//! * **Estimate** ([`estimate`]): a deliberately conservative upper bound, in f64 (no
//!   overflow for any `usize` flag), the sum of
//!   - a base (the process, the data set and its standardised copies);
//!   - the M² part (`--inducing`): per GP output the M×M covariance factor, its Adam
//!     moments, gradient, flat copies and the tape's M×M temporaries; the fully coupled
//!     structured family (fc) holds one (L·W·M)² covariance; nested's Ψ₂ statistics
//!     hold an M×M matrix per minibatch row;
//!   - the training tape (`--train-samples`, dspp: `--samples`): per sample, layer and
//!     output the M×B projections and the B×D propagated inputs;
//!   - prediction (`--samples`): a chunk of max(S, rows per chunk) propagated rows per
//!     layer and output, and the N_test×S mixture of the result;
//!   - sghmc keeps S posterior samples of every parameter.
//!
//!   The constants were set from measured peak RSS (`VmHWM`) of runs on boston (M 30 to
//!   300, 5000 predictive samples, 50 training samples; svi, fc, star, nested, dspp,
//!   sghmc), where the estimate is 3 to 35 times the measurement (fc 486 MiB vs 162; svi M = 300: 2.0 GiB vs 183 MiB); the test
//!   `memory_estimate_bounds_measured_peak_rss` keeps it above the measurement.

use crate::error::{BenchError, Result};

/// One f64.
const F64: f64 = 8.0;

/// Shapes that decide a run's memory.
#[derive(Clone, Debug)]
pub struct Shape<'a> {
    /// Backend name.
    pub backend: &'a str,
    /// GP layers.
    pub layers: usize,
    /// Inducing points per layer.
    pub m: usize,
    /// Input dimension of the data.
    pub d: usize,
    /// Hidden width as given (`None`: the backend's default).
    pub hidden: Option<usize>,
    /// Training rows.
    pub n_train: usize,
    /// Test rows.
    pub n_test: usize,
    /// Minibatch rows actually used (≤ n_train).
    pub batch: usize,
    /// Training samples (dspp: quadrature sites).
    pub train_samples: usize,
    /// Predictive mixture components.
    pub predict_samples: usize,
    /// Whether `--samples` is the number of the model's components (dspp).
    pub samples_are_components: bool,
}

/// An estimate: the total and the part each flag is responsible for.
#[derive(Clone, Debug)]
pub struct Estimate {
    /// Upper bound of the peak resident memory, bytes.
    pub total: f64,
    /// (flag, bytes) of each part, largest first.
    pub parts: Vec<(&'static str, f64)>,
}

/// The conservative peak-memory estimate of one experiment (see the module docs).
pub fn estimate(s: &Shape<'_>) -> Estimate {
    let f = |v: usize| v as f64;
    let l = f(s.layers.max(1));
    let m = f(s.m);
    let d = f(s.d.max(1));
    // The backends' default widths: sghmc D, the others min(D, 30) or a small constant.
    let default_width = if s.backend == "sghmc" {
        s.d
    } else {
        s.d.clamp(5, 30)
    };
    let w = f(s.hidden.unwrap_or(default_width).max(1));
    let din = d.max(w);
    let b = f(s.batch.max(1));
    let n = f(s.n_train + s.n_test);
    let outputs = l * w; // GP outputs over all layers (upper bound: the last has 1)
    let base = 96.0 * 1024.0 * 1024.0 + 12.0 * n * (d + 1.0) * F64;
    // M² part: q(u) factors, Kuu and its factor per layer, optimiser state, tape copies.
    let mut m2 = 8.0 * (outputs + 2.0 * l) * m * m * F64 + 16.0 * l * m * din * F64;
    match s.backend {
        "fc" => m2 += 12.0 * (outputs * m) * (outputs * m) * F64,
        "nested" => m2 += 8.0 * l * b * m * m * F64,
        _ => {}
    }
    let (train_flag, predict_flag) = if s.samples_are_components {
        ("--samples", "--samples")
    } else {
        ("--train-samples", "--samples")
    };
    let st = f(s.train_samples.max(1));
    let train = 4.0 * st * l * (w + 4.0) * b * (m + din) * F64;
    let sp = f(s.predict_samples.max(1));
    let rows = sp.max(8192.0).min(sp * f(s.n_test.max(1)));
    let mut predict = 4.0 * l * (w + 4.0) * rows * (m + din) * F64 + 8.0 * f(s.n_test) * sp * F64;
    if s.backend == "sghmc" {
        predict += 2.0 * sp * (outputs * m * (m + 1.0) + l * m * din) * F64;
    }
    let batch = 24.0 * b * din * l * F64;
    let mut parts = vec![
        ("--inducing", m2),
        (train_flag, train),
        (predict_flag, predict),
        ("--batch", batch),
    ];
    let total = base + parts.iter().map(|p| p.1).sum::<f64>();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    Estimate { total, parts }
}

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

/// Refuses an experiment (`label`) whose estimate exceeds `budget`; `flag_of` gives, for
/// a part of the estimate (named by `run`'s flag), the flag as the subcommand spells it
/// and its value.
///
/// # Errors
/// [`BenchError::Usage`] naming the dominating flag, the estimate and the budget.
pub fn check(
    label: &str,
    shape: &Shape<'_>,
    budget: Option<&(f64, String)>,
    flag_of: impl Fn(&str) -> (String, String),
) -> Result<()> {
    let Some((limit, origin)) = budget else {
        return Ok(());
    };
    let e = estimate(shape);
    if e.total <= *limit {
        return Ok(());
    }
    let (part_flag, part) = e.parts[0];
    let (flag, value) = flag_of(part_flag);
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
    let shape = Shape {
        backend: e.backend.name(),
        layers: a.layers,
        m: a.num_inducing,
        d: e.input_dim,
        hidden: a.hidden_width,
        n_train: e.n_train,
        n_test: e.n_test,
        batch: e.batch.min(e.n_train.max(1)),
        train_samples: a.train_samples,
        predict_samples: a.predict_samples,
        samples_are_components: components,
    };
    let label = format!(
        "{} {}",
        e.backend.name(),
        crate::experiment::model_label(a.layers)
    );
    check(&label, &shape, budget, |part| {
        let (flag, value) = match part {
            "--inducing" => ("--inducing", a.num_inducing),
            "--batch" => ("--batch", shape.batch),
            "--train-samples" => (
                if flags == Flags::Time {
                    "--samples"
                } else {
                    "--train-samples"
                },
                a.train_samples,
            ),
            // `--samples`: dspp's sites (training and prediction alike), or prediction.
            _ if components => ("--samples", a.predict_samples),
            _ => (
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
        let s = Shape {
            backend: "fc",
            layers: usize::MAX,
            m: usize::MAX,
            d: 3,
            hidden: None,
            n_train: 10,
            n_test: 2,
            batch: 10,
            train_samples: usize::MAX,
            predict_samples: usize::MAX,
            samples_are_components: false,
        };
        let e = estimate(&s);
        assert!(e.total.is_finite() || e.total == f64::INFINITY);
        assert!(e.total > 1e30);
        assert!(!fmt_bytes(e.total).is_empty());
    }
}
