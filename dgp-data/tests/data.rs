//! Integration tests of `dgp_traits::data`: the data set type, the CSV loader (with every
//! typed error), standardisation, splits, minibatches and k-means.
//!
//! The real-data tests read the UCI folders from `$DGP_UCI_DIR` (default
//! `/work/shared/data/uci`); they print a notice and return if that folder is absent.

use std::path::{Path, PathBuf};

use dgp_core::Error;
use dgp_core::rng::{seeded, standard_normal};
use dgp_data::*;
use dgp_traits::testing::ScratchDir;
use faer::Mat;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// helpers

fn scratch(name: &str) -> ScratchDir {
    ScratchDir::new("dgp-traits-data", name)
}

fn write(path: &Path, text: &str) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

fn uci_root() -> Option<PathBuf> {
    let root = std::env::var_os("DGP_UCI_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/data/uci"));
    if root.is_dir() {
        Some(root)
    } else {
        eprintln!("skipping: UCI data folder {} not found", root.display());
        None
    }
}

fn mat(rows: &[&[f64]]) -> Mat<f64> {
    Mat::from_fn(rows.len(), rows[0].len(), |i, j| rows[i][j])
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

// ---------------------------------------------------------------------------------------
// Dataset

#[test]
fn dataset_accessors_and_select_rows() {
    let d = Dataset::new(
        mat(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]]),
        mat(&[&[10.0], &[20.0], &[30.0]]),
    )
    .unwrap()
    .with_feature_names(vec!["a".into(), "b".into()])
    .unwrap();
    assert_eq!((d.n(), d.input_dim(), d.output_dim()), (3, 2, 1));
    let s = d.select_rows(&[2, 0, 2]).unwrap();
    assert_eq!(s.n(), 3);
    assert_eq!(s.x()[(0, 1)], 6.0);
    assert_eq!(s.x()[(1, 0)], 1.0);
    assert_eq!(s.y()[(2, 0)], 30.0);
    assert_eq!(
        s.feature_names().unwrap(),
        &["a".to_string(), "b".to_string()]
    );
}

#[test]
fn dataset_shape_mismatch_is_a_shape_error() {
    let r = Dataset::new(Mat::zeros(3, 2), Mat::zeros(4, 1));
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
}

#[test]
fn dataset_nan_is_a_non_finite_error_with_position() {
    let mut x = Mat::<f64>::zeros(3, 2);
    x[(2, 1)] = f64::NAN;
    match Dataset::new(x, Mat::zeros(3, 1)) {
        Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (2, 1)),
        other => panic!("expected NonFinite, got {other:?}"),
    }
    let mut y = Mat::<f64>::zeros(3, 1);
    y[(1, 0)] = f64::INFINITY;
    match Dataset::new(Mat::zeros(3, 2), y) {
        Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (1, 0)),
        other => panic!("expected NonFinite, got {other:?}"),
    }
}

#[test]
fn dataset_empty_is_an_empty_error() {
    assert!(matches!(
        Dataset::new(Mat::zeros(0, 2), Mat::zeros(0, 1)),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        Dataset::new(Mat::zeros(3, 0), Mat::zeros(3, 1)),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        Dataset::new(Mat::zeros(3, 2), Mat::zeros(3, 0)),
        Err(Error::Empty(_))
    ));
}

#[test]
fn select_rows_rejects_bad_indices_and_names_must_match() {
    let d = Dataset::new(Mat::zeros(3, 2), Mat::zeros(3, 1)).unwrap();
    assert!(matches!(d.select_rows(&[0, 3]), Err(Error::Shape { .. })));
    assert!(matches!(d.select_rows(&[]), Err(Error::Empty(_))));
    assert!(matches!(
        d.clone().with_feature_names(vec!["a".into()]),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        d.with_target_names(vec!["a".into(), "b".into()]),
        Err(Error::Shape { .. })
    ));
}

