//! # dgp-bench
//!
//! Runs the deep-GP inference backends of the workspace against each other on the same
//! data, splits and metrics (the `protocol` module of dgp-bench), and times their hot paths.
//!
//! * [`backends`] — the registry: every backend is one [`backends::BackendEntry`] around
//!   the backend crate's [`dgp_traits::backend::Backend`]; all subcommands and the default
//!   job iterate over it.
//! * [`datasets`] — UCI folders (published splits), CSV files (seeded random 90/10 splits),
//!   the embedded concrete data and the DGPS step function.
//! * [`experiment`] — [`experiment::run_experiment`]: per split, standardise with training
//!   statistics, build, fit, predict, un-standardise, and compute NLL/RMSE/CRPS/coverage in
//!   original units ([`experiment::SplitRecord`]).
//! * [`classification`] — [`classification::run_classification`]: a backend on the splits
//!   of a classification folder (labels `0..K`), with error rate, log loss, Brier, ECE
//!   and AUC of its class probabilities; `run --task classification` on any data source.
//! * [`reliability`] — reliability diagrams (SVG) of classifiers.
//! * [`protocol`] — `run --protocol published | lindinger | dspp` (Lindinger et al.'s random
//!   90:10 splits, held-out early stopping and settings; the DSPP paper's random 15:3:2
//!   splits, 10 or 5 of them) next to `--split-kind published | random | extrapolate`
//!   ([`datasets::SplitKind`]; the extrapolation split of protocol §1, which always trains
//!   with Lindinger's held-out early stopping).
//! * [`units`] — metrics in standardised units, derived exactly from a record and its
//!   training split's target mean and std (the `units` module of dgp-bench).
//! * [`compare`] — the per-point direct comparison of any two backends (Lindinger et al.
//!   §4.2) from records with per-test-point log densities (`run --per-point`).
//! * [`summary`] — mean ± standard error over splits (ddof = 1).
//! * [`report`] — Markdown table, `report.md`, `results.json`, JSON Lines.
//! * [`results`] — the repository's `RESULTS.md` and each `results/FOLDER/TABLES.md`, regenerated from
//!   the records in `results/`.
//! * [`plots`] — SVG predictive bands of 1-D models and calibration curves.
//! * [`timing`] — `time`: milliseconds per REAL training step (each backend's own `fit`),
//!   several backends interleaved in one run with per-round ratios, and per prediction.
//! * [`resources`] — wall seconds and peak RSS per split in the records.
//! * [`reference`](mod@reference) — the seed papers' published numbers (the papers' tables in `data/reference.csv`) and `vs-paper`.
//! * [`default_run`] — the quick job run without arguments.
//! * [`validate`] — checks of inputs and outputs before any work (outputs never inputs,
//!   writable, splits readable, M limits) and the warnings recorded in the records.
//! * [`cli`] — the command line on top of all this, one module per subcommand.
//! * `distributed` (cargo feature `mpi`) — data-parallel training over MPI:
//!   `mpirun -np P dgp-bench run ...` shares each minibatch's chunks between P ranks, with
//!   results bit-identical to one process.
//!
//! ```no_run
//! use dgp_bench::{backends::find_backend, datasets::BenchData, experiment::*, summary::summarise};
//! # fn main() -> dgp_bench::error::Result<()> {
//! let data = BenchData::embedded_concrete()?;
//! let mut spec = ExperimentSpec::with_defaults(&data, find_backend("svi")?, 2);
//! spec.splits = vec![0, 1, 2];
//! let records = run_experiment(&spec)?;
//! println!("{}", dgp_bench::report::markdown_table(&summarise(&records)));
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

pub mod backends;
pub mod checkpointing;
pub mod classification;
pub mod cli;
pub mod compare;
pub mod datasets;
pub mod default_run;
pub mod diagnostics;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod error;
pub mod experiment;
pub mod locks;
pub mod memory;
pub mod plots;
mod probe;
pub mod progress;
pub mod protocol;
pub mod reference;
pub mod reliability;
pub mod report;
pub mod resources;
pub mod results;
pub mod session;
pub mod settings;
pub mod spec;
pub mod splits;
pub mod summary;
pub mod timing;
pub mod units;
pub mod validate;

pub use backends::{ArchSpec, BACKENDS, BackendEntry};
pub use error::{BenchError, Result};
pub use experiment::{ExperimentSpec, SplitRecord, run_experiment};
pub use summary::{MeanSe, SummaryRow, summarise};
