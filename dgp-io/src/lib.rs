//! Data on disk for the deep-GP workspace: the benchmark folder format, and rows that live
//! on disk rather than in RAM.
//!
//! * [`uci`] — the UCI benchmark folder format (`data.txt`, column indices, published
//!   splits), for regression targets and for class labels ([`uci::ClassDataset`]).
//!
//! * [`rowstore`] — a binary, memory-mapped row store ([`rowstore::RowStore`], a
//!   [`dgp_traits::data::RowSource`]) and its streaming writer.
//! * [`standardize`] — standardisation statistics from a row source in bounded memory,
//!   bit-identical to [`dgp_traits::data::Standardizer::fit`], and
//!   [`standardize::StandardizedRows`], a source in model units.
//! * [`labels`] — the class-label checks of a classification training or test file, in
//!   one streamed pass.
//! * [`sample`] — a seeded reservoir sample of rows (for k-means++ inducing inputs).
//! * [`synth`] — a seeded synthetic regression problem of any size with a known
//!   Bayes-optimal negative log likelihood.
//! * [`tabular`] — streaming CSV reading by column name and conversion into a row store.
//! * [`parquet_reader`] — streaming Parquet reading by column name.
//! * [`chunks`] — reading a row source in consecutive chunks of bounded size.
#![warn(missing_docs)]

pub mod chunks;
pub mod labels;
pub mod parquet_reader;
pub mod rowstore;
pub mod sample;
pub mod standardize;
pub mod synth;
pub mod tabular;
pub mod uci;
