//! `dgp-bench synth`: writes the synthetic regression problem of [`dgp_io::synth`] (9
//! inputs, input-dependent noise, known Bayes-optimal NLL) as a row store, or with
//! `--task classification` its probit classification variant (label `1[y > 0]`, known
//! Bayes-optimal error and log loss).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use dgp_io::synth::{SYNTH_MAX_ROWS, SynthTask, class_floor, write_synth_task};

use crate::error::{BenchError, Result};

/// Arguments of `dgp-bench synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Number of rows: an integer, `1_000_000` or `1e9` (1 to 4e9).
    #[arg(long)]
    pub rows: String,
    /// Seed: chunk c of 65536 rows is drawn from stream c of this seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output row store (written to a temporary file next to it, renamed when complete).
    #[arg(long)]
    pub out: PathBuf,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// `regression` (target y) or `classification` (target `label` = `1[y > 0]`, the same
    /// rows otherwise).
    #[arg(long, default_value = "regression")]
    pub task: String,
}

/// Parses a `synth --rows` value: a row count written as an integer (`_` separators
/// allowed) or as `<m>e<k>`, from 1 to `SYNTH_MAX_ROWS`.
///
/// # Errors
/// [`BenchError::Usage`] for anything else.
pub fn parse_rows(s: &str) -> Result<u64> {
    let t = s.trim().replace('_', "");
    let v = if let Ok(v) = t.parse::<u64>() {
        v
    } else {
        let f: f64 = t
            .parse()
            .map_err(|_| BenchError::Usage(format!("--rows {s}: not a number")))?;
        if !(f.is_finite() && f >= 1.0 && f.fract() == 0.0 && f <= SYNTH_MAX_ROWS as f64) {
            return Err(BenchError::Usage(format!(
                "--rows {s}: must be a whole number between 1 and {SYNTH_MAX_ROWS}"
            )));
        }
        f as u64
    };
    if v == 0 || v > SYNTH_MAX_ROWS {
        return Err(BenchError::Usage(format!(
            "--rows {s}: must be between 1 and {SYNTH_MAX_ROWS}"
        )));
    }
    Ok(v)
}

pub(super) fn cmd_synth(args: &SynthArgs) -> Result<()> {
    let n = parse_rows(&args.rows)?;
    let task = match args.task.as_str() {
        "regression" => SynthTask::Regression,
        "classification" => SynthTask::Classification,
        other => {
            return Err(BenchError::Usage(format!(
                "--task {other}: regression or classification"
            )));
        }
    };
    crate::locks::lock_file(&format!("--out {}", args.out.display()), &args.out)?;
    let show = !args.quiet && n >= 10_000_000;
    let t0 = Instant::now();
    let mut last = t0;
    let summary = write_synth_task(&args.out, n, args.seed, task, |done| {
        if show && last.elapsed() >= Duration::from_secs(5) {
            last = Instant::now();
            let s = t0.elapsed().as_secs_f64();
            eprintln!(
                "synth: {done} / {n} rows ({:.1} %), {:.0} s, {:.2e} rows/s",
                100.0 * done as f64 / n as f64,
                s,
                done as f64 / s
            );
        }
    })
    .map_err(|e| match e {
        dgp_traits::Error::Config(c) => BenchError::Usage(c.to_string()),
        e => BenchError::Output {
            path: args.out.clone(),
            message: e.to_string(),
        },
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} rows (9 inputs x1..x9, one target; {bytes} bytes) to {} in {secs:.2} s \
         ({:.3e} rows/s); seed {}",
        summary.rows,
        args.out.display(),
        summary.rows as f64 / secs,
        args.seed
    );
    if task == SynthTask::Classification {
        let store = dgp_io::rowstore::RowStore::open(&args.out)
            .map_err(|e| BenchError::run("reading the written rows", e))?;
        let floor =
            class_floor(&store).map_err(|e| BenchError::run("reading the written rows", e))?;
        println!(
            "target: label = 1[y > 0], P(label = 1 | x) = Φ(f(x)/σ(x)); Bayes-optimal error of \
             these rows {:.6}, log loss {:.6}",
            floor.error_rate, floor.log_loss
        );
    } else {
        println!(
            "Bayes-optimal mean test NLL of these rows: {:.6} (mean of ½ln(2πσ²(x)) + ½)",
            summary.mean_bayes_nll
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_counts_parse_in_both_notations() {
        assert_eq!(parse_rows("1000").unwrap(), 1000);
        assert_eq!(parse_rows("1_000_000").unwrap(), 1_000_000);
        assert_eq!(parse_rows("1e9").unwrap(), 1_000_000_000);
        assert_eq!(parse_rows("2.5e3").unwrap(), 2500);
        for bad in ["0", "1.5", "-3", "1e12", "x", "nan"] {
            assert!(
                matches!(parse_rows(bad), Err(BenchError::Usage(_))),
                "{bad}"
            );
        }
    }
}
