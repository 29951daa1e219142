//! Integration tests of `dgp_data::uci`: the benchmark folder format (every typed error,
//! embedded sources, the real folders against their READMEs) and classification folders.
//!
//! The real-data tests read the UCI folders from `$DGP_UCI_DIR` (default
//! `/work/shared/data/uci`); they print a notice and return if that folder is absent.

use std::path::{Path, PathBuf};

use dgp_core::{Error, LabelError};
use dgp_data::uci::*;
use dgp_data::*;
use dgp_traits::testing::ScratchDir;

// ---------------------------------------------------------------------------------------
// helpers

fn scratch(name: &str) -> ScratchDir {
    ScratchDir::new("dgp-io-uci", name)
}

fn write(path: &Path, text: &str) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

/// A small valid UCI folder: 5 rows, columns (f0, f1, y), one split.
fn tiny_uci(name: &str) -> ScratchDir {
    let dir = scratch(name);
    write(
        &dir.join("data.txt"),
        "1 2 3\n\n4 5 6\n7 8 9\n10 11 12\n13 14 15\n\n",
    );
    write(&dir.join("index_features.txt"), "0\n1\n");
    write(&dir.join("index_target.txt"), "2\n");
    write(&dir.join("n_splits.txt"), "1\n");
    write(&dir.join("splits/index_train_0.txt"), "0\n1\n2\n");
    write(&dir.join("splits/index_test_0.txt"), "3\n4\n");
    dir
}

fn uci_root() -> Option<PathBuf> {
    let root = std::env::var_os("DGP_UCI_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/data/uci"));
    if root.is_dir() {
        Some(root)
    } else {
        eprintln!("skipping: UCI data folder {} not found", root.display());
        None
    }
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

// ---------------------------------------------------------------------------------------
// UCI loader: typed errors

#[test]
fn uci_tiny_folder_loads_with_blank_lines() {
    let dir = tiny_uci("ok");
    let u = load_uci(&dir).unwrap();
    assert_eq!(u.name, dir.file_name().unwrap().to_string_lossy());
    assert_eq!(
        (u.data.n(), u.data.input_dim(), u.data.output_dim()),
        (5, 2, 1)
    );
    assert_eq!(u.data.y()[(4, 0)], 15.0);
    assert_eq!(u.data.x()[(1, 1)], 5.0);
    assert_eq!(u.n_splits, 1);
    assert_eq!(u.split(0).unwrap(), (vec![0, 1, 2], vec![3, 4]));
}

#[test]
fn uci_missing_file_is_an_io_error_with_path() {
    let dir = tiny_uci("missing");
    std::fs::remove_file(dir.join("index_target.txt")).unwrap();
    match load_uci(&dir) {
        Err(Error::Io { path, .. }) => assert_eq!(path, dir.join("index_target.txt")),
        other => panic!("expected Io, got {other:?}"),
    }
    let r = load_uci(dir.join("no-such-folder"));
    assert!(matches!(r, Err(Error::Io { .. })), "{r:?}");
}

