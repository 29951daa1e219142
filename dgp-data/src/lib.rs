//! # dgp-data
//!
//! The one home of data in the deep-GP workspace: the dense data set type and the row
//! sources training reads, every file format (the benchmark folder format, CSV, Parquet,
//! the memory-mapped row store), standardisation (in memory and in streaming passes),
//! splits, minibatches, k-means, and the synthetic problem.
//!
//! * [`Dataset`] — inputs `x` (N×D) and targets `y` (N×P) as `faer` matrices, validated on
//!   construction (shapes agree, non-empty, finite).
//! * Loaders — CSV files with a header ([`load_csv`], [`parse_csv_str`]). Every loader
//!   refuses a line longer than [`MAX_LINE_BYTES`] (1 MiB) as soon as it reads it, with an
//!   error naming the file and the line ([`read_bounded`], [`read_text_bounded`]); the
//!   other file formats are the modules below. A byte-order
//!   mark at the start of a file is ignored, one elsewhere is named in the error
//!   ([`strip_bom`], [`quote_field`]). A file that changes while it is read is an error
//!   ([`FileStamp`]).
//! * [`Standardizer`] — per-column mean and population standard deviation of the training
//!   split (from rows in memory, or in streaming passes over a [`RowSource`]:
//!   [`fit_standardizer`], [`StandardizedRows`]); a predictive mixture is mapped back to
//!   original units by `Predictive::unstandardize` of `dgp-traits`.
//! * Splits — seeded random splits ([`random_split`]), the extrapolation split of Lindinger et al. (2020) §4.1
//!   ([`extrapolation_split`]), train/validation splits ([`validation_split`]) and the
//!   early-stopping holdout drawn with replacement ([`holdout_with_replacement`]).
//! * [`Minibatches`] — a seeded stream of shuffled index batches, and [`gather_rows_into`] to
//!   copy the rows of a batch into preallocated buffers.
//! * [`RowSource`] — rows read by index, the contract between the minibatch loop and where
//!   the rows live (the in-memory [`Dataset`] is one source; out-of-core stores are others).
//! * [`kmeans`] — k-means++ seeding followed by Lloyd iterations, for inducing inputs.
//!
//! Data on disk: the benchmark folder format, and rows that live on disk rather than in
//! RAM.
//!
//! * [`uci`] — the UCI benchmark folder format (`data.txt`, column indices, published
//!   splits), for regression targets and for class labels ([`uci::ClassDataset`]).
//!
//! * [`rowstore`] — a binary, memory-mapped row store ([`rowstore::RowStore`], a
//!   [`RowSource`]) and its streaming writer.
//! * [`labels`] — the class-label checks of a classification training or test file, in
//!   one streamed pass.
//! * [`sample`] — a seeded reservoir sample of rows (for k-means++ inducing inputs).
//! * [`synth`] — a seeded synthetic regression problem of any size with a known
//!   Bayes-optimal negative log likelihood.
//! * [`tabular`] — streaming CSV reading by column name and conversion into a row store.
//! * [`parquet_reader`] — streaming Parquet reading by column name.
//! * [`chunks`] — reading a row source in consecutive chunks of bounded size.
#![warn(missing_docs)]

mod batches;
mod bounded;
mod csv_file;
mod dataset;
pub mod held_out;
mod kmeans;
mod permute;
mod source;
mod splits;
mod stamp;
mod standardize;
mod text;

pub use batches::{FEISTEL_ROUNDS, Minibatches, PERMUTATION_TABLE_MAX_N, gather_rows_into};
pub use bounded::{
    LINE_LIMIT_VAR, MAX_LINE_BYTES, line_limit, long_line_message, read_bounded, read_text_bounded,
};
pub use csv_file::{load_csv, load_csv_targets, parse_csv_str};
pub use dataset::Dataset;
pub use kmeans::{KMEANS_JITTER, kmeans, kmeans_plus_plus};
pub use source::{RowSource, RowsExcept, check_gather, gather_dataset, require_in_memory};
pub use splits::held_out_count;
pub use splits::{
    EXTRAPOLATION_FEATURE_STD, EXTRAPOLATION_HOLDOUT_FRACTION, ExtrapolationSplit,
    extrapolation_split, holdout_with_replacement, permutation, random_split, validation_split,
};
pub use stamp::FileStamp;
pub use standardize::{
    CONSTANT_REL_STD, CONSTANT_STD, ColumnStats, DIRECT_MAGNITUDE, DROP_FEATURE_STD,
    StandardizeOptions, StandardizedRows, Standardizer, TARGET_SCALE_RANGE, TargetScaling,
    fit_standardizer,
};
pub use text::{BOM, narrow_header, quote_field, strip_bom, strip_bom_bytes};

pub mod chunks;
pub mod labels;
pub mod parquet_reader;
pub mod rowstore;
pub mod sample;
pub mod synth;
pub mod tabular;
pub mod uci;
