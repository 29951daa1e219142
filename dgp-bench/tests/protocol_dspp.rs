//! `run --protocol dspp` (the `protocol` and `units` modules of dgp-bench): the 15:3:2
//! split generator, the exact conversion of a record to standardised units, the CLI run
//! and its usage errors.

use std::collections::BTreeSet;
use std::path::Path;

use dgp_bench::backends::find_backend;
use dgp_bench::datasets::{BenchData, SplitKind};
use dgp_bench::experiment::{ExperimentSpec, PREDICT_SEED_OFFSET, run_split};
use dgp_bench::protocol::{DsppPartition, Protocol, dspp_split_count};
use dgp_bench::report::read_json_lines;
use dgp_bench::units::standardised;
use dgp_data::validation_split;
use dgp_traits::metrics::Metrics;
use dgp_traits::model::PredictConfig;

mod common;

use common::{Scratch, bench, stderr, stdout};

/// `n` rows, features (a, b), target a smooth function in units of 10 around 50 (so the
/// standardised and original units differ); one published split.
fn write_uci(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir.join("splits")).unwrap();
    let data: String = (0..n)
        .map(|i| {
            let a = (i % 8) as f64 / 4.0 - 1.0;
            let b = (i / 8) as f64 / 2.0 - 1.0;
            let y = 50.0 + 10.0 * ((2.0 * a).sin() + 0.5 * b) + 0.3 * ((i * 7919) % 13) as f64;
            format!("{a} {b} {y}\n")
        })
        .collect();
    std::fs::write(dir.join("data.txt"), data).unwrap();
    std::fs::write(dir.join("index_features.txt"), "0\n1\n").unwrap();
    std::fs::write(dir.join("index_target.txt"), "2\n").unwrap();
    std::fs::write(dir.join("n_splits.txt"), "1\n").unwrap();
    let fmt = |v: Vec<usize>| v.iter().map(|i| format!("{i}\n")).collect::<String>();
    let test: Vec<usize> = (0..n).filter(|i| i % 10 == 3).collect();
    let train: Vec<usize> = (0..n).filter(|i| i % 10 != 3).collect();
    std::fs::write(dir.join("splits/index_train_0.txt"), fmt(train)).unwrap();
    std::fs::write(dir.join("splits/index_test_0.txt"), fmt(test)).unwrap();
}

fn dspp_kind(layers: &[usize]) -> SplitKind {
    Protocol::Dspp.split_kind(None, layers).unwrap()
}

#[test]
fn splits_are_15_3_2_disjoint_seeded_and_10_or_5() {
    let d = BenchData::embedded_concrete().unwrap();
    assert_eq!(dspp_split_count(&[1, 2]), 10);
    assert_eq!(dspp_split_count(&[2, 3]), 5);
    assert_eq!(dspp_kind(&[2]), SplitKind::Dspp { splits: 10 });
    let ten = d.clone().with_split_kind(dspp_kind(&[1, 2]), 0).unwrap();
    let five = d.clone().with_split_kind(dspp_kind(&[3]), 0).unwrap();
    assert_eq!((ten.n_splits(), five.n_splits()), (10, 5));
    assert!(five.split(5).is_err() && ten.split(9).is_ok());
    // concrete, N = 1030: test floor(154.5) = 154, fit 876, validation floor(103.06) = 103,
    // train 773 — 75.0 / 15.0 / 10.0 % to within a row.
    let p = DsppPartition::of(1030, "concrete").unwrap();
    assert_eq!((p.test, p.fit, p.validation, p.train), (154, 876, 103, 773));
    for (part, share) in [(p.train, 0.75), (p.test, 0.15), (p.validation, 0.10)] {
        assert!(
            (part as f64 - share * 1030.0).abs() <= 1.0,
            "{part} vs {share}"
        );
    }
    let mut tests = BTreeSet::new();
    for k in 0..10 {
        let (tr, te) = ten.split(k).unwrap();
        assert_eq!((tr.len(), te.len()), (p.fit, p.test));
        let all: BTreeSet<usize> = tr.iter().chain(&te).copied().collect();
        assert_eq!(all.len(), 1030, "disjoint and covering");
        assert_eq!(
            ten.split(k).unwrap(),
            (tr.clone(), te.clone()),
            "deterministic"
        );
        assert!(
            tests.insert(te.clone()),
            "split {k} repeats an earlier test set"
        );
        // dspp's selection draws exactly the partition's validation rows from the fit rows.
        let (fit, val) = validation_split(&tr, dgp_dspp::VALIDATION_FRACTION, k as u64).unwrap();
        assert_eq!((fit.len(), val.len()), (p.train, p.validation));
    }
    // The 5 splits of 3-layer models are the first 5 of the 10; another seed moves them.
    assert_eq!(five.split(4).unwrap(), ten.split(4).unwrap());
    let other = d.with_split_kind(dspp_kind(&[2]), 1).unwrap();
    assert_eq!(
        other.split(0).unwrap(),
        ten.split(1).unwrap(),
        "split k = seed + k"
    );
    assert!(ten.split_protocol().contains("15:3:2"));
}

