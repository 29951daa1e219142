//! Streaming readers of tabular files (CSV) that deliver rows in chunks, and conversion
//! of such a stream into a row store.
//!
//! A [`ChunkReader`] yields consecutive rows, each the chosen input columns then the
//! chosen target columns, in bounded memory; [`convert_to_rowstore`] writes them to a
//! [`crate::rowstore::RowStore`] file.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use dgp_traits::data::{Dataset, FileStamp, quote_field};
use dgp_traits::{Error, Result};

use crate::rowstore::{RowStoreWriter, Schema};
use crate::sample::Reservoir;

/// Default upper bound on one physical line of a CSV file, in bytes.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

/// A stream of rows read from a file in chunks.
pub trait ChunkReader {
    /// Names of the D input and P target columns delivered.
    fn schema(&self) -> &Schema;

    /// Clears `out` and appends up to `max_rows` rows, row-major (D inputs then P targets
    /// per row); returns the number of rows appended, 0 at the end of the stream.
    ///
    /// # Errors
    /// [`Error::Parse`] for a malformed record or a non-numeric field (file, line, column
    /// and column name); [`Error::NonFinite`] for NaN or infinity (0-based data row,
    /// column among the delivered D + P); [`Error::Io`] for a failed read.
    fn next_chunk(&mut self, out: &mut Vec<f64>, max_rows: usize) -> Result<usize>;
}

/// Wraps a reader and fails as soon as a physical line exceeds `limit` bytes.
struct LineLimited<R> {
    inner: R,
    limit: usize,
    current: usize,
    line: usize,
}

impl<R: Read> Read for LineLimited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        for &b in &buf[..k] {
            if b == b'\n' {
                self.current = 0;
                self.line += 1;
            } else {
                self.current += 1;
                if self.current > self.limit {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "line {} is longer than {} bytes (the limit on one line)",
                            self.line, self.limit
                        ),
                    ));
                }
            }
        }
        Ok(k)
    }
}

fn parse_err(path: &Path, line: usize, column: usize, message: String) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// A CSV file with a header row, read record by record (memory: one record and the
/// reader's buffer, whatever the file size), delivering the columns chosen by name.
///
/// Fields are trimmed; each chosen field must parse as an `f64` and be finite; other
/// columns are not parsed. A physical line longer than the limit is an error naming the
/// line; a file that changes while it is read (checked before each chunk and at the
/// end, [`FileStamp`]) is an [`Error::Io`] saying so.
pub struct CsvChunks {
    rdr: csv::Reader<LineLimited<BufReader<File>>>,
    record: csv::ByteRecord,
    cols: Vec<usize>,
    schema: Schema,
    path: PathBuf,
    row: usize,
    /// The file as opened, to detect a change while it is read ([`FileStamp`]).
    file: File,
    stamp: FileStamp,
}

impl std::fmt::Debug for CsvChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvChunks")
            .field("path", &self.path)
            .field("schema", &self.schema)
            .field("row", &self.row)
            .finish()
    }
}

/// Positions of `names` in `header`; an error names a missing or repeated column.
fn find_columns(path: &Path, header: &[String], names: &[String]) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|t| {
            let hits: Vec<usize> = (0..header.len()).filter(|&j| header[j] == *t).collect();
            match hits.as_slice() {
                [j] => Ok(*j),
                [] => Err(parse_err(
                    path,
                    1,
                    0,
                    format!("no column named '{t}' in the header {header:?}"),
                )),
                _ => Err(parse_err(
                    path,
                    1,
                    hits[1] + 1,
                    format!("column name '{t}' appears more than once"),
                )),
            }
        })
        .collect()
}

