//! Advisory locks on the outputs of a command (issue 56): two commands started at the
//! same time on the same output cannot interleave their writes; the second one refuses,
//! before any work, with an error naming the flag and the output, and the first one's
//! outputs are left intact.
//!
//! * **What is locked.** Every output a command writes: the `--out` directory of `run`
//!   and of the default job ([`lock_dir`]: the directory itself is locked), and every
//!   output file ([`lock_file`]): `--json` of `run`, `time` and `stream`, `stream
//!   --predictions`, the row store of `synth --out` and `convert --out`, `results --out`.
//!   (The checkpoint directories of `--checkpoint` / `--resume` are locked by the
//!   checkpoint machinery.)
//! * **How.** `flock(2)` through the `fs4` crate, taken without waiting: held, the lock
//!   refuses; free, the command takes it and keeps it until it ends
//!   ([`release_all`], called when a command returns; the kernel releases it when the
//!   process dies however it dies). A directory is locked through a handle on the
//!   directory itself (nothing is created in it). A file is written by replacing it
//!   (a temporary file renamed over it), so its own inode cannot carry the lock: the lock
//!   is on a companion file `.<name>.lock` beside it, which holds the process id and is
//!   removed when the lock is released. A companion left by a killed process holds no
//!   lock: the next command takes it over. Taking it checks that the locked file is still
//!   the one under that name (one removed by a finishing holder is not trusted).
//! * **What it does not protect.** Advisory locks bind only the programs that take them:
//!   another program, or an older `dgp-bench`, writes regardless. A device (`/dev/null`)
//!   is written through in place and not locked. On a network file system `flock` may be
//!   local to one machine.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fs4::{FileExt, TryLockError};

use crate::error::{BenchError, Result};

/// One lock this process holds.
struct Held {
    /// The locked output, canonical (the key against locking it twice).
    output: PathBuf,
    /// The handle that carries the lock.
    file: File,
    /// The companion lock file of a locked output file (removed on release).
    companion: Option<PathBuf>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Removed while still locked, so that no other process locks the name between
        // the removal and the unlock (one that opened it before sees it gone, see
        // `take_companion`).
        if let Some(c) = &self.companion {
            let _ = fs::remove_file(c);
        }
        let _ = FileExt::unlock(&self.file);
    }
}

static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

fn held() -> std::sync::MutexGuard<'static, Vec<Held>> {
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn canonical(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn busy(flag: &str, what: String) -> BenchError {
    BenchError::Usage(format!(
        "{flag}: {what}; another dgp-bench command is writing it now (two commands on the \
         same output would interleave their writes): wait for it to finish, or choose \
         another output"
    ))
}

fn failed(flag: &str, path: &Path, e: std::io::Error) -> BenchError {
    BenchError::Output {
        path: path.to_path_buf(),
        message: format!("{flag}: cannot take the lock on the output: {e}"),
    }
}

/// Locks the output directory `dir` (which must exist: [`crate::validate::check_outputs`]
/// creates it) for the rest of the command; a directory this process already holds is
/// not locked again.
///
/// # Errors
/// [`BenchError::Usage`] when another process holds it; [`BenchError::Output`] when the
/// directory cannot be opened or locked.
pub fn lock_dir(flag: &str, dir: &Path) -> Result<()> {
    let key = canonical(dir);
    let mut held = held();
    if held.iter().any(|h| h.output == key) {
        return Ok(());
    }
    let file = File::open(&key).map_err(|e| failed(flag, dir, e))?;
    match FileExt::try_lock(&file) {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(busy(
                flag,
                format!("the directory {} is locked", dir.display()),
            ));
        }
        Err(TryLockError::Error(e)) => return Err(failed(flag, dir, e)),
    }
    held.push(Held {
        output: key,
        file,
        companion: None,
    });
    Ok(())
}

/// The companion lock file of output file `path`: `.<name>.lock` in its directory.
pub fn companion_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".lock");
    path.with_file_name(name)
}

