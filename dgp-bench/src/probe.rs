//! Whether a directory accepts new files, checked before any work writes into it.

use std::fs;
use std::path::Path;

/// Creates and removes a probe file in `dir`.
pub(crate) fn probe_dir(dir: &Path) -> std::io::Result<()> {
    let pid = std::process::id();
    for k in 0..100u32 {
        let p = dir.join(format!(".dgp-bench-probe.{pid}.{k}"));
        match fs::OpenOptions::new().write(true).create_new(true).open(&p) {
            Ok(f) => {
                drop(f);
                return fs::remove_file(&p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
