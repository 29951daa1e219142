//! The binary row store: N rows of D inputs and P targets as little-endian `f64`, one row
//! contiguous, behind a self-checking header.
//!
//! # File format (version [`FORMAT_VERSION`])
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic [`MAGIC`] |
//! | 8 | 4 | format version, `u32` LE |
//! | 12 | 4 | reserved, zero |
//! | 16 | 8 | N (rows), `u64` LE |
//! | 24 | 8 | D (inputs per row), `u64` LE |
//! | 32 | 8 | P (targets per row), `u64` LE |
//! | 40 | 8 | L, byte length of the name block, `u64` LE |
//! | 48 | L | D + P names (inputs, then targets), each `u32` LE byte length + UTF-8 |
//! | 48 + L | 0..7 | zero padding to a multiple of 8 |
//! | H − 8 | 8 | header checksum: FNV-1a 64 of bytes `0..H−8`, `u64` LE |
//! | H | N·(D+P)·8 | rows: row `i` is `x[i,0..D]` then `y[i,0..P]`, `f64` LE |
//!
//! `H` (the header length) is a multiple of 8, so every value is 8-byte aligned in a
//! mapping. A valid file has length exactly `H + N·(D+P)·8`, N ≥ 1, D ≥ 1, P ≥ 1, and
//! only finite values (checked when written, and again when a row is read).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use dgp_traits::data::{Dataset, FileStamp, RowSource, check_gather};
use dgp_traits::{Error, Result};
use faer::{Mat, MatMut, MatRef};
use memmap2::Mmap;

/// The 8 bytes every row store begins with.
pub const MAGIC: [u8; 8] = *b"DGPROWS\0";

/// The format version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Length of the fixed part of the header (before the name block).
const FIXED_HEADER: usize = 48;

/// Largest accepted name block (a corrupt length field must not trigger a huge read).
const MAX_NAME_BLOCK: u64 = 1 << 26;

/// Capacity of the writer's buffer: the writer's memory use, whatever the number of rows.
pub const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// FNV-1a, 64-bit: the header checksum.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn format_err(path: &Path, message: impl Into<String>) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line: 0,
        column: 0,
        message: message.into(),
    }
}

/// Column names and counts of a row store: D input names and P target names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// Names of the D input columns (D ≥ 1).
    pub inputs: Vec<String>,
    /// Names of the P target columns (P ≥ 1).
    pub targets: Vec<String>,
}

impl Schema {
    /// A schema from names; errors if either list is empty.
    ///
    /// # Errors
    /// [`Error::Empty`] if there are no inputs or no targets.
    pub fn new(inputs: Vec<String>, targets: Vec<String>) -> Result<Self> {
        if inputs.is_empty() || targets.is_empty() {
            return Err(Error::Empty(format!(
                "a row store needs at least one input and one target column (got {} and {})",
                inputs.len(),
                targets.len()
            )));
        }
        Ok(Self { inputs, targets })
    }

    /// Default names `x0..x{d-1}` and `y0..y{p-1}`.
    ///
    /// # Errors
    /// [`Error::Empty`] if `d == 0` or `p == 0`.
    pub fn numbered(d: usize, p: usize) -> Result<Self> {
        Self::new(
            (0..d).map(|j| format!("x{j}")).collect(),
            (0..p).map(|j| format!("y{j}")).collect(),
        )
    }

    /// The schema of a data set: its names when it has them, numbered names otherwise.
    pub fn of(data: &Dataset) -> Self {
        let inputs = data
            .feature_names()
            .map(<[String]>::to_vec)
            .unwrap_or_else(|| (0..data.input_dim()).map(|j| format!("x{j}")).collect());
        let targets = data
            .target_names()
            .map(<[String]>::to_vec)
            .unwrap_or_else(|| (0..data.output_dim()).map(|j| format!("y{j}")).collect());
        Self { inputs, targets }
    }

    /// D, the number of inputs.
    pub fn d(&self) -> usize {
        self.inputs.len()
    }