// ---------------------------------------------------------------------------------------
// CSV

#[test]
fn csv_loads_with_named_target_and_reports_bad_numbers() {
    let dir = scratch("csv");
    let p = dir.join("d.csv");
    write(&p, "a, y ,b\n1,2,3\n4,5,6\n7,8,9\n");
    let d = load_csv(&p, "y").unwrap();
    assert_eq!((d.n(), d.input_dim(), d.output_dim()), (3, 2, 1));
    assert_eq!(d.x()[(2, 1)], 9.0);
    assert_eq!(d.y()[(1, 0)], 5.0);
    assert_eq!(
        d.feature_names().unwrap(),
        &["a".to_string(), "b".to_string()]
    );
    assert_eq!(d.target_names().unwrap(), &["y".to_string()]);

    write(&p, "a,y,b\n1,2,3\n4,oops,6\n");
    match load_csv(&p, "y") {
        Err(Error::Parse {
            path, line, column, ..
        }) => {
            assert_eq!(path, p);
            assert_eq!((line, column), (3, 2));
        }
        other => panic!("expected Parse, got {other:?}"),
    }
    write(&p, "a,y,b\n1,2,3\n4,5,NaN\n");
    assert!(matches!(
        load_csv(&p, "y"),
        Err(Error::Parse {
            line: 3,
            column: 3,
            ..
        })
    ));
}

#[test]
fn csv_structural_errors_are_typed() {
    let dir = scratch("csv-errors");
    let p = dir.join("d.csv");
    write(&p, "a,y\n1,2\n3\n");
    match load_csv(&p, "y") {
        Err(Error::Parse { line, .. }) => assert_eq!(line, 3),
        other => panic!("expected Parse for a ragged row, got {other:?}"),
    }
    write(&p, "a,b\n1,2\n");
    assert!(matches!(
        load_csv(&p, "y"),
        Err(Error::Parse { line: 1, .. })
    ));
    write(&p, "a,y\n");
    assert!(matches!(load_csv(&p, "y"), Err(Error::Empty(_))));
    // A one-column file has no feature column; the header check names it first.
    write(&p, "y\n1\n");
    match load_csv(&p, "y") {
        Err(Error::Parse {
            line: 1, message, ..
        }) => {
            assert!(message.contains("one column"), "{message}")
        }
        other => panic!("expected Parse for a one-column header, got {other:?}"),
    }
    match load_csv(dir.join("nope.csv"), "y") {
        Err(Error::Io { path, .. }) => assert_eq!(path, dir.join("nope.csv")),
        other => panic!("expected Io, got {other:?}"),
    }
    write(&p, "a,y,b,z\n1,2,3,4\n");
    let d = load_csv_targets(&p, &["z", "y"]).unwrap();
    assert_eq!((d.input_dim(), d.output_dim()), (2, 2));
    assert_eq!((d.y()[(0, 0)], d.y()[(0, 1)]), (4.0, 2.0));
}

// ---------------------------------------------------------------------------------------
// Standardisation

