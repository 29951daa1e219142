//! Classification labels, class probabilities and metrics against hand-computed values.

use dgp_core::rng::seeded;
use dgp_core::{Error, LabelError};
use dgp_traits::classification::{
    ClassMetrics, ClassMetricsAccumulator, ClassProbs, ECE_BINS, auc, brier,
    check_all_classes_present, class_labels, error_rate, expected_calibration_error,
    infer_num_classes, log_loss, reliability_bins,
};
use faer::{Mat, mat};
use rand::RngExt;

fn example() -> (ClassProbs, Vec<usize>) {
    let p = ClassProbs::new(mat![[0.8, 0.2], [0.3, 0.7], [0.65, 0.35], [0.35, 0.65]]).unwrap();
    (p, vec![0, 1, 1, 0])
}

#[test]
fn metrics_match_hand_computed_values() {
    let (p, y) = example();
    assert_eq!(p.predicted(), vec![0, 1, 0, 1]);
    assert_eq!(error_rate(&p, &y).unwrap(), 0.5);
    // −(ln 0.8 + ln 0.7 + 2 ln 0.35)/4.
    let want = -(0.8f64.ln() + 0.7f64.ln() + 2.0 * 0.35f64.ln()) / 4.0;
    assert!((log_loss(&p, &y).unwrap() - want).abs() < 1e-15);
    assert!((log_loss(&p, &y).unwrap() - 0.669_865_686_05).abs() < 1e-10);
    // (0.08 + 0.18 + 0.845 + 0.845)/4.
    assert!((brier(&p, &y).unwrap() - 0.4875).abs() < 1e-15);
    // Confidences 0.8 (bin 12, right), 0.7 (bin 11, right), 0.65 ×2 (bin 10, wrong):
    // 0.25·0.2 + 0.25·0.3 + 0.5·0.65.
    let ece = expected_calibration_error(&p, &y, ECE_BINS).unwrap();
    assert!((ece - 0.45).abs() < 1e-15, "{ece}");
    // Positives score 0.7, 0.35; negatives 0.2, 0.65: 3 of 4 pairs ordered.
    assert!((auc(&p, &y).unwrap() - 0.75).abs() < 1e-15);
    let m = ClassMetrics::compute(&p, &y).unwrap();
    assert_eq!(m.error_rate, 0.5);
    assert_eq!(m.auc, Some(auc(&p, &y).unwrap()));
    assert_eq!(m.ece, ece);
}

#[test]
fn ece_bins_are_right_closed_and_one_bin_is_the_confidence_gap() {
    // With one bin, ECE = |accuracy − mean confidence|.
    let (p, y) = example();
    let e1 = expected_calibration_error(&p, &y, 1).unwrap();
    let mean_conf = (0.8 + 0.7 + 0.65 + 0.65) / 4.0;
    assert!((e1 - (mean_conf - 0.5f64).abs()).abs() < 1e-15);
    // Confidence exactly 1 lands in the last bin; perfectly calibrated certain
    // predictions give 0.
    let sure = ClassProbs::new(mat![[1.0, 0.0], [0.0, 1.0]]).unwrap();
    assert_eq!(expected_calibration_error(&sure, &[0, 1], 15).unwrap(), 0.0);
    assert_eq!(expected_calibration_error(&sure, &[1, 0], 15).unwrap(), 1.0);
    assert!(expected_calibration_error(&sure, &[1, 0], 0).is_err());
}

#[test]
fn auc_averages_ties_and_equals_the_pair_count() {
    let p = ClassProbs::new(mat![[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.1, 0.9]]).unwrap();
    // Pairs: two ties (½ each) and two ordered pairs.
    assert!((auc(&p, &[0, 1, 0, 1]).unwrap() - 0.75).abs() < 1e-15);
    // Random scores with many ties against the O(n²) pair definition.
    let mut rng = seeded(3);
    for _ in 0..20 {
        let n = 40;
        let s: Vec<f64> = (0..n)
            .map(|_| (rng.random_range(0..8) as f64) / 8.0)
            .collect();
        let y: Vec<usize> = (0..n).map(|_| rng.random_range(0..2)).collect();
        if !(y.contains(&0) && y.contains(&1)) {
            continue;
        }
        let p = ClassProbs::new(Mat::from_fn(
            n,
            2,
            |i, c| if c == 1 { s[i] } else { 1.0 - s[i] },
        ))
        .unwrap();
        let (mut num, mut den) = (0.0, 0.0);
        for i in 0..n {
            for j in 0..n {
                if y[i] == 1 && y[j] == 0 {
                    den += 1.0;
                    num += if s[i] > s[j] {
                        1.0
                    } else if s[i] == s[j] {
                        0.5
                    } else {
                        0.0
                    };
                }
            }
        }
        assert!((auc(&p, &y).unwrap() - num / den).abs() < 1e-12);
    }
}