    /// P, the number of targets.
    pub fn p(&self) -> usize {
        self.targets.len()
    }

    /// The complete header bytes for `n` rows (length a multiple of 8, checksum last).
    fn header_bytes(&self, n: u64) -> Result<Vec<u8>> {
        let mut names = Vec::new();
        for s in self.inputs.iter().chain(&self.targets) {
            let len = u32::try_from(s.len()).map_err(|_| {
                Error::config("column_names", format!("column name of {} bytes", s.len()))
            })?;
            names.extend_from_slice(&len.to_le_bytes());
            names.extend_from_slice(s.as_bytes());
        }
        if names.len() as u64 > MAX_NAME_BLOCK {
            return Err(Error::config(
                "column_names",
                format!(
                    "column names take {} bytes; at most {MAX_NAME_BLOCK} are allowed",
                    names.len()
                ),
            ));
        }
        let mut h = Vec::with_capacity(FIXED_HEADER + names.len() + 16);
        h.extend_from_slice(&MAGIC);
        h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&n.to_le_bytes());
        h.extend_from_slice(&(self.d() as u64).to_le_bytes());
        h.extend_from_slice(&(self.p() as u64).to_le_bytes());
        h.extend_from_slice(&(names.len() as u64).to_le_bytes());
        h.extend_from_slice(&names);
        while h.len() % 8 != 0 {
            h.push(0);
        }
        let sum = fnv1a64(&h);
        h.extend_from_slice(&sum.to_le_bytes());
        Ok(h)
    }
}

/// A parsed, verified header: the schema, N and the header length H.
#[derive(Clone, Debug)]
struct Header {
    schema: Schema,
    n: usize,
    len: usize,
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// Parses and verifies the header at the start of `b` (the whole file or its mapping).
fn parse_header(path: &Path, b: &[u8]) -> Result<Header> {
    if b.len() < FIXED_HEADER + 8 {
        return Err(format_err(
            path,
            format!(
                "not a row store: {} bytes, shorter than the smallest header ({} bytes)",
                b.len(),
                FIXED_HEADER + 8
            ),
        ));
    }
    if b[..8] != MAGIC {
        return Err(format_err(
            path,
            format!("not a row store: magic {:?}, expected {:?}", &b[..8], MAGIC),
        ));
    }
    let version = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
    if version != FORMAT_VERSION {
        return Err(format_err(
            path,
            format!(
                "row store format version {version}; this reader reads version {FORMAT_VERSION}"
            ),
        ));
    }
    let names_len = u64_at(b, 40);
    if names_len > MAX_NAME_BLOCK {
        return Err(format_err(
            path,
            format!("corrupt header: name block of {names_len} bytes"),
        ));
    }
    let names_end = FIXED_HEADER + names_len as usize;
    let len = names_end.div_ceil(8) * 8 + 8;
    if b.len() < len {
        return Err(format_err(
            path,
            format!(
                "truncated header: {} bytes, the header alone needs {len}",
                b.len()
            ),
        ));
    }
    let stored = u64_at(b, len - 8);
    let computed = fnv1a64(&b[..len - 8]);
    if stored != computed {
        return Err(format_err(
            path,
            format!("corrupt header: checksum {stored:#018x} stored, {computed:#018x} computed"),
        ));
    }
    let (n, d, p) = (u64_at(b, 16), u64_at(b, 24), u64_at(b, 32));
    if n == 0 || d == 0 || p == 0 {
        return Err(format_err(
            path,
            format!("row store with N = {n}, D = {d}, P = {p}; all must be ≥ 1"),
        ));
    }
    let mut names = Vec::new();
    let mut off = FIXED_HEADER;
    for k in 0..d.saturating_add(p) {
        if off + 4 > names_end {
            return Err(format_err(
                path,
                format!("corrupt header: name {k} runs past the name block"),
            ));
        }
        let l = u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]) as usize;
        off += 4;
        if off + l > names_end {
            return Err(format_err(
                path,
                format!("corrupt header: name {k} runs past the name block"),
            ));
        }
        let s = std::str::from_utf8(&b[off..off + l])
            .map_err(|_| format_err(path, format!("corrupt header: name {k} is not UTF-8")))?;
        names.push(s.to_string());
        off += l;
    }
    if off != names_end {
        return Err(format_err(
            path,
            "corrupt header: the name block has trailing bytes",
        ));
    }
    let targets = names.split_off(d as usize);
    let n = usize::try_from(n)
        .map_err(|_| format_err(path, format!("{n} rows do not fit this platform")))?;
    Ok(Header {
        schema: Schema {
            inputs: names,
            targets,
        },
        n,
        len,
    })
}

