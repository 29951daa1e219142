//! Minibatch index streams and row gathering.

use faer::{MatMut, MatRef};

use crate::data::splits::shuffle;
use crate::error::{Error, Result};
use crate::rng::{Rng, seeded};

/// A seeded, endless stream of minibatches of row indices.
///
/// The stream is the concatenation of independent uniformly random permutations of
/// `0..n` (one per epoch), cut into consecutive batches of exactly `batch_size` indices:
///
/// * when `n ≥ batch_size`, every batch has exactly `batch_size` indices. The last batch of
///   an epoch that does not fill up is completed with the first indices of the next
///   (freshly shuffled) epoch ("reshuffle and continue"), so every epoch's permutation is
///   consumed exactly once and every index appears exactly once per epoch. A batch that
///   straddles an epoch boundary may therefore contain the same index twice;
/// * when `batch_size ≥ n`, every batch is the full data set `0..n` in order (full-batch
///   training; no random numbers are drawn).
///
/// [`Minibatches::next_batch`] returns a borrowed slice and never allocates after
/// construction; the [`Iterator`] implementation yields owned copies for convenience.
#[derive(Clone, Debug)]
pub struct Minibatches {
    n: usize,
    batch_size: usize,
    perm: Vec<usize>,
    pos: usize,
    buf: Vec<usize>,
    rng: Rng,
    epochs: usize,
}

impl Minibatches {
    /// A stream over `0..n` with batches of `batch_size`, shuffled with `crate::rng::seeded(seed)`.
    ///
    /// # Errors
    /// [`Error::Empty`] if `n == 0`; [`Error::Config`] if `batch_size == 0`.
    pub fn new(n: usize, batch_size: usize, seed: u64) -> Result<Self> {
        if n == 0 {
            return Err(Error::Empty("minibatches over zero rows".into()));
        }
        if batch_size == 0 {
            return Err(Error::Config("minibatch size must be at least 1".into()));
        }
        let mut rng = seeded(seed);
        let mut perm: Vec<usize> = (0..n).collect();
        let full = batch_size >= n;
        if !full {
            shuffle(&mut rng, &mut perm);
        }
        Ok(Self {
            n,
            batch_size: batch_size.min(n),
            perm,
            pos: 0,
            buf: vec![0; if full { 0 } else { batch_size }],
            rng,
            epochs: 0,
        })
    }

    /// Number of rows the stream draws from.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Effective batch size, `min(batch_size, n)`.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Whether every batch is the full data set (`batch_size ≥ n`).
    pub fn is_full_batch(&self) -> bool {
        self.batch_size == self.n
    }

    /// Number of epochs (permutations) consumed completely so far.
    pub fn epochs_completed(&self) -> usize {
        self.epochs
    }

    /// The next batch of exactly [`Minibatches::batch_size`] indices.
    pub fn next_batch(&mut self) -> &[usize] {
        let (n, b) = (self.n, self.batch_size);
        if b == n {
            self.epochs += 1;
            return &self.perm;
        }
        if self.pos == n {
            shuffle(&mut self.rng, &mut self.perm);
            self.pos = 0;
        }
        if self.pos + b <= n {
            let start = self.pos;
            self.pos += b;
            if self.pos == n {
                self.epochs += 1;
            }
            return &self.perm[start..start + b];
        }
        // Straddling batch: the rest of this epoch, then the head of the next one.
        let r = n - self.pos;
        self.buf[..r].copy_from_slice(&self.perm[self.pos..]);
        self.epochs += 1;
        shuffle(&mut self.rng, &mut self.perm);
        self.buf[r..].copy_from_slice(&self.perm[..b - r]);
        self.pos = b - r;
        &self.buf
    }
}

impl Iterator for Minibatches {
    type Item = Vec<usize>;

    /// An owned copy of [`Minibatches::next_batch`]; the stream never ends.
    fn next(&mut self) -> Option<Vec<usize>> {
        Some(self.next_batch().to_vec())
    }
}

/// Copies the rows `idx` of `src` into `dst` (`dst` row `r` = `src` row `idx[r]`) without
/// allocating.
///
/// # Panics
/// If `dst` is not `idx.len()` × `src.ncols()` or an index is out of range. This is a hot-path
/// helper for index sets produced by the library (splits, [`Minibatches`]); user-supplied
/// indices should go through [`crate::data::Dataset::select_rows`], which validates them.
pub fn gather_rows_into(src: MatRef<'_, f64>, idx: &[usize], mut dst: MatMut<'_, f64>) {
    assert_eq!(
        (dst.nrows(), dst.ncols()),
        (idx.len(), src.ncols()),
        "gather_rows_into: destination must be idx.len() × src.ncols()"
    );
    let n = src.nrows();
    assert!(
        idx.iter().all(|&i| i < n),
        "gather_rows_into: row index out of range ({n} rows)"
    );
    for j in 0..src.ncols() {
        let s = src.col(j);
        let mut d = dst.as_mut().col_mut(j);
        for (r, &i) in idx.iter().enumerate() {
            d[r] = s[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn straddling_batches_keep_size_and_cover_each_epoch() {
        let mut mb = Minibatches::new(10, 4, 3).unwrap();
        let stream: Vec<usize> = (0..5).flat_map(|_| mb.next_batch().to_vec()).collect();
        assert_eq!(stream.len(), 20);
        for epoch in stream.chunks(10) {
            let mut e = epoch.to_vec();
            e.sort_unstable();
            assert_eq!(e, (0..10).collect::<Vec<_>>());
        }
        assert_eq!(mb.epochs_completed(), 2);
    }

    #[test]
    fn full_batch_when_batch_exceeds_n() {
        let mut mb = Minibatches::new(5, 9, 0).unwrap();
        assert!(mb.is_full_batch());
        assert_eq!(mb.next_batch(), &[0, 1, 2, 3, 4]);
        assert_eq!(mb.next().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(mb.epochs_completed(), 2);
    }
}