#[test]
fn mixture_averages_with_weights_and_validates() {
    let a = mat![[0.9, 0.05, 0.05], [0.2, 0.3, 0.5]];
    let b = mat![[0.5, 0.25, 0.25], [0.0, 1.0, 0.0]];
    let m = ClassProbs::mixture(&[0.25, 0.75], &[a.clone(), b.clone()]).unwrap();
    for i in 0..2 {
        for c in 0..3 {
            assert!((m.probs()[(i, c)] - (0.25 * a[(i, c)] + 0.75 * b[(i, c)])).abs() < 1e-15);
        }
    }
    assert_eq!((m.n_points(), m.n_classes()), (2, 3));
    assert!(ClassProbs::mixture(&[0.5], &[a.clone(), b.clone()]).is_err());
    assert!(ClassProbs::mixture(&[0.6, 0.6], &[a.clone(), b.clone()]).is_err());
    assert!(ClassProbs::mixture(&[], &[]).is_err());
    assert!(ClassProbs::new(mat![[0.5, 0.6]]).is_err());
    assert!(ClassProbs::new(mat![[1.2, -0.2]]).is_err());
    assert!(ClassProbs::new(mat![[f64::NAN, 0.5]]).is_err());
    assert!(matches!(
        ClassProbs::new(mat![[1.0]]),
        Err(Error::Label(LabelError::TooFewClasses { num_classes: 1 }))
    ));
}

#[test]
fn metric_inputs_are_checked() {
    let (p, _) = example();
    assert!(matches!(error_rate(&p, &[0, 1]), Err(Error::Shape { .. })));
    assert!(matches!(
        log_loss(&p, &[0, 1, 2, 0]),
        Err(Error::Label(LabelError::OutOfRange { row: 2, .. }))
    ));
    assert!(matches!(
        auc(&p, &[1, 1, 1, 1]),
        Err(Error::Label(LabelError::MissingClass { class: 0, .. }))
    ));
    let three = ClassProbs::new(mat![[0.2, 0.3, 0.5]]).unwrap();
    assert!(auc(&three, &[2]).is_err());
    assert_eq!(ClassMetrics::compute(&three, &[2]).unwrap().auc, None);
    // A zero probability of the label gives a finite log loss.
    let sure = ClassProbs::new(mat![[1.0, 0.0]]).unwrap();
    assert!(log_loss(&sure, &[1]).unwrap().is_finite());
}

#[test]
fn labels_are_parsed_and_checked() {
    assert_eq!(
        class_labels(mat![[0.0], [2.0], [1.0]].as_ref(), 3).unwrap(),
        vec![0, 2, 1]
    );
    assert_eq!(
        infer_num_classes(mat![[0.0], [4.0], [1.0]].as_ref()).unwrap(),
        5
    );
    assert!(matches!(
        infer_num_classes(mat![[0.0], [0.0]].as_ref()),
        Err(Error::Label(LabelError::TooFewClasses { num_classes: 1 }))
    ));
    assert!(matches!(
        class_labels(mat![[0.0], [f64::INFINITY]].as_ref(), 2),
        Err(Error::Label(LabelError::NonFinite { row: 1, .. }))
    ));
    assert!(matches!(
        class_labels(mat![[0.5]].as_ref(), 2),
        Err(Error::Label(LabelError::NotAnInteger { row: 0, .. }))
    ));
    assert!(matches!(
        class_labels(mat![[0.0]].as_ref(), 1),
        Err(Error::Label(LabelError::TooFewClasses { num_classes: 1 }))
    ));
    assert!(matches!(
        check_all_classes_present(&[0, 2, 2], 3),
        Err(Error::Label(LabelError::MissingClass {
            class: 1,
            num_classes: 3
        }))
    ));
    assert!(check_all_classes_present(&[0, 2, 1], 3).is_ok());
}

