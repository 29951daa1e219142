//! Detecting a data file that changes while it is read.
//!
//! A reader takes the [`FileStamp`] of the file it opened (length and modification time,
//! one `fstat`) and compares it again later: after reading a file whole
//! ([`crate::data::read_bounded`]), before each chunk of a streaming reader (`dgp-io`'s
//! CSV and Parquet readers) and before each read of a memory-mapped row store. A change
//! is an [`Error::Io`] saying that the file changed while it was read, instead of rows
//! that mix two versions of the file.
//!
//! What cannot be detected: a change that keeps both the length and the modification
//! time (a write within the file system's time resolution that keeps the length, or a
//! time reset). A file *replaced* by a rename is not a change of the open file: the
//! reader keeps reading the contents it opened.

use std::fs::File;
use std::path::Path;
use std::time::SystemTime;

use crate::error::{Error, Result};

/// Length and modification time of an open file (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    /// Length in bytes.
    pub len: u64,
    /// Modification time, where the platform has one.
    pub modified: Option<SystemTime>,
    /// Whether the file is a regular file (a device or pipe has no stable length and is
    /// not checked).
    pub regular: bool,
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl FileStamp {
    /// The stamp of `file` now (`path` names it in errors).
    ///
    /// # Errors
    /// [`Error::Io`] when the file's metadata cannot be read.
    pub fn of(file: &File, path: &Path) -> Result<Self> {
        let m = file.metadata().map_err(|e| io(path, e))?;
        Ok(FileStamp {
            len: m.len(),
            modified: m.modified().ok(),
            regular: m.is_file(),
        })
    }

    /// Checks that `file` still has this stamp (always true for a non-regular file).
    ///
    /// # Errors
    /// [`Error::Io`] naming the file, its length then and now, when it changed (or its
    /// metadata cannot be read).
    pub fn check(&self, file: &File, path: &Path) -> Result<()> {
        if !self.regular {
            return Ok(());
        }
        let now = Self::of(file, path)?;
        if now != *self {
            return Err(io(
                path,
                std::io::Error::other(format!(
                    "the file changed while it was read (length {} bytes when opened, {} \
                     now{}): it is being written by another program; read it again once it \
                     is complete",
                    self.len,
                    now.len,
                    if now.len == self.len {
                        ", with a new modification time"
                    } else {
                        ""
                    }
                )),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_change_of_length_or_time_is_seen() {
        let dir = std::env::temp_dir().join(format!("dgp-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.txt");
        std::fs::write(&p, "1 2\n").unwrap();
        let f = File::open(&p).unwrap();
        let stamp = FileStamp::of(&f, &p).unwrap();
        stamp.check(&f, &p).unwrap();
        let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        w.write_all(b"3 4\n").unwrap();
        let e = stamp.check(&f, &p).unwrap_err().to_string();
        assert!(
            e.contains("changed while it was read") && e.contains("4 bytes"),
            "{e}"
        );
        // The same length, a new modification time.
        let f = File::open(&p).unwrap();
        let stamp = FileStamp::of(&f, &p).unwrap();
        let t = stamp.modified.unwrap() + std::time::Duration::from_secs(1);
        w.set_modified(t).unwrap();
        let e = stamp.check(&f, &p).unwrap_err().to_string();
        assert!(e.contains("new modification time"), "{e}");
        // A device is not checked.
        #[cfg(unix)]
        {
            let z = Path::new("/dev/null");
            let f = File::open(z).unwrap();
            FileStamp::of(&f, z).unwrap().check(&f, z).unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
