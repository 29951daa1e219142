//! `dgp-bench results`: regenerate (or check) RESULTS.md from the records in results/.

use std::path::PathBuf;

use clap::Args;

use crate::error::{BenchError, Result};
use crate::report::write_text;
use crate::results::render;

/// Arguments of `dgp-bench results`.
#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// Directory of the records: `INDEX.md` and one folder per question (`*.jsonl`, notes
    /// `*.md`, an optional `README.md`).
    #[arg(long, default_value = "results")]
    pub dir: PathBuf,
    /// The document to write.
    #[arg(long, default_value = "RESULTS.md")]
    pub out: PathBuf,
    /// Do not write: fail (exit code 1) if the document is not what the records give.
    #[arg(long)]
    pub check: bool,
}

pub(super) fn cmd_results(a: &ResultsArgs) -> Result<()> {
    if !a.dir.is_dir() {
        return Err(BenchError::Usage(format!(
            "--dir {}: no such directory (run from the repository root)",
            a.dir.display()
        )));
    }
    if !a.check {
        // The records (and notes) are inputs: --out may not be one of them.
        let out = crate::validate::OutputFile::new(format!("--out {}", a.out.display()), &a.out);
        crate::validate::check_outputs(&crate::validate::files_under(&a.dir), &[out])?;
        crate::locks::lock_file(&format!("--out {}", a.out.display()), &a.out)?;
    }
    let doc = render(&a.dir)?;
    if a.check {
        let current = std::fs::read_to_string(&a.out).unwrap_or_default();
        if current != doc {
            return Err(BenchError::output(
                &a.out,
                "out of date with the records; run `dgp-bench results` to regenerate it",
            ));
        }
        println!("{} is up to date", a.out.display());
        return Ok(());
    }
    write_text(&a.out, &doc)?;
    println!("wrote {}", a.out.display());
    Ok(())
}
