//! [`CheckpointDir`]: a directory of run states, locked by the run that writes it, whose
//! files are written atomically, carry a checksum and the identity of their run, and are
//! verified before any of their state is used.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::error::{CheckpointError, Error, Result};
use crate::fit::RunState;
use crate::guard::identity::first_difference;

/// Version of the checkpoint file layout:
/// `{"version":2,"identity":I,"checksum":"C","state":S}` — written as
/// `{"version":2,"fingerprint":I,...}`, the name the first files used — with `I` the run's
/// identity (any JSON), `S` its [`RunState`] and `C` the [`checksum`] of the bytes of `I`
/// and `S` exactly as written.
pub const CHECKPOINT_FILE_VERSION: u32 = 2;

/// The name of the lock file of a checkpoint directory on platforms that cannot lock a
/// directory itself (not Unix); reserved on every platform.
pub const LOCK_FILE: &str = ".lock";

/// What [`CheckpointDir::open`] locks: on Unix the directory itself (`flock` on a
/// directory handle: nothing is written into the directory, so a refused run changes no
/// byte of it), elsewhere the file [`LOCK_FILE`] in it.
fn lock_handle(dir: &Path) -> std::io::Result<File> {
    if cfg!(unix) {
        File::open(dir)
    } else {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))
    }
}

/// The process holding the `flock` of `dir`, from the kernel's table of locks
/// (`/proc/locks`: `N: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> ...`, the device
/// numbers in hex); `None` where there is no such table or no entry.
#[cfg(target_os = "linux")]
fn lock_holder(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).ok()?;
    let dev = m.dev();
    // glibc's encoding of a device number (`gnu_dev_major` / `gnu_dev_minor`).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    table.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if !fields.contains(&"FLOCK") || fields.contains(&"->") {
            return None;
        }
        let at = fields.iter().position(|f| f.matches(':').count() == 2)?;
        let mut id = fields[at].split(':');
        let (ma, mi, ino) = (id.next()?, id.next()?, id.next()?);
        let same = u64::from_str_radix(ma, 16).ok()? == major
            && u64::from_str_radix(mi, 16).ok()? == minor
            && ino.parse::<u64>().ok()? == m.ino();
        same.then(|| fields.get(at.checked_sub(1)?)?.parse().ok())?
    })
}

/// See the Linux version: no table of locks elsewhere.
#[cfg(not(target_os = "linux"))]
fn lock_holder(_dir: &Path) -> Option<u32> {
    None
}

