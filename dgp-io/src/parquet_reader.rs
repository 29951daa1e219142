//! A streaming Parquet reader: chosen numeric columns, record batch by record batch.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use dgp_traits::data::{Dataset, FileStamp};
use dgp_traits::{Error, Result};
use faer::Mat;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};

use crate::rowstore::Schema;
use crate::tabular::ChunkReader;

/// Default number of rows per record batch read from a Parquet file.
pub const DEFAULT_PARQUET_BATCH_ROWS: usize = 65_536;

fn perr(path: &Path, message: String) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line: 0,
        column: 0,
        message,
    }
}

/// The reader of `file` (at `path`), its column types taken from the Parquet schema alone:
/// the Arrow schema some writers embed in the file's metadata (`ARROW:schema`, an Arrow
/// IPC message) is ignored. It adds nothing for numeric columns, and its decoder
/// (`arrow-ipc`) panics on a malformed one instead of returning an error (a fuzz finding
/// of issue 56: `fuzz/`, target `parquet`).
///
/// The footer's column chunk locations are checked against the file (offsets and sizes
/// not negative, every chunk inside the file): the decoder asserts them when it reads a
/// chunk and would panic on a corrupt footer (a second fuzz finding).
fn reader_builder(path: &Path, file: File) -> Result<ParquetRecordBatchReaderBuilder<File>> {
    let len = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
        .map_err(|e| perr(path, format!("not a readable Parquet file: {e}")))?;
    for (g, group) in builder.metadata().row_groups().iter().enumerate() {
        for (c, col) in group.columns().iter().enumerate() {
            let start = col
                .dictionary_page_offset()
                .unwrap_or(col.data_page_offset());
            let size = col.compressed_size();
            let inside = start >= 0
                && size >= 0
                && col.data_page_offset() >= 0
                && (start as u64)
                    .checked_add(size as u64)
                    .is_some_and(|end| end <= len);
            if !inside {
                return Err(perr(
                    path,
                    format!(
                        "corrupt Parquet footer: column chunk {c} of row group {g} lies at \
                         offset {start} with {size} bytes, outside the file of {len} bytes"
                    ),
                ));
            }
        }
    }
    Ok(builder)
}

/// Whether values of this type convert to `f64` (integers above 2⁵³ are rounded).
fn numeric(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Float64
            | DataType::Float32
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
    )
}

/// The value at `i` of a numeric array as `f64` (the type was checked at open).
fn value(a: &dyn Array, i: usize) -> f64 {
    match a.data_type() {
        DataType::Float64 => a.as_primitive::<Float64Type>().value(i),
        DataType::Float32 => f64::from(a.as_primitive::<Float32Type>().value(i)),
        DataType::Int8 => f64::from(a.as_primitive::<Int8Type>().value(i)),
        DataType::Int16 => f64::from(a.as_primitive::<Int16Type>().value(i)),
        DataType::Int32 => f64::from(a.as_primitive::<Int32Type>().value(i)),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i) as f64,
        DataType::UInt8 => f64::from(a.as_primitive::<UInt8Type>().value(i)),
        DataType::UInt16 => f64::from(a.as_primitive::<UInt16Type>().value(i)),
        DataType::UInt32 => f64::from(a.as_primitive::<UInt32Type>().value(i)),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i) as f64,
        _ => f64::NAN,
    }
}

/// A Parquet file read in record batches of a bounded number of rows (memory: one batch
/// of the chosen columns), delivering the columns chosen by name as `f64`.
///
/// Accepted column types: 8- to 64-bit integers and 32/64-bit floats (integers beyond
/// 2⁵³ in magnitude are rounded to the nearest `f64`). Compression codecs: uncompressed
/// and Snappy. A file that changes while it is read (checked before each chunk,
/// [`FileStamp`]) is an [`Error::Io`] saying so.
pub struct ParquetChunks {
    reader: ParquetRecordBatchReader,
    /// Column positions in the projected batches: inputs, then targets.
    cols: Vec<usize>,
    schema: Schema,
    path: PathBuf,
    pending: Option<(RecordBatch, usize)>,
    row: usize,
    /// The file as opened, to detect a change while it is read ([`FileStamp`]).
    file: File,
    stamp: FileStamp,
}