/// Byte length of the rows of `n` rows with `w` values each, or an error on overflow.
fn data_bytes(path: &Path, n: usize, w: usize) -> Result<u64> {
    (n as u64)
        .checked_mul(w as u64)
        .and_then(|v| v.checked_mul(8))
        .ok_or_else(|| format_err(path, format!("{n} rows of {w} values overflow a file size")))
}

/// The canonical form of `p` even when it does not exist yet (canonical parent + name).
fn canonical_target(p: &Path) -> Option<PathBuf> {
    if let Ok(c) = p.canonicalize() {
        return Some(c);
    }
    let parent = match p.parent() {
        Some(q) if !q.as_os_str().is_empty() => q.canonicalize().ok()?,
        _ => std::env::current_dir().ok()?,
    };
    Some(parent.join(p.file_name()?))
}

/// Errors if `out` names the same file as one of `inputs` (so no output overwrites an
/// input; symbolic links and relative paths are resolved).
///
/// # Errors
/// [`Error::Config`] naming both paths.
pub fn check_not_input(out: &Path, inputs: &[&Path]) -> Result<()> {
    let o = canonical_target(out);
    for &i in inputs {
        let same = match (&o, i.canonicalize().ok()) {
            (Some(a), Some(b)) => *a == b,
            _ => out == i,
        };
        if same {
            return Err(Error::config(
                "output",
                format!(
                    "{} is the input {}; refusing to overwrite an input",
                    out.display(),
                    i.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Streaming writer of a row store.
///
/// Contract: rows are appended in order ([`RowStoreWriter::push_row`],
/// [`RowStoreWriter::push_rows`]) through a buffer of [`WRITE_BUFFER_BYTES`] (memory use does
/// not grow with N); every value must be finite, else [`Error::NonFinite`] names the row
/// (0-based, counted over the whole file) and column (inputs `0..D`, targets `D..D+P`). The
/// rows go to a temporary file `.<name>.partial-<pid>` next to the destination, which
/// [`RowStoreWriter::finish`] completes (final header, `fsync`) and renames onto the
/// destination: a reader never sees a half-written file under the final name, and a
/// reader that has the previous file open keeps reading the previous contents. A writer
/// dropped without `finish`, or failing, removes its temporary file.
#[derive(Debug)]
pub struct RowStoreWriter {
    out: BufWriter<File>,
    tmp: PathBuf,
    dest: PathBuf,
    schema: Schema,
    n: u64,
    done: bool,
}

impl RowStoreWriter {
    /// Starts a store at `dest` with the columns of `schema`, refusing a destination that
    /// is one of `inputs`.
    ///
    /// # Errors
    /// [`Error::Config`] if `dest` is an input or a name is too long; [`Error::Io`] if the
    /// temporary file cannot be created.
    pub fn create(dest: &Path, schema: Schema, inputs: &[&Path]) -> Result<Self> {
        check_not_input(dest, inputs)?;
        let name = dest.file_name().ok_or_else(|| {
            Error::config("output", format!("{} has no file name", dest.display()))
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".partial-{}", std::process::id()));
        let tmp = dest.with_file_name(tmp_name);
        let header = schema.header_bytes(0)?;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| io_err(&tmp, e))?;
        let mut w = Self {
            out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, file),
            tmp,
            dest: dest.to_path_buf(),
            schema,
            n: 0,
            done: false,
        };
        w.write(&header)?;
        Ok(w)
    }

    fn write(&mut self, b: &[u8]) -> Result<()> {
        self.out.write_all(b).map_err(|e| io_err(&self.tmp, e))
    }

    /// The schema being written.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.n
    }

    /// Appends one row: `x` (D values) then `y` (P values).
    ///
    /// # Errors
    /// [`Error::Shape`] for a wrong length; [`Error::NonFinite`] for NaN/inf (nothing of the
    /// row is written); [`Error::Io`] for a failed write.
    pub fn push_row(&mut self, x: &[f64], y: &[f64]) -> Result<()> {
        let (d, p) = (self.schema.d(), self.schema.p());
        if x.len() != d || y.len() != p {
            return Err(Error::shape(
                "RowStoreWriter::push_row (inputs, targets)",
                format!("({d}, {p})"),
                format!("({}, {})", x.len(), y.len()),
            ));
        }
        let row = self.n as usize;
        if let Some(col) = x.iter().chain(y).position(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                context: format!("rows written to {}", self.dest.display()),
                row,
                col,
            });
        }
        for &v in x.iter().chain(y) {
            self.out
                .write_all(&v.to_le_bytes())
                .map_err(|e| io_err(&self.tmp, e))?;
        }
        self.n += 1;
        Ok(())
    }

    /// Appends the rows of `x` (m×D) and `y` (m×P) in order; all rows are checked before
    /// any is written.
    ///
    /// # Errors
    /// As [`RowStoreWriter::push_row`]; the row number of [`Error::NonFinite`] is counted over
    /// the whole file.
    pub fn push_rows(&mut self, x: MatRef<'_, f64>, y: MatRef<'_, f64>) -> Result<()> {
        let (d, p) = (self.schema.d(), self.schema.p());
        if x.ncols() != d || y.ncols() != p || x.nrows() != y.nrows() {
            return Err(Error::shape(
                "RowStoreWriter::push_rows (x, y)",
                format!("(m×{d}, m×{p})"),
                format!("({}×{}, {}×{})", x.nrows(), x.ncols(), y.nrows(), y.ncols()),
            ));
        }
        for i in 0..x.nrows() {
            let bad = (0..d)
                .map(|j| x[(i, j)])
                .chain((0..p).map(|j| y[(i, j)]))
                .position(|v| !v.is_finite());
            if let Some(col) = bad {
                return Err(Error::NonFinite {
                    context: format!("rows written to {}", self.dest.display()),
                    row: self.n as usize + i,
                    col,
                });
            }
        }
        for i in 0..x.nrows() {
            for v in (0..d).map(|j| x[(i, j)]).chain((0..p).map(|j| y[(i, j)])) {
                self.out
                    .write_all(&v.to_le_bytes())
                    .map_err(|e| io_err(&self.tmp, e))?;
            }
        }
        self.n += x.nrows() as u64;
        Ok(())
    }

    /// Appends rows given as one row-major slice: `values.len()` must be a multiple of
    /// D+P, each row D inputs then P targets (the on-disk layout); all rows are checked
    /// before any is written.
    ///
    /// # Errors
    /// As [`RowStoreWriter::push_rows`].
    pub fn push_row_major(&mut self, values: &[f64]) -> Result<()> {
        let w = self.schema.d() + self.schema.p();
        if !values.len().is_multiple_of(w) {
            return Err(Error::shape(
                "RowStoreWriter::push_row_major (values)",
                format!("a multiple of {w}"),
                values.len(),
            ));
        }
        if let Some(k) = values.iter().position(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                context: format!("rows written to {}", self.dest.display()),
                row: self.n as usize + k / w,
                col: k % w,
            });
        }
        let mut bytes = [0u8; 512];
        for block in values.chunks(64) {
            for (k, v) in block.iter().enumerate() {
                bytes[8 * k..8 * k + 8].copy_from_slice(&v.to_le_bytes());
            }
            self.write(&bytes[..8 * block.len()])?;
        }
        self.n += (values.len() / w) as u64;
        Ok(())
    }

    /// Writes the final header, syncs and renames the file onto the destination; returns
    /// the number of rows.
    ///
    /// # Errors
    /// [`Error::Empty`] if no row was written (the temporary file is removed);
    /// [`Error::Io`] for a failed write, sync or rename.
    pub fn finish(mut self) -> Result<u64> {
        if self.n == 0 {
            return Err(Error::Empty(format!(
                "no rows were written to {}",
                self.dest.display()
            )));
        }
        let header = self.schema.header_bytes(self.n)?;
        self.out.flush().map_err(|e| io_err(&self.tmp, e))?;
        let f = self.out.get_mut();
        f.seek(SeekFrom::Start(0))
            .and_then(|_| f.write_all(&header))
            .and_then(|_| f.sync_all())
            .map_err(|e| io_err(&self.tmp, e))?;
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| io_err(&self.dest, e))?;
        self.done = true;
        Ok(self.n)
    }
}

