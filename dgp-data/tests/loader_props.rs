//! Property tests of the text loaders (the benchmark folder format here, the CSV loader of
//! `dgp_traits::data`): random bytes and random edits of valid
//! UCI and CSV files never panic the loaders; whatever loads is a finite, consistent data
//! set whose splits and standardisation do not panic either.

use std::path::{Path, PathBuf};

use dgp_data::uci::{UciSources, load_uci, load_uci_from_str, parse_indices, parse_matrix};
use dgp_data::{Dataset, Standardizer, load_csv, parse_csv_str};
use proptest::prelude::*;

const CSV: &str = "a,y,b\n0.5,1.25,-3\n1e-3,2,4\n-7,0.001,5.5\n8,9,10\n";
const DATA: &str = "1 2 3\n4 5 6\n7 8 9\n10 11 12.5\n\n";
const FEATS: &str = "0\n1\n";
const TARGET: &str = "2\n";
const NSPLITS: &str = "2\n";
const SPLITS: [(&str, &str); 2] = [("0\n1\n2\n", "3\n"), ("1\n2\n3\n", "0\n")];

fn temp_file(tag: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "dgp-loader-prop-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Whatever loads must be usable: finite, consistent, standardisable.
fn check_dataset(d: &Dataset) {
    assert!(d.n() > 0 && d.input_dim() > 0);
    assert_eq!(d.x().nrows(), d.y().nrows());
    for i in 0..d.n() {
        for j in 0..d.input_dim() {
            assert!(d.x()[(i, j)].is_finite());
        }
    }
    let s = Standardizer::fit(d);
    if let Ok(t) = s.transform(d) {
        assert_eq!(t.n(), d.n());
    }
}

/// One random edit of `text`: replace, insert or delete a byte-range with characters
/// that matter to the parsers.
fn edit(text: &str, pos: usize, op: u8, piece: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let pos = pos % (chars.len() + 1);
    match op % 3 {
        0 => {
            let end = (pos + piece.chars().count()).min(chars.len());
            chars.splice(pos..end, piece.chars());
        }
        1 => {
            chars.splice(pos..pos, piece.chars());
        }
        _ => {
            let end = (pos + 1 + piece.len() % 4).min(chars.len());
            chars.drain(pos..end);
        }
    }
    chars.into_iter().collect()
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\n".to_string()),
        Just(",".to_string()),
        Just(" ".to_string()),
        Just("\"".to_string()),
        Just("-".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("1e400".to_string()),
        Just("1e-400".to_string()),
        Just("99999999999999999999999".to_string()),
        Just("y".to_string()),
        Just("\u{feff}".to_string()),
        "[0-9a-z,;\" \\n\\t.eE+-]{0,6}",
    ]
}

fn uci_from(texts: &[String; 9]) -> Result<(), ()> {
    let splits = [
        (texts[4].as_str(), texts[5].as_str()),
        (texts[6].as_str(), texts[7].as_str()),
    ];
    let src = UciSources {
        name: "prop",
        data: &texts[0],
        index_features: &texts[1],
        index_target: &texts[2],
        n_splits: &texts[3],
        splits: &splits,
    };
    let Ok(uci) = load_uci_from_str(&src) else {
        return Err(());
    };
    check_dataset(&uci.data);
    for k in 0..uci.n_splits.min(1000) {
        if let Ok((tr, te)) = uci.split(k) {
            assert!(tr.iter().chain(&te).all(|&i| i < uci.data.n()));
            if let (Ok(a), Ok(_)) = (uci.data.select_rows(&tr), uci.data.select_rows(&te)) {
                check_dataset(&a);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic_the_csv_loader(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let p = temp_file("csv", &bytes);
        if let Ok(d) = load_csv(&p, "y") {
            check_dataset(&d);
        }
        let _ = std::fs::remove_file(&p);
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_matrix(&text, Path::new("bytes"));
        let _ = parse_indices(&text, Path::new("bytes"), 10);
    }

    #[test]
    fn random_bytes_never_panic_the_uci_folder_loader(
        bytes in proptest::collection::vec(any::<u8>(), 0..120),
        which in 0usize..7,
    ) {
        let dir = std::env::temp_dir().join(format!(
            "dgp-loader-prop-uci-{}-{:?}", std::process::id(), std::thread::current().id()));
        std::fs::create_dir_all(dir.join("splits")).unwrap();
        let files = [
            ("data.txt", DATA), ("index_features.txt", FEATS), ("index_target.txt", TARGET),
            ("n_splits.txt", NSPLITS), ("splits/index_train_0.txt", SPLITS[0].0),
            ("splits/index_test_0.txt", SPLITS[0].1), ("splits/index_train_1.txt", SPLITS[1].0),
        ];
        for (i, (f, t)) in files.iter().enumerate() {
            let contents: &[u8] = if i == which { &bytes } else { t.as_bytes() };
            std::fs::write(dir.join(f), contents).unwrap();
        }
        if let Ok(uci) = load_uci(&dir) {
            check_dataset(&uci.data);
            for k in 0..uci.n_splits.min(50) {
                let _ = uci.split(k);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn random_edits_of_a_valid_csv_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), piece()), 1..5),
    ) {
        let mut text = CSV.to_string();
        for (pos, op, p) in &edits {
            text = edit(&text, *pos, *op, p);
        }
        if let Ok(d) = parse_csv_str(&text, &["y"], Path::new("edited.csv")) {
            check_dataset(&d);
        }
    }

    #[test]
    fn random_edits_of_a_valid_uci_folder_never_panic(
        which in 0usize..8,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), piece()), 1..4),
    ) {
        let mut texts: [String; 9] = [
            DATA.into(), FEATS.into(), TARGET.into(), NSPLITS.into(),
            SPLITS[0].0.into(), SPLITS[0].1.into(), SPLITS[1].0.into(), SPLITS[1].1.into(),
            String::new(),
        ];
        for (pos, op, p) in &edits {
            texts[which] = edit(&texts[which], *pos, *op, p);
        }
        let _ = uci_from(&texts);
    }
}

#[test]
fn the_unedited_fixtures_load() {
    let texts: [String; 9] = [
        DATA.into(),
        FEATS.into(),
        TARGET.into(),
        NSPLITS.into(),
        SPLITS[0].0.into(),
        SPLITS[0].1.into(),
        SPLITS[1].0.into(),
        SPLITS[1].1.into(),
        String::new(),
    ];
    assert!(uci_from(&texts).is_ok());
    let d = parse_csv_str(CSV, &["y"], Path::new("ok.csv")).unwrap();
    assert_eq!((d.n(), d.input_dim()), (4, 2));
}
