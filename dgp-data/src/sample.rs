//! Seeded uniform samples of rows without holding the data: reservoir sampling.
//!
//! Algorithm R (Vitter 1985) with the generator `dgp_core::rng::seeded(seed)`: slots
//! `0..k` take rows `0..k`; row `i ≥ k` draws `j` uniform in `0..=i` (Lemire's unbiased
//! bounded integers) and replaces slot `j` if `j < k`. Every k-subset of the N rows is
//! equally likely. The result lists the rows in slot order. The decisions depend only on
//! the row numbers and the seed, so [`reservoir_sample`] (which draws the row numbers
//! first and then reads only the chosen rows) and [`Reservoir`] (fed chunks of a stream)
//! select the same rows in the same order for the same seed and N.

use crate::{Dataset, RowSource};
use dgp_core::rng::{Rng, seeded};
use dgp_core::{Error, Result};
use faer::{Mat, MatRef};
use rand::Rng as _;

/// Uniform integer in `0..n` (`n ≥ 1`), Lemire's multiply-and-reject method (unbiased).
fn uniform_below(rng: &mut Rng, n: u64) -> u64 {
    let threshold = n.wrapping_neg() % n;
    loop {
        let m = u128::from(rng.next_u64()) * u128::from(n);
        if (m as u64) >= threshold {
            return (m >> 64) as u64;
        }
    }
}

/// Row numbers of a reservoir sample of `min(k, n)` of `0..n`, in slot order (memory
/// `O(k)`, `n − k` random draws, no data read).
///
/// # Errors
/// [`Error::Config`] if `k == 0`; [`Error::Empty`] if `n == 0`.
pub fn reservoir_indices(n: usize, k: usize, seed: u64) -> Result<Vec<usize>> {
    if k == 0 {
        return Err(Error::config("k", "a sample needs at least one row"));
    }
    if n == 0 {
        return Err(Error::Empty("sampling from zero rows".into()));
    }
    let mut rng = seeded(seed);
    let mut slots: Vec<usize> = (0..k.min(n)).collect();
    for i in k..n {
        let j = uniform_below(&mut rng, i as u64 + 1) as usize;
        if j < k {
            slots[j] = i;
        }
    }
    Ok(slots)
}

/// A reservoir sample of `min(k, N)` rows of `src` as an in-memory [`Dataset`], rows in
/// slot order (see the module docs). Only the chosen rows are read.
///
/// # Errors
/// As [`reservoir_indices`] and [`RowSource::gather`].
pub fn reservoir_sample<S: RowSource + ?Sized>(src: &S, k: usize, seed: u64) -> Result<Dataset> {
    let idx = reservoir_indices(src.n(), k, seed)?;
    let mut x = Mat::zeros(idx.len(), src.input_dim());
    let mut y = Mat::zeros(idx.len(), src.output_dim());
    src.gather(&idx, x.as_mut(), y.as_mut())?;
    Dataset::new(x, y)
}

/// A reservoir fed with consecutive chunks of a stream of rows whose length is not known
/// in advance (a CSV or Parquet reader); holds `k` rows (`O(k·(D+P))` memory).
#[derive(Clone, Debug)]
pub struct Reservoir {
    k: usize,
    seen: usize,
    x: Mat<f64>,
    y: Mat<f64>,
    rng: Rng,
}

impl Reservoir {
    /// An empty reservoir of `k` rows of `d` inputs and `p` targets.
    ///
    /// # Errors
    /// [`Error::Config`] if `k`, `d` or `p` is 0.
    pub fn new(k: usize, d: usize, p: usize, seed: u64) -> Result<Self> {
        if k == 0 || d == 0 || p == 0 {
            return Err(Error::config(
                "k",
                format!("reservoir of {k} rows × ({d} inputs, {p} targets): all must be ≥ 1"),
            ));
        }
        Ok(Self {
            k,
            seen: 0,
            x: Mat::zeros(k, d),
            y: Mat::zeros(k, p),
            rng: seeded(seed),
        })
    }

