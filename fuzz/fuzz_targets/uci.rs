//! The UCI benchmark folder format (`dgp_io::uci`): `data.txt` (whitespace-separated
//! numbers), the column index files, `n_splits.txt` and the split index files.
//!
//! Input: the files' contents separated by the byte 0x1E (record separator): data,
//! index_features, index_target, n_splits, then train/test pairs of split files. The data
//! text alone also goes through `parse_matrix` and every part through `parse_indices`.
//! Checked: no panic; an accepted folder holds finite rows of the announced shape and
//! each split it accepts is non-empty, in range, without repeats and disjoint; a refusal
//! names a line inside the text.
#![no_main]

use std::path::Path;

use dgp_fuzz::{assert_finite_dataset, assert_text_error};
use dgp_io::uci::{ClassDataset, UciSources, load_uci_from_str, parse_indices, parse_matrix};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parts: Vec<&str> = text.split('\u{1e}').collect();
    let p = Path::new("fuzz");
    match parse_matrix(parts[0], p) {
        Ok(m) => {
            assert!(m.nrows() >= 1 && m.ncols() >= 1);
            for i in 0..m.nrows() {
                for j in 0..m.ncols() {
                    assert!(m[(i, j)].is_finite());
                }
            }
        }
        Err(e) => {
            assert_text_error(&e, parts[0].as_bytes());
        }
    }
    for (k, part) in parts.iter().enumerate() {
        let bound = 1 + k * 7;
        match parse_indices(part, p, bound) {
            Ok(v) => assert!(v.iter().all(|&i| i < bound)),
            Err(e) => {
                assert_text_error(&e, part.as_bytes());
            }
        }
    }
    if parts.len() < 4 {
        return;
    }
    let pairs: Vec<(&str, &str)> = parts[4..]
        .chunks(2)
        .map(|c| (c[0], c.get(1).copied().unwrap_or("")))
        .collect();
    let src = UciSources {
        name: "fuzz",
        data: parts[0],
        index_features: parts[1],
        index_target: parts[2],
        n_splits: parts[3],
        splits: &pairs,
    };
    match load_uci_from_str(&src) {
        Ok(u) => {
            assert_finite_dataset(&u.data);
            for k in 0..u.n_splits.min(pairs.len() + 1) {
                if let Ok((train, test)) = u.split(k) {
                    assert!(!train.is_empty() && !test.is_empty());
                    let n = u.data.n();
                    let mut seen = vec![0u8; n];
                    for &i in train.iter().chain(&test) {
                        assert!(i < n);
                        seen[i] += 1;
                        assert!(seen[i] == 1, "row {i} twice in split {k}");
                    }
                }
            }
            // The same folder read as a classification data set (labels 0..K).
            if let Ok(c) = ClassDataset::from_uci(u, None) {
                assert!(c.num_classes >= 2 && c.labels().iter().all(|&l| l < c.num_classes));
                for k in 0..c.uci.n_splits.min(pairs.len() + 1) {
                    let _ = c.split(k);
                }
            }
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
        }
    }
});
