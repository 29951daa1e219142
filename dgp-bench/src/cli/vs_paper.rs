//! `dgp-bench vs-paper`: a run's records next to the seed papers' published numbers
//! ([`crate::reference`]).

use std::path::PathBuf;

use clap::Args;

use crate::error::{BenchError, Result};
use crate::reference::{reference_rows, render, vs_paper};
use crate::report::read_json_lines;

/// Arguments of `dgp-bench vs-paper`.
#[derive(Debug, Args)]
pub struct VsPaperArgs {
    /// JSON Lines files written by `run --json`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

pub(super) fn cmd_vs_paper(args: &VsPaperArgs) -> Result<()> {
    crate::validate::check_stdout(&args.files)?;
    let mut records = Vec::new();
    for f in &args.files {
        records.extend(read_json_lines(f)?);
    }
    if records.is_empty() {
        return Err(BenchError::Usage(
            "vs-paper: the files hold no records".into(),
        ));
    }
    let table = reference_rows()?;
    print!("{}", render(&vs_paper(&records, &table)));
    Ok(())
}
