//! Where a minibatch loop reads its rows from: the [`RowSource`] contract.
//!
//! The training executor (`dgp_traits::train::Executor`) draws minibatch *indices* from a
//! seeded [`crate::Minibatches`] stream that depends only on the number of rows, the
//! batch size and the seed, and then asks a [`RowSource`] for those rows. The in-memory
//! [`Dataset`] is one source; out-of-core stores (a memory-mapped row file, for example)
//! are others. Because the indices never depend on the source, the same seed gives the
//! same minibatches — and, with a source that returns the same numbers, the same run bit
//! for bit — whether the rows come from memory or from a file.

use std::sync::Mutex;

use faer::{Mat, MatMut};

use crate::Dataset;
use dgp_core::{Error, Result};

/// Rows of a supervised data set that can be read by index: inputs (N×D) and targets
/// (N×P), in the units the model trains in.
///
/// Contract:
/// * [`RowSource::gather`] copies rows `idx` (in that order, repeats allowed) into the
///   first `idx.len()` rows of `x` and `y`, exactly as they are stored (no rounding, no
///   reordering), and never allocates per call in the hot path;
/// * an index ≥ [`RowSource::n`], a buffer of the wrong shape, a read failure or a
///   non-finite value is an error (naming the row where it applies), never a panic and
///   never a silently wrong number;
/// * a source is read-only and may be read from several threads at once.
pub trait RowSource: Send + Sync {
    /// Number of rows N (≥ 1).
    fn n(&self) -> usize;

    /// Number of input columns D (≥ 1).
    fn input_dim(&self) -> usize;

    /// Number of target columns P (≥ 1).
    fn output_dim(&self) -> usize;

    /// Copies rows `idx` into `x` (`idx.len()`×D) and `y` (`idx.len()`×P); see the
    /// trait docs.
    ///
    /// # Errors
    /// [`Error::Shape`] for a buffer of the wrong shape or an index out of range;
    /// [`Error::Io`] for a failed read; [`Error::NonFinite`] (with the source's row number)
    /// for a NaN or infinite value.
    fn gather(&self, idx: &[usize], x: MatMut<'_, f64>, y: MatMut<'_, f64>) -> Result<()>;

    /// The rows as an in-memory [`Dataset`] when the source holds them that way (`None` by
    /// default): what a full-batch backend needs, and the way a backend that is only
    /// written for in-memory data recognises that it can train.
    fn in_memory(&self) -> Option<&Dataset> {
        None
    }

    /// A short description for messages and records (`"in memory"` by default).
    fn describe(&self) -> String {
        "in memory".into()
    }
}

/// The rows of `source` as an in-memory [`Dataset`], or [`Error::Unsupported`] naming
/// `who` (a backend, a training scheme) and why it needs them in memory.
///
/// # Errors
/// [`Error::Unsupported`] when the source does not hold its rows in memory.
pub fn require_in_memory<'a>(
    source: &'a dyn RowSource,
    who: &str,
    why: &str,
) -> Result<&'a Dataset> {
    source.in_memory().ok_or_else(|| {
        Error::Unsupported(format!(
            "{who} needs the training rows in memory ({why}); the rows come from {}: load them \
             into memory or use a backend that streams",
            source.describe()
        ))
    })
}

/// Checks `idx` and the buffers of a [`RowSource::gather`] call against a source with
/// `n` rows, `d` inputs and `p` targets: the checks every implementation makes first.
///
/// # Errors
/// [`Error::Shape`] naming the buffer or the first index out of range.
pub fn check_gather(
    n: usize,
    (d, p): (usize, usize),
    idx: &[usize],
    x: &MatMut<'_, f64>,
    y: &MatMut<'_, f64>,
) -> Result<()> {
    if (x.nrows(), x.ncols()) != (idx.len(), d) {
        return Err(Error::shape(
            "RowSource::gather inputs buffer",
            format!("{}×{d}", idx.len()),
            format!("{}×{}", x.nrows(), x.ncols()),
        ));
    }
    if (y.nrows(), y.ncols()) != (idx.len(), p) {
        return Err(Error::shape(
            "RowSource::gather targets buffer",
            format!("{}×{p}", idx.len()),
            format!("{}×{}", y.nrows(), y.ncols()),
        ));
    }
    if let Some(&bad) = idx.iter().find(|&&i| i >= n) {
        return Err(Error::shape(
            "RowSource::gather row index",
            format!("< {n}"),
            bad,
        ));
    }
    Ok(())
}