impl std::fmt::Debug for ParquetChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetChunks")
            .field("path", &self.path)
            .field("schema", &self.schema)
            .field("row", &self.row)
            .finish()
    }
}

impl ParquetChunks {
    /// Opens `path`, checks that the `features` and `targets` columns exist once each and
    /// are numeric, and prepares to read them in batches of `batch_rows`.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened; [`Error::Parse`] for a file that is not
    /// Parquet, a missing or repeated column, or a non-numeric column (naming it and its
    /// type); [`Error::Empty`] if no feature or no target is named; [`Error::Config`] if
    /// `batch_rows == 0`.
    pub fn open(
        path: &Path,
        features: &[String],
        targets: &[String],
        batch_rows: usize,
    ) -> Result<Self> {
        if batch_rows == 0 {
            return Err(Error::config(
                "batch_rows",
                "batch size must be at least 1 row",
            ));
        }
        let schema = Schema::new(features.to_vec(), targets.to_vec())?;
        let file = File::open(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let stamp = FileStamp::of(&file, path)?;
        let watched = file.try_clone().map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let builder = reader_builder(path, file)?;
        let fields = builder.schema().fields().clone();
        let mut roots = Vec::new();
        for name in schema.inputs.iter().chain(&schema.targets) {
            let hits: Vec<usize> = (0..fields.len())
                .filter(|&j| fields[j].name() == name)
                .collect();
            let j = match hits.as_slice() {
                [j] => *j,
                [] => {
                    let all: Vec<&String> = fields.iter().map(|f| f.name()).collect();
                    return Err(perr(
                        path,
                        format!("no column named '{name}' (columns: {all:?})"),
                    ));
                }
                _ => {
                    return Err(perr(
                        path,
                        format!("column '{name}' appears more than once"),
                    ));
                }
            };
            let t = fields[j].data_type();
            if !numeric(t) {
                return Err(perr(
                    path,
                    format!("column '{name}' has type {t}, not a numeric type"),
                ));
            }
            roots.push(j);
        }
        let mut sorted = roots.clone();
        sorted.sort_unstable();
        sorted.dedup();
        // Projected batches keep the file's column order: position of each root in it.
        let cols = roots
            .iter()
            .map(|r| sorted.binary_search(r).unwrap_or(0))
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), sorted);
        let reader = builder
            .with_projection(mask)
            .with_batch_size(batch_rows)
            .build()
            .map_err(|e| perr(path, e.to_string()))?;
        Ok(Self {
            reader,
            cols,
            schema,
            path: path.to_path_buf(),
            pending: None,
            row: 0,
            file: watched,
            stamp,
        })
    }
}

impl ChunkReader for ParquetChunks {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    fn next_chunk(&mut self, out: &mut Vec<f64>, max_rows: usize) -> Result<usize> {
        out.clear();
        self.stamp.check(&self.file, &self.path)?;
        let w = self.cols.len();
        let d = self.schema.d();
        let mut rows = 0;
        while rows < max_rows {
            let (batch, offset) = match self.pending.take() {
                Some(p) => p,
                None => match self.reader.next() {
                    None => break,
                    Some(b) => (b.map_err(|e| perr(&self.path, e.to_string()))?, 0),
                },
            };
            let take = (batch.num_rows() - offset).min(max_rows - rows);
            let base = out.len();
            out.resize(base + take * w, 0.0);
            for (k, &c) in self.cols.iter().enumerate() {
                let a = batch.column(c).as_ref();
                let name = if k < d {
                    &self.schema.inputs[k]
                } else {
                    &self.schema.targets[k - d]
                };
                for r in 0..take {
                    let i = offset + r;
                    let row = self.row + rows + r;
                    if a.is_null(i) {
                        return Err(perr(
                            &self.path,
                            format!("column '{name}' is null at data row {row} (0-based)"),
                        ));
                    }
                    let v = value(a, i);
                    if !v.is_finite() {
                        return Err(Error::NonFinite {
                            context: format!("{} (column '{name}')", self.path.display()),
                            row,
                            col: k,
                        });
                    }
                    out[base + r * w + k] = v;
                }
            }
            rows += take;
            if offset + take < batch.num_rows() {
                self.pending = Some((batch, offset + take));
            }
        }
        self.row += rows;
        Ok(rows)
    }
}