/// A 64-bit checksum of the identity's and the state's JSON text, as 16 hex digits:
/// FNV-1a's xor-multiply step over 8-byte little-endian words in four lanes (then the
/// tail bytes), with a final avalanche. It catches edits and corruption of a checkpoint
/// (a flipped digit, a changed number), not a deliberate forgery (whoever edits the state
/// can recompute it). Word-wise it runs at several GB/s, well under a tenth of the cost of
/// serialising the state it covers.
pub fn checksum(identity: &str, state: &str) -> String {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [identity.as_bytes(), b"\n", state.as_bytes()] {
        // Four independent lanes over 32-byte blocks (the multiplications overlap).
        let mut lanes = [h, h ^ 0x9e37, h ^ 0x79b9, h ^ 0x7f4a];
        let mut blocks = part.chunks_exact(32);
        for block in &mut blocks {
            for (lane, w) in lanes.iter_mut().zip(block.chunks_exact(8)) {
                let mut b = [0u8; 8];
                b.copy_from_slice(w);
                *lane = (*lane ^ u64::from_le_bytes(b))
                    .wrapping_mul(PRIME)
                    .rotate_left(31);
            }
        }
        for lane in lanes {
            h = (h ^ lane).wrapping_mul(PRIME);
        }
        for &b in blocks.remainder() {
            h = (h ^ u64::from(b)).wrapping_mul(PRIME);
        }
        h = (h ^ part.len() as u64).wrapping_mul(PRIME);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    format!("{h:016x}")
}

/// The text of a checkpoint file holding `state` of the run `identity` (see
/// [`CHECKPOINT_FILE_VERSION`]).
///
/// # Errors
/// [`Error::Serde`] when the state does not serialise.
pub fn checkpoint_text(identity: &Value, state: &RunState) -> Result<String> {
    let state = serde_json::to_string(state).map_err(|e| Error::Serde(e.to_string()))?;
    let identity = identity.to_string();
    let sum = checksum(&identity, &state);
    Ok(format!(
        "{{\"version\":{CHECKPOINT_FILE_VERSION},\"fingerprint\":{identity},\"checksum\":\"{sum}\",\"state\":{state}}}"
    ))
}

/// The identity, checksum and state texts of a checkpoint file as [`checkpoint_text`]
/// writes it, or `None` for any other layout.
fn split_file(text: &str) -> Option<(&str, &str, &str)> {
    let rest = text.strip_prefix(&format!(
        "{{\"version\":{CHECKPOINT_FILE_VERSION},\"fingerprint\":"
    ))?;
    let (identity, rest) = rest.split_once(",\"checksum\":\"")?;
    let (sum, rest) = rest.split_once("\",\"state\":")?;
    let state = rest.strip_suffix('}')?;
    Some((identity, sum, state))
}

/// Reads and verifies the checkpoint text `text` of `file` for the run `identity`: the
/// layout and version, the checksum, the identity (the first field that differs is
/// named), then the state's values ([`RunState::validate`]).
///
/// # Errors
/// [`CheckpointError::Damaged`] naming the field; [`CheckpointError::OtherRun`].
pub fn verify_checkpoint(file: &Path, text: &str, identity: &Value) -> Result<RunState> {
    let damaged = |field: Option<&str>, message: String| {
        Error::Checkpoint(CheckpointError::Damaged {
            file: file.to_path_buf(),
            field: field.map(str::to_string),
            message,
        })
    };
    let doc: Value =
        serde_json::from_str(text).map_err(|e| damaged(None, format!("not a checkpoint: {e}")))?;
    let version = doc.get("version").and_then(Value::as_u64);
    if version != Some(u64::from(CHECKPOINT_FILE_VERSION)) {
        return Err(damaged(
            Some("version"),
            format!(
                "{} (this build reads checkpoint files of version {CHECKPOINT_FILE_VERSION}, which \
                 carry a checksum)",
                version.map_or("missing".to_string(), |v| v.to_string())
            ),
        ));
    }
    let Some((id_text, stored, state_text)) = split_file(text) else {
        return Err(damaged(
            Some("checksum"),
            "missing, or the file is not laid out as a checkpoint is written (edited?)".into(),
        ));
    };
    let computed = checksum(id_text, state_text);
    if stored != computed {
        return Err(damaged(
            Some("checksum"),
            format!(
                "{stored}, but the saved identity and state hash to {computed}: the file was \
                 changed or damaged after it was written"
            ),
        ));
    }
    let saved: Value =
        serde_json::from_str(id_text).map_err(|e| damaged(Some("fingerprint"), e.to_string()))?;
    if let Some((field, saved, now)) = first_difference(&saved, identity) {
        return Err(Error::Checkpoint(CheckpointError::OtherRun {
            file: file.to_path_buf(),
            field,
            saved,
            now,
        }));
    }
    let state: RunState =
        serde_json::from_str(state_text).map_err(|e| damaged(Some("state"), e.to_string()))?;
    state.validate().map_err(|e| match e {
        Error::Config(c) => damaged(Some(&c.field), c.message),
        e => damaged(Some("state"), e.to_string()),
    })?;
    Ok(state)
}

/// How a guarded run treats the state already in its checkpoint file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// Continue from the saved state when there is one, else start fresh (the same line of
    /// code run again after a crash continues the run).
    #[default]
    Auto,
    /// Start fresh; a saved state is refused ([`CheckpointError::WouldOverwrite`]), never
    /// overwritten.
    Fresh,
    /// Continue from the saved state; none is an error ([`CheckpointError::NothingToResume`]).
    Resume,
}

struct DirInner {
    path: PathBuf,
    /// The locked handle (`None`: opened only to read, see [`CheckpointDir::for_reading`]).
    lock: Option<File>,
}

/// A directory of checkpoint files (one per run, by name), held by one writing process at
/// a time: [`CheckpointDir::open`] takes an advisory lock on the directory (`flock`
/// through the `fs4` crate; on Unix on the directory itself, so that nothing is written
/// into it but checkpoints) that lasts until the last clone of the handle is dropped — or
/// the process ends, `kill -9` included, when the operating system releases it — so a
/// second run or a second resume on the same directory is refused
/// ([`CheckpointError::Locked`], naming the holder's process where the system tells)
/// instead of writing between the first one's saves. Clones share the lock.
///
/// Files are written with [`CheckpointDir::save`] (atomically: a temporary file in the
/// directory, synced, renamed over the file, the directory synced) and read with
/// [`CheckpointDir::load`], which verifies everything before returning a state
/// ([`verify_checkpoint`]).
#[derive(Clone)]
pub struct CheckpointDir {
    inner: Arc<DirInner>,
}

impl std::fmt::Debug for CheckpointDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointDir")
            .field("path", &self.inner.path)
            .field("locked", &self.inner.lock.is_some())
            .finish()
    }
}

