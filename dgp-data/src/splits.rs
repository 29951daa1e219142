//! Train/test/validation index splits, all seeded through [`dgp_core::rng`].
//!
//! Random choices use our own Fisher–Yates shuffle and Lemire's unbiased bounded integers on
//! top of the xoshiro stream, so splits are reproducible across versions of `rand`.

use faer::MatRef;

pub use crate::permute::permutation;
use crate::permute::uniform_below;
use dgp_core::rng::{seeded, standard_normal};
use dgp_core::{Error, Result, check_finite};

/// Number of held-out rows for a fraction, as NumPy's `int(fraction * n)` (floor).
pub fn held_out_count(n: usize, fraction: f64, what: &str) -> Result<usize> {
    if !(fraction > 0.0 && fraction < 1.0) {
        return Err(Error::config(
            "fraction",
            format!("{what} fraction must be in (0, 1), got {fraction}"),
        ));
    }
    let k = (fraction * n as f64).floor() as usize;
    if k == 0 || k >= n {
        return Err(Error::config(
            "fraction",
            format!("{what} fraction {fraction} of {n} rows leaves an empty set"),
        ));
    }
    Ok(k)
}

/// Seeded random split of `0..n` into `(train, test)`.
///
/// As Structured_DGP's `prepare_dataset`: a random permutation, whose first
/// `floor(test_fraction · n)` entries are the test set. (The published UCI splits have
/// `round(0.1 · n)` test rows, e.g. 51 for boston; use `crate::uci::UciDataset::split`
/// for those.) Both index lists are returned sorted ascending.
///
/// # Errors
/// [`Error::Config`] if `test_fraction ∉ (0, 1)` or either set would be empty.
pub fn random_split(n: usize, test_fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    let n_test = held_out_count(n, test_fraction, "test")?;
    let perm = permutation(n, &mut seeded(seed));
    let mut test = perm[..n_test].to_vec();
    let mut train = perm[n_test..].to_vec();
    test.sort_unstable();
    train.sort_unstable();
    Ok((train, test))
}

/// Seeded split of a training index set into `(fit, validation)` for hyperparameter
/// selection: `floor(fraction · len)` randomly chosen entries of `train_idx` form the
/// validation set. Both lists are returned sorted ascending.
///
/// # Errors
/// [`Error::Config`] if `fraction ∉ (0, 1)` or either set would be empty.
pub fn validation_split(
    train_idx: &[usize],
    fraction: f64,
    seed: u64,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let n = train_idx.len();
    let n_val = held_out_count(n, fraction, "validation")?;
    let perm = permutation(n, &mut seeded(seed));
    let mut val: Vec<usize> = perm[..n_val].iter().map(|&i| train_idx[i]).collect();
    let mut fit: Vec<usize> = perm[n_val..].iter().map(|&i| train_idx[i]).collect();
    val.sort_unstable();
    fit.sort_unstable();
    Ok((fit, val))
}

/// Early-stopping holdout drawn WITH replacement, as Structured_DGP's `prepare_data.py`:
/// `floor(fraction · n)` indices drawn uniformly from `0..n` (Lemire's bounded integers on
/// `dgp_core::rng::seeded(seed)`); the distinct drawn rows are held out (so usually fewer than
/// `fraction · n`: about `n(1 − e^{−fraction})`) and the others kept. Returns
/// `(kept, held_out)`, both sorted ascending, disjoint, covering `0..n`.
///
/// # Errors
/// [`Error::Config`] if `fraction ∉ (0, 1)` or no row would be drawn.
pub fn holdout_with_replacement(
    n: usize,
    fraction: f64,
    seed: u64,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let draws = held_out_count(n, fraction, "holdout")?;
    let h = crate::held_out::draw_with_replacement(n, draws, seed);
    let k = crate::held_out::complement(n, &h);
    Ok((k, h))
}

/// Features with full-data std at most this are excluded from the random projection
/// (step 1 of the extrapolation split).
pub const EXTRAPOLATION_FEATURE_STD: f64 = 1e-3;

/// Fraction of the training rows drawn (with replacement) for the early-stopping holdout.
pub const EXTRAPOLATION_HOLDOUT_FRACTION: f64 = 0.1;

/// Result of [`extrapolation_split`]. All index lists are sorted ascending and pairwise
/// disjoint; `train ∪ holdout` is the training half.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtrapolationSplit {
    /// Training rows (the larger-projection half minus the holdout).
    pub train: Vec<usize>,
    /// Test rows: the `floor(N/2)` rows with the smallest projections.
    pub test: Vec<usize>,
    /// Early-stopping holdout: the distinct training-half rows hit by
    /// `floor(0.1 · |training half|)` draws with replacement.
    pub holdout: Vec<usize>,
    /// Columns used for the projection (full-data std > 1e-3).
    pub projected_features: Vec<usize>,
    /// The direction w ~ N(0, I), one weight per projected feature.
    pub direction: Vec<f64>,
    /// z = X_std w for every row of the full data.
    pub projection: Vec<f64>,
}

