//! Minibatch index streams and row gathering.

use faer::{MatMut, MatRef};

pub use crate::permute::FEISTEL_ROUNDS;
use crate::permute::{Feistel, shuffle};
use dgp_core::rng::{Rng, seeded};
use dgp_core::{Error, Result};

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
/// Memory: for `n ≤` [`PERMUTATION_TABLE_MAX_N`] each epoch is a Fisher–Yates shuffle of a
/// table of `n` indices (`8n` bytes). Above it, no table is kept: each epoch's permutation
/// is a keyed bijection of `0..n` ([`FEISTEL_ROUNDS`]-round balanced Feistel network on the
/// smallest even number of bits `2h` with `2^(2h) ≥ n`, walked along its cycles until the
/// value falls below `n`), with a fresh key of [`FEISTEL_ROUNDS`] words drawn from the
/// stream's generator per epoch, so memory is `O(batch_size)` whatever `n`. The
/// epoch/straddle semantics above are the same in both orders; the full-batch case keeps
/// the table `0..n`.
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
    feistel: Option<Feistel>,
}

/// Largest `n` whose epochs are shuffled tables; larger `n` use the O(1)-memory keyed
/// bijection (see [`Minibatches`]). 2²⁴ rows cost a 128 MiB table.
pub const PERMUTATION_TABLE_MAX_N: usize = 1 << 24;

impl Minibatches {
    /// A stream over `0..n` with batches of `batch_size`, shuffled with `dgp_core::rng::seeded(seed)`.
    ///
    /// # Errors
    /// [`Error::Empty`] if `n == 0`; [`Error::Config`] if `batch_size == 0`.
    pub fn new(n: usize, batch_size: usize, seed: u64) -> Result<Self> {
        Self::with_table_limit(n, batch_size, seed, PERMUTATION_TABLE_MAX_N)
    }

    /// [`Minibatches::new`] with the table/bijection threshold as a parameter (tests).
    pub(crate) fn with_table_limit(
        n: usize,
        batch_size: usize,
        seed: u64,
        table_max_n: usize,
    ) -> Result<Self> {
        if n == 0 {
            return Err(Error::Empty("minibatches over zero rows".into()));
        }
        if batch_size == 0 {
            return Err(Error::config(
                "batch_size",
                "minibatch size must be at least 1",
            ));
        }
        let mut rng = seeded(seed);
        let full = batch_size >= n;
        if !full && n > table_max_n {
            let feistel = Some(Feistel::new(n, &mut rng));
            return Ok(Self {
                n,
                batch_size,
                perm: Vec::new(),
                pos: 0,
                buf: vec![0; batch_size],
                rng,
                epochs: 0,
                feistel,
            });
        }
        let mut perm: Vec<usize> = (0..n).collect();
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
            feistel: None,
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
        if self.feistel.is_some() {
            return self.next_batch_table_free();
        }
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

    /// [`Minibatches::next_batch`] in the table-free order: the same consumption of
    /// epochs, positions mapped through the epoch's keyed bijection.
    fn next_batch_table_free(&mut self) -> &[usize] {
        let (n, b) = (self.n, self.batch_size);
        let Some(f) = self.feistel.as_mut() else {
            unreachable!("table-free order without a key")
        };
        for slot in &mut self.buf[..b] {
            if self.pos == n {
                *f = Feistel::new(n, &mut self.rng);
                self.pos = 0;
            }
            *slot = f.index(self.pos, n);
            self.pos += 1;
            if self.pos == n {
                self.epochs += 1;
            }
        }
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
/// indices should go through [`crate::Dataset::select_rows`], which validates them.
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
    fn table_free_order_gives_a_permutation_per_epoch_and_is_seeded() {
        for (n, b) in [(1000, 64), (1001, 7), (4097, 4097 - 1), (65, 1)] {
            let mut mb = Minibatches::with_table_limit(n, b, 11, 64).unwrap();
            assert!(mb.feistel.is_some() && mb.perm.is_empty());
            let batches = (3 * n).div_ceil(b);
            let stream: Vec<usize> = (0..batches)
                .flat_map(|_| mb.next_batch().to_vec())
                .collect();
            for epoch in stream.chunks_exact(n) {
                let mut e = epoch.to_vec();
                e.sort_unstable();
                assert_eq!(e, (0..n).collect::<Vec<_>>(), "n {n} b {b}");
            }
            assert_eq!(mb.epochs_completed(), stream.len() / n);
            // Epochs differ (fresh keys), the seed fixes the stream, another seed changes it.
            assert_ne!(stream[..n], stream[n..2 * n]);
            let mut again = Minibatches::with_table_limit(n, b, 11, 64).unwrap();
            let replay: Vec<usize> = (0..batches)
                .flat_map(|_| again.next_batch().to_vec())
                .collect();
            assert_eq!(stream, replay);
            let mut other = Minibatches::with_table_limit(n, b, 12, 64).unwrap();
            let diff: Vec<usize> = (0..batches)
                .flat_map(|_| other.next_batch().to_vec())
                .collect();
            assert_ne!(stream, diff);
        }
    }

    #[test]
    fn table_free_order_is_not_close_to_the_identity() {
        // A weak bijection would keep most indices near their position; count fixed
        // points and order-preserving neighbours over one epoch of 10000 rows.
        let n = 10_000;
        let mut mb = Minibatches::with_table_limit(n, n - 1, 5, 1000).unwrap();
        let e: Vec<usize> = (0..2)
            .flat_map(|_| mb.next_batch().to_vec())
            .take(n)
            .collect();
        let fixed = e.iter().enumerate().filter(|&(k, &v)| k == v).count();
        let ascending = e.windows(2).filter(|w| w[1] > w[0]).count();
        // Uniform permutation: E[fixed] = 1, ascending pairs ≈ n/2 ± 29 (sd).
        assert!(fixed <= 6, "{fixed}");
        assert!((ascending as f64 - 5000.0).abs() < 150.0, "{ascending}");
    }

    #[test]
    fn huge_n_needs_no_table() {
        // 2^33 rows: a table would take 64 GiB.
        let n = 1usize << 33;
        let mut mb = Minibatches::new(n, 256, 1).unwrap();
        assert!(mb.perm.capacity() == 0);
        let b = mb.next_batch().to_vec();
        assert!(b.iter().all(|&i| i < n));
        let mut s = b.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 256);
    }

    #[test]
    fn small_n_keeps_the_table_order() {
        let a: Vec<usize> = Minibatches::new(100, 7, 9)
            .unwrap()
            .take(20)
            .flatten()
            .collect();
        let mut rng = seeded(9);
        let mut perm: Vec<usize> = (0..100).collect();
        shuffle(&mut rng, &mut perm);
        assert_eq!(a[..100], perm[..]);
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