#[cfg(unix)]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_a: &fs::Metadata, _b: &fs::Metadata) -> bool {
    true
}

/// Opens and locks the companion file `c`, retrying when the locked file is no longer
/// the one under its name (a holder removed it while releasing).
fn take_companion(flag: &str, output: &Path, c: &Path) -> Result<File> {
    for _ in 0..100 {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(c)
            .map_err(|e| failed(flag, c, e))?;
        match FileExt::try_lock(&file) {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let pid = fs::read_to_string(c).unwrap_or_default();
                let pid = pid.trim();
                let by = if pid.is_empty() {
                    String::new()
                } else {
                    format!(" by process {pid}")
                };
                return Err(busy(
                    flag,
                    format!(
                        "{} is locked{by} (lock file {})",
                        output.display(),
                        c.display()
                    ),
                ));
            }
            Err(TryLockError::Error(e)) => return Err(failed(flag, c, e)),
        }
        let mine = file.metadata().map_err(|e| failed(flag, c, e))?;
        match fs::metadata(c) {
            Ok(now) if same_file(&mine, &now) => return Ok(file),
            _ => continue,
        }
    }
    Err(failed(
        flag,
        c,
        std::io::Error::other("the lock file kept being replaced"),
    ))
}

/// Locks the output file `path` for the rest of the command (see the module docs: a
/// companion `.<name>.lock` beside it; the output itself is not touched). A device or
/// another non-regular file that exists is not locked, nor a file whose directory does
/// not exist (the command's write then fails with its own message); an output this
/// process already holds is not locked again.
///
/// # Errors
/// [`BenchError::Usage`] when another process holds it; [`BenchError::Output`] when the
/// lock file cannot be created or locked.
pub fn lock_file(flag: &str, path: &Path) -> Result<()> {
    // A symlinked output is written through to its target: lock the target.
    let target = canonical(path);
    if fs::metadata(&target).is_ok_and(|m| !m.is_file()) {
        return Ok(());
    }
    // No directory yet: the command's own write reports that (nothing can be writing
    // there); `run` creates its output directories before it locks.
    if target
        .parent()
        .is_some_and(|d| !d.as_os_str().is_empty() && !d.is_dir())
    {
        return Ok(());
    }
    let mut held = held();
    if held.iter().any(|h| h.output == target) {
        return Ok(());
    }
    let c = companion_path(&target);
    let mut file = take_companion(flag, path, &c)?;
    let _ = file.set_len(0);
    let _ = writeln!(file, "{}", std::process::id());
    held.push(Held {
        output: target,
        file,
        companion: Some(c),
    });
    Ok(())
}

/// Releases every lock this process holds (companion files removed); the end of a
/// command ([`crate::cli::execute`]).
pub fn release_all() {
    held().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second process is simulated by a second open file description: `flock` locks
    /// conflict between descriptions, also within one process.
    #[test]
    fn a_held_output_is_refused_and_released_cleanly() {
        let dir = std::env::temp_dir().join(format!("dgp-bench-locks-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let out = dir.join("r.jsonl");
        let c = companion_path(&out);
        let other = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&c)
            .unwrap();
        FileExt::try_lock(&other).unwrap();
        let e = lock_file("--json r.jsonl", &out).unwrap_err().to_string();
        assert!(
            e.contains("--json r.jsonl") && e.contains("is locked"),
            "{e}"
        );
        drop(other);
        // A stale companion (its holder gone) is taken over, then removed on release.
        lock_file("--json r.jsonl", &out).unwrap();
        lock_file("--json r.jsonl", &out).unwrap();
        assert!(c.exists());
        let second = File::open(&dir).unwrap();
        lock_dir("--out D", &dir).unwrap();
        assert!(matches!(
            FileExt::try_lock(&second),
            Err(TryLockError::WouldBlock)
        ));
        release_all();
        assert!(!c.exists());
        FileExt::try_lock(&second).unwrap();
        assert!(
            !out.exists(),
            "the output itself is never created by its lock"
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
