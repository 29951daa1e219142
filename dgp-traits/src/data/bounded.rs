//! Reading a whole text file with a bound on the length of its lines.
//!
//! The loaders that read files whole ([`crate::data::load_csv`] here, the benchmark folder
//! reader of `dgp-io`) then parse them. A file without line breaks (`/dev/zero` linked as
//! `data.txt`, a binary file, a 2 GB line) would be read to its end, or without end, before
//! the parser could object; reading through [`read_bounded`] stops at the first line longer
//! than [`MAX_LINE_BYTES`] with an [`Error::Parse`] naming the file and the line.

use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::error::{Error, Result};

/// The longest line a data file may have: 1 MiB (1 048 576 bytes, the line break not
/// counted). A row of 1 MiB holds some 50 000 numbers; a longer line is a binary file or a
/// file whose rows lost their line breaks, not data. The same bound as the header of a
/// CSV file read by `dgp-bench` and the default of `dgp-bench convert --max-line-bytes`.
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
/// [`Error::Io`] when the file cannot be opened or read; [`Error::Parse`] naming the file
/// and the (1-based) line that is longer than `limit`.
pub fn read_bounded(path: &Path, limit: usize) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| io(path, e))?;
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
                return Err(Error::Parse {
                    path: path.to_path_buf(),
                    line,
                    column: 0,
                    message: format!(
                        "line {line} is longer than {} bytes, the limit on one line of a data \
                         file: a binary file, or rows without line breaks?",
                        limit
                    ),
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

/// [`read_bounded`] with [`MAX_LINE_BYTES`], as UTF-8 text.
///
/// # Errors
/// As [`read_bounded`]; [`Error::Io`] (invalid data) for text that is not UTF-8.
pub fn read_text_bounded(path: &Path) -> Result<String> {
    let bytes = read_bounded(path, MAX_LINE_BYTES)?;
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
