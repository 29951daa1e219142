//! Standardisation is robust to the units of the data (issue 16): features and target
//! multiplied by 1e300 or 1e-300 standardise to the same numbers (up to rounding), so svi
//! fits the same model, and the test NLL in original units is shifted by exactly
//! log(factor) (the change of variables y' = f·y: p'(y') = p(y)/f).

mod common;

use dgp_data::Standardizer;
use dgp_svi::prelude::*;
use dgp_traits::model::{FitHooks, PredictConfig};
use faer::Mat;

/// 40 rows of [`common::rows`] times `f`; train = the first 32, test = the last 8.
fn split(f: f64) -> (Dataset, Dataset) {
    let r = common::rows();
    let make = |rows: &[[f64; 3]]| {
        let x = Mat::from_fn(rows.len(), 2, |i, j| rows[i][j] * f);
        let y = Mat::from_fn(rows.len(), 1, |i, _| rows[i][2] * f);
        Dataset::new(x, y).unwrap()
    };
    (make(&r[..32]), make(&r[32..]))
}

/// Mean test NLL in original units: the standardised model's NLL plus log(y_std), and
/// the standardised training data.
fn fit_and_nll(f: f64) -> (f64, Dataset) {
    let (train, test) = split(f);
    let s = Standardizer::fit(&train);
    let train_std = s.transform(&train).unwrap();
    let test_std = s.transform(&test).unwrap();
    let mut model = SviModel::new(
        SviConfig {
            layers: 2,
            num_inducing: 6,
            adam: AdamConfig::with_lr(0.02),
            ..Default::default()
        },
        &train_std,
    )
    .unwrap();
    let cfg = FitConfig {
        steps: 15,
        batch_size: 16,
        seed: 3,
        ..FitConfig::default()
    };
    model.fit(&train_std, &cfg, &mut FitHooks::none()).unwrap();
    let pred = model
        .predict(
            test_std.x(),
            &PredictConfig {
                samples: 5,
                seed: 1,
            },
        )
        .unwrap();
    let ld = pred.log_density(test_std.y()).unwrap();
    let nll_std = -ld.iter().sum::<f64>() / ld.len() as f64;
    (nll_std + s.y_std[0].ln(), train_std)
}

fn max_abs_diff(a: &Dataset, b: &Dataset) -> f64 {
    let mut m: f64 = 0.0;
    for i in 0..a.n() {
        for j in 0..a.input_dim() {
            m = m.max((a.x()[(i, j)] - b.x()[(i, j)]).abs());
        }
        m = m.max((a.y()[(i, 0)] - b.y()[(i, 0)]).abs());
    }
    m
}

#[test]
fn data_times_1e300_or_1e_minus_300_fit_the_same_model_and_shift_the_nll_by_log_factor() {
    let (nll1, std1) = fit_and_nll(1.0);
    assert!(nll1.is_finite());
    for f in [1e300, 1e-300] {
        let (nllf, stdf) = fit_and_nll(f);
        let d = max_abs_diff(&std1, &stdf);
        assert!(d < 1e-13, "factor {f:e}: standardised data differ by {d:e}");
        let expected = nll1 + f.ln();
        let rel = (nllf - expected).abs() / expected.abs().max(1.0);
        assert!(
            rel < 1e-9,
            "factor {f:e}: NLL {nllf} vs {nll1} + ln f = {expected} (relative {rel:e})"
        );
    }
}

#[test]
fn a_feature_in_tiny_units_is_kept_and_a_huge_one_is_not_zeroed() {
    for f in [1e-14, 1e-200, 1e200, 1e300] {
        let (train, _) = split(1.0);
        let x = Mat::from_fn(train.n(), 2, |i, j| {
            train.x()[(i, j)] * if j == 0 { f } else { 1.0 }
        });
        let d = Dataset::new(x, train.y().to_owned()).unwrap();
        let s = Standardizer::fit(&d);
        let t = s.transform(&d).unwrap();
        let ref_t = Standardizer::fit(&train).transform(&train).unwrap();
        let diff = max_abs_diff(&t, &ref_t);
        assert!(diff < 1e-12, "feature ×{f:e}: {diff:e}");
    }
}
