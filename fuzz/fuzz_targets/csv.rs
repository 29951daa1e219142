//! CSV files: the in-memory loader of the core (`dgp_traits::data::load_csv_targets`), the
//! streaming reader of `dgp-io` (`tabular::CsvChunks`) and `dgp-bench`'s reading of
//! `--data FILE.csv` (header checks, the last column as target).
//!
//! Input: the file's bytes (header, fields, quoting, BOM, line breaks as given). Checked:
//! no panic; an accepted file loads to finite values, writes back as CSV and reads again
//! to the same names and bit-identical values, and the streaming reader delivers the same
//! rows as the in-memory loader; a refusal is a typed error naming a line of the file.
#![no_main]

use dgp_bench::datasets::BenchData;
use dgp_fuzz::{assert_finite_dataset, assert_text_error, scratch_file};
use dgp_io::tabular::{ChunkReader, CsvChunks};
use dgp_traits::data::{MAX_LINE_BYTES, load_csv_targets, parse_csv_str};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = scratch_file("f.csv", data);
    // dgp-bench's reading: the header's last column is the target.
    match BenchData::load(path.to_str().unwrap(), None, 0) {
        Ok(b) => assert_finite_dataset(b.data()),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let core = match load_csv_targets(&path, &["y"]) {
        Ok(d) => d,
        Err(e) => {
            assert_text_error(&e, data);
            return;
        }
    };
    assert_finite_dataset(&core);
    let features = core.feature_names().unwrap().to_vec();
    let targets = core.target_names().unwrap().to_vec();
    // A first name that itself begins with a byte-order mark (after the one the reader
    // skips) would lose it when written first in a file again: not a round trip of data.
    if features[0].starts_with('\u{feff}') {
        return;
    }
    // Write back (quoted as needed) and read again: the same names and bits.
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(features.iter().chain(&targets)).unwrap();
    for i in 0..core.n() {
        let row: Vec<String> = (0..core.input_dim())
            .map(|j| core.x()[(i, j)].to_string())
            .chain((0..core.output_dim()).map(|j| core.y()[(i, j)].to_string()))
            .collect();
        w.write_record(&row).unwrap();
    }
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    let again = parse_csv_str(&text, &["y"], std::path::Path::new("again.csv"))
        .unwrap_or_else(|e| panic!("written CSV not read back: {e}\n{text}"));
    assert_eq!(again.feature_names(), core.feature_names());
    assert_eq!(again.x(), core.x());
    assert_eq!(again.y(), core.y());
    // The streaming reader over the same columns, when the names are distinct.
    let mut all: Vec<&String> = features.iter().collect();
    all.sort();
    all.dedup();
    if all.len() != features.len() {
        return;
    }
    let mut r = match CsvChunks::open(&path, &features, &targets, MAX_LINE_BYTES) {
        Ok(r) => r,
        Err(e) => panic!("the core loads the file, the stream refuses it: {e}"),
    };
    let (d, width) = (core.input_dim(), core.input_dim() + 1);
    let mut buf = Vec::new();
    let mut row = 0;
    loop {
        let m = r
            .next_chunk(&mut buf, 3)
            .unwrap_or_else(|e| panic!("the core loads the file, the stream refuses it: {e}"));
        if m == 0 {
            break;
        }
        for i in 0..m {
            for j in 0..width {
                let want = if j < d {
                    core.x()[(row, j)]
                } else {
                    core.y()[(row, 0)]
                };
                assert_eq!(
                    buf[i * width + j].to_bits(),
                    want.to_bits(),
                    "row {row} col {j}"
                );
            }
            row += 1;
        }
    }
    assert_eq!(row, core.n());
});