#[test]
fn standardizer_uses_train_statistics_with_population_std() {
    let train = Dataset::new(
        mat(&[&[1.0, 5.0], &[3.0, 5.0], &[5.0, 5.0]]),
        mat(&[&[2.0], &[4.0], &[9.0]]),
    )
    .unwrap();
    let s = Standardizer::fit(&train);
    assert_eq!(s.x_mean, vec![3.0, 5.0]);
    // ddof 0: sqrt(((−2)² + 0 + 2²)/3).
    assert!((s.x_std[0] - (8.0f64 / 3.0).sqrt()).abs() < 1e-15);
    assert_eq!(s.x_std[1], 1.0, "constant column gets std 1");
    assert_eq!(s.y_mean, vec![5.0]);
    let z = s.transform(&train).unwrap();
    for j in 0..2 {
        let m: f64 = (0..3).map(|i| z.x()[(i, j)]).sum::<f64>() / 3.0;
        assert!(m.abs() < 1e-15);
    }
    let v: f64 = (0..3).map(|i| z.y()[(i, 0)].powi(2)).sum::<f64>() / 3.0;
    assert!((v - 1.0).abs() < 1e-14);
    // A test row is transformed with the train statistics.
    let test = Dataset::new(mat(&[&[3.0, 7.0]]), mat(&[&[5.0]])).unwrap();
    let zt = s.transform(&test).unwrap();
    assert_eq!(
        (zt.x()[(0, 0)], zt.x()[(0, 1)], zt.y()[(0, 0)]),
        (0.0, 2.0, 0.0)
    );
    // Round trip of targets.
    let back = s.inverse_y(z.y()).unwrap();
    for i in 0..3 {
        assert!((back[(i, 0)] - train.y()[(i, 0)]).abs() < 1e-14);
    }
    let xb = s.inverse_x(z.x()).unwrap();
    assert!((xb[(2, 0)] - 5.0).abs() < 1e-14);
    // Shape errors.
    let wrong = Dataset::new(Mat::zeros(2, 3), Mat::zeros(2, 1)).unwrap();
    assert!(matches!(s.transform(&wrong), Err(Error::Shape { .. })));
    assert!(matches!(
        s.inverse_y(Mat::zeros(2, 2).as_ref()),
        Err(Error::Shape { .. })
    ));
}

#[test]
fn standardizer_drop_option_keeps_names_and_rejects_all_constant() {
    let train = Dataset::new(
        mat(&[&[1.0, 5.0, 0.0], &[3.0, 5.0001, 1.0], &[5.0, 5.0, 2.0]]),
        mat(&[&[2.0], &[4.0], &[9.0]]),
    )
    .unwrap()
    .with_feature_names(vec!["a".into(), "b".into(), "c".into()])
    .unwrap();
    let s = Standardizer::fit_with(&train, StandardizeOptions::drop_near_constant()).unwrap();
    assert_eq!(s.kept_features, vec![0, 2]);
    let z = s.transform(&train).unwrap();
    assert_eq!(
        z.feature_names().unwrap(),
        &["a".to_string(), "c".to_string()]
    );
    // Without the option the near-constant column is kept and scaled by its (small) std.
    assert_eq!(Standardizer::fit(&train).kept_features, vec![0, 1, 2]);
    let flat = Dataset::new(mat(&[&[1.0], &[1.0]]), mat(&[&[0.0], &[1.0]])).unwrap();
    assert!(matches!(
        Standardizer::fit_with(&flat, StandardizeOptions::drop_near_constant()),
        Err(Error::Empty(_))
    ));
    let bad = StandardizeOptions {
        drop_features_below: Some(f64::NAN),
        ..StandardizeOptions::default()
    };
    assert!(matches!(
        Standardizer::fit_with(&flat, bad),
        Err(Error::Config(_))
    ));
    // Serde round trip.
    let json = serde_json::to_string(&s).unwrap();
    let back: Standardizer = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
}

// ---------------------------------------------------------------------------------------
// Splits

#[test]
fn random_split_is_seeded_disjoint_and_floor_sized() {
    let (tr, te) = random_split(506, 0.1, 3).unwrap();
    assert_eq!(te.len(), 50, "floor(0.1·506) as Structured's int(0.1·N)");
    assert_eq!(tr.len(), 456);
    let mut all = tr.clone();
    all.extend(&te);
    assert_eq!(sorted(all), (0..506).collect::<Vec<_>>());
    assert_eq!(random_split(506, 0.1, 3).unwrap(), (tr.clone(), te.clone()));
    assert_ne!(random_split(506, 0.1, 4).unwrap().1, te);
    assert!(matches!(random_split(10, 0.0, 0), Err(Error::Config(_))));
    assert!(matches!(random_split(10, 1.0, 0), Err(Error::Config(_))));
    assert!(matches!(random_split(5, 0.1, 0), Err(Error::Config(_))));
}