    /// Rows offered so far.
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// Offers the next rows of the stream, `x` (m×D) and `y` (m×P).
    ///
    /// # Errors
    /// [`Error::Shape`] if the chunk does not have D and P columns and equal row counts.
    pub fn push(&mut self, x: MatRef<'_, f64>, y: MatRef<'_, f64>) -> Result<()> {
        let (d, p) = (self.x.ncols(), self.y.ncols());
        if x.ncols() != d || y.ncols() != p || x.nrows() != y.nrows() {
            return Err(Error::shape(
                "Reservoir::push (x, y)",
                format!("(m×{d}, m×{p})"),
                format!("({}×{}, {}×{})", x.nrows(), x.ncols(), y.nrows(), y.ncols()),
            ));
        }
        for r in 0..x.nrows() {
            let i = self.seen + r;
            let slot = if i < self.k {
                Some(i)
            } else {
                let j = uniform_below(&mut self.rng, i as u64 + 1) as usize;
                (j < self.k).then_some(j)
            };
            if let Some(s) = slot {
                for c in 0..d {
                    self.x[(s, c)] = x[(r, c)];
                }
                for c in 0..p {
                    self.y[(s, c)] = y[(r, c)];
                }
            }
        }
        self.seen += x.nrows();
        Ok(())
    }

    /// The sample: `min(k, seen)` rows in slot order.
    ///
    /// # Errors
    /// [`Error::Empty`] if no row was offered; [`Error::NonFinite`] if a kept value is not
    /// finite.
    pub fn finish(self) -> Result<Dataset> {
        let m = self.k.min(self.seen);
        if m == 0 {
            return Err(Error::Empty("reservoir sample of an empty stream".into()));
        }
        let x = self.x.subrows(0, m).to_owned();
        let y = self.y.subrows(0, m).to_owned();
        Dataset::new(x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunks::for_each_chunk;

    fn indexed(n: usize) -> Dataset {
        Dataset::new(
            Mat::from_fn(n, 2, |i, j| (i * 10 + j) as f64),
            Mat::from_fn(n, 1, |i, _| -(i as f64)),
        )
        .unwrap()
    }

    #[test]
    fn every_row_is_equally_likely() {
        // 20000 samples of k = 5 of n = 20 rows (seeds 0..20000): each row is expected
        // 5000 times. Pearson's statistic has 19 degrees of freedom; 43.82 is its 0.999
        // quantile, the stated tolerance.
        let (n, k, trials) = (20usize, 5usize, 20_000u64);
        let mut counts = vec![0u64; n];
        for seed in 0..trials {
            let s = reservoir_indices(n, k, seed).unwrap();
            let mut u = s.clone();
            u.sort_unstable();
            u.dedup();
            assert_eq!(u.len(), k);
            for &i in &s {
                counts[i] += 1;
            }
        }
        let e = (trials as usize * k) as f64 / n as f64;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 43.82, "chi2 {chi2}, counts {counts:?}");
    }

    #[test]
    fn index_path_and_stream_path_agree_and_are_seeded() {
        let data = indexed(1003);
        let a = reservoir_sample(&data, 50, 7).unwrap();
        let again = reservoir_sample(&data, 50, 7).unwrap();
        assert_eq!(a.x(), again.x());
        let other = reservoir_sample(&data, 50, 8).unwrap();
        assert_ne!(a.x(), other.x());
        for chunk in [1, 64, 1003] {
            let mut r = Reservoir::new(50, 2, 1, 7).unwrap();
            for_each_chunk(&data, chunk, |_, x, y| r.push(x, y)).unwrap();
            assert_eq!(r.seen(), 1003);
            let b = r.finish().unwrap();
            assert_eq!(a.x(), b.x(), "chunk {chunk}");
            assert_eq!(a.y(), b.y(), "chunk {chunk}");
        }
        // The rows are the data set's rows.
        for i in 0..50 {
            let row = -a.y()[(i, 0)];
            assert_eq!(a.x()[(i, 1)], row * 10.0 + 1.0);
        }
    }

    #[test]
    fn k_at_least_n_returns_every_row_and_bad_k_is_an_error() {
        let data = indexed(4);
        let s = reservoir_sample(&data, 10, 0).unwrap();
        assert_eq!(s.x(), data.x());
        assert!(matches!(
            reservoir_sample(&data, 0, 0),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Reservoir::new(3, 2, 1, 0).unwrap().finish(),
            Err(Error::Empty(_))
        ));
    }
}
