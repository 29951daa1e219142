//! Which rows of `0..n` are held out: seeded draws that cost memory in the number of rows
//! drawn, never in `n` above [`PERMUTATION_TABLE_MAX_N`], so the held-out rows of a file of
//! any size can be chosen, gathered into memory and their complement trained on as a view
//! ([`crate::RowsExcept`]).
//!
//! Both draws return the held-out rows sorted ascending and distinct; the kept rows are
//! the rest in ascending order ([`complement`]).

use crate::PERMUTATION_TABLE_MAX_N;
use crate::permute::{Feistel, permutation, uniform_below};
use dgp_core::rng::seeded;

/// Most rows an early-stopping rule holds out (or draws, for a rule that draws with
/// replacement): the held-out rows are copied into memory and scored at every evaluation,
/// so their number is bounded whatever the size of the training set. 2¹⁶ rows of 10
/// columns are 5 MiB; the standard error of a mean held-out NLL over them is
/// `sd/256`. Below `2¹⁶ / fraction` training rows the cap never applies.
pub const MAX_HELD_OUT_ROWS: usize = 1 << 16;

/// `k` distinct rows of `0..n` (`k ≤ n`) drawn uniformly without replacement with
/// `dgp_core::rng::seeded(seed)`, sorted ascending.
///
/// For `n ≤` [`PERMUTATION_TABLE_MAX_N`]: the first `k` entries of the Fisher–Yates
/// [`permutation`] of `0..n` (the draw of [`crate::validation_split`], transiently
/// `8n` bytes). Above it: the images of `0..k` under the keyed bijection of
/// [`crate::Minibatches`]' table-free order (a Feistel network on `0..2^(2h)` with
/// cycle walking, key drawn from the same generator), `8k` bytes whatever `n`.
pub fn draw_without_replacement(n: usize, k: usize, seed: u64) -> Vec<usize> {
    draw_without_replacement_with_limit(n, k, seed, PERMUTATION_TABLE_MAX_N)
}

/// [`draw_without_replacement`] with the table/bijection threshold as a parameter (tests).
pub(crate) fn draw_without_replacement_with_limit(
    n: usize,
    k: usize,
    seed: u64,
    table_max_n: usize,
) -> Vec<usize> {
    let k = k.min(n);
    let mut rng = seeded(seed);
    let mut held = if n <= table_max_n {
        let mut perm = permutation(n, &mut rng);
        perm.truncate(k);
        perm
    } else {
        let f = Feistel::new(n, &mut rng);
        (0..k).map(|i| f.index(i, n)).collect()
    };
    held.sort_unstable();
    held
}

/// The distinct rows hit by `draws` uniform draws with replacement from `0..n` (`n ≥ 1`;
/// Lemire's bounded integers on `dgp_core::rng::seeded(seed)`), sorted ascending: the holdout
/// of [`crate::holdout_with_replacement`], in `8 · draws` bytes.
pub fn draw_with_replacement(n: usize, draws: usize, seed: u64) -> Vec<usize> {
    let mut rng = seeded(seed);
    let mut held: Vec<usize> = (0..draws).map(|_| uniform_below(&mut rng, n)).collect();
    held.sort_unstable();
    held.dedup();
    held
}

/// The rows of `0..n` not in `held` (sorted ascending, distinct), ascending.
pub fn complement(n: usize, held: &[usize]) -> Vec<usize> {
    let mut kept = Vec::with_capacity(n.saturating_sub(held.len()));
    let mut next = 0;
    for &h in held {
        kept.extend(next..h);
        next = h + 1;
    }
    kept.extend(next..n);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{holdout_with_replacement, validation_split};
    use proptest::prelude::*;

    fn sorted_distinct_in_range(v: &[usize], n: usize) -> bool {
        v.windows(2).all(|w| w[0] < w[1]) && v.iter().all(|&i| i < n)
    }

    proptest! {
        #[test]
        fn the_table_draw_is_the_validation_split(n in 2usize..400, frac in 0.01f64..0.99, seed in 0u64..1000) {
            let k = (frac * n as f64).floor() as usize;
            prop_assume!(k > 0 && k < n);
            let all: Vec<usize> = (0..n).collect();
            let (fit, val) = validation_split(&all, frac, seed).unwrap();
            prop_assert_eq!(&draw_without_replacement(n, k, seed), &val);
            prop_assert_eq!(complement(n, &val), fit);
        }

        #[test]
        fn the_table_free_draw_is_k_distinct_rows(n in 2usize..5000, k in 1usize..300, seed in 0u64..1000) {
            let k = k.min(n);
            let v = draw_without_replacement_with_limit(n, k, seed, 1);
            prop_assert_eq!(v.len(), k);
            prop_assert!(sorted_distinct_in_range(&v, n));
            prop_assert_eq!(&v, &draw_without_replacement_with_limit(n, k, seed, 1));
            let c = complement(n, &v);
            prop_assert_eq!(c.len() + k, n);
            prop_assert!(sorted_distinct_in_range(&c, n));
            prop_assert!(c.iter().all(|i| v.binary_search(i).is_err()));
        }

        #[test]
        fn draws_with_replacement_are_the_reference_holdout(n in 2usize..400, frac in 0.01f64..0.99, seed in 0u64..1000) {
            let draws = (frac * n as f64).floor() as usize;
            prop_assume!(draws > 0 && draws < n);
            // The reference's boolean mask over 0..n, written out independently.
            let mut rng = seeded(seed);
            let mut mask = vec![false; n];
            for _ in 0..draws {
                mask[uniform_below(&mut rng, n)] = true;
            }
            let want: Vec<usize> = (0..n).filter(|&i| mask[i]).collect();
            prop_assert_eq!(&draw_with_replacement(n, draws, seed), &want);
            let (kept, held) = holdout_with_replacement(n, frac, seed).unwrap();
            prop_assert_eq!(&held, &want);
            prop_assert_eq!(kept, complement(n, &want));
        }
    }

    #[test]
    fn the_table_free_draw_is_uniform_over_the_rows() {
        // 20 000 of 10⁶ rows, seed 3: each decile of 0..n should hold 2 000 rows; the
        // count is hypergeometric with sd ≈ 42, so ±250 (6 sd) fails only if the draw is
        // not uniform. The draw's mean row should be n/2 within 6 sd (≈ 12 200).
        let (n, k) = (1_000_000, 20_000);
        let v = draw_without_replacement_with_limit(n, k, 3, 1000);
        assert_eq!(v.len(), k);
        for d in 0..10 {
            let c = v.iter().filter(|&&i| i * 10 / n == d).count() as i64;
            assert!((c - 2000).abs() <= 250, "decile {d}: {c} rows");
        }
        let mean = v.iter().sum::<usize>() as f64 / k as f64;
        assert!((mean - n as f64 / 2.0).abs() < 12_200.0, "mean row {mean}");
    }

    #[test]
    fn rows_beyond_the_table_limit_cost_only_the_drawn_rows() {
        // 10⁹ rows: the drawn rows only (a table would be 8 GB).
        let n = 1_000_000_000;
        let v = draw_without_replacement(n, MAX_HELD_OUT_ROWS, 11);
        assert_eq!(v.len(), MAX_HELD_OUT_ROWS);
        assert!(sorted_distinct_in_range(&v, n));
        let w = draw_with_replacement(n, MAX_HELD_OUT_ROWS, 11);
        assert!(sorted_distinct_in_range(&w, n));
        assert!(w.len() > MAX_HELD_OUT_ROWS - 10);
    }
}