impl RowSource for Dataset {
    fn n(&self) -> usize {
        Dataset::n(self)
    }

    fn input_dim(&self) -> usize {
        Dataset::input_dim(self)
    }

    fn output_dim(&self) -> usize {
        Dataset::output_dim(self)
    }

    fn gather(&self, idx: &[usize], x: MatMut<'_, f64>, y: MatMut<'_, f64>) -> Result<()> {
        check_gather(
            Dataset::n(self),
            (Dataset::input_dim(self), Dataset::output_dim(self)),
            idx,
            &x,
            &y,
        )?;
        self.gather_into(idx, x, y);
        Ok(())
    }

    fn in_memory(&self) -> Option<&Dataset> {
        Some(self)
    }
}

/// The rows of another source that are not in a sorted list of excluded rows, in
/// ascending order, as a source of their own: the training rows left after held-out rows
/// are split off a source that does not hold its rows in memory. Row `k` of the view is
/// row `k + c` of the parent, where `c = #{j : held[j] − j ≤ k}` (the excluded rows before
/// it; `held[j] − j` counts the kept rows before `held[j]`), found by binary search.
/// Memory: the excluded list and a scratch buffer of one minibatch's indices, never `n`
/// indices and never the rows; `O(log |held|)` per row.
pub struct RowsExcept<'a> {
    source: &'a dyn RowSource,
    held: Vec<usize>,
    scratch: Mutex<Vec<usize>>,
}

