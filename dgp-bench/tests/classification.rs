//! The classification experiment runner on small folders written to a temporary
//! directory: svi trains a binary problem, the metrics are finite and sensible, and bad
//! requests (a binary likelihood on three classes, a likelihood family the backend does
//! not declare) are usage errors.

use std::path::PathBuf;

use dgp_bench::backends::find_backend;
use dgp_bench::classification::{ClassExperimentSpec, likelihood_by_name, run_classification};
use dgp_bench::error::BenchError;
use dgp_core::rng::{seeded, standard_normal};
use dgp_traits::backend::{CommonSettings, Settings};
use dgp_traits::model::{FitConfig, PredictConfig};

/// `k` blobs in 2-D, 90 rows, one published split (first 60 rows train).
/// A classification folder with `k` classes in a scratch directory of its own (tests run in
/// parallel threads of one process: each call gets a fresh directory, so one test's
/// clean-up never removes another's data).
fn write_folder(k: usize) -> PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base =
        std::env::temp_dir().join(format!("dgp-bench-class-{k}-{}-{call}", std::process::id()));
    // The data folder inside the scratch directory; a run's outputs go beside it, never
    // among its input data (the bench refuses that).
    let dir = base.join(format!("dgp-bench-class-{k}"));
    std::fs::create_dir_all(dir.join("splits")).unwrap();
    let raw = standard_normal(&mut seeded(1), 90, 2);
    let centres = [[0.0, 0.0], [3.0, 0.0], [1.5, 2.6]];
    let mut data = String::new();
    for i in 0..90 {
        let c = i % k;
        data.push_str(&format!(
            "{} {} {}\n",
            centres[c][0] + 0.4 * raw[(i, 0)],
            centres[c][1] + 0.4 * raw[(i, 1)],
            c
        ));
    }
    std::fs::write(dir.join("data.txt"), data).unwrap();
    std::fs::write(dir.join("index_features.txt"), "0\n1\n").unwrap();
    std::fs::write(dir.join("index_target.txt"), "2\n").unwrap();
    std::fs::write(dir.join("n_splits.txt"), "1\n").unwrap();
    let train: String = (0..60).map(|i| format!("{i}\n")).collect();
    let test: String = (60..90).map(|i| format!("{i}\n")).collect();
    std::fs::write(dir.join("splits/index_train_0.txt"), train).unwrap();
    std::fs::write(dir.join("splits/index_test_0.txt"), test).unwrap();
    dir
}

/// `name` in the scratch directory of the data folder `dir` (beside it, not inside it).
fn out_path(dir: &std::path::Path, name: impl AsRef<std::path::Path>) -> PathBuf {
    dir.parent().unwrap().join(name)
}

fn spec(dir: PathBuf, backend: &str, likelihood: &str) -> ClassExperimentSpec {
    ClassExperimentSpec {
        dir,
        num_classes: None,
        backend: find_backend(backend).unwrap().backend,
        likelihood: likelihood.into(),
        common: CommonSettings {
            preset: "default".into(),
            layers: 1,
            num_inducing: 10,
            hidden_width: None,
            train_samples: 1,
            predict_samples: 5,
            seed: 0,
            tune: false,
            learning_rate: Some(0.02),
            lr_schedule: None,
        },
        settings: Settings::new(),
        fit: FitConfig {
            steps: 200,
            ..Default::default()
        },
        predict: PredictConfig {
            samples: 5,
            seed: 1,
        },
        splits: vec![0],
    }
}

