//! `dgp-bench compare`: the per-point direct comparison of two models (Lindinger et al.
//! 2020 §4.2) from the records of `run --per-point` ([`crate::compare`]).

use std::path::PathBuf;

use clap::Args;

use crate::compare::{Selector, comparison_table, direct_comparison};
use crate::error::Result;
use crate::report::read_json_lines;

/// Arguments of `dgp-bench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// JSON Lines files written by `run --json ... --per-point`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Model A: a backend name, optionally with its number of layers (`star:3`).
    #[arg(long, value_name = "NAME[:L]")]
    pub a: String,
    /// Model B: a backend name, optionally with its number of layers (`svi:3`).
    #[arg(long, value_name = "NAME[:L]")]
    pub b: String,
}

pub(super) fn cmd_compare(args: &CompareArgs) -> Result<()> {
    let a = Selector::parse(&args.a, "--a")?;
    let b = Selector::parse(&args.b, "--b")?;
    crate::validate::check_stdout(&args.files)?;
    let mut records = Vec::new();
    for f in &args.files {
        records.extend(read_json_lines(f)?);
    }
    let rows = direct_comparison(&records, &a, &b)?;
    print!("{}", comparison_table(&rows, &a, &b));
    println!(
        "\nPer split: the fraction of test points where A's log predictive density is strictly larger than B's; mean over splits (s.e. = sd/√n, sd with ddof = 0 as Lindinger et al.'s direct_comparison). Paired by data set, protocol, seed and split."
    );
    Ok(())
}
