//! The binary row store (`dgp_io::rowstore`): header (magic, version, N, D, P, name block,
//! checksum) and body.
//!
//! Input: a selector byte, then the file's bytes. With the selector's low bit set the
//! target first writes the correct header checksum into the bytes (where the header's own
//! length fields place it), so that the fuzzer explores what lies behind the checksum:
//! the counts, the name block and the length check. Checked: no panic, no unbounded
//! allocation; an accepted store reads to finite rows of its announced shape, and written
//! again (`write_dataset`) reads back to the same schema and bit-identical values; a
//! refusal is a typed error.
#![no_main]

use dgp_fuzz::{assert_finite_dataset, scratch_dir, scratch_file, selector};
use dgp_io::rowstore::{RowStore, Schema, write_dataset};
use dgp_traits::data::RowSource;
use libfuzzer_sys::fuzz_target;

/// FNV-1a 64 (the header checksum of the format, `rowstore.rs` module docs).
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn fix_checksum(b: &mut [u8]) {
    if b.len() < 56 {
        return;
    }
    let names_len = u64::from_le_bytes(b[40..48].try_into().unwrap());
    // The reader refuses a name block over 2^26 bytes before it reads the checksum.
    if names_len > 1 << 26 {
        return;
    }
    let h = (48 + names_len as usize).div_ceil(8) * 8 + 8;
    if h > b.len() {
        return;
    }
    let sum = fnv1a64(&b[..h - 8]);
    b[h - 8..h].copy_from_slice(&sum.to_le_bytes());
}

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = selector(data);
    let mut bytes = rest.to_vec();
    if sel & 1 == 1 {
        fix_checksum(&mut bytes);
    }
    let path = scratch_file("f.rows", &bytes);
    let store = match RowStore::open(&path) {
        Ok(s) => s,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let (n, d, p) = (store.n(), store.input_dim(), store.output_dim());
    assert!(n >= 1 && d >= 1 && p >= 1);
    assert_eq!(
        bytes.len() as u64 % 8,
        0,
        "an accepted store is whole 8-byte words"
    );
    let ds = match store.to_dataset() {
        Ok(ds) => ds,
        Err(e) => {
            // Only a non-finite value may refuse the rows of a store that opened.
            assert!(matches!(e, dgp_traits::Error::NonFinite { .. }), "{e}");
            return;
        }
    };
    assert_finite_dataset(&ds);
    assert_eq!((ds.n(), ds.input_dim(), ds.output_dim()), (n, d, p));
    let out = scratch_dir().join("again.rows");
    write_dataset(&out, &ds, &[&path]).expect("rows read from a store write again");
    let again = RowStore::open(&out).expect("a written store opens");
    assert_eq!(again.schema(), &Schema::of(&ds));
    assert_eq!(again.schema(), store.schema());
    let ds2 = again.to_dataset().unwrap();
    assert_eq!(ds2.x(), ds.x());
    assert_eq!(ds2.y(), ds.y());
});