impl Drop for RowStoreWriter {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `data` as a row store at `dest` (names from the data set when it has them).
///
/// # Errors
/// As [`RowStoreWriter::create`] and [`RowStoreWriter::finish`].
pub fn write_dataset(dest: &Path, data: &Dataset, inputs: &[&Path]) -> Result<u64> {
    let mut w = RowStoreWriter::create(dest, Schema::of(data), inputs)?;
    w.push_rows(data.x(), data.y())?;
    w.finish()
}

/// A row store opened for reading through a read-only memory mapping; a [`RowSource`].
///
/// Checked at open: magic, format version, header checksum, N, D, P ≥ 1, and file length
/// `== H + N·(D+P)·8` (a truncated or extended file is an error naming both sizes).
///
/// Checked on every [`RowSource::gather`] (one `fstat` of the open file, no allocation):
/// the file's length and modification time are those seen at open; otherwise
/// [`Error::Io`] says the file changed while it was read. Values are checked finite as
/// they are copied ([`Error::NonFinite`] names the file row and column).
///
/// What cannot be detected: a change that keeps length and modification time (writes
/// through another shared mapping before the kernel updates the time, or a time reset).
/// A file *replaced* by rename (as [`RowStoreWriter`] does) is not a change: the mapping
/// keeps the contents that were opened. A file *truncated in place* while a gather copies
/// rows between the check and the copy makes the kernel raise `SIGBUS`, which ends the
/// process; mitigation: the workspace's writers never truncate or rewrite a finished
/// file in place (they write a temporary file and rename it), the length check before
/// every gather narrows the window to one copy, and [`RowStore::to_dataset`] reads a
/// store that must survive external writers into memory.
#[derive(Debug)]
pub struct RowStore {
    map: Mmap,
    file: File,
    path: PathBuf,
    schema: Schema,
    n: usize,
    header_len: usize,
    /// The file as opened ([`FileStamp`]), checked before every read.
    stamp: FileStamp,
}

impl RowStore {
    /// Opens and verifies a row store (see the type docs for what is checked).
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened or mapped; [`Error::Parse`] for a file that
    /// is not a valid row store (wrong magic or version, corrupt header, wrong length).
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        let meta = file.metadata().map_err(|e| io_err(path, e))?;
        if !meta.is_file() {
            return Err(format_err(path, "not a regular file"));
        }
        // SAFETY: the mapping is read-only; a concurrent truncation is the documented
        // SIGBUS case (type docs), and every other change is checked before each read.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| io_err(path, e))?;
        let h = parse_header(path, &map)?;
        let w = h.schema.d() + h.schema.p();
        let expected = (h.len as u64)
            .checked_add(data_bytes(path, h.n, w)?)
            .ok_or_else(|| format_err(path, "file size overflows"))?;
        let actual = meta.len();
        if actual != expected {
            return Err(format_err(
                path,
                format!(
                    "row store of {} rows × {w} values must be {expected} bytes, the file has \
                     {actual} bytes ({})",
                    h.n,
                    if actual < expected {
                        "truncated"
                    } else {
                        "trailing data"
                    }
                ),
            ));
        }
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Random);
        Ok(Self {
            stamp: FileStamp::of(&file, path)?,
            map,
            file,
            path: path.to_path_buf(),
            schema: h.schema,
            n: h.n,
            header_len: h.len,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Column names.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Checks that the file still has the length and modification time seen at open.
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be checked or has changed.
    pub fn check_unchanged(&self) -> Result<()> {
        self.stamp.check(&self.file, &self.path)
    }

    /// The values of row `i` (D inputs then P targets), as stored.
    fn row_bytes(&self, i: usize) -> &[u8] {
        let w = (self.schema.d() + self.schema.p()) * 8;
        let start = self.header_len + i * w;
        &self.map[start..start + w]
    }

    /// Reads every row into memory (names included).
    ///
    /// # Errors
    /// As [`RowSource::gather`].
    pub fn to_dataset(&self) -> Result<Dataset> {
        let idx: Vec<usize> = (0..self.n).collect();
        let mut x = Mat::zeros(self.n, self.schema.d());
        let mut y = Mat::zeros(self.n, self.schema.p());
        self.gather(&idx, x.as_mut(), y.as_mut())?;
        Dataset::new(x, y)?
            .with_feature_names(self.schema.inputs.clone())?
            .with_target_names(self.schema.targets.clone())
    }
}

#[inline]
fn f64_at(b: &[u8], k: usize) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[8 * k..8 * k + 8]);
    f64::from_le_bytes(a)
}