/// The names of the top-level columns of the Parquet file at `path`, in file order.
///
/// # Errors
/// [`Error::Io`] if the file cannot be opened; [`Error::Parse`] for a file that is not
/// Parquet.
pub fn parquet_column_names(path: &Path) -> Result<Vec<String>> {
    let file = File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let builder = reader_builder(path, file)?;
    Ok(builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect())
}

/// Reads the whole Parquet file at `path` into memory: the column named `target` becomes
/// `y` (N×1) and every other column, in file order, becomes `x`, with the column names
/// kept as feature and target names — the Parquet counterpart of
/// [`dgp_traits::data::load_csv`]. Every column must be numeric (as [`ParquetChunks`]),
/// with no nulls and no NaN or infinity.
///
/// # Errors
/// As [`ParquetChunks::open`] and [`ChunkReader::next_chunk`] (a non-numeric column is
/// named with its type; a null, NaN or infinity with its 0-based data row);
/// [`Error::Empty`] for no data rows or no column besides the target.
pub fn load_parquet(path: &Path, target: &str) -> Result<Dataset> {
    let names = parquet_column_names(path)?;
    if !names.iter().any(|n| n == target) {
        return Err(perr(
            path,
            format!("no column named '{target}' (columns: {names:?})"),
        ));
    }
    let features: Vec<String> = names.iter().filter(|n| *n != target).cloned().collect();
    if features.is_empty() {
        return Err(Error::Empty(format!(
            "{}: no feature column besides the target '{target}'",
            path.display()
        )));
    }
    let targets = vec![target.to_string()];
    let mut reader = ParquetChunks::open(path, &features, &targets, DEFAULT_PARQUET_BATCH_ROWS)?;
    let w = features.len() + 1;
    let mut rows = Vec::new();
    let mut chunk = Vec::new();
    while reader.next_chunk(&mut chunk, DEFAULT_PARQUET_BATCH_ROWS)? > 0 {
        rows.extend_from_slice(&chunk);
    }
    let n = rows.len() / w;
    if n == 0 {
        return Err(Error::Empty(format!("{}: no data rows", path.display())));
    }
    let d = features.len();
    let x = Mat::from_fn(n, d, |i, j| rows[i * w + j]);
    let y = Mat::from_fn(n, 1, |i, _| rows[i * w + d]);
    Dataset::new(x, y)?
        .with_feature_names(features)?
        .with_target_names(targets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rowstore::RowStore;
    use crate::tabular::convert_to_rowstore;
    use arrow_array::{Float64Array, Int32Array, StringArray};
    use arrow_schema::Field;
    use dgp_traits::data::RowSource;
    use parquet::arrow::ArrowWriter;
    use std::sync::Arc;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn write(path: &Path, n: usize, bad_row: Option<usize>) {
        let schema = Arc::new(arrow_schema::Schema::new(vec![
            Field::new("a", DataType::Float64, false),
            Field::new("s", DataType::Utf8, false),
            Field::new("b", DataType::Int32, false),
            Field::new("y", DataType::Float64, false),
        ]));
        let file = File::create(path).unwrap();
        let mut w = ArrowWriter::try_new(file, schema.clone(), None).unwrap();
        // Several record batches of uneven sizes.
        let mut start = 0;
        for len in [7, 100, n - 107] {
            let a: Vec<f64> = (start..start + len)
                .map(|i| {
                    if Some(i) == bad_row {
                        f64::INFINITY
                    } else {
                        i as f64 * 0.25
                    }
                })
                .collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Float64Array::from(a)),
                    Arc::new(StringArray::from(
                        (start..start + len)
                            .map(|i| format!("r{i}"))
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(Int32Array::from(
                        (start..start + len)
                            .map(|i| -(i as i32))
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(Float64Array::from(
                        (start..start + len)
                            .map(|i| (i * i) as f64)
                            .collect::<Vec<_>>(),
                    )),
                ],
            )
            .unwrap();
            w.write(&batch).unwrap();
            start += len;
        }
        w.close().unwrap();
    }

    #[test]
    fn parquet_converts_with_columns_by_name_in_any_order() {
        let dir = std::env::temp_dir().join(format!("dgp-io-pq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pq = dir.join("in.parquet");
        write(&pq, 250, None);
        for (batch, chunk) in [(16, 10), (1000, 33), (1, 250)] {
            let mut r =
                ParquetChunks::open(&pq, &names(&["b", "a"]), &names(&["y"]), batch).unwrap();
            let out = dir.join(format!("o{batch}.rows"));
            assert_eq!(
                convert_to_rowstore(&mut r, &out, &[&pq], chunk).unwrap(),
                250
            );
            let d = RowStore::open(&out).unwrap().to_dataset().unwrap();
            assert_eq!(d.n(), 250);
            for i in [0, 6, 7, 106, 107, 249] {
                assert_eq!(d.x()[(i, 0)], -(i as f64));
                assert_eq!(d.x()[(i, 1)], i as f64 * 0.25);
                assert_eq!(d.y()[(i, 0)], (i * i) as f64);
            }
            assert_eq!(RowStore::open(&out).unwrap().input_dim(), 2);
        }
        let e = ParquetChunks::open(&pq, &names(&["a", "zz"]), &names(&["y"]), 10).unwrap_err();
        assert!(e.to_string().contains("no column named 'zz'"), "{e}");
        let e = ParquetChunks::open(&pq, &names(&["s"]), &names(&["y"]), 10).unwrap_err();
        assert!(e.to_string().contains("column 's' has type Utf8"), "{e}");
        let e = ParquetChunks::open(&dir.join("o16.rows"), &names(&["a"]), &names(&["y"]), 10)
            .unwrap_err();
        assert!(matches!(e, Error::Parse { .. }), "{e}");

        write(&pq, 250, Some(123));
        let mut r = ParquetChunks::open(&pq, &names(&["b", "a"]), &names(&["y"]), 16).unwrap();
        match convert_to_rowstore(&mut r, &dir.join("bad.rows"), &[&pq], 50) {
            Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (123, 1)),
            other => panic!("{other:?}"),
        }
        assert!(!dir.join("bad.rows").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A numeric-only file: the same columns as [`write`] without the string column.
    fn write_numeric(path: &Path, n: usize, bad_row: Option<usize>) {
        let schema = Arc::new(arrow_schema::Schema::new(vec![
            Field::new("a", DataType::Float64, false),
            Field::new("y", DataType::Float64, false),
            Field::new("b", DataType::Int32, true),
        ]));
        let file = File::create(path).unwrap();
        let mut w = ArrowWriter::try_new(file, schema.clone(), None).unwrap();
        let mut start = 0;
        for len in [3, n - 3] {
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Float64Array::from(
                        (start..start + len)
                            .map(|i| i as f64 * 0.5)
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(Float64Array::from(
                        (start..start + len)
                            .map(|i| {
                                if Some(i) == bad_row {
                                    f64::NAN
                                } else {
                                    1.0 + i as f64
                                }
                            })
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(Int32Array::from(
                        (start..start + len)
                            .map(|i| i as i32 % 3)
                            .collect::<Vec<_>>(),
                    )),
                ],
            )
            .unwrap();
            w.write(&batch).unwrap();
            start += len;
        }
        w.close().unwrap();
    }

    #[test]
    fn load_parquet_reads_every_other_column_as_features_in_file_order() {
        let dir = std::env::temp_dir().join(format!("dgp-io-pqload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pq = dir.join("t.parquet");
        write_numeric(&pq, 40, None);
        assert_eq!(parquet_column_names(&pq).unwrap(), names(&["a", "y", "b"]));
        let d = load_parquet(&pq, "y").unwrap();
        assert_eq!((d.n(), d.input_dim(), d.output_dim()), (40, 2, 1));
        assert_eq!(d.feature_names().unwrap(), &names(&["a", "b"])[..]);
        assert_eq!(d.target_names().unwrap(), &names(&["y"])[..]);
        for i in [0, 2, 3, 39] {
            assert_eq!(d.x()[(i, 0)], i as f64 * 0.5);
            assert_eq!(d.x()[(i, 1)], (i % 3) as f64);
            assert_eq!(d.y()[(i, 0)], 1.0 + i as f64);
        }
        // Another target: the former target becomes a feature, in file order.
        let d = load_parquet(&pq, "b").unwrap();
        assert_eq!(d.feature_names().unwrap(), &names(&["a", "y"])[..]);
        assert_eq!(d.y()[(5, 0)], 2.0);

        let e = load_parquet(&pq, "zz").unwrap_err();
        assert!(e.to_string().contains("no column named 'zz'"), "{e}");
        write_numeric(&pq, 40, Some(17));
        match load_parquet(&pq, "b") {
            Err(Error::NonFinite { row, .. }) => assert_eq!(row, 17),
            other => panic!("{other:?}"),
        }
        // A string column is named with its type; a file that is not Parquet is a parse error.
        write(&pq, 250, None);
        let e = load_parquet(&pq, "y").unwrap_err();
        assert!(e.to_string().contains("column 's' has type Utf8"), "{e}");
        let txt = dir.join("not.parquet");
        std::fs::write(&txt, "a,y\n1,2\n").unwrap();
        assert!(matches!(load_parquet(&txt, "y"), Err(Error::Parse { .. })));
        // Truncated file: a parse error, never a panic.
        write_numeric(&pq, 40, None);
        let bytes = std::fs::read(&pq).unwrap();
        std::fs::write(&pq, &bytes[..bytes.len() / 2]).unwrap();
        assert!(matches!(load_parquet(&pq, "y"), Err(Error::Parse { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Reads every chunk of `path` (columns a, y) into a vector, or the first error.
    fn read_all(path: &Path) -> Result<Vec<f64>> {
        let mut r = ParquetChunks::open(path, &names(&["a"]), &names(&["y"]), 32)?;
        let (mut all, mut buf) = (Vec::new(), Vec::new());
        while r.next_chunk(&mut buf, 50)? > 0 {
            all.extend_from_slice(&buf);
        }
        Ok(all)
    }

    /// A Parquet file cut short anywhere is a typed error naming the file, never a panic
    /// and never a shorter set of rows; bytes overwritten inside the file are an error or,
    /// where the format cannot tell (Parquet stores data pages without checksums by
    /// default), rows read without a panic — the conversion then still checks every
    /// value is finite.
    #[test]
    fn truncated_and_overwritten_parquet_files_are_errors_not_panics() {
        let dir = std::env::temp_dir().join(format!("dgp-io-pq-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pq = dir.join("in.parquet");
        write(&pq, 250, None);
        let bytes = std::fs::read(&pq).unwrap();
        let good = read_all(&pq).unwrap();
        assert_eq!(good.len(), 500);
        let cut = dir.join("cut.parquet");
        for len in [
            0,
            4,
            8,
            bytes.len() / 3,
            bytes.len() / 2,
            bytes.len() - 9,
            bytes.len() - 1,
        ] {
            std::fs::write(&cut, &bytes[..len]).unwrap();
            match std::panic::catch_unwind(|| read_all(&cut)) {
                Ok(Err(e)) => assert!(
                    matches!(e, Error::Parse { .. }) && e.to_string().contains("cut.parquet"),
                    "cut at {len}: {e}"
                ),
                Ok(Ok(v)) => panic!("cut at {len} bytes read {} values", v.len()),
                Err(_) => panic!("cut at {len} bytes: panic"),
            }
        }
        let bad = dir.join("bad.parquet");
        let mut outcomes = [0usize; 2];
        for start in (4..bytes.len() - 8).step_by(37) {
            let mut b = bytes.clone();
            for x in &mut b[start..(start + 6).min(bytes.len() - 8)] {
                *x ^= 0xA5;
            }
            std::fs::write(&bad, &b).unwrap();
            match std::panic::catch_unwind(|| read_all(&bad)) {
                Ok(Err(_)) => outcomes[0] += 1,
                Ok(Ok(_)) => outcomes[1] += 1,
                Err(_) => panic!("bytes {start}..{} overwritten: panic", start + 6),
            }
        }
        assert!(outcomes[0] > 0, "{outcomes:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
