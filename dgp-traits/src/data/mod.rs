//! Data: the dense data set type, the CSV loader, standardisation, splits, minibatches and k-means.
//!
//! * [`Dataset`] — inputs `x` (N×D) and targets `y` (N×P) as `faer` matrices, validated on
//!   construction (shapes agree, non-empty, finite).
//! * Loaders — CSV files with a header ([`load_csv`], [`parse_csv_str`]). Every loader
//!   refuses a line longer than [`MAX_LINE_BYTES`] (1 MiB) as soon as it reads it, with an
//!   error naming the file and the line ([`read_bounded`], [`read_text_bounded`]); the
//!   benchmark folder format lives with the other file formats in `dgp-io`. A byte-order
//!   mark at the start of a file is ignored, one elsewhere is named in the error
//!   ([`strip_bom`], [`quote_field`]). A file that changes while it is read is an error
//!   ([`FileStamp`]).
//! * [`Standardizer`] — per-column mean and population standard deviation of the training
//!   split; predictive mixtures are mapped back to original units by
//!   [`crate::predictive::Predictive::unstandardize`].
//! * Splits — seeded random splits ([`random_split`]), the extrapolation split of Lindinger et al. (2020) §4.1
//!   ([`extrapolation_split`]), train/validation splits ([`validation_split`]) and the
//!   early-stopping holdout drawn with replacement ([`holdout_with_replacement`]).
//! * [`Minibatches`] — a seeded stream of shuffled index batches, and [`gather_rows_into`] to
//!   copy the rows of a batch into preallocated buffers.
//! * [`RowSource`] — rows read by index, the contract between the minibatch loop and where
//!   the rows live (the in-memory [`Dataset`] is one source; out-of-core stores are others).
//! * [`kmeans`] — k-means++ seeding followed by Lloyd iterations, for inducing inputs.

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
pub(crate) use splits::held_out_count;
pub use splits::{
    EXTRAPOLATION_FEATURE_STD, EXTRAPOLATION_HOLDOUT_FRACTION, ExtrapolationSplit,
    extrapolation_split, holdout_with_replacement, permutation, random_split, validation_split,
};
pub use stamp::FileStamp;
pub use standardize::{
    CONSTANT_REL_STD, CONSTANT_STD, ColumnStats, DIRECT_MAGNITUDE, DROP_FEATURE_STD,
    StandardizeOptions, Standardizer, TARGET_SCALE_RANGE, TargetScaling,
};
pub use text::{BOM, narrow_header, quote_field, strip_bom, strip_bom_bytes};
