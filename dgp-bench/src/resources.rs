//! Resources of a run: wall seconds and peak resident memory per split.
//!
//! Peak RSS is the kernel's high-water mark `VmHWM` of `/proc/self/status` (Linux), read
//! once at the end of each split. Before each split the mark is reset by writing `5` to
//! `/proc/self/clear_refs` (Linux ≥ 4.0), so it is the peak of that split; where the reset
//! is refused the value is the process peak so far (never smaller than the split's own).
//! Elsewhere (no `/proc`) it is `None`.

use serde::{Deserialize, Serialize};

/// Wall time and peak memory of one split; both `None` in records written before these
/// fields existed (and omitted from the JSON then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResources {
    /// Wall-clock seconds of the whole split: build, train, predict, evaluate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<f64>,
    /// Peak resident set size in MiB (`VmHWM`; see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
    /// Number of processes (MPI ranks) that shared each training step
    /// ([`dgp_traits::distribute::ChunkRunner::processes`]); `None` for one process (and
    /// omitted from the JSON then, so single-process records keep their form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<usize>,
}

/// The number of processes sharing each training step when more than one, else `None`
/// (see [`RunResources::ranks`]).
pub fn ranks() -> Option<usize> {
    Some(dgp_traits::distribute::runner().processes()).filter(|&p| p > 1)
}

/// Resets the peak-RSS mark of this process (see the module docs); `false` when the
/// kernel refuses or there is no `/proc`.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `VmHWM` of this process in MiB, `None` where unavailable.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm_kib(&status).map(|kib| kib as f64 / 1024.0)
}

/// The `VmHWM:` value of a `/proc/<pid>/status` text, in KiB.
pub fn parse_vm_hwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut parts = line["VmHWM:".len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => Some(value),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vm_hwm_and_rejects_garbage() {
        let s = "Name:\tdgp-bench\nVmPeak:\t  200000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 4000 kB\n";
        assert_eq!(parse_vm_hwm_kib(s), Some(51_200));
        assert_eq!(parse_vm_hwm_kib("VmRSS: 1 kB\n"), None);
        assert_eq!(parse_vm_hwm_kib("VmHWM: many kB\n"), None);
        assert_eq!(parse_vm_hwm_kib("VmHWM: 3 MB\n"), None);
    }

    #[test]
    fn old_records_parse_and_new_fields_are_omitted_when_none() {
        let r: RunResources = serde_json::from_str("{}").unwrap();
        assert_eq!(r, RunResources::default());
        assert_eq!(serde_json::to_string(&r).unwrap(), "{}");
        if cfg!(target_os = "linux") {
            assert!(peak_rss_mib().is_some_and(|m| m > 0.0));
        }
    }
}