#[test]
fn validation_split_partitions_the_training_indices() {
    let train: Vec<usize> = (100..200).step_by(2).collect();
    let (fit, val) = validation_split(&train, 0.2, 7).unwrap();
    assert_eq!((fit.len(), val.len()), (40, 10));
    let mut all = fit.clone();
    all.extend(&val);
    assert_eq!(sorted(all), train);
    assert_eq!(validation_split(&train, 0.2, 7).unwrap(), (fit, val));
    assert!(matches!(
        validation_split(&[1, 2], 0.2, 0),
        Err(Error::Config(_))
    ));
}

fn check_extrapolation(x: &Mat<f64>, seed: u64) -> ExtrapolationSplit {
    let n = x.nrows();
    let s = extrapolation_split(x.as_ref(), seed).unwrap();
    assert_eq!(s.test.len(), n / 2);
    let half = n - n / 2;
    assert_eq!(s.train.len() + s.holdout.len(), half);
    let n_draws = (0.1 * half as f64).floor() as usize;
    assert!(s.holdout.len() <= n_draws);
    if n_draws > 0 {
        assert!(!s.holdout.is_empty());
    }
    let mut all = s.train.clone();
    all.extend(&s.test);
    all.extend(&s.holdout);
    assert_eq!(sorted(all), (0..n).collect::<Vec<_>>(), "disjoint cover");
    // Test rows are exactly the floor(N/2) smallest projections.
    let max_test = s
        .test
        .iter()
        .map(|&i| s.projection[i])
        .fold(f64::MIN, f64::max);
    let min_train = s
        .train
        .iter()
        .chain(&s.holdout)
        .map(|&i| s.projection[i])
        .fold(f64::MAX, f64::min);
    assert!(max_test <= min_train);
    // Exactly the features with full-data std > 1e-3 are projected, and the projection is
    // X_std w with full-data mean and population std.
    let col_stats = |j: usize| {
        let c: Vec<f64> = (0..n).map(|r| x[(r, j)]).collect();
        let m = c.iter().sum::<f64>() / n as f64;
        let sd = (c.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64).sqrt();
        (m, sd)
    };
    let expected: Vec<usize> = (0..x.ncols()).filter(|&j| col_stats(j).1 > 1e-3).collect();
    assert_eq!(s.projected_features, expected);
    for i in [0, n / 3, n - 1] {
        let z: f64 = s
            .projected_features
            .iter()
            .zip(&s.direction)
            .map(|(&j, w)| {
                let (m, sd) = col_stats(j);
                (x[(i, j)] - m) / sd * w
            })
            .sum();
        assert!((z - s.projection[i]).abs() < 1e-10 * (1.0 + z.abs()));
    }
    s
}

#[test]
fn extrapolation_split_has_the_protocol_properties() {
    let mut x = standard_normal(&mut seeded(11), 101, 4);
    for i in 0..101 {
        x[(i, 2)] = 3.0; // a constant feature: excluded from the projection
    }
    let a = check_extrapolation(&x, 0);
    assert_eq!(a.projected_features, vec![0, 1, 3]);
    assert_eq!(a.direction.len(), 3);
    assert_eq!(
        extrapolation_split(x.as_ref(), 0).unwrap(),
        a,
        "deterministic per seed"
    );
    let b = check_extrapolation(&x, 1);
    assert_ne!(a.test, b.test, "different seeds project differently");
    // Errors.
    assert!(matches!(
        extrapolation_split(Mat::zeros(1, 3).as_ref(), 0),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        extrapolation_split(Mat::from_fn(5, 2, |_, _| 1.0).as_ref(), 0),
        Err(Error::Config(_))
    ));
    let mut bad = x.clone();
    bad[(3, 1)] = f64::NAN;
    assert!(matches!(
        extrapolation_split(bad.as_ref(), 0),
        Err(Error::NonFinite { .. })
    ));
}