impl<'a> RowsExcept<'a> {
    /// The rows of `source` not in `held` (strictly ascending).
    ///
    /// # Errors
    /// [`Error::Shape`] for a list that is not strictly ascending or names a row out of
    /// range; [`Error::Empty`] when no row is left.
    pub fn new(source: &'a dyn RowSource, held: Vec<usize>) -> Result<Self> {
        let n = source.n();
        if let Some(w) = held.windows(2).find(|w| w[0] >= w[1]) {
            return Err(Error::shape(
                "RowsExcept excluded rows",
                "strictly ascending",
                format!("{} before {}", w[0], w[1]),
            ));
        }
        if let Some(&bad) = held.last().filter(|&&h| h >= n) {
            return Err(Error::shape(
                "RowsExcept excluded row",
                format!("< {n}"),
                bad,
            ));
        }
        if held.len() >= n {
            return Err(Error::Empty(format!(
                "every one of the {n} rows is excluded"
            )));
        }
        Ok(RowsExcept {
            source,
            held,
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// Row of the parent source that is row `k` of the view (`k < n()`).
    pub fn parent_row(&self, k: usize) -> usize {
        // `held[j] − j` is non-decreasing in j (the list is strictly ascending).
        let (mut lo, mut hi) = (0, self.held.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.held[mid] - mid <= k {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        k + lo
    }
}

impl RowSource for RowsExcept<'_> {
    fn n(&self) -> usize {
        self.source.n() - self.held.len()
    }

    fn input_dim(&self) -> usize {
        self.source.input_dim()
    }

    fn output_dim(&self) -> usize {
        self.source.output_dim()
    }

    fn gather(&self, idx: &[usize], x: MatMut<'_, f64>, y: MatMut<'_, f64>) -> Result<()> {
        check_gather(self.n(), (self.input_dim(), self.output_dim()), idx, &x, &y)?;
        let mut scratch = self
            .scratch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        scratch.clear();
        scratch.extend(idx.iter().map(|&k| self.parent_row(k)));
        self.source.gather(&scratch, x, y)
    }

    fn describe(&self) -> String {
        format!(
            "{} rows of {} ({} held out)",
            self.n(),
            self.source.describe(),
            self.held.len()
        )
    }
}

/// Rows `idx` of `source` copied into an in-memory [`Dataset`] (e.g. the held-out rows of
/// a source that does not hold its rows in memory): exactly the stored values, as
/// [`Dataset::select_rows`] gives for an in-memory source.
///
/// # Errors
/// [`Error::Empty`] for no rows; the source's [`RowSource::gather`] errors.
pub fn gather_dataset(source: &dyn RowSource, idx: &[usize]) -> Result<Dataset> {
    if idx.is_empty() {
        return Err(Error::Empty("no rows to gather".into()));
    }
    let mut x = Mat::zeros(idx.len(), source.input_dim());
    let mut y = Mat::zeros(idx.len(), source.output_dim());
    source.gather(idx, x.as_mut(), y.as_mut())?;
    Dataset::new(x, y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    fn data() -> Dataset {
        let x = Mat::from_fn(5, 2, |i, j| (i * 10 + j) as f64);
        let y = Mat::from_fn(5, 1, |i, _| i as f64);
        Dataset::new(x, y).unwrap()
    }

    #[test]
    fn dataset_gathers_rows_in_index_order() {
        let d = data();
        let mut x = Mat::zeros(3, 2);
        let mut y = Mat::zeros(3, 1);
        d.gather(&[4, 0, 4], x.as_mut(), y.as_mut()).unwrap();
        assert_eq!(x[(0, 1)], 41.0);
        assert_eq!(x[(1, 0)], 0.0);
        assert_eq!(y[(2, 0)], 4.0);
        assert!(RowSource::in_memory(&d).is_some());
    }

    #[test]
    fn rows_except_reads_the_complement_in_order() {
        let d = data();
        let v = RowsExcept::new(&d, vec![1, 2]).unwrap();
        assert_eq!(v.n(), 3);
        assert_eq!(
            (0..3).map(|k| v.parent_row(k)).collect::<Vec<_>>(),
            [0, 3, 4]
        );
        let g = gather_dataset(&v, &[2, 0, 1]).unwrap();
        let s = d.select_rows(&[4, 0, 3]).unwrap();
        assert_eq!((g.x(), g.y()), (s.x(), s.y()));
        assert!(v.in_memory().is_none());
        assert!(RowsExcept::new(&d, vec![2, 1]).is_err());
        assert!(RowsExcept::new(&d, vec![1, 1]).is_err());
        assert!(RowsExcept::new(&d, vec![5]).is_err());
        assert!(RowsExcept::new(&d, vec![0, 1, 2, 3, 4]).is_err());
        let mut x = Mat::zeros(1, 2);
        let mut y = Mat::zeros(1, 1);
        assert!(v.gather(&[3], x.as_mut(), y.as_mut()).is_err());
    }

    proptest::proptest! {
        #[test]
        fn rows_except_is_the_complement(n in 1usize..300, mask in proptest::collection::vec(proptest::bool::ANY, 300)) {
            let held: Vec<usize> = (0..n).filter(|&i| mask[i]).collect();
            proptest::prop_assume!(held.len() < n);
            let x = Mat::from_fn(n, 1, |i, _| i as f64);
            let d = Dataset::new(x.clone(), x).unwrap();
            let v = RowsExcept::new(&d, held.clone()).unwrap();
            let want = crate::held_out::complement(n, &held);
            let got: Vec<usize> = (0..v.n()).map(|k| v.parent_row(k)).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn bad_index_and_buffer_are_errors_not_panics() {
        let d = data();
        let mut x = Mat::zeros(1, 2);
        let mut y = Mat::zeros(1, 1);
        assert!(matches!(
            d.gather(&[5], x.as_mut(), y.as_mut()),
            Err(Error::Shape { .. })
        ));
        let mut wide = Mat::zeros(1, 3);
        assert!(matches!(
            d.gather(&[0], wide.as_mut(), y.as_mut()),
            Err(Error::Shape { .. })
        ));
    }
}
