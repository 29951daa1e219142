//! Reading a whole text file with a bound on the length of its lines.
//!
//! The loaders that read files whole ([`crate::data::load_csv`] here, the benchmark folder
//! reader of `dgp-io`) then parse them. A file without line breaks (`/dev/zero` linked as
//! `data.txt`, a binary file, a 2 GB line) would be read to its end, or without end, before
//! the parser could object; reading through [`read_bounded`] stops at the first line longer
//! than [`MAX_LINE_BYTES`] with an [`Error::Parse`] naming the file and the line.

use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::data::FileStamp;
use crate::error::{Error, Result};

/// The longest line a data file may have by default: 1 MiB (1 048 576 bytes, the line
/// break not counted). A row of 1 MiB holds some 50 000 numbers; a longer line is more
/// often a binary file or a file whose rows lost their line breaks than data, so it is
/// refused as soon as it is read, with a message that says what the line looks like and
/// how to lift the limit ([`LINE_LIMIT_VAR`], [`line_limit`]). The same bound as the
/// header of a CSV file read by `dgp-bench` and the default of `dgp-bench convert
/// --max-line-bytes`.
pub const MAX_LINE_BYTES: usize = 1 << 20;

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The bytes of the file at `path`, refusing it at the first line longer than `limit`
/// bytes without reading further (so a line of any length, or an endless device, costs
/// at most `limit` bytes more than the lines before it).
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened or read, or changed while it was read
/// ([`FileStamp`]); [`Error::Parse`] naming the file and the (1-based) line that is
/// longer than `limit`.
pub fn read_bounded(path: &Path, limit: usize) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| io(path, e))?;
    let stamp = FileStamp::of(&file, path)?;
    let mut reader = BufReader::with_capacity(64 << 10, file);
    let mut out = Vec::new();
    // Bytes of the line in progress, and its 1-based number.
    let (mut current, mut line) = (0usize, 1usize);
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(path, e)),
        };
        if buf.is_empty() {
            // The whole file as it was opened, or an error (crate::data::FileStamp).
            stamp.check(reader.get_ref(), path)?;
            // (A file of /proc reports length 0 and has contents: not compared.)
            if stamp.regular && stamp.len != 0 && out.len() as u64 != stamp.len {
                return Err(io(
                    path,
                    std::io::Error::other(format!(
                        "the file changed while it was read ({} bytes when opened, {} read)",
                        stamp.len,
                        out.len()
                    )),
                ));
            }
            return Ok(out);
        }
        let mut rest = buf;
        loop {
            let (len, more) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (rest.len(), false),
            };
            current += len;
            if current > limit {
                // The line so far: its part in `out` (when it began in an earlier buffer,
                // i.e. no line ended yet in this one), then its part in this buffer.
                let start = if rest.len() < buf.len() {
                    out.len()
                } else {
                    out.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
                };
                let seen = [&out[start..], &rest[..len]].concat();
                return Err(Error::Parse {
                    path: path.to_path_buf(),
                    line,
                    column: 0,
                    message: long_line_message(line, limit, &seen),
                });
            }
            if !more {
                break;
            }
            current = 0;
            line += 1;
            rest = &rest[len + 1..];
        }
        let n = buf.len();
        out.extend_from_slice(buf);
        reader.consume(n);
    }
}

/// The environment variable that raises (or lowers) the limit on one line of a data
/// file above [`MAX_LINE_BYTES`]: a number of bytes ([`line_limit`]).
pub const LINE_LIMIT_VAR: &str = "DGP_MAX_LINE_BYTES";

/// The limit on one line of a data file read whole: [`LINE_LIMIT_VAR`] when it is set to
/// a whole number of bytes ≥ 1, else [`MAX_LINE_BYTES`]. Every whole-file text loader
/// ([`read_text_bounded`], [`crate::data::load_csv`], the UCI folder reader of `dgp-io`
/// and `dgp-bench`'s reading of a CSV header) uses it.
pub fn line_limit() -> usize {
    std::env::var(LINE_LIMIT_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(MAX_LINE_BYTES)
}

/// The error message of a line longer than `limit`: the limit in bytes and MiB, what the
/// line looks like from its first `limit` bytes (of `seen`: a row of numbers and at least
/// how many fields, white space, or bytes that are not text), and how to lift the limit.
pub fn long_line_message(line: usize, limit: usize, seen: &[u8]) -> String {
    let seen = &seen[..seen.len().min(limit)];
    let numeric = |b: &u8| b.is_ascii_digit() || b".eE+-".contains(b);
    let sep = |b: &u8| b" \t,;\r".contains(b);
    let looks = if seen.iter().all(|b| numeric(b) || sep(b)) {
        let fields = seen.split(sep).filter(|f| !f.is_empty()).count();
        if fields == 0 {
            format!("its first {} bytes are white space", seen.len())
        } else {
            format!(
                "its first {} bytes look like a row of numbers, at least {fields} fields",
                seen.len()
            )
        }
    } else if seen
        .iter()
        .any(|&b| b == 0 || (b < 0x20 && !b"\t\r".contains(&b)))
    {
        "it holds bytes that are not text: a binary file?".to_string()
    } else {
        "rows without line breaks?".to_string()
    };
    format!(
        "line {line} is longer than {limit} bytes ({:.1} MiB), the limit on one line of a \
         data file, which keeps a binary file or a file without line breaks from being \
         read whole ({looks}); to read longer lines set the environment variable \
         {LINE_LIMIT_VAR} to a larger number of bytes (e.g. {LINE_LIMIT_VAR}={})",
        limit as f64 / (1 << 20) as f64,
        limit.saturating_mul(8)
    )
}

/// [`read_bounded`] with [`line_limit`] ([`MAX_LINE_BYTES`] by default), as UTF-8 text.
///
/// # Errors
/// As [`read_bounded`]; [`Error::Io`] (invalid data) for text that is not UTF-8.
pub fn read_text_bounded(path: &Path) -> Result<String> {
    let bytes = read_bounded(path, line_limit())?;
    String::from_utf8(bytes).map_err(|e| {
        io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_up_to_the_limit_pass_and_a_longer_one_is_named() {
        let dir = std::env::temp_dir().join(format!("dgp-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.txt");
        std::fs::write(&p, "1234\n12345\n\n123").unwrap();
        assert_eq!(read_bounded(&p, 5).unwrap(), b"1234\n12345\n\n123");
        std::fs::write(&p, "1234\n12345\n123456\n1").unwrap();
        let e = read_bounded(&p, 5).unwrap_err();
        assert!(matches!(&e, Error::Parse { line: 3, .. }), "{e}");
        assert!(
            e.to_string()
                .contains("f.txt:3:0: line 3 is longer than 5 bytes"),
            "{e}"
        );
        // A last line without a break counts too.
        std::fs::write(&p, "12\n123456").unwrap();
        assert!(matches!(
            read_bounded(&p, 5),
            Err(Error::Parse { line: 2, .. })
        ));
        #[cfg(unix)]
        {
            let e = read_bounded(Path::new("/dev/zero"), 1000).unwrap_err();
            assert!(matches!(e, Error::Parse { line: 1, .. }), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
