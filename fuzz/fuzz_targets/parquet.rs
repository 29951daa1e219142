//! Parquet files: `dgp_io::parquet_reader` (column names, the whole-file loader, the
//! streaming reader in small record batches) and `dgp-bench`'s `--data FILE.parquet`.
//!
//! Input: the file's bytes. Checked: no panic and no unbounded allocation (a footer or
//! page header may claim any size); an accepted file loads to finite values, and the
//! streaming reader in batches of 3 rows delivers the same rows bit for bit; a refusal is
//! a typed error.
#![no_main]

use dgp_bench::datasets::BenchData;
use dgp_fuzz::{assert_finite_dataset, scratch_file};
use dgp_io::parquet_reader::{ParquetChunks, load_parquet, parquet_column_names};
use dgp_io::tabular::ChunkReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = scratch_file("f.parquet", data);
    match BenchData::load(path.to_str().unwrap(), None, 0) {
        Ok(b) => assert_finite_dataset(b.data()),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let Ok(names) = parquet_column_names(&path) else {
        return;
    };
    let Some(target) = names.last().cloned() else {
        return;
    };
    let whole = match load_parquet(&path, &target) {
        Ok(d) => d,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert_finite_dataset(&whole);
    let features = whole.feature_names().unwrap().to_vec();
    let mut r = ParquetChunks::open(&path, &features, &[target], 3)
        .unwrap_or_else(|e| panic!("the whole-file loader reads it, the stream refuses: {e}"));
    let (d, width) = (whole.input_dim(), whole.input_dim() + 1);
    let mut buf = Vec::new();
    let mut row = 0;
    loop {
        let m = r
            .next_chunk(&mut buf, 2)
            .unwrap_or_else(|e| panic!("the whole-file loader reads it, the stream refuses: {e}"));
        if m == 0 {
            break;
        }
        for i in 0..m {
            for j in 0..width {
                let want = if j < d {
                    whole.x()[(row, j)]
                } else {
                    whole.y()[(row, 0)]
                };
                assert_eq!(buf[i * width + j].to_bits(), want.to_bits());
            }
            row += 1;
        }
    }
    assert_eq!(row, whole.n());
});
