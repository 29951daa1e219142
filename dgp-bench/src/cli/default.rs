//! The quick default job (no subcommand).

use std::path::Path;
use std::time::Instant;

use super::progress_enabled;
use crate::default_run::{DefaultRunOptions, default_run};
use crate::error::{BenchError, Result};
use crate::experiment::model_label;
use crate::report::TABLE_NOTE;

pub(super) fn cmd_default(out: &Path, seed: u64, progress: bool) -> Result<()> {
    let opts = DefaultRunOptions {
        out_dir: out.to_path_buf(),
        seed,
        progress: progress_enabled(progress),
        ..DefaultRunOptions::default()
    };
    crate::validate::check_default(out)?;
    std::fs::create_dir_all(out).map_err(|e| {
        BenchError::Usage(format!("--out {}: cannot create it: {e}", out.display()))
    })?;
    for line in opts.plan() {
        println!("{line}");
    }
    println!();
    let t0 = Instant::now();
    let result = default_run(&opts, &mut |r| {
        println!(
            "  {:<4} {:<5} {:<9} split {:>2}: NLL {:>8.4}  RMSE {:>8.4}  CRPS {:>8.4}  cov95 {:.3}  ({:.1} s)",
            r.backend,
            model_label(r.layers),
            r.dataset,
            r.split,
            r.nll,
            r.rmse,
            r.crps,
            r.cov95,
            r.train_seconds
        );
    })?;
    println!();
    print!("{}", result.table);
    println!("\n{TABLE_NOTE}");
    if !result.class_table.is_empty() {
        print!("\nclassification (magic-small):\n{}", result.class_table);
        println!("\n{}", crate::classification::CLASS_TABLE_NOTE);
    }
    println!(
        "\nwall time {:.1} s; wrote {}",
        t0.elapsed().as_secs_f64(),
        result
            .files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}