#[test]
fn svi_classifies_a_small_binary_folder() {
    let dir = write_folder(2);
    for lik in ["probit", "logit"] {
        let records = run_classification(&spec(dir.clone(), "svi", lik)).unwrap();
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!((r.num_classes, r.n_train, r.n_test), (2, 60, 30));
        assert!(r.metrics.error_rate <= 0.1, "{lik}: {r:?}");
        assert!(
            r.metrics.log_loss.is_finite() && r.metrics.log_loss < 0.5,
            "{lik}: {r:?}"
        );
        assert!(r.metrics.auc.unwrap() > 0.95, "{lik}: {r:?}");
        assert!(r.metrics.ece >= 0.0 && r.metrics.brier >= 0.0);
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

#[test]
fn bad_classification_requests_are_usage_errors() {
    let dir = write_folder(3);
    assert!(matches!(
        run_classification(&spec(dir.clone(), "svi", "logit")),
        Err(BenchError::Usage(_))
    ));
    assert!(matches!(
        likelihood_by_name(Some("tanh"), 2),
        Err(BenchError::Usage(_))
    ));
    // nested declares only Gaussian likelihoods.
    assert!(matches!(
        run_classification(&spec(dir.clone(), "nested", "robust-max")),
        Err(BenchError::Usage(_))
    ));
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

/// `dgp-bench run --likelihood robust-max` on a three-class folder: per-split records with
/// the classification metrics, `dgp-bench table` prints them, and the report has a
/// reliability diagram with 15 bins.
#[test]
fn the_command_line_runs_classification_and_tables_it() {
    let dir = write_folder(3);
    let out = out_path(&dir, "out");
    let json = out_path(&dir, "records.jsonl");
    let bench = env!("CARGO_BIN_EXE_dgp-bench");
    let o = std::process::Command::new(bench)
        .args([
            "run",
            "--data",
            dir.to_str().unwrap(),
            "--likelihood",
            "robust-max",
        ])
        .args([
            "--layers",
            "1,2",
            "--steps",
            "150",
            "--inducing",
            "10",
            "--samples",
            "5",
        ])
        .args(["--lr", "0.02", "--quiet", "--json", json.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for (r, layers) in lines.iter().zip([1, 2]) {
        assert_eq!(r["task"], "classification");
        assert_eq!(r["layers"], layers);
        assert_eq!(r["likelihood"]["kind"], "robust_max");
        assert_eq!(r["num_classes"], 3);
        let m = &r["metrics"];
        assert!(m["error_rate"].as_f64().unwrap() <= 0.2, "{r}");
        for k in ["log_loss", "brier", "ece"] {
            assert!(m[k].as_f64().unwrap().is_finite(), "{k}: {r}");
        }
        assert!(m["auc"].is_null(), "no AUC for three classes");
        assert_eq!(r["reliability"].as_array().unwrap().len(), 15);
        let n: u64 = r["reliability"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(n, 30);
    }
    let t = std::process::Command::new(bench)
        .args(["table", json.to_str().unwrap()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&t.stdout);
    assert!(t.status.success());
    assert!(
        table.contains("| error | NLL (log loss) | Brier | ECE | AUC |"),
        "{table}"
    );
    assert!(
        table.contains("| robust-max |") && table.contains("| DGP2 |"),
        "{table}"
    );
    let svg = std::fs::read_to_string(out.join("reliability_dgp-bench-class-3.svg"))
        .or_else(|_| {
            let f = std::fs::read_dir(&out)
                .unwrap()
                .filter_map(|e| e.ok())
                .find(|e| e.file_name().to_string_lossy().starts_with("reliability_"))
                .expect("a reliability SVG");
            std::fs::read_to_string(f.path())
        })
        .unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    // Two panels (SGP, DGP2) of 15 bins each.
    assert_eq!(svg.matches("class=\"accuracy\"").count(), 30);
    assert_eq!(svg.matches("data-bins=\"15\"").count(), 2);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("reliability_") && report.contains("| svi | SGP | robust-max |"));
    // `dgp-bench results` renders classification records kept under FOLDER/records/.
    let results = out_path(&dir, "results");
    std::fs::create_dir_all(results.join("cls/records")).unwrap();
    std::fs::write(
        results.join("INDEX.md"),
        "| folder | status | question |\n|---|---|---|\n| cls | current | Classifiers? |\n",
    )
    .unwrap();
    std::fs::copy(&json, results.join("cls/records/blobs.jsonl")).unwrap();
    let docs = dgp_bench::results::render_all(&results).unwrap();
    assert_eq!(docs.tables[0].0, "cls");
    let doc = &docs.tables[0].1;
    assert!(doc.contains("## cls: classification records"), "{doc}");
    assert!(doc.contains("`results/cls/records/blobs.jsonl`"), "{doc}");
    assert!(
        doc.contains("--json results/cls/records/blobs.jsonl"),
        "the command names the record file where it is now: {doc}"
    );
    assert!(doc.contains("| svi | DGP2 | robust-max | 1 |"), "{doc}");
    assert!(doc.contains("Per split:"), "{doc}");
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

/// `--set likelihood.kind=robust_max` alone makes a classification run whose K comes
/// from the data; a stated K that disagrees, or a binary kind on three classes, is a
/// usage error before training.
#[test]
fn a_likelihood_setting_alone_runs_classification() {
    let dir = write_folder(3);
    let json = out_path(&dir, "records.jsonl");
    let bench = env!("CARGO_BIN_EXE_dgp-bench");
    let run = |extra: &[&str]| {
        std::process::Command::new(bench)
            .args(["run", "--data", dir.to_str().unwrap(), "--layers", "1"])
            .args([
                "--steps",
                "20",
                "--inducing",
                "6",
                "--samples",
                "2",
                "--quiet",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&[
        "--set",
        "likelihood.kind=robust_max",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&json)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(r["task"], "classification");
    assert_eq!(r["likelihood"]["kind"], "robust_max");
    assert_eq!(r["likelihood"]["num_classes"], 3);
    for bad in [
        vec![
            "--set",
            "likelihood.kind=robust_max",
            "--set",
            "likelihood.num_classes=5",
        ],
        vec!["--set", "likelihood.kind=bernoulli_probit"],
        vec![
            "--set",
            "likelihood.kind=softmax",
            "--likelihood",
            "softmax",
        ],
    ] {
        let o = run(&bad);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{bad:?} should fail");
        assert!(err.contains("likelihood"), "{bad:?}: {err}");
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

/// The structured, sghmc and dspp backends run classification from the command line.
#[test]
fn structured_sghmc_and_dspp_classify_from_the_command_line() {
    let dir = write_folder(3);
    let json = out_path(&dir, "records.jsonl");
    let bench = env!("CARGO_BIN_EXE_dgp-bench");
    let o = std::process::Command::new(bench)
        .args([
            "run",
            "--data",
            dir.to_str().unwrap(),
            "--likelihood",
            "robust-max",
        ])
        .args(["--backend", "star,mf,sghmc,dspp", "--layers", "2"])
        .args([
            "--steps",
            "40",
            "--inducing",
            "6",
            "--samples",
            "3",
            "--quiet",
        ])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let backends: Vec<String> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(
                r["metrics"]["log_loss"].as_f64().unwrap().is_finite(),
                "{r}"
            );
            r["backend"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(backends, ["star", "mf", "sghmc", "dspp"]);
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

/// Held-out early stopping of a classification model scores the held-out rows by the log
/// loss of their labels: the best score the rule reports is the log loss of the restored
/// model's class probabilities on the held-out rows (same rows, samples and seed).
#[test]
fn held_out_early_stopping_scores_classification_by_log_loss() {
    use dgp_bench::classification::build_model;
    use dgp_data::uci::ClassDataset;
    use dgp_data::{Dataset, Standardizer};
    use dgp_traits::classification::{ClassProbs, class_labels, log_loss};
    use dgp_traits::fit::FitHooks;
    use dgp_traits::train::{EarlyStopping, HeldOutRule, HeldOutSplit, SCORE_SEED_OFFSET};
    let dir = write_folder(3);
    let split = ClassDataset::load(&dir, None).unwrap().split(0).unwrap();
    let st = Standardizer::fit(&split.train);
    let train = Dataset::new(
        st.transform_x(split.train.x()).unwrap(),
        split.train.y().to_owned(),
    )
    .unwrap();
    let rule = HeldOutRule::Patience(EarlyStopping {
        every: 10,
        patience: 3,
        ..Default::default()
    });
    let mut s = spec(dir.clone(), "svi", "robust-max");
    s.fit.steps = 120;
    s.fit.early_stopping = Some(rule.clone());
    let lik = likelihood_by_name(Some("robust-max"), 3).unwrap();
    let mut model = build_model(&s, &lik, &train).unwrap();
    let report = model.fit(&train, &s.fit, &mut FitHooks::none()).unwrap();
    let best = report.held_out.unwrap().best_heldout_nll.unwrap();
    let split = HeldOutSplit::draw(&rule, train.n(), s.fit.seed)
        .unwrap()
        .unwrap();
    let hold = train.select_rows(split.held()).unwrap();
    let pred = model
        .predict(
            hold.x(),
            &PredictConfig {
                samples: rule.score_samples(),
                seed: s.fit.seed.wrapping_add(SCORE_SEED_OFFSET),
            },
        )
        .unwrap();
    let probs = ClassProbs::from_predictive(&pred).unwrap();
    let want = log_loss(&probs, &class_labels(hold.y(), 3).unwrap()).unwrap();
    assert!(
        (best - want).abs() < 1e-12,
        "best {best} vs log loss {want}"
    );
    assert!(best > 0.0 && best < 3f64.ln(), "{best}");
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

/// The same classification run at 1 and at 2 threads gives the same records to the last
/// digit (metrics, reliability bins, final objective).
#[test]
fn classification_runs_are_identical_at_one_and_two_threads() {
    let dir = write_folder(3);
    let run = |threads: &str| -> Vec<serde_json::Value> {
        let json = out_path(&dir, format!("t{threads}.jsonl"));
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
            .args([
                "run",
                "--data",
                dir.to_str().unwrap(),
                "--likelihood",
                "softmax",
            ])
            .args([
                "--layers",
                "2",
                "--steps",
                "40",
                "--inducing",
                "8",
                "--samples",
                "4",
            ])
            .args(["--quiet", "--json", json.to_str().unwrap()])
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(&json)
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                let m = v.as_object_mut().unwrap();
                for k in ["train_seconds", "predict_seconds", "command"] {
                    m.remove(k);
                }
                v
            })
            .collect()
    };
    let one = run("1");
    assert_eq!(one.len(), 1);
    assert_eq!(one, run("2"));
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}

/// `time` times a classification model: a likelihood setting alone (K from the data)
/// keeps the labels as labels (a standardised target would be refused as non-integer),
/// the model trains K latent GPs, and a stated K that disagrees is refused.
#[test]
fn time_runs_a_classification_likelihood_with_k_from_the_data() {
    let dir = write_folder(3);
    let json = out_path(&dir, "time.json");
    let bench = env!("CARGO_BIN_EXE_dgp-bench");
    let time = |extra: &[&str]| {
        std::process::Command::new(bench)
            .args(["time", "--data", dir.to_str().unwrap(), "--backend", "svi"])
            .args(["--layers", "1", "--inducing", "6", "--batch", "30"])
            .args(["--warmup", "1", "--steps", "2", "--block", "1"])
            .args(["--predict-reps", "1"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = time(&[
        "--set",
        "likelihood.kind=robust_max",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["backends"].as_array().unwrap().len(), 1);
    let o = time(&[
        "--set",
        "likelihood.kind=robust_max",
        "--set",
        "likelihood.num_classes=5",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("num_classes"), "{err}");
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
}