#[test]
fn reliability_bins_are_the_ece_bins_and_pool_by_addition() {
    use dgp_traits::classification::{ReliabilityBin, reliability_bins};
    let (p, y) = example();
    let bins = reliability_bins(&p, &y, ECE_BINS).unwrap();
    assert_eq!(bins.len(), 15);
    assert_eq!(bins.iter().map(|b| b.count).sum::<usize>(), 4);
    // Confidences 0.65 ×2 (both wrong) fall in bin 10 = (9/15, 10/15].
    assert_eq!((bins[9].count, bins[9].correct), (2, 0));
    assert!((bins[9].confidence().unwrap() - 0.65).abs() < 1e-15);
    assert_eq!(bins[9].accuracy(), Some(0.0));
    assert_eq!(bins[0].accuracy(), None);
    assert!((bins[9].lower - 0.6).abs() < 1e-15 && (bins[9].upper - 10.0 / 15.0).abs() < 1e-15);
    let ece: f64 = bins
        .iter()
        .filter(|b| b.count > 0)
        .map(|b| b.count as f64 / 4.0 * (b.accuracy().unwrap() - b.confidence().unwrap()).abs())
        .sum();
    assert_eq!(ece, expected_calibration_error(&p, &y, ECE_BINS).unwrap());
    let pooled = ReliabilityBin::pool(&[bins.clone(), bins.clone()]).unwrap();
    assert_eq!(pooled[9].count, 4);
    assert_eq!(pooled[9].confidence(), bins[9].confidence());
    assert!(ReliabilityBin::pool(&[bins, vec![ReliabilityBin::default()]]).is_err());
    assert!(reliability_bins(&p, &y, 0).is_err());
}

/// Random K-class probabilities (with ties and exact zeros) and labels.
fn random_problem(n: usize, k: usize, seed: u64) -> (Mat<f64>, Vec<usize>) {
    let mut rng = seeded(seed);
    let raw = Mat::from_fn(n, k, |_, _| (rng.random_range(0..5) as f64) / 4.0);
    let probs = Mat::from_fn(n, k, |i, c| {
        let s: f64 = (0..k).map(|j| raw[(i, j)]).sum();
        if s == 0.0 {
            1.0 / k as f64
        } else {
            raw[(i, c)] / s
        }
    });
    let y = (0..n).map(|_| rng.random_range(0..k)).collect();
    (probs, y)
}

/// Rows `from..to` as class probabilities (each row normalised as on its own).
fn rows(p: &Mat<f64>, from: usize, to: usize) -> ClassProbs {
    ClassProbs::new(p.subrows(from, to - from).to_owned()).unwrap()
}

proptest::proptest! {
    /// The metrics of points pushed in chunks of any sizes equal, bit for bit, the
    /// metrics of the same points at once (every sum in row order): a streamed test file
    /// and the same predictions in memory cannot disagree.
    #[test]
    fn chunked_accumulation_equals_one_pass_bit_for_bit(
        n in 1usize..200,
        k in 2usize..5,
        chunk in 1usize..64,
        seed in 0u64..1000,
    ) {
        let (raw, y) = random_problem(n, k, seed);
        let p = ClassProbs::new(raw.clone()).unwrap();
        let whole = ClassMetrics::compute(&p, &y).unwrap();
        let bins = reliability_bins(&p, &y, ECE_BINS).unwrap();
        let mut acc = ClassMetricsAccumulator::new(k, ECE_BINS).unwrap();
        let mut start = 0;
        while start < n {
            let end = (start + chunk).min(n);
            acc.push(&rows(&raw, start, end), &y[start..end]).unwrap();
            start = end;
        }
        proptest::prop_assert_eq!(acc.rows(), n);
        let (m, b) = acc.finish().unwrap();
        let bits = |m: &ClassMetrics| {
            [m.error_rate, m.log_loss, m.brier, m.ece, m.auc.unwrap_or(-1.0)].map(f64::to_bits)
        };
        proptest::prop_assert_eq!(bits(&m), bits(&whole));
        proptest::prop_assert_eq!(b, bins);
    }
}

#[test]
fn the_accumulator_checks_its_inputs() {
    assert!(matches!(
        ClassMetricsAccumulator::new(1, ECE_BINS),
        Err(Error::Label(LabelError::TooFewClasses { num_classes: 1 }))
    ));
    assert!(matches!(
        ClassMetricsAccumulator::new(2, 0),
        Err(Error::Config(_))
    ));
    let mut acc = ClassMetricsAccumulator::new(3, ECE_BINS).unwrap();
    let (p, y) = example();
    // Two classes pushed into a three-class accumulator.
    assert!(matches!(acc.push(&p, &y), Err(Error::Shape { .. })));
    let (p3, _) = random_problem(2, 3, 1);
    let p3 = ClassProbs::new(p3).unwrap();
    assert!(matches!(acc.push(&p3, &[0]), Err(Error::Shape { .. })));
    assert!(matches!(acc.push(&p3, &[0, 3]), Err(Error::Label(_))));
    assert_eq!(acc.rows(), 0, "nothing is added on error");
    assert!(matches!(acc.finish(), Err(Error::Empty(_))));
}
