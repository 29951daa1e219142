//! The textual inputs of `dgp-bench`'s command line: `--config` JSON and `--set KEY=VALUE`
//! as each backend receives and checks them (`apply_settings` through
//! `Backend::check`), and the mini-languages `--splits`, `--memory-budget`, `synth
//! --rows`, `--early-stopping` (a rule name or JSON), `--layers` and `--backend`.
//!
//! Input: a selector byte, then text. Selector mod 8: 0 `--config` text, 1 `--set` values
//! (one per line), 2 `--config` text and `--set` values (separated by the byte 0x1E);
//! 3 `--splits` against a data set of 1 to 32 splits (from the next byte); 4 a size;
//! 5 a row count; 6 an early-stopping rule; 7 `--layers` and `--backend`. The backend
//! checked is selector / 8 mod the number of registered backends. Checked: no panic, no
//! hang; an accepted value is in range (splits exist and are distinct, sizes finite and
//! positive, layer counts ≥ 1); a refusal is an error with a message.
#![no_main]

use std::path::Path;

use dgp_bench::BACKENDS;
use dgp_bench::cli::{
    parse_backends, parse_early_stopping, parse_layers, parse_rows, settings_for_backend,
};
use dgp_bench::datasets::parse_splits;
use dgp_bench::memory::parse_size;
use dgp_fuzz::selector;
use dgp_traits::backend::CommonSettings;
use libfuzzer_sys::fuzz_target;

fn settings(config: Option<&str>, set: &[String], sel: u8) {
    let b = &BACKENDS[(sel / 8) as usize % BACKENDS.len()];
    let s = match settings_for_backend(config.map(|t| (t, Path::new("c.json"))), set, b) {
        Ok(s) => s,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let common = CommonSettings {
        preset: "default".into(),
        layers: 1 + (sel as usize % 3),
        num_inducing: 8,
        hidden_width: None,
        train_samples: 2,
        predict_samples: 2,
        seed: 0,
        tune: sel & 64 != 0,
        learning_rate: None,
        lr_schedule: None,
    };
    if let Err(e) = b.backend.check(&common, &s) {
        assert!(!e.to_string().is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = selector(data);
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match sel % 8 {
        0 => settings(Some(text), &[], sel),
        1 => {
            let set: Vec<String> = text.lines().map(str::to_string).collect();
            settings(None, &set, sel)
        }
        2 => {
            let (config, set) = text.split_once('\u{1e}').unwrap_or((text, ""));
            let set: Vec<String> = set.lines().map(str::to_string).collect();
            settings(Some(config), &set, sel)
        }
        3 => {
            let (n, spec) = match rest.split_first() {
                Some((&b, r)) => (1 + (b as usize % 32), std::str::from_utf8(r).unwrap_or("")),
                None => (1, ""),
            };
            if let Ok(v) = parse_splits(spec, n) {
                let mut seen = vec![false; n];
                for &k in &v {
                    assert!(k < n && !seen[k], "split {k} of {n}: {v:?}");
                    seen[k] = true;
                }
            }
        }
        4 => {
            if let Ok(v) = parse_size(text) {
                assert!(v.is_finite() && v > 0.0);
            }
        }
        5 => {
            if let Ok(v) = parse_rows(text) {
                assert!(v >= 1);
            }
        }
        6 => {
            if let Ok(Some(rule)) = parse_early_stopping(text) {
                rule.validate().expect("an accepted rule is valid");
            }
        }
        _ => {
            if let Ok(v) = parse_layers(text) {
                assert!(!v.is_empty() && v.iter().all(|&l| l >= 1));
            }
            if let Ok(v) = parse_backends(text) {
                assert!(!v.is_empty());
            }
        }
    }
});