impl CheckpointDir {
    /// Creates `path` if needed, locks it for this process (see the type docs) and checks
    /// that it takes new files.
    ///
    /// # Errors
    /// [`CheckpointError::Locked`] while another run holds the directory;
    /// [`CheckpointError::Write`] when it cannot be created, written or locked.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let write_err = |p: &Path, what: &str, e: std::io::Error| {
            Error::Checkpoint(CheckpointError::Write {
                path: p.to_path_buf(),
                message: format!("{what}: {e}"),
            })
        };
        std::fs::create_dir_all(&path).map_err(|e| write_err(&path, "cannot create it", e))?;
        let lock = lock_handle(&path)
            .map_err(|e| write_err(&path, "cannot write a checkpoint into it", e))?;
        match fs4::FileExt::try_lock(&lock) {
            Ok(()) => {}
            Err(fs4::TryLockError::WouldBlock) => {
                return Err(Error::Checkpoint(CheckpointError::Locked {
                    holder: lock_holder(&path),
                    dir: path,
                }));
            }
            Err(fs4::TryLockError::Error(e)) => {
                return Err(write_err(&path, "cannot lock it", e));
            }
        }
        // A probe: the directory must take new files (the lock alone does not show it).
        let probe = path.join(format!(".probe-{}.tmp", std::process::id()));
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .and_then(|f| {
                drop(f);
                std::fs::remove_file(&probe)
            })
            .map_err(|e| write_err(&path, "cannot write a checkpoint into it", e))?;
        Ok(CheckpointDir {
            inner: Arc::new(DirInner {
                path,
                lock: Some(lock),
            }),
        })
    }

    /// The directory `path` opened only to read its states, neither created nor locked
    /// (the processes of a distributed launch other than the one that writes; the writer
    /// holds the lock). [`CheckpointDir::save`] refuses.
    pub fn for_reading(path: impl AsRef<Path>) -> Self {
        CheckpointDir {
            inner: Arc::new(DirInner {
                path: path.as_ref().to_path_buf(),
                lock: None,
            }),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether this handle writes (holds the lock; see [`CheckpointDir::for_reading`]).
    pub fn writes(&self) -> bool {
        self.inner.lock.is_some()
    }

    /// The path of the checkpoint file `name`.
    ///
    /// # Errors
    /// [`Error::Config`] for a name that is not a plain file name (empty, with a path
    /// separator, `.`/`..`, or the lock file's).
    pub fn file(&self, name: &str) -> Result<PathBuf> {
        let plain = Path::new(name)
            .file_name()
            .is_some_and(|f| f == std::ffi::OsStr::new(name));
        if !plain || name == LOCK_FILE || name.ends_with(".tmp") {
            return Err(Error::config(
                "checkpoint file name",
                format!(
                    "'{name}' is not a plain file name for a checkpoint (no path separators, \
                     not '{LOCK_FILE}', not ending in '.tmp')"
                ),
            ));
        }
        Ok(self.inner.path.join(name))
    }

    /// Whether the checkpoint file `name` exists.
    ///
    /// # Errors
    /// As [`CheckpointDir::file`].
    pub fn contains(&self, name: &str) -> Result<bool> {
        Ok(self.file(name)?.exists())
    }

    /// The verified state of the checkpoint file `name` for the run `identity`
    /// ([`verify_checkpoint`]), or `None` when the file does not exist.
    ///
    /// # Errors
    /// [`Error::Io`] when it cannot be read; those of [`verify_checkpoint`].
    pub fn load(&self, name: &str, identity: &Value) -> Result<Option<RunState>> {
        let file = self.file(name)?;
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Io { path: file, source }),
        };
        verify_checkpoint(&file, &text, identity).map(Some)
    }

    /// Writes `state` of the run `identity` to the file `name`, atomically (see the type
    /// docs).
    ///
    /// # Errors
    /// [`CheckpointError::Write`] for a handle that does not write or a failed write;
    /// [`Error::Serde`].
    pub fn save(&self, name: &str, identity: &Value, state: &RunState) -> Result<()> {
        let text = checkpoint_text(identity, state)?;
        self.write_text(name, &text)
    }

    /// Writes the checkpoint text `text` ([`checkpoint_text`]) to the file `name`,
    /// atomically.
    pub(crate) fn write_text(&self, name: &str, text: &str) -> Result<()> {
        let file = self.file(name)?;
        if !self.writes() {
            return Err(Error::Checkpoint(CheckpointError::Write {
                path: file,
                message: "this handle only reads the directory (another process writes it)".into(),
            }));
        }
        crate::fitted::write_atomic_io(&file, text.as_bytes()).map_err(|e| {
            Error::Checkpoint(CheckpointError::Write {
                path: file,
                message: format!("I/O error: {e}"),
            })
        })
    }
}