impl RowSource for RowStore {
    fn n(&self) -> usize {
        self.n
    }

    fn input_dim(&self) -> usize {
        self.schema.d()
    }

    fn output_dim(&self) -> usize {
        self.schema.p()
    }

    fn gather(&self, idx: &[usize], mut x: MatMut<'_, f64>, mut y: MatMut<'_, f64>) -> Result<()> {
        let (d, p) = (self.schema.d(), self.schema.p());
        check_gather(self.n, (d, p), idx, &x, &y)?;
        self.check_unchanged()?;
        for (r, &i) in idx.iter().enumerate() {
            let b = self.row_bytes(i);
            for j in 0..d {
                let v = f64_at(b, j);
                if !v.is_finite() {
                    return Err(Error::NonFinite {
                        context: format!("row store {}", self.path.display()),
                        row: i,
                        col: j,
                    });
                }
                x[(r, j)] = v;
            }
            for j in 0..p {
                let v = f64_at(b, d + j);
                if !v.is_finite() {
                    return Err(Error::NonFinite {
                        context: format!("row store {}", self.path.display()),
                        row: i,
                        col: d + j,
                    });
                }
                y[(r, j)] = v;
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "row store {} ({} rows, {} inputs, {} targets)",
            self.path.display(),
            self.n,
            self.schema.d(),
            self.schema.p()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::rng::seeded;
    use rand::RngExt;

    pub(crate) fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dgp-io-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn random_data(n: usize, d: usize, p: usize, seed: u64) -> Dataset {
        let mut r = seeded(seed);
        let x = Mat::from_fn(n, d, |_, _| r.random::<f64>() * 10.0 - 5.0);
        let y = Mat::from_fn(n, p, |_, _| r.random::<f64>() * 1e6);
        Dataset::new(x, y).unwrap()
    }

    #[test]
    fn round_trip_and_gather_bit_identical_to_memory() {
        let dir = tmpdir("rt");
        let path = dir.join("a.rows");
        let data = random_data(257, 3, 2, 1);
        // Written in uneven chunks, to exercise streaming appends.
        let mut w = RowStoreWriter::create(&path, Schema::of(&data), &[]).unwrap();
        w.push_rows(data.x().subrows(0, 100), data.y().subrows(0, 100))
            .unwrap();
        let row_x: Vec<f64> = (0..3).map(|j| data.x()[(100, j)]).collect();
        let row_y: Vec<f64> = (0..2).map(|j| data.y()[(100, j)]).collect();
        w.push_row(&row_x, &row_y).unwrap();
        w.push_rows(data.x().subrows(101, 156), data.y().subrows(101, 156))
            .unwrap();
        assert_eq!(w.finish().unwrap(), 257);
        let s = RowStore::open(&path).unwrap();
        assert_eq!((s.n(), s.input_dim(), s.output_dim()), (257, 3, 2));
        assert_eq!(s.schema(), &Schema::numbered(3, 2).unwrap());
        let idx = [256, 0, 17, 17, 100, 3];
        let (mut xa, mut ya) = (Mat::zeros(6, 3), Mat::zeros(6, 2));
        let (mut xb, mut yb) = (Mat::zeros(6, 3), Mat::zeros(6, 2));
        s.gather(&idx, xa.as_mut(), ya.as_mut()).unwrap();
        RowSource::gather(&data, &idx, xb.as_mut(), yb.as_mut()).unwrap();
        for r in 0..6 {
            for j in 0..3 {
                assert_eq!(xa[(r, j)].to_bits(), xb[(r, j)].to_bits());
            }
            for j in 0..2 {
                assert_eq!(ya[(r, j)].to_bits(), yb[(r, j)].to_bits());
            }
        }
        let back = s.to_dataset().unwrap();
        assert_eq!(back.x(), data.x());
        assert_eq!(back.y(), data.y());
        assert!(matches!(
            s.gather(
                &[257],
                xa.as_mut().subrows_mut(0, 1),
                ya.as_mut().subrows_mut(0, 1)
            ),
            Err(Error::Shape { .. })
        ));
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn named_columns_survive() {
        let dir = tmpdir("names");
        let path = dir.join("b.rows");
        let data = random_data(4, 2, 1, 2)
            .with_feature_names(vec!["pickup_hour".into(), "é".into()])
            .unwrap()
            .with_target_names(vec!["fare".into()])
            .unwrap();
        write_dataset(&path, &data, &[]).unwrap();
        let s = RowStore::open(&path).unwrap();
        assert_eq!(s.schema().inputs, vec!["pickup_hour", "é"]);
        assert_eq!(s.schema().targets, vec!["fare"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn parse_message(e: Error) -> String {
        match e {
            Error::Parse { message, .. } => message,
            other => panic!("expected a Parse error, got {other:?}"),
        }
    }

    #[test]
    fn truncated_corrupt_and_foreign_files_are_typed_errors() {
        let dir = tmpdir("bad");
        let path = dir.join("c.rows");
        write_dataset(&path, &random_data(10, 2, 1, 3), &[]).unwrap();
        let good = std::fs::read(&path).unwrap();
        let header_len = good.len() - 10 * 3 * 8;

        let bad = dir.join("bad.rows");
        std::fs::write(&bad, &good[..good.len() - 5]).unwrap();
        let m = parse_message(RowStore::open(&bad).unwrap_err());
        assert!(
            m.contains(&format!("{} bytes", good.len()))
                && m.contains(&format!("{} bytes", good.len() - 5))
                && m.contains("truncated"),
            "{m}"
        );

        let mut c = good.clone();
        c[20] ^= 1; // N
        std::fs::write(&bad, &c).unwrap();
        let m = parse_message(RowStore::open(&bad).unwrap_err());
        assert!(m.contains("checksum"), "{m}");

        let mut c = good.clone();
        c[0] = b'X';
        std::fs::write(&bad, &c).unwrap();
        let m = parse_message(RowStore::open(&bad).unwrap_err());
        assert!(m.contains("magic"), "{m}");

        let mut c = good.clone();
        c[8] = 2;
        std::fs::write(&bad, &c).unwrap();
        let m = parse_message(RowStore::open(&bad).unwrap_err());
        assert!(m.contains("version 2"), "{m}");

        std::fs::write(&bad, b"short").unwrap();
        let m = parse_message(RowStore::open(&bad).unwrap_err());
        assert!(m.contains("not a row store"), "{m}");

        // A NaN planted in the data (not through the writer) is found at gather.
        let mut c = good.clone();
        let off = header_len + (7 * 3 + 2) * 8;
        c[off..off + 8].copy_from_slice(&f64::NAN.to_le_bytes());
        std::fs::write(&bad, &c).unwrap();
        let s = RowStore::open(&bad).unwrap();
        let (mut x, mut y) = (Mat::zeros(2, 2), Mat::zeros(2, 1));
        match s.gather(&[1, 7], x.as_mut(), y.as_mut()) {
            Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (7, 2)),
            other => panic!("expected NonFinite, got {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writer_rejects_nan_with_its_row_and_leaves_no_file() {
        let dir = tmpdir("nan");
        let path = dir.join("d.rows");
        let mut w = RowStoreWriter::create(&path, Schema::numbered(2, 1).unwrap(), &[]).unwrap();
        w.push_row(&[1.0, 2.0], &[3.0]).unwrap();
        let mut x = Mat::<f64>::zeros(3, 2);
        x[(2, 1)] = f64::INFINITY;
        let y = Mat::<f64>::zeros(3, 1);
        match w.push_rows(x.as_ref(), y.as_ref()) {
            Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (3, 1)),
            other => panic!("expected NonFinite, got {other:?}"),
        }
        match w.push_row(&[1.0, 2.0], &[f64::NAN]) {
            Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (1, 2)),
            other => panic!("expected NonFinite, got {other:?}"),
        }
        match w.push_row_major(&[1.0, 2.0, 3.0, 4.0, f64::NAN, 6.0]) {
            Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (2, 1)),
            other => panic!("expected NonFinite, got {other:?}"),
        }
        assert!(matches!(
            w.push_row_major(&[1.0, 2.0]),
            Err(Error::Shape { .. })
        ));
        assert_eq!(w.rows(), 1);
        drop(w);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writer_refuses_to_overwrite_an_input() {
        let dir = tmpdir("overwrite");
        let input = dir.join("in.csv");
        std::fs::write(&input, "a,b\n1,2\n").unwrap();
        let e = RowStoreWriter::create(
            &dir.join(".").join("in.csv"),
            Schema::numbered(1, 1).unwrap(),
            &[&input],
        )
        .unwrap_err();
        assert!(e.to_string().contains("refusing"), "{e}");
        assert_eq!(std::fs::read(&input).unwrap(), b"a,b\n1,2\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_changed_under_the_reader_is_detected() {
        let dir = tmpdir("changed");
        let path = dir.join("e.rows");
        write_dataset(&path, &random_data(10, 2, 1, 4), &[]).unwrap();
        let s = RowStore::open(&path).unwrap();
        // Appending keeps the mapped part valid (no SIGBUS) but changes the length.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0u8; 8]).unwrap();
        drop(f);
        let (mut x, mut y) = (Mat::zeros(1, 2), Mat::zeros(1, 1));
        let e = s.gather(&[0], x.as_mut(), y.as_mut()).unwrap_err();
        assert!(
            matches!(e, Error::Io { .. }) && e.to_string().contains("changed"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_replaced_file_keeps_serving_the_opened_contents() {
        let dir = tmpdir("replaced");
        let path = dir.join("f.rows");
        let a = random_data(10, 2, 1, 5);
        write_dataset(&path, &a, &[]).unwrap();
        let s = RowStore::open(&path).unwrap();
        write_dataset(&path, &random_data(20, 2, 1, 6), &[]).unwrap();
        let back = s.to_dataset().unwrap();
        assert_eq!(back.x(), a.x());
        assert_eq!(RowStore::open(&path).unwrap().n(), 20);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