impl CsvChunks {
    /// Opens `path` and locates the `features` and `targets` columns in its header.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened; [`Error::Parse`] for a missing or
    /// repeated column or a bad header; [`Error::Empty`] if no feature or no target is
    /// named; [`Error::Config`] if `max_line_bytes == 0`.
    pub fn open(
        path: &Path,
        features: &[String],
        targets: &[String],
        max_line_bytes: usize,
    ) -> Result<Self> {
        if max_line_bytes == 0 {
            return Err(Error::config(
                "max_line_bytes",
                "line limit must be at least 1 byte",
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
        let limited = LineLimited {
            inner: BufReader::new(file),
            limit: max_line_bytes,
            current: 0,
            line: 1,
        };
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .trim(csv::Trim::All)
            .from_reader(limited);
        let header: Vec<String> = rdr
            .headers()
            .map_err(|e| parse_err(path, 1, 0, e.to_string()))?
            .iter()
            .map(str::to_string)
            .collect();
        let mut cols = find_columns(path, &header, &schema.inputs)?;
        cols.extend(find_columns(path, &header, &schema.targets)?);
        Ok(Self {
            rdr,
            record: csv::ByteRecord::new(),
            cols,
            schema,
            path: path.to_path_buf(),
            row: 0,
            file: watched,
            stamp,
        })
    }
}

impl ChunkReader for CsvChunks {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    fn next_chunk(&mut self, out: &mut Vec<f64>, max_rows: usize) -> Result<usize> {
        out.clear();
        self.stamp.check(&self.file, &self.path)?;
        let mut rows = 0;
        while rows < max_rows {
            let more = self.rdr.read_byte_record(&mut self.record).map_err(|e| {
                let line = e.position().map(|p| p.line() as usize).unwrap_or(0);
                parse_err(&self.path, line, 0, e.to_string())
            })?;
            if !more {
                // The end as it was opened (a file appended to meanwhile is an error).
                self.stamp.check(&self.file, &self.path)?;
                break;
            }
            let line = self
                .record
                .position()
                .map(|p| p.line() as usize)
                .unwrap_or(0);
            for (k, &c) in self.cols.iter().enumerate() {
                let name = if k < self.schema.d() {
                    &self.schema.inputs[k]
                } else {
                    &self.schema.targets[k - self.schema.d()]
                };
                let field = self.record.get(c).ok_or_else(|| {
                    parse_err(
                        &self.path,
                        line,
                        c + 1,
                        format!("record has no field for column '{name}'"),
                    )
                })?;
                // Trimmed as text (Unicode white space, as the core's `load_csv` trims its
                // fields): the reader's own trim of a byte record drops ASCII white space
                // only, and a vertical tab or a no-break space around a number would make
                // the two loaders disagree on the same file.
                let v = std::str::from_utf8(field)
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .ok_or_else(|| {
                        parse_err(
                            &self.path,
                            line,
                            c + 1,
                            format!(
                                "column '{name}': {} is not a number",
                                quote_field(&String::from_utf8_lossy(field))
                            ),
                        )
                    })?;
                if !v.is_finite() {
                    return Err(Error::NonFinite {
                        context: format!("{} (line {line}, column '{name}')", self.path.display()),
                        row: self.row,
                        col: k,
                    });
                }
                out.push(v);
            }
            self.row += 1;
            rows += 1;
        }
        Ok(rows)
    }
}

/// Streams every row of `reader` into a row store at `dest` in chunks of `chunk_rows`,
/// refusing a destination that is one of `inputs`; returns the number of rows. On any
/// error no file is left under `dest` (and an existing `dest` is untouched).
///
/// # Errors
/// Errors of the reader and of [`RowStoreWriter`].
pub fn convert_to_rowstore<R: ChunkReader + ?Sized>(
    reader: &mut R,
    dest: &Path,
    inputs: &[&Path],
    chunk_rows: usize,
) -> Result<u64> {
    if chunk_rows == 0 {
        return Err(Error::config(
            "chunk_rows",
            "chunk size must be at least 1 row",
        ));
    }
    let mut w = RowStoreWriter::create(dest, reader.schema().clone(), inputs)?;
    let mut buf = Vec::new();
    while reader.next_chunk(&mut buf, chunk_rows)? > 0 {
        w.push_row_major(&buf)?;
    }
    w.finish()
}

/// A reservoir sample of `k` rows of the stream (see [`crate::sample`]); reads the whole
/// stream in chunks of `chunk_rows`.
///
/// # Errors
/// Errors of the reader; [`Error::Empty`] for an empty stream.
pub fn reservoir_from_chunks<R: ChunkReader + ?Sized>(
    reader: &mut R,
    k: usize,
    seed: u64,
    chunk_rows: usize,
) -> Result<Dataset> {
    if chunk_rows == 0 {
        return Err(Error::config(
            "chunk_rows",
            "chunk size must be at least 1 row",
        ));
    }
    let (d, p) = (reader.schema().d(), reader.schema().p());
    let mut res = Reservoir::new(k, d, p, seed)?;
    let mut buf = Vec::new();
    loop {
        let m = reader.next_chunk(&mut buf, chunk_rows)?;
        if m == 0 {
            break;
        }
        let x = faer::Mat::from_fn(m, d, |i, j| buf[i * (d + p) + j]);
        let y = faer::Mat::from_fn(m, p, |i, j| buf[i * (d + p) + d + j]);
        res.push(x.as_ref(), y.as_ref())?;
    }
    res.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rowstore::RowStore;
    use dgp_traits::data::RowSource;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dgp-io-tab-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn csv_converts_to_a_row_store_with_chosen_columns() {
        let dir = tmp("csv");
        let csv = dir.join("in.csv");
        let mut text = String::from("id, b ,y,a,note\n");
        for i in 0..103 {
            text.push_str(&format!(
                "{i},{},{},{},text {i}\n",
                i as f64 * 0.5,
                -(i as f64),
                i * i
            ));
        }
        std::fs::write(&csv, &text).unwrap();
        let out = dir.join("out.rows");
        let mut r = CsvChunks::open(&csv, &names(&["a", "b"]), &names(&["y"]), 1000).unwrap();
        assert_eq!(convert_to_rowstore(&mut r, &out, &[&csv], 10).unwrap(), 103);
        let s = RowStore::open(&out).unwrap();
        assert_eq!(s.schema().inputs, names(&["a", "b"]));
        let d = s.to_dataset().unwrap();
        assert_eq!(
            (d.x()[(7, 0)], d.x()[(7, 1)], d.y()[(7, 0)]),
            (49.0, 3.5, -7.0)
        );
        assert_eq!(s.n(), 103);
        // The same rows through the reservoir of the stream and of the store.
        let mut r = CsvChunks::open(&csv, &names(&["a", "b"]), &names(&["y"]), 1000).unwrap();
        let a = reservoir_from_chunks(&mut r, 9, 3, 7).unwrap();
        let b = crate::sample::reservoir_sample(&s, 9, 3).unwrap();
        assert_eq!(a.x(), b.x());
        // Refuses to overwrite its input.
        let mut r = CsvChunks::open(&csv, &names(&["a"]), &names(&["y"]), 1000).unwrap();
        assert!(convert_to_rowstore(&mut r, &csv, &[&csv], 10).is_err());
        assert_eq!(std::fs::read_to_string(&csv).unwrap(), text);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_errors_name_the_column_row_and_line() {
        let dir = tmp("csverr");
        let csv = dir.join("e.csv");
        std::fs::write(&csv, "a,y,s\n1,2,x\n3,4,y\n").unwrap();
        let e = CsvChunks::open(&csv, &names(&["a", "z"]), &names(&["y"]), 100).unwrap_err();
        assert!(e.to_string().contains("no column named 'z'"), "{e}");
        let mut r = CsvChunks::open(&csv, &names(&["s"]), &names(&["y"]), 100).unwrap();
        let e = r.next_chunk(&mut Vec::new(), 10).unwrap_err();
        match e {
            Error::Parse { line, message, .. } => {
                assert_eq!(line, 2);
                assert!(message.contains("column 's'") && message.contains("not a number"));
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(&csv, "a,y\n1,2\n3,4\n5,nan\n").unwrap();
        let mut r = CsvChunks::open(&csv, &names(&["a"]), &names(&["y"]), 100).unwrap();
        let out = dir.join("o.rows");
        match convert_to_rowstore(&mut r, &out, &[], 2) {
            Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (2, 1)),
            other => panic!("{other:?}"),
        }
        assert!(!out.exists());
        std::fs::write(&csv, format!("a,y\n1,2\n{},4\n", "9".repeat(500))).unwrap();
        // The limit may be hit while the header is read (small file, one buffer) or later.
        let e = CsvChunks::open(&csv, &names(&["a"]), &names(&["y"]), 100)
            .and_then(|mut r| r.next_chunk(&mut Vec::new(), 10))
            .unwrap_err();
        assert!(
            e.to_string().contains("line 3 is longer than 100 bytes"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_csv_file_changed_while_streamed_is_an_error() {
        let dir = tmp("csvchanged");
        let csv = dir.join("c.csv");
        let mut text = String::from("a,y\n");
        for i in 0..50 {
            text.push_str(&format!("{i},{}\n", 2 * i));
        }
        std::fs::write(&csv, &text).unwrap();
        let mut r = CsvChunks::open(&csv, &names(&["a"]), &names(&["y"]), 100).unwrap();
        let mut buf = Vec::new();
        assert_eq!(r.next_chunk(&mut buf, 10).unwrap(), 10);
        // Appended to (a writer still at work): the next chunk says so.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&csv).unwrap();
        writeln!(f, "50,100").unwrap();
        drop(f);
        let e = r.next_chunk(&mut buf, 10).unwrap_err();
        assert!(
            matches!(e, Error::Io { .. }) && e.to_string().contains("changed while it was read"),
            "{e}"
        );
        // A file replaced by rename is not a change of the open file.
        let mut r = CsvChunks::open(&csv, &names(&["a"]), &names(&["y"]), 100).unwrap();
        let other = dir.join("other.csv");
        std::fs::write(&other, "a,y\n7,7\n").unwrap();
        std::fs::rename(&other, &csv).unwrap();
        let mut n = 0;
        while r.next_chunk(&mut buf, 16).unwrap() > 0 {
            n += buf.len() / 2;
        }
        assert_eq!(n, 51);
        // A whole-file read of a file that changed: see dgp_traits::data::FileStamp.
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Fuzz finding (target `csv`): a field " \u{b}4" (vertical tab) was a number to the
    /// core's `load_csv` and not to the streaming reader.
    #[test]
    fn fields_are_trimmed_as_the_core_loader_trims_them() {
        let dir = tmp("csvtrim");
        let csv = dir.join("t.csv");
        std::fs::write(&csv, "x0,y\r\n1,2\r\n\u{b}4\u{a0},\u{2003}6\r\n").unwrap();
        let core = dgp_traits::data::load_csv(&csv, "y").unwrap();
        let mut r = CsvChunks::open(&csv, &names(&["x0"]), &names(&["y"]), 100).unwrap();
        let mut buf = Vec::new();
        assert_eq!(r.next_chunk(&mut buf, 10).unwrap(), 2);
        assert_eq!(buf, vec![1.0, 2.0, 4.0, 6.0]);
        assert_eq!((core.x()[(1, 0)], core.y()[(1, 0)]), (4.0, 6.0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