/// The extrapolation split of Lindinger et al. (2020) §4.1 (Structured_DGP's
/// `prepare_dataset_extrapolate`), for the inputs `x` (N×D) of the FULL data set:
///
/// 1. keep the features with full-data std > 1e-3, standardise them with full-data mean and
///    population std, draw w ~ N(0, I) (one weight per kept feature), z = X_std w;
/// 2. sort by z ascending (stable: ties keep row order); n_test = floor(N/2); the n_test
///    smallest-z rows are the test set, the rest the training half;
/// 3. (caller) drop features whose train std ≤ 1e-3 and standardise X and y with the
///    training statistics: `Standardizer::fit_with(&train,
///    StandardizeOptions::drop_near_constant())` on the `train ∪ holdout` rows, as the
///    reference fits before removing the holdout;
/// 4. early-stopping holdout: floor(0.1 · n_train_half) indices drawn uniformly WITH
///    replacement from the training half; the distinct drawn rows form the holdout and are
///    removed from training (the reference's boolean mask);
/// 5. (caller) report per-test-point log-likelihoods
///    (`dgp_traits::predictive::Predictive::log_density`).
///
/// All randomness (w, then the holdout draws) comes from `dgp_core::rng::seeded(seed)`; the
/// protocol uses seeds 0..9.
///
/// # Errors
/// [`Error::Empty`] if N < 2 or D = 0; [`Error::NonFinite`] for NaN/∞ inputs;
/// [`Error::Config`] if no feature has std > 1e-3.
pub fn extrapolation_split(x: MatRef<'_, f64>, seed: u64) -> Result<ExtrapolationSplit> {
    let (n, d) = (x.nrows(), x.ncols());
    if n < 2 || d == 0 {
        return Err(Error::Empty(format!(
            "extrapolation split needs at least 2 rows and 1 column, got {n}×{d}"
        )));
    }
    check_finite("extrapolation_split inputs", x)?;
    // Step 1: full-data statistics of every feature.
    let mut projected_features = Vec::new();
    let mut means = Vec::new();
    let mut stds = Vec::new();
    for j in 0..d {
        let c = x.col(j);
        let mean = (0..n).map(|i| c[i]).sum::<f64>() / n as f64;
        let std = ((0..n).map(|i| (c[i] - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        if std > EXTRAPOLATION_FEATURE_STD {
            projected_features.push(j);
            means.push(mean);
            stds.push(std);
        }
    }
    if projected_features.is_empty() {
        return Err(Error::config(
            "split",
            "extrapolation split: no feature has std > 1e-3",
        ));
    }
    let mut rng = seeded(seed);
    let w = standard_normal(&mut rng, projected_features.len(), 1);
    let direction: Vec<f64> = (0..w.nrows()).map(|k| w[(k, 0)]).collect();
    let projection: Vec<f64> = (0..n)
        .map(|i| {
            projected_features
                .iter()
                .enumerate()
                .map(|(k, &j)| (x[(i, j)] - means[k]) / stds[k] * direction[k])
                .sum()
        })
        .collect();
    // Step 2: sort by projection; the smaller half is the test set.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| projection[a].total_cmp(&projection[b]));
    let n_test = n / 2;
    let mut test = order[..n_test].to_vec();
    let half = &order[n_test..];
    // Step 4: holdout drawn with replacement from the training half.
    let n_holdout = (EXTRAPOLATION_HOLDOUT_FRACTION * half.len() as f64).floor() as usize;
    let mut in_holdout = vec![false; half.len()];
    for _ in 0..n_holdout {
        in_holdout[uniform_below(&mut rng, half.len())] = true;
    }
    let mut train = Vec::with_capacity(half.len());
    let mut holdout = Vec::new();
    for (k, &row) in half.iter().enumerate() {
        if in_holdout[k] {
            holdout.push(row);
        } else {
            train.push(row);
        }
    }
    test.sort_unstable();
    train.sort_unstable();
    holdout.sort_unstable();
    Ok(ExtrapolationSplit {
        train,
        test,
        holdout,
        projected_features,
        direction,
        projection,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permute::uniform01;

    #[test]
    fn uniform_below_is_in_range_and_roughly_uniform() {
        let mut rng = seeded(1);
        let mut counts = [0usize; 5];
        for _ in 0..50_000 {
            counts[uniform_below(&mut rng, 5)] += 1;
        }
        for c in counts {
            // 10 000 expected, s.d. ≈ 89.
            assert!((c as f64 - 10_000.0).abs() < 500.0, "{counts:?}");
        }
        let u = uniform01(&mut rng);
        assert!((0.0..1.0).contains(&u));
    }

    #[test]
    fn permutation_is_a_permutation() {
        let mut p = permutation(100, &mut seeded(2));
        assert_ne!(p, (0..100).collect::<Vec<_>>());
        p.sort_unstable();
        assert_eq!(p, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn holdout_with_replacement_draws_distinct_rows_once_each() {
        let (kept, held) = holdout_with_replacement(455, 0.1, 3).unwrap();
        // 45 draws with replacement: between ~35 and 45 distinct rows.
        assert!(held.len() <= 45 && held.len() >= 35, "{}", held.len());
        let mut all = kept.clone();
        all.extend(&held);
        all.sort_unstable();
        assert_eq!(all, (0..455).collect::<Vec<_>>(), "disjoint cover");
        assert!(held.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            holdout_with_replacement(455, 0.1, 3).unwrap(),
            (kept, held.clone())
        );
        assert_ne!(holdout_with_replacement(455, 0.1, 4).unwrap().1, held);
        // Reference arithmetic: the distinct values of the seeded draws.
        let mut rng = seeded(3);
        let mut want: Vec<usize> = (0..45).map(|_| uniform_below(&mut rng, 455)).collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(held, want);
        assert!(holdout_with_replacement(5, 0.1, 0).is_err());
        assert!(holdout_with_replacement(50, 1.0, 0).is_err());
    }
}
