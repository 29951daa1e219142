//! Regression tests of what the fuzz targets (`fuzz/`, issue 56) found in the loaders of
//! this crate, each at the input the fuzzer reduced it to (or a readable equivalent).

use dgp_io::uci::{UciSources, load_uci_from_str};
use dgp_traits::Error;

/// Target `uci`: a split file that starts with a byte-order mark and repeats a row index.
/// The BOM is skipped when the indices are read, but the search for the repeat (for the
/// error's line and field) did not skip it, found one occurrence only and let the split
/// through with row 0 twice in its training set.
#[test]
fn a_repeated_row_index_after_a_byte_order_mark_is_refused() {
    let src = UciSources {
        name: "bom-repeat",
        data: "0 0\n1 1\n2 0\n3 1\n",
        index_features: "0\n",
        index_target: "1\n",
        n_splits: "1\n",
        splits: &[("\u{feff}0 1 0", "3\n")],
    };
    let uci = load_uci_from_str(&src).unwrap();
    match uci.split(0) {
        Err(Error::Parse {
            line,
            column,
            message,
            ..
        }) => {
            assert_eq!((line, column), (1, 3));
            assert_eq!(message, "row index 0 repeated");
        }
        other => panic!("{other:?}"),
    }
}

/// Target `parquet`: a file whose embedded Arrow schema (`ARROW:schema` in the key-value
/// metadata) is a malformed IPC message. The Arrow reader decoded it and `arrow-ipc`
/// panicked (`convert.rs`: `fb.fields().unwrap()`); the reader now takes the column types
/// from the Parquet schema alone. The file must be refused or read, never panic.
#[test]
fn a_parquet_file_with_a_malformed_embedded_arrow_schema_does_not_panic() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz/parquet-bad-arrow-schema.parquet");
    let names = dgp_io::parquet_reader::parquet_column_names(&path);
    if let Ok(names) = names {
        let target = names.last().cloned().unwrap_or_default();
        match dgp_io::parquet_reader::load_parquet(&path, &target) {
            Ok(d) => assert!(d.n() >= 1),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

/// Target `parquet`: a footer whose column chunk has a negative offset. The decoder
/// asserted it when reading the chunk (`ColumnChunkMetaData::byte_range`: "column start
/// and length should not be negative") and panicked; the reader now checks every chunk's
/// location against the file when it opens it.
#[test]
fn a_parquet_footer_with_a_chunk_outside_the_file_is_refused() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz/parquet-negative-column-offset.parquet");
    let names = dgp_io::parquet_reader::parquet_column_names(&path);
    let e = match names {
        Err(e) => e,
        Ok(names) => {
            let target = names.last().cloned().unwrap_or_default();
            dgp_io::parquet_reader::load_parquet(&path, &target).unwrap_err()
        }
    };
    assert!(e.to_string().contains("corrupt Parquet footer"), "{e}");
}