#[test]
fn extrapolation_split_on_boston() {
    let Some(root) = uci_root() else { return };
    // boston/data.txt: 506 rows of 14 whitespace-separated numbers, the 13 features first.
    let text = std::fs::read_to_string(root.join("boston").join("data.txt")).unwrap();
    let rows: Vec<Vec<f64>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|v| v.parse().unwrap()).collect())
        .collect();
    let x = Mat::from_fn(rows.len(), 13, |i, j| rows[i][j]);
    assert_eq!(x.nrows(), 506);
    for seed in 0..3 {
        let s = check_extrapolation(&x, seed);
        assert_eq!(s.test.len(), 253);
        assert_eq!(s.projected_features.len(), 13);
    }
}

// ---------------------------------------------------------------------------------------
// Minibatches

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn minibatches_cover_every_index_once_per_epoch(
        n in 1usize..120, b in 1usize..150, seed in 0u64..1000
    ) {
        let mut mb = Minibatches::new(n, b, seed).unwrap();
        let eff = b.min(n);
        prop_assert_eq!(mb.batch_size(), eff);
        let epochs = 3;
        let n_batches = (epochs * n).div_ceil(eff);
        let mut stream = Vec::new();
        for _ in 0..n_batches {
            let batch = mb.next_batch();
            prop_assert_eq!(batch.len(), eff);
            stream.extend_from_slice(batch);
        }
        for e in 0..epochs {
            let epoch = sorted(stream[e * n..(e + 1) * n].to_vec());
            prop_assert_eq!(epoch, (0..n).collect::<Vec<_>>());
        }
        // Deterministic per seed.
        let again: Vec<usize> = Minibatches::new(n, b, seed).unwrap()
            .take(n_batches).flatten().collect();
        prop_assert_eq!(again, stream);
    }
}

#[test]
fn minibatches_reject_bad_arguments_and_shuffle() {
    assert!(matches!(Minibatches::new(0, 4, 0), Err(Error::Empty(_))));
    assert!(matches!(Minibatches::new(4, 0, 0), Err(Error::Config(_))));
    let mut mb = Minibatches::new(1000, 1000 - 1, 0).unwrap();
    assert_ne!(mb.next_batch(), &(0..999).collect::<Vec<_>>()[..]);
}

#[test]
fn gather_rows_into_copies_rows_in_place() {
    let src = Mat::from_fn(5, 3, |i, j| (10 * i + j) as f64);
    let mut dst = Mat::<f64>::zeros(2, 3);
    gather_rows_into(src.as_ref(), &[4, 1], dst.as_mut());
    assert_eq!(dst, Mat::from_fn(2, 3, |i, j| (10 * [4, 1][i] + j) as f64));
    let d = Dataset::new(src.clone(), Mat::from_fn(5, 1, |i, _| i as f64)).unwrap();
    let (mut xb, mut yb) = (Mat::zeros(3, 3), Mat::zeros(3, 1));
    d.gather_into(&[0, 0, 3], xb.as_mut(), yb.as_mut());
    assert_eq!((xb[(2, 2)], yb[(2, 0)]), (32.0, 3.0));
}

#[test]
#[should_panic(expected = "destination must be")]
fn gather_rows_into_panics_on_wrong_buffer_shape() {
    let src = Mat::<f64>::zeros(5, 3);
    let mut dst = Mat::<f64>::zeros(2, 2);
    gather_rows_into(src.as_ref(), &[0, 1], dst.as_mut());
}

// ---------------------------------------------------------------------------------------
// k-means

fn four_clusters() -> (Mat<f64>, [[f64; 2]; 4]) {
    let centres = [[10.0, 10.0], [-10.0, 10.0], [10.0, -10.0], [-10.0, -10.0]];
    let noise = standard_normal(&mut seeded(5), 200, 2);
    let x = Mat::from_fn(200, 2, |i, j| centres[i % 4][j] + 0.1 * noise[(i, j)]);
    (x, centres)
}