#[test]
fn too_few_rows_and_a_second_split_kind_are_usage_errors() {
    // 24 rows: test 3, fit 21, validation 2, train 19 < 20 (the early-stopping minimum).
    let e = DsppPartition::of(24, "tiny").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("too few for 15:3:2"), "{e}");
    let p = DsppPartition::of(25, "tiny").unwrap();
    assert_eq!((p.test, p.validation, p.train), (3, 2, 20));
    for n in [0, 1, 5, 19] {
        assert!(DsppPartition::of(n, "tiny").is_err(), "{n}");
    }
    let e = Protocol::Dspp
        .split_kind(Some(SplitKind::Random), &[2])
        .unwrap_err();
    assert!(e.to_string().contains("leave out --split-kind"), "{e}");
    assert!(Protocol::parse("dsp").is_err());
    let s = Scratch::new("few");
    write_uci(&s.path("d"), 24);
    let data = BenchData::load(s.path("d").to_str().unwrap(), None, 0).unwrap();
    assert_eq!(
        data.with_split_kind(dspp_kind(&[2]), 0)
            .unwrap_err()
            .exit_code(),
        2
    );
}

#[test]
fn a_records_standardised_nll_is_the_nll_computed_in_standardised_units() {
    let s = Scratch::new("units");
    write_uci(&s.path("d"), 60);
    let data = BenchData::load(s.path("d").to_str().unwrap(), None, 0)
        .unwrap()
        .with_split_kind(dspp_kind(&[1]), 0)
        .unwrap();
    let mut spec = ExperimentSpec::with_defaults(&data, find_backend("svi").unwrap(), 1);
    spec.steps = 30;
    spec.arch.num_inducing = 5;
    spec.arch.predict_samples = 7;
    let o = run_split(&spec, 3).unwrap();
    let r = &o.record;
    assert_eq!((r.n_train, r.n_test, r.validation_rows), (51, 9, 0));
    assert_eq!(
        (r.y_mean.clone(), r.y_std.clone()),
        (o.standardizer.y_mean.clone(), o.standardizer.y_std.clone())
    );
    assert!(r.y_std[0] > 3.0, "the units differ: s_y = {}", r.y_std[0]);
    // By hand: predict the standardised test inputs, score the standardised targets.
    let test_std = o.standardizer.transform(&o.test).unwrap();
    let pred = o
        .model
        .predict(
            test_std.x(),
            &PredictConfig {
                samples: 7,
                seed: spec.seed.wrapping_add(PREDICT_SEED_OFFSET),
            },
        )
        .unwrap();
    let by_hand = Metrics::compute(&pred, test_std.y()).unwrap();
    let conv = standardised(r).unwrap();
    assert!(
        (conv.nll - by_hand.nll).abs() < 1e-10,
        "{} vs {}",
        conv.nll,
        by_hand.nll
    );
    assert!((conv.rmse.unwrap() - by_hand.rmse).abs() < 1e-10);
    assert!((conv.crps.unwrap() - by_hand.crps).abs() < 1e-10);
    // Not the original-unit value: NLL_std = NLL − log s_y, with s_y > 3.
    assert!((r.nll - conv.nll - r.y_std[0].ln()).abs() < 1e-12);
}

#[test]
fn cli_run_records_units_and_rows_and_refuses_bad_input() {
    let s = Scratch::new("cli");
    let dir = s.path("d");
    write_uci(&dir, 40);
    let data = dir.to_str().unwrap();
    let json = s.path("r.jsonl");
    let tiny = [
        "--inducing",
        "5",
        "--steps",
        "15",
        "--batch",
        "16",
        "--samples",
        "4",
        "--quiet",
    ];
    let mut args = vec![
        "run",
        "--data",
        data,
        "--protocol",
        "dspp",
        "--backend",
        "svi,ppgpr",
        "--layers",
        "1",
        "--splits",
        "0,9",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend(tiny);
    let o = bench(&args);
    let out = stdout(&o);
    assert!(o.status.success(), "{}\n{out}", stderr(&o));
    assert!(
        out.contains("protocol dspp (split kind 15:3:2), splits [0, 9]"),
        "{out}"
    );
    // 40 rows: test 6, fit 34, validation floor(4.0) = 4, train 30.
    assert!(
        out.contains("test 6 (15.0 %)") && out.contains("holds out 4 for validation"),
        "{out}"
    );
    assert!(
        out.contains("Standardised units (DSPP paper)") && out.contains("NLL (std)"),
        "{out}"
    );
    assert!(out.contains("std units: NLL"), "{out}");
    let recs = read_json_lines(&json).unwrap();
    assert_eq!(recs.len(), 4);
    for r in &recs {
        assert_eq!(
            (r.protocol.as_str(), r.n_train, r.n_test),
            ("dspp/15:3:2", 34, 6)
        );
        assert_eq!((r.y_mean.len(), r.y_std.len()), (1, 1));
        let want = if r.backend == "ppgpr" { 4 } else { 0 };
        assert_eq!(r.validation_rows, want, "{}", r.backend);
    }
    // --splits 9 does not exist for 3-layer models (5 splits).
    let mut args = vec![
        "run",
        "--data",
        data,
        "--protocol",
        "dspp",
        "--layers",
        "3",
        "--splits",
        "9",
    ];
    args.extend(tiny);
    let o = bench(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("split 9 does not exist"), "{err}");
    // Bad input: one-line usage errors, nothing trained.
    let small = s.path("small");
    write_uci(&small, 24);
    for (extra, needle) in [
        (
            vec!["--protocol", "dspq"],
            "--protocol must be published, lindinger or dspp",
        ),
        (
            vec!["--protocol", "dspp", "--split-kind", "extrapolate"],
            "leave out --split-kind",
        ),
    ] {
        let mut args = vec!["run", "--data", data];
        args.extend(extra);
        args.extend(tiny);
        let o = bench(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.starts_with("error: ") && err.contains(needle), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let mut args = vec![
        "run",
        "--data",
        small.to_str().unwrap(),
        "--protocol",
        "dspp",
    ];
    args.extend(tiny);
    let o = bench(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("24 rows, too few for 15:3:2"), "{err}");
    assert!(!stdout(&o).contains("split 0:"));
}
