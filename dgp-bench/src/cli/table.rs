//! `dgp-bench table`: one table from the JSON records of earlier runs.

use std::path::PathBuf;

use clap::Args;

use crate::error::{BenchError, Result};
use crate::report::{TABLE_NOTE, markdown_table, read_json_lines};
use crate::summary::summarise;

/// Arguments of `dgp-bench table`.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// JSON Lines files written by `run --json`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

pub(super) fn cmd_table(a: &TableArgs) -> Result<()> {
    crate::validate::check_stdout(&a.files)?;
    let (mut records, mut class) = (Vec::new(), Vec::new());
    for f in &a.files {
        if crate::classification::holds_class_records(f)? {
            class.extend(crate::classification::read_class_records(f)?);
        } else {
            records.extend(read_json_lines(f)?);
        }
    }
    if records.is_empty() && class.is_empty() {
        return Err(BenchError::Usage("table: the files hold no records".into()));
    }
    if !records.is_empty() {
        print!("{}", markdown_table(&summarise(&records)));
        println!("\n{TABLE_NOTE}");
    }
    if !class.is_empty() {
        let rows = crate::classification::summarise_class(&class);
        print!("{}", crate::classification::class_table(&rows));
        println!("\n{}", crate::classification::CLASS_TABLE_NOTE);
    }
    Ok(())
}
