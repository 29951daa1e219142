//! Reading a [`RowSource`] in consecutive chunks with bounded memory.

use crate::RowSource;
use dgp_core::Result;
use faer::{Mat, MatRef};

/// Default number of rows per chunk of [`for_each_chunk`] callers in this crate.
pub const DEFAULT_CHUNK_ROWS: usize = 65_536;

/// Calls `f(first_row, x, y)` for consecutive chunks of at most `chunk_rows` rows of
/// `src`, in row order (rows `first_row..first_row + x.nrows()`), through buffers of
/// `chunk_rows` rows allocated once: memory is `O(chunk_rows·(D+P))` whatever N.
///
/// # Errors
/// The first error of [`RowSource::gather`] or of `f`; [`dgp_core::Error::Config`] if
/// `chunk_rows == 0`.
pub fn for_each_chunk<S: RowSource + ?Sized>(
    src: &S,
    chunk_rows: usize,
    mut f: impl FnMut(usize, MatRef<'_, f64>, MatRef<'_, f64>) -> Result<()>,
) -> Result<()> {
    if chunk_rows == 0 {
        return Err(dgp_core::Error::config(
            "chunk_rows",
            "chunk size must be at least 1 row",
        ));
    }
    let (n, d, p) = (src.n(), src.input_dim(), src.output_dim());
    let c = chunk_rows.min(n);
    let mut x = Mat::zeros(c, d);
    let mut y = Mat::zeros(c, p);
    let mut idx = vec![0usize; c];
    let mut start = 0;
    while start < n {
        let m = c.min(n - start);
        for (k, v) in idx[..m].iter_mut().enumerate() {
            *v = start + k;
        }
        src.gather(
            &idx[..m],
            x.as_mut().subrows_mut(0, m),
            y.as_mut().subrows_mut(0, m),
        )?;
        f(start, x.as_ref().subrows(0, m), y.as_ref().subrows(0, m))?;
        start += m;
    }
    Ok(())
}
