//! Checkpoint files of the library's guard (`dgp_traits::guard::verify_checkpoint`:
//! layout version, checksum, identity, the core's `RunState` and its validation), which
//! `dgp-bench run --checkpoint` / `--resume` write and read.
//!
//! Input: a selector byte, then text. Selector even: the text is a whole checkpoint file,
//! loaded with the fingerprint it carries (so a file is refused for its contents, not for
//! belonging to another run). Selector odd: the text is the saved state alone, written
//! into a file of the current layout with a correct checksum (what the checksum would
//! otherwise keep the fuzzer from reaching). Checked: no panic, no unbounded allocation;
//! an accepted state passes `RunState::validate` and serialises to JSON that loads again
//! to the same text; a refusal is a typed error naming the file.
#![no_main]

use dgp_traits::guard::{CHECKPOINT_FILE_VERSION as FILE_VERSION, checksum, verify_checkpoint};
use dgp_fuzz::{scratch_file, selector};
use dgp_traits::train::RunState;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = selector(data);
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let (file, fingerprint) = if sel % 2 == 0 {
        let fp = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| v.get("fingerprint").cloned())
            .unwrap_or_default();
        (text.to_string(), fp)
    } else {
        let fp = serde_json::json!({"backend": "svi", "split": 0});
        let fp_text = fp.to_string();
        let sum = checksum(&fp_text, text);
        (
            format!(
                "{{\"version\":{FILE_VERSION},\"fingerprint\":{fp_text},\"checksum\":\"{sum}\",\"state\":{text}}}"
            ),
            fp,
        )
    };
    let path = scratch_file("checkpoint.json", file.as_bytes());
    let state = match verify_checkpoint(&path, &file, &fingerprint) {
        Ok(s) => s,
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("checkpoint.json"), "{m}");
            return;
        }
    };
    state.validate().expect("a loaded state is valid");
    let json = serde_json::to_string(&state).expect("a loaded state serialises");
    let again: RunState = serde_json::from_str(&json).expect("a serialised state loads");
    assert_eq!(serde_json::to_string(&again).unwrap(), json);
});