#[test]
fn uci_missing_split_file_is_an_io_error_with_path() {
    let dir = tiny_uci("missing-split");
    std::fs::remove_file(dir.join("splits/index_test_0.txt")).unwrap();
    let u = load_uci(&dir).unwrap();
    match u.split(0) {
        Err(Error::Io { path, .. }) => assert_eq!(path, dir.join("splits/index_test_0.txt")),
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn uci_parse_error_reports_path_line_and_column() {
    let dir = tiny_uci("parse");
    // Line 4 (after a blank line 2), field 2 is bad.
    write(&dir.join("data.txt"), "1 2 3\n\n4 5 6\n7 x8 9\n");
    match load_uci(&dir) {
        Err(Error::Parse {
            path, line, column, ..
        }) => {
            assert_eq!(path, dir.join("data.txt"));
            assert_eq!((line, column), (4, 2));
        }
        other => panic!("expected Parse, got {other:?}"),
    }
    // A NaN token is rejected as a parse error at its position.
    write(&dir.join("data.txt"), "1 2 3\n4 5 nan\n");
    match load_uci(&dir) {
        Err(Error::Parse { line, column, .. }) => assert_eq!((line, column), (2, 3)),
        other => panic!("expected Parse, got {other:?}"),
    }
}

#[test]
fn uci_ragged_row_is_a_parse_error() {
    let dir = tiny_uci("ragged");
    write(&dir.join("data.txt"), "1 2 3\n4 5 6\n\n7 8\n");
    match load_uci(&dir) {
        Err(Error::Parse { line, column, .. }) => assert_eq!((line, column), (4, 3)),
        other => panic!("expected Parse, got {other:?}"),
    }
}

#[test]
fn uci_empty_data_is_an_empty_error() {
    let dir = tiny_uci("empty");
    write(&dir.join("data.txt"), "\n  \n");
    assert!(matches!(load_uci(&dir), Err(Error::Empty(_))));
}

#[test]
fn uci_column_index_out_of_range_is_a_parse_error() {
    let dir = tiny_uci("colrange");
    write(&dir.join("index_features.txt"), "0\n5\n");
    match load_uci(&dir) {
        Err(Error::Parse {
            path, line, column, ..
        }) => {
            assert_eq!(path, dir.join("index_features.txt"));
            assert_eq!((line, column), (2, 1));
        }
        other => panic!("expected Parse, got {other:?}"),
    }
}

#[test]
fn uci_split_row_index_out_of_range_is_a_parse_error() {
    let dir = tiny_uci("rowrange");
    write(&dir.join("splits/index_train_0.txt"), "0\n1\n\n7\n");
    let u = load_uci(&dir).unwrap();
    match u.split(0) {
        Err(Error::Parse {
            path,
            line,
            column,
            message,
        }) => {
            assert_eq!(path, dir.join("splits/index_train_0.txt"));
            assert_eq!((line, column), (4, 1));
            assert!(message.contains("out of range"), "{message}");
        }
        other => panic!("expected Parse, got {other:?}"),
    }
}

#[test]
fn uci_split_number_out_of_range_is_a_config_error() {
    let u = load_uci(tiny_uci("splitk")).unwrap();
    assert!(matches!(u.split(1), Err(Error::Config(_))));
}

#[test]
fn uci_overlapping_or_repeated_split_indices_are_rejected() {
    let dir = tiny_uci("overlap");
    write(&dir.join("splits/index_test_0.txt"), "2\n4\n");
    let u = load_uci(&dir).unwrap();
    assert!(matches!(u.split(0), Err(Error::Config(_))));
    write(&dir.join("splits/index_test_0.txt"), "3\n4\n3\n");
    match u.split(0) {
        Err(Error::Parse { line, .. }) => assert_eq!(line, 3),
        other => panic!("expected Parse, got {other:?}"),
    }
}

#[test]
fn uci_from_str_matches_folder_and_reports_embedded_paths() {
    let dir = tiny_uci("fromstr");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let (data, feats, target, ns) = (
        read("data.txt"),
        read("index_features.txt"),
        read("index_target.txt"),
        read("n_splits.txt"),
    );
    let (tr, te) = (
        read("splits/index_train_0.txt"),
        read("splits/index_test_0.txt"),
    );
    let splits = [(tr.as_str(), te.as_str())];
    let src = UciSources {
        name: "tiny",
        data: &data,
        index_features: &feats,
        index_target: &target,
        n_splits: &ns,
        splits: &splits,
    };
    let a = load_uci_from_str(&src).unwrap();
    let b = load_uci(&dir).unwrap();
    assert_eq!(a.data, b.data);
    assert_eq!(a.split(0).unwrap(), b.split(0).unwrap());
    // Malformed embedded data names the pseudo-path and line.
    let bad = UciSources {
        data: "1 2 3\nfoo 5 6\n",
        ..src
    };
    match load_uci_from_str(&bad) {
        Err(Error::Parse {
            path, line, column, ..
        }) => {
            assert_eq!(path, PathBuf::from("embedded:tiny/data.txt"));
            assert_eq!((line, column), (2, 1));
        }
        other => panic!("expected Parse, got {other:?}"),
    }
    // More embedded splits than n_splits is a configuration error.
    let too_many = [(tr.as_str(), te.as_str()), (tr.as_str(), te.as_str())];
    let r = load_uci_from_str(&UciSources {
        splits: &too_many,
        ..src
    });
    assert!(matches!(r, Err(Error::Config(_))));
}

// ---------------------------------------------------------------------------------------
// UCI loader: the real data sets

const README_TABLE: [(&str, usize, usize, usize); 8] = [
    ("boston", 506, 13, 20),
    ("concrete", 1030, 8, 20),
    ("energy", 768, 8, 20),
    ("kin8nm", 8192, 8, 20),
    ("naval", 11934, 16, 20),
    ("power", 9568, 4, 20),
    ("protein", 45730, 9, 5),
    ("wine-red", 1599, 11, 20),
];

#[test]
fn uci_real_folders_match_readme_and_published_splits_partition() {
    let Some(root) = uci_root() else { return };
    for (name, n, d, n_splits) in README_TABLE {
        let u = load_uci(root.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(u.name, name);
        assert_eq!(
            (u.data.n(), u.data.input_dim(), u.data.output_dim()),
            (n, d, 1),
            "{name}"
        );
        assert_eq!(u.n_splits, n_splits, "{name}");
        let expected_test = (0.1 * n as f64).round() as usize;
        for k in 0..n_splits {
            let (train, test) = u
                .split(k)
                .unwrap_or_else(|e| panic!("{name} split {k}: {e}"));
            assert_eq!(train.len() + test.len(), n, "{name} split {k}");
            assert_eq!(test.len(), expected_test, "{name} split {k}");
            let mut all = train.clone();
            all.extend(&test);
            assert_eq!(sorted(all), (0..n).collect::<Vec<_>>(), "{name} split {k}");
        }
        assert!(matches!(u.split(n_splits), Err(Error::Config(_))));
    }
}

#[test]
fn uci_trailing_blank_lines_of_concrete_and_energy_are_ignored() {
    let Some(root) = uci_root() else { return };
    for name in ["concrete", "energy"] {
        let text = std::fs::read_to_string(root.join(name).join("data.txt")).unwrap();
        assert!(
            text.ends_with("\n\n"),
            "{name} should end with a blank line"
        );
        let last: Vec<f64> = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap()
            .split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect();
        let u = load_uci(root.join(name)).unwrap();
        let n = u.data.n();
        assert_eq!(u.data.y()[(n - 1, 0)], *last.last().unwrap(), "{name}");
        assert_eq!(u.data.x()[(n - 1, 0)], last[0], "{name}");
    }
}

#[test]
fn naval_constant_columns_standardise_without_nan() {
    let Some(root) = uci_root() else { return };
    let u = load_uci(root.join("naval")).unwrap();
    let (train_idx, _) = u.split(0).unwrap();
    let train = u.data.select_rows(&train_idx).unwrap();
    let x = train.x();
    let constant: Vec<usize> = (0..x.ncols())
        .filter(|&j| (0..x.nrows()).all(|i| x[(i, j)] == x[(0, j)]))
        .collect();
    assert_eq!(constant, vec![8, 11]);
    let s = Standardizer::fit(&train);
    for &j in &constant {
        assert_eq!(s.x_std[j], 1.0);
    }
    let z = s.transform(&u.data).unwrap();
    for j in 0..z.input_dim() {
        for i in 0..z.n() {
            assert!(z.x()[(i, j)].is_finite());
        }
    }
    for &j in &constant {
        assert!((0..z.n()).all(|i| z.x()[(i, j)] == 0.0));
    }
    // Dropping near-constant features removes exactly these two.
    let sd = Standardizer::fit_with(&train, StandardizeOptions::drop_near_constant()).unwrap();
    assert_eq!(sd.kept_features.len(), 14);
    assert!(!sd.kept_features.contains(&8) && !sd.kept_features.contains(&11));
    assert_eq!(sd.transform(&train).unwrap().input_dim(), 14);
}

// ---------------------------------------------------------------------------------------
// Classification folders

#[test]
fn classification_folders_load_with_validated_labels() {
    let src = |data: &'static str, splits: &'static [(&'static str, &'static str)]| UciSources {
        name: "tiny",
        data,
        index_features: "0\n",
        index_target: "1\n",
        n_splits: "1\n",
        splits,
    };
    let ok = src("0.1 0\n0.2 1\n0.3 2\n0.4 1\n", &[("0\n1\n2\n", "3\n")]);
    let d = ClassDataset::from_uci(load_uci_from_str(&ok).unwrap(), None).unwrap();
    assert_eq!((d.num_classes, d.labels()), (3, &[0, 1, 2, 1][..]));
    let s = d.split(0).unwrap();
    assert_eq!((s.train.n(), s.test.n()), (3, 1));
    assert_eq!(s.train_labels, vec![0, 1, 2]);
    // K given larger than the data: class 3 missing.
    assert!(matches!(
        ClassDataset::from_uci(load_uci_from_str(&ok).unwrap(), Some(4)),
        Err(Error::Label(LabelError::MissingClass {
            class: 3,
            num_classes: 4
        }))
    ));
    // K given smaller than a label.
    assert!(matches!(
        ClassDataset::from_uci(load_uci_from_str(&ok).unwrap(), Some(2)),
        Err(Error::Label(LabelError::OutOfRange { row: 2, .. }))
    ));
    // A class missing from the training split.
    let miss = src("0.1 0\n0.2 1\n0.3 2\n0.4 1\n", &[("0\n1\n3\n", "2\n")]);
    let d = ClassDataset::from_uci(load_uci_from_str(&miss).unwrap(), None).unwrap();
    assert!(matches!(
        d.split(0),
        Err(Error::Label(LabelError::MissingClass {
            class: 2,
            num_classes: 3
        }))
    ));
    // Non-integer labels and a single class.
    let frac = src("0.1 0\n0.2 1.5\n", &[("0\n", "1\n")]);
    assert!(matches!(
        ClassDataset::from_uci(load_uci_from_str(&frac).unwrap(), None),
        Err(Error::Label(LabelError::NotAnInteger { row: 1, .. }))
    ));
    let one = src("0.1 0\n0.2 0\n", &[("0\n", "1\n")]);
    assert!(matches!(
        ClassDataset::from_uci(load_uci_from_str(&one).unwrap(), None),
        Err(Error::Label(LabelError::TooFewClasses { num_classes: 1 }))
    ));
}

#[test]
fn shared_classification_folders_load() {
    let root = std::path::Path::new("../../shared/data/classification");
    let root = if root.exists() {
        root.to_path_buf()
    } else {
        std::path::PathBuf::from("/work/shared/data/classification")
    };
    if !root.exists() {
        return;
    }
    let magic = ClassDataset::load(root.join("magic"), None).unwrap();
    assert_eq!((magic.uci.data.n(), magic.num_classes), (19_020, 2));
    assert_eq!(magic.labels().iter().filter(|&&c| c == 1).count(), 6_688);
    let digits = ClassDataset::load(root.join("optdigits"), None).unwrap();
    assert_eq!((digits.uci.data.n(), digits.num_classes), (5_620, 10));
    let s = digits.split(0).unwrap();
    assert_eq!((s.train.n(), s.test.n()), (3_823, 1_797));
}