#[test]
fn kmeans_is_deterministic_per_seed_and_recovers_separated_clusters() {
    let (x, truth) = four_clusters();
    let a = kmeans(x.as_ref(), 4, 30, &mut seeded(1)).unwrap();
    let b = kmeans(x.as_ref(), 4, 30, &mut seeded(1)).unwrap();
    assert_eq!(a, b);
    for t in truth {
        let best = (0..4)
            .map(|r| ((a[(r, 0)] - t[0]).powi(2) + (a[(r, 1)] - t[1]).powi(2)).sqrt())
            .fold(f64::INFINITY, f64::min);
        // The cluster mean of 50 points with sd 0.1 is within ~0.05 of the truth.
        assert!(best < 0.05, "no centre near {t:?}: {a:?}");
    }
    // Seeding alone puts one centre in each cluster too (D² sampling with separation 20).
    let init = kmeans_plus_plus(x.as_ref(), 4, &mut seeded(2)).unwrap();
    for t in truth {
        assert!(
            (0..4).any(|r| (init[(r, 0)] - t[0]).abs() < 1.0 && (init[(r, 1)] - t[1]).abs() < 1.0)
        );
    }
}

#[test]
fn kmeans_with_k_at_least_n_returns_points_then_jittered_copies() {
    let x = mat(&[&[0.0, 1.0], &[2.0, 3.0], &[4.0, 7.0]]);
    let c = kmeans(x.as_ref(), 3, 10, &mut seeded(0)).unwrap();
    assert_eq!(c, x);
    let c = kmeans(x.as_ref(), 5, 10, &mut seeded(0)).unwrap();
    assert_eq!(c.nrows(), 5);
    assert_eq!(c.as_ref().submatrix(0, 0, 3, 2).to_owned(), x);
    for r in 3..5 {
        let src = r - 3;
        for j in 0..2 {
            let d = (c[(r, j)] - x[(src, j)]).abs();
            assert!(d > 0.0 && d < 0.2, "jitter of row {r}: {d}");
        }
    }
}

#[test]
fn kmeans_handles_duplicate_points() {
    // Ten rows, only two distinct values; ask for four centres.
    let x = Mat::from_fn(10, 2, |i, j| if i % 2 == 0 { 1.0 + j as f64 } else { -1.0 });
    let c = kmeans(x.as_ref(), 4, 20, &mut seeded(3)).unwrap();
    for r in 0..4 {
        for s in 0..r {
            let d2 = (c[(r, 0)] - c[(s, 0)]).powi(2) + (c[(r, 1)] - c[(s, 1)]).powi(2);
            assert!(d2 > 0.0, "centres {r} and {s} coincide");
        }
        assert!(c[(r, 0)].is_finite() && c[(r, 1)].is_finite());
    }
    // Both distinct points are represented.
    assert!((0..4).any(|r| c[(r, 0)] == 1.0 && c[(r, 1)] == 2.0));
    assert!((0..4).any(|r| c[(r, 0)] == -1.0 && c[(r, 1)] == -1.0));
}

#[test]
fn kmeans_rejects_bad_arguments() {
    let x = Mat::<f64>::zeros(4, 2);
    assert!(matches!(
        kmeans(x.as_ref(), 0, 5, &mut seeded(0)),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        kmeans(Mat::<f64>::zeros(0, 2).as_ref(), 2, 5, &mut seeded(0)),
        Err(Error::Empty(_))
    ));
    let mut y = x.clone();
    y[(1, 1)] = f64::NAN;
    assert!(matches!(
        kmeans(y.as_ref(), 2, 5, &mut seeded(0)),
        Err(Error::NonFinite { .. })
    ));
}
