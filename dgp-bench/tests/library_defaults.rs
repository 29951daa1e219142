//! The library's default fit of every registered backend — `Config::default().fit(&train)`
//! in original units, predicted with the configuration's own prediction settings — gives
//! the records of `dgp-bench run --backend NAME` (no other model flag) bit for bit on the
//! same split: one home for the defaults, one pipeline.

mod common;

use common::{Scratch, bench, stderr};
use dgp_bench::backends::BACKENDS;
use dgp_bench::experiment::SplitRecord;
use dgp_bench::report::read_json_lines;
use dgp_data::Dataset;
use dgp_dspp::DsppConfig;
use dgp_dspp::estimator::PpgprConfig;
use dgp_hmc::{DgpsConfig, SghmcConfig};
use dgp_nested::NestedConfig;
use dgp_structured::StructuredConfig;
use dgp_svi::SviConfig;
use dgp_traits::fitted::Estimator;
use dgp_traits::metrics::Metrics;
use faer::Mat;

/// 40 rows of a smooth function of two inputs with a little deterministic noise (few rows:
/// every backend's default schedule runs in full, so the steps must be cheap); rows
/// `i % 5 == 2` are the test split.
fn rows() -> Vec<[f64; 3]> {
    (0..N)
        .map(|i| {
            let a = (i % 8) as f64 / 4.0 - 1.0;
            let b = (i / 8) as f64 / 2.5 - 1.0;
            let noise = 0.05 * (((i * 7919) % 17) as f64 / 17.0 - 0.5);
            [a, b, (2.0 * a).sin() + 0.5 * b * b + noise]
        })
        .collect()
}

const N: usize = 40;

fn is_test(i: usize) -> bool {
    i % 5 == 2
}

fn write_uci(dir: &std::path::Path) {
    std::fs::create_dir_all(dir.join("splits")).unwrap();
    let data: String = rows()
        .iter()
        .map(|r| format!("{} {} {}\n", r[0], r[1], r[2]))
        .collect();
    std::fs::write(dir.join("data.txt"), data).unwrap();
    std::fs::write(dir.join("index_features.txt"), "0\n1\n").unwrap();
    std::fs::write(dir.join("index_target.txt"), "2\n").unwrap();
    std::fs::write(dir.join("n_splits.txt"), "1\n").unwrap();
    let idx = |test: bool| -> String {
        (0..N)
            .filter(|&i| is_test(i) == test)
            .map(|i| format!("{i}\n"))
            .collect()
    };
    std::fs::write(dir.join("splits/index_train_0.txt"), idx(false)).unwrap();
    std::fs::write(dir.join("splits/index_test_0.txt"), idx(true)).unwrap();
}

fn dataset(test: bool) -> Dataset {
    let r: Vec<[f64; 3]> = rows()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| is_test(*i) == test)
        .map(|(_, r)| r)
        .collect();
    let x = Mat::from_fn(r.len(), 2, |i, j| r[i][j]);
    let y = Mat::from_fn(r.len(), 1, |i, _| r[i][2]);
    Dataset::new(x, y).unwrap()
}

/// The record of `dgp-bench run --backend NAME --layers L` on the folder.
fn bench_record(data: &str, out: &Scratch, backend: &str, layers: usize) -> SplitRecord {
    let json = out.s(&format!("{backend}.jsonl"));
    let o = bench(&[
        "run",
        "--data",
        data,
        "--backend",
        backend,
        "--layers",
        &layers.to_string(),
        "--quiet",
        "--json",
        &json,
    ]);
    assert!(o.status.success(), "{backend}: {}", stderr(&o));
    let mut records: Vec<SplitRecord> = read_json_lines(std::path::Path::new(&json)).unwrap();
    assert_eq!(records.len(), 1);
    records.remove(0)
}

/// Fits `est` with the library on the training rows and checks its predictions on the
/// test rows against the bench's record.
fn check<E: Estimator>(name: &str, est: &E, layers: usize, data: &str, out: &Scratch) {
    let (train, test) = (dataset(false), dataset(true));
    let fitted = est
        .fit(&train)
        .unwrap_or_else(|e| panic!("{name}: library fit failed: {e}"));
    let pred = fitted.predict(test.x()).unwrap();
    let m = Metrics::compute(&pred, test.y()).unwrap();
    let r = bench_record(data, out, name, layers);
    assert_eq!(
        (r.nll, r.rmse, r.crps, r.cov95),
        (m.nll, m.rmse, m.crps, m.cov95),
        "{name}: the library's default fit and the bench's run differ"
    );
    assert_eq!(
        (r.steps, r.final_objective),
        (fitted.report().steps, fitted.report().final_objective),
        "{name}"
    );
    assert_eq!(r.predict_samples, fitted.predict_config().samples, "{name}");
}

#[test]
fn the_library_default_fit_is_the_bench_run_bit_for_bit() {
    let out = Scratch::new("library-defaults");
    let dir = out.path("data");
    write_uci(&dir);
    let data = dir.to_str().unwrap().to_string();
    let mut seen = Vec::new();
    for b in BACKENDS.iter() {
        let name = b.name();
        match name {
            "svi" => check(name, &SviConfig::default(), 2, &data, &out),
            "nested" => check(name, &NestedConfig::default(), 2, &data, &out),
            "dspp" => check(name, &DsppConfig::default(), 2, &data, &out),
            "ppgpr" => check(name, &PpgprConfig(DsppConfig::default()), 1, &data, &out),
            "star" => check(name, &StructuredConfig::star(), 3, &data, &out),
            "mf" => check(name, &StructuredConfig::mf(), 3, &data, &out),
            "fc" => check(name, &StructuredConfig::fc(), 3, &data, &out),
            "dgps" => check(name, &DgpsConfig::default(), 2, &data, &out),
            "sghmc" => check(name, &SghmcConfig::default(), 2, &data, &out),
            other => panic!("backend {other} has no library default in this test"),
        }
        seen.push(name);
    }
    assert_eq!(seen.len(), BACKENDS.len());
}
