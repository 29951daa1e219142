//! `dgp-bench convert`: streams chosen columns of a CSV or Parquet file into a binary row
//! store ([`dgp_io::rowstore`]), in bounded memory.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use dgp_io::parquet_reader::{DEFAULT_PARQUET_BATCH_ROWS, ParquetChunks};
use dgp_io::tabular::{ChunkReader, CsvChunks, DEFAULT_MAX_LINE_BYTES, convert_to_rowstore};

use crate::error::{BenchError, Result};

/// Rows per chunk of the conversion.
const CONVERT_CHUNK_ROWS: usize = 65_536;

/// Arguments of `dgp-bench convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Input file: a CSV file with a header row (`.csv`) or a Parquet file (`.parquet`).
    #[arg(long)]
    pub input: PathBuf,
    /// Input columns, by name, comma-separated, in the order they are stored.
    #[arg(long, value_delimiter = ',', required = true)]
    pub features: Vec<String>,
    /// Target column(s), by name (comma-separated for several).
    #[arg(long, value_delimiter = ',', required = true)]
    pub target: Vec<String>,
    /// Output row store (must not be the input; written to a temporary file next to it
    /// and renamed when complete).
    #[arg(long)]
    pub out: PathBuf,
    /// Longest accepted line of the CSV file, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_LINE_BYTES)]
    pub max_line_bytes: usize,
}

pub(super) fn cmd_convert(args: &ConvertArgs) -> Result<()> {
    let ext = args
        .input
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    crate::locks::lock_file(&format!("--out {}", args.out.display()), &args.out)?;
    let t0 = Instant::now();
    let mut reader: Box<dyn ChunkReader> = match ext.as_deref() {
        Some("csv") => Box::new(
            CsvChunks::open(
                &args.input,
                &args.features,
                &args.target,
                args.max_line_bytes,
            )
            .map_err(BenchError::data)?,
        ),
        Some("parquet") => Box::new(
            ParquetChunks::open(
                &args.input,
                &args.features,
                &args.target,
                DEFAULT_PARQUET_BATCH_ROWS,
            )
            .map_err(BenchError::data)?,
        ),
        _ => {
            return Err(BenchError::Usage(format!(
                "--input {}: only CSV (.csv) and Parquet (.parquet) files can be converted",
                args.input.display()
            )));
        }
    };
    let rows = convert_to_rowstore(&mut *reader, &args.out, &[&args.input], CONVERT_CHUNK_ROWS)
        .map_err(|e| match e {
            dgp_traits::Error::Io { ref path, .. } if *path != args.input => BenchError::Output {
                path: args.out.clone(),
                message: e.to_string(),
            },
            dgp_traits::Error::Config(c) => BenchError::Usage(c.to_string()),
            e => BenchError::data(e),
        })?;
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "wrote {rows} rows ({} inputs, {} targets) from {} to {} in {secs:.2} s",
        args.features.len(),
        args.target.len(),
        args.input.display(),
        args.out.display()
    );
    Ok(())
}
