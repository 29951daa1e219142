//! End-to-end tests of `dgp-bench stream`: training from a memory-mapped row store equals
//! training on the same rows in memory (same seed: the same records, bit for bit, and the
//! same prediction file, as CSV and as Parquet with the predictive mixture), and backends
//! that need rows in memory are refused up front.

use std::path::PathBuf;
use std::process::{Command, Output};

use dgp_data::rowstore::write_dataset;
use dgp_data::synth::synth_dataset;

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("dgp-stream-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn path(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
    fn arg(&self, p: &str) -> String {
        self.path(p).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run dgp-bench")
}

/// Synthetic train (1500 rows) and test (300 rows, another seed) row stores.
fn write_files(s: &Scratch) {
    write_dataset(&s.path("train.rows"), &synth_dataset(1500, 1).unwrap(), &[]).unwrap();
    write_dataset(&s.path("test.rows"), &synth_dataset(300, 2).unwrap(), &[]).unwrap();
}

/// The columns of a Parquet file by name, in schema order, and its number of row groups.
fn parquet_columns(path: &PathBuf) -> (Vec<(String, Vec<f64>)>, usize) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float64Type;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let groups = builder.metadata().num_row_groups();
    let schema = builder.schema().clone();
    let mut cols: Vec<(String, Vec<f64>)> = schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), Vec::new()))
        .collect();
    for batch in builder.build().unwrap() {
        let batch = batch.unwrap();
        for (j, (_, v)) in cols.iter_mut().enumerate() {
            v.extend(
                batch
                    .column(j)
                    .as_primitive::<Float64Type>()
                    .values()
                    .iter(),
            );
        }
    }
    (cols, groups)
}

fn column<'a>(cols: &'a [(String, Vec<f64>)], name: &str) -> &'a [f64] {
    &cols.iter().find(|(n, _)| n == name).unwrap().1
}

/// The CSV prediction file as columns `mean,variance,log_density,y`.
fn csv_columns(text: &str) -> [Vec<f64>; 4] {
    let mut cols: [Vec<f64>; 4] = Default::default();
    for line in text.lines().skip(1) {
        for (c, v) in cols.iter_mut().zip(line.split(',')) {
            c.push(v.parse().unwrap());
        }
    }
    cols
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(f64::MIN_POSITIVE)
}

/// The Parquet predictions of the streamed and in-memory runs are equal value for value,
/// equal the CSV's, and their mixture columns (`components` of them) give the mean and the
/// variance (law of total variance) to 1e-12 relative.
fn check_parquet(s: &Scratch, backend: &str, components: usize) {
    let (pf, groups) = parquet_columns(&s.path("file.parquet"));
    let (pm, _) = parquet_columns(&s.path("mem.parquet"));
    assert_eq!(
        groups, 3,
        "{backend}: one row group per prediction chunk of 128 rows"
    );
    let names: Vec<&str> = pf.iter().map(|(n, _)| n.as_str()).collect();
    let mut expected: Vec<String> = ["mean", "variance", "log_density", "y"]
        .iter()
        .map(|n| n.to_string())
        .collect();
    for k in 0..components {
        expected.extend([
            format!("weight_{k}"),
            format!("mean_{k}"),
            format!("variance_{k}"),
        ]);
    }
    assert_eq!(names, expected, "{backend}: Parquet schema");
    assert_eq!(pf, pm, "{backend}: Parquet prediction files differ");
    let csv = csv_columns(&std::fs::read_to_string(s.path("file.csv")).unwrap());
    for (j, name) in ["mean", "variance", "log_density", "y"].iter().enumerate() {
        assert_eq!(
            column(&pf, name),
            &csv[j][..],
            "{backend}: {name} differs from the CSV"
        );
    }
    let (mean, var) = (column(&pf, "mean"), column(&pf, "variance"));
    assert_eq!(mean.len(), 300);
    let comp = |what: &str, k: usize| column(&pf, &format!("{what}_{k}"));
    let weight_sum: f64 = (0..components).map(|k| comp("weight", k)[0]).sum();
    assert!(
        close(weight_sum, 1.0, 1e-12),
        "{backend}: weights sum to {weight_sum}"
    );
    for i in 0..mean.len() {
        let m: f64 = (0..components)
            .map(|k| comp("weight", k)[i] * comp("mean", k)[i])
            .sum();
        assert!(
            close(m, mean[i], 1e-12),
            "{backend}: row {i}: Σ w mean_k = {m}, mean {}",
            mean[i]
        );
        let v: f64 = (0..components)
            .map(|k| {
                let d = comp("mean", k)[i] - mean[i];
                comp("weight", k)[i] * (comp("variance", k)[i] + d * d)
            })
            .sum();
        assert!(
            close(v, var[i], 1e-12),
            "{backend}: row {i}: total variance {v}, variance {}",
            var[i]
        );
        assert!((0..components).all(|k| comp("variance", k)[i] > 0.0));
    }
}

fn record(path: &PathBuf) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// `stream` of `backend` with `layers` layers from the row store and with `--in-memory`:
/// the same records (model, steps, metrics) and the same prediction file.
/// With `components = Some(S)` both runs are repeated writing Parquet, checked by
/// [`check_parquet`] against an S-component mixture.
fn streamed_equals_in_memory(
    backend: &str,
    layers: &str,
    steps: &str,
    tag: &str,
    components: Option<usize>,
) {
    streamed_equals_in_memory_with(backend, layers, steps, tag, components, &[]);
}

/// [`streamed_equals_in_memory`] with `extra` arguments to both runs; returns the
/// streamed run's record.
fn streamed_equals_in_memory_with(
    backend: &str,
    layers: &str,
    steps: &str,
    tag: &str,
    components: Option<usize>,
    extra: &[&str],
) -> serde_json::Value {
    let s = Scratch::new(tag);
    write_files(&s);
    let common = |json: &str, preds: &str| -> Vec<String> {
        [
            "stream",
            "--train",
            &s.arg("train.rows"),
            "--test",
            &s.arg("test.rows"),
            "--backend",
            backend,
            "--layers",
            layers,
            "--inducing",
            "8",
            "--batch",
            "700",
            "--steps",
            steps,
            "--samples",
            "3",
            "--init-rows",
            "400",
            "--predict-chunk",
            "128",
            "--synth",
            "--quiet",
            "--json",
            &s.arg(json),
            "--predictions",
            &s.arg(preds),
        ]
        .iter()
        .chain(extra)
        .map(|a| a.to_string())
        .collect()
    };
    let file_args = common("file.jsonl", "file.csv");
    let out = bench(&file_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "{backend}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut mem_args = common("mem.jsonl", "mem.csv");
    mem_args.push("--in-memory".into());
    let out = bench(&mem_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "{backend}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (f, m) = (record(&s.path("file.jsonl")), record(&s.path("mem.jsonl")));
    assert_eq!(f["rows_from"], "file");
    assert_eq!(m["rows_from"], "memory");
    for key in [
        "nll",
        "rmse",
        "steps",
        "n_train",
        "n_test",
        "bayes_nll",
        "model",
        "early_stopping",
        "held_out",
    ] {
        assert_eq!(
            f[key], m[key],
            "{backend}: {key} differs between file and memory"
        );
    }
    assert!(f["nll"].as_f64().unwrap().is_finite());
    assert!(f["bayes_nll"].as_f64().unwrap() < f["nll"].as_f64().unwrap());
    let (pf, pm) = (
        std::fs::read_to_string(s.path("file.csv")).unwrap(),
        std::fs::read_to_string(s.path("mem.csv")).unwrap(),
    );
    assert_eq!(pf.lines().count(), 301, "header and one line per test row");
    assert_eq!(pf, pm, "{backend}: prediction files differ");
    if let Some(c) = components {
        for (json, preds, memory) in [
            ("file-pq.jsonl", "file.parquet", false),
            ("mem-pq.jsonl", "mem.parquet", true),
        ] {
            let mut args = common(json, preds);
            if memory {
                args.push("--in-memory".into());
            }
            let out = bench(&args.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(
                out.status.success(),
                "{backend}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!s.path(&format!("{preds}.tmp")).exists());
        }
        check_parquet(&s, backend, c);
    }
    f
}

#[test]
fn streamed_run_equals_the_in_memory_run() {
    streamed_equals_in_memory("svi", "2", "15", "equal", Some(3));
}

/// dspp holds validation rows out for its early stopping: from the file they are read
/// into memory and the training rows stay a view of the file (the in-memory split).
#[test]
fn streamed_dspp_and_ppgpr_equal_the_in_memory_runs() {
    streamed_equals_in_memory("dspp", "2", "15", "equal-dspp", Some(3));
    streamed_equals_in_memory("ppgpr", "1", "15", "equal-ppgpr", None);
}

/// Held-out early stopping from a file: the held-out rows are drawn from the row count
/// and the seed, read into memory, and the others trained on through a view of the file,
/// so both rules give the in-memory run's scores, stopping step and model bit for bit.
#[test]
fn streamed_early_stopping_equals_the_in_memory_run() {
    let f = streamed_equals_in_memory_with(
        "svi",
        "2",
        "80",
        "equal-es-patience",
        None,
        &[
            "--early-stopping",
            r#"{"patience": {"every": 4, "patience": 2}}"#,
        ],
    );
    let h = &f["held_out"];
    // ⌊1500 · 2/17⌋ rows held out, 1 318 trained on.
    assert_eq!(h["heldout_rows"], 176, "{h}");
    assert!(h["scores"].as_array().unwrap().len() >= 3, "{h}");
    assert!(h["best_heldout_nll"].as_f64().unwrap().is_finite(), "{h}");
    let f = streamed_equals_in_memory_with(
        "star",
        "2",
        "60",
        "equal-es-lindinger",
        None,
        &[
            "--early-stopping",
            r#"{"lindinger": {"every": 3, "window": 2, "lag": 3, "checks": 1, "min_steps": 9}}"#,
        ],
    );
    let h = &f["held_out"];
    assert!(h["heldout_rows"].as_u64().unwrap() > 100, "{h}");
    assert!(
        f["steps"].as_u64().unwrap() < 60,
        "the rule stopped the run: {h}"
    );
    assert!(h["scores"].as_array().unwrap().len() >= 3, "{h}");
}

#[test]
fn an_unknown_early_stopping_rule_a_backend_without_it_or_a_class_likelihood_is_refused() {
    let s = Scratch::new("es-refuse");
    write_files(&s);
    for (backend, rule) in [
        ("svi", "sometimes"),
        ("svi", r#"{"patience": {"fraction": 1.5}}"#),
        ("sghmc", "patience"),
    ] {
        let out = bench(&[
            "stream",
            "--train",
            &s.arg("train.rows"),
            "--test",
            &s.arg("test.rows"),
            "--backend",
            backend,
            "--early-stopping",
            rule,
            "--quiet",
        ]);
        assert_eq!(out.status.code(), Some(2), "{backend} {rule}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("early-stopping") || err.contains("early stopping"),
            "{err}"
        );
    }
    // A classification likelihood on a regression target: refused before training, the
    // first non-integer row of the training file named.
    let out = bench(&[
        "stream",
        "--train",
        &s.arg("train.rows"),
        "--test",
        &s.arg("test.rows"),
        "--set",
        "likelihood.kind=robust_max",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("regression target") && err.contains("row 0") && err.contains("train.rows"),
        "{err}"
    );
}

/// Synthetic classification train (1500 rows) and test (300 rows, another seed) row
/// stores: `dgp-bench synth --task classification`'s labels 1[y > 0].
fn write_class_files(s: &Scratch) {
    for (name, rows, seed) in [("ctrain.rows", 1500, 1), ("ctest.rows", 300, 2)] {
        dgp_data::synth::write_synth_task(
            &s.path(name),
            rows,
            seed,
            dgp_data::synth::SynthTask::Classification,
            |_| {},
        )
        .unwrap();
    }
}

/// A row store of 2 inputs and the given labels.
fn write_labels(s: &Scratch, name: &str, labels: &[f64]) {
    let n = labels.len();
    let data = dgp_data::Dataset::new(
        faer::Mat::from_fn(n, 2, |i, j| ((i * 7 + j * 3) % 11) as f64),
        faer::Mat::from_fn(n, 1, |i, _| labels[i]),
    )
    .unwrap();
    write_dataset(&s.path(name), &data, &[]).unwrap();
}

/// A classification stream from the row store equals the `--in-memory` run: the same
/// model, steps and metrics, bit for bit; the record carries K, the likelihood, the
/// class counts, the metrics of `run` and the Bayes-optimal error and log loss.
#[test]
fn a_classification_stream_equals_the_in_memory_run() {
    let s = Scratch::new("class-equal");
    write_class_files(&s);
    for (layers, lik) in [("2", "probit"), ("1", "logit")] {
        let args = |json: &str| -> Vec<String> {
            [
                "stream",
                "--train",
                &s.arg("ctrain.rows"),
                "--test",
                &s.arg("ctest.rows"),
                "--backend",
                "svi",
                "--layers",
                layers,
                "--likelihood",
                lik,
                "--inducing",
                "8",
                "--batch",
                "700",
                "--steps",
                "40",
                "--samples",
                "3",
                "--init-rows",
                "400",
                "--predict-chunk",
                "128",
                "--synth",
                "--quiet",
                "--json",
                &s.arg(json),
            ]
            .iter()
            .map(|a| a.to_string())
            .collect()
        };
        let file = format!("file-{layers}.jsonl");
        let mem = format!("mem-{layers}.jsonl");
        let out = bench(&args(&file).iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut m = args(&mem);
        m.push("--in-memory".into());
        let out = bench(&m.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (f, m) = (record(&s.path(&file)), record(&s.path(&mem)));
        for key in [
            "nll",
            "steps",
            "model",
            "classification",
            "n_train",
            "n_test",
        ] {
            assert_eq!(
                f[key], m[key],
                "L{layers}: {key} differs between file and memory"
            );
        }
        let c = &f["classification"];
        assert_eq!(c["num_classes"], 2);
        assert_eq!(
            c["likelihood"]["kind"],
            if lik == "probit" {
                "bernoulli_probit"
            } else {
                "bernoulli_logit"
            }
        );
        let counts: Vec<u64> = c["train_class_counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 1500);
        let metrics = &c["metrics"];
        assert_eq!(f["nll"], metrics["log_loss"]);
        assert!(f.get("rmse").is_none(), "no RMSE for classification");
        let err = metrics["error_rate"].as_f64().unwrap();
        let auc = metrics["auc"].as_f64().unwrap();
        let bayes = c["bayes_error"].as_f64().unwrap();
        assert!(err < 0.4 && auc > 0.6 && bayes < err, "{c}");
        assert!(c["bayes_log_loss"].as_f64().unwrap() < f["nll"].as_f64().unwrap());
        let bins = c["reliability"].as_array().unwrap();
        assert_eq!(bins.len(), 15);
        assert_eq!(
            bins.iter()
                .map(|b| b["count"].as_u64().unwrap())
                .sum::<u64>(),
            300
        );
    }
}

/// Every label error of a classification stream is a data error (exit 2) before any
/// training, naming the file and the row: a non-integer (a regression target), a
/// negative label, a label ≥ K in the test file, a class missing from the training file,
/// K = 1 found or given; and a likelihood that does not suit K, a Gaussian-only backend,
/// or per-row predictions, are usage errors.
#[test]
fn bad_labels_of_a_classification_stream_are_refused_before_training() {
    let s = Scratch::new("class-bad");
    let ok: Vec<f64> = (0..40).map(|i| (i % 3) as f64).collect();
    write_labels(&s, "ok.rows", &ok);
    let mut frac = ok.clone();
    frac[17] = 1.5;
    write_labels(&s, "frac.rows", &frac);
    let mut neg = ok.clone();
    neg[5] = -1.0;
    write_labels(&s, "neg.rows", &neg);
    let mut big = ok.clone();
    big[23] = 3.0;
    write_labels(&s, "big.rows", &big);
    let missing: Vec<f64> = (0..40)
        .map(|i| if i % 2 == 0 { 0.0 } else { 2.0 })
        .collect();
    write_labels(&s, "missing.rows", &missing);
    write_labels(&s, "one.rows", &[0.0; 40]);
    let cases: [(&str, &str, &[&str], &[&str]); 10] = [
        (
            "frac.rows",
            "ok.rows",
            &[],
            &["frac.rows", "row 17", "not an integer", "regression target"],
        ),
        ("neg.rows", "ok.rows", &[], &["neg.rows", "row 5"]),
        (
            "ok.rows",
            "big.rows",
            &[],
            &["test file", "big.rows", "row 23", "0..3"],
        ),
        ("ok.rows", "frac.rows", &[], &["test file", "row 17"]),
        (
            "missing.rows",
            "ok.rows",
            &[],
            &["missing.rows", "class 1 of 0..3"],
        ),
        (
            "ok.rows",
            "ok.rows",
            &["--classes", "4"],
            &["class 3 of 0..4"],
        ),
        (
            "one.rows",
            "ok.rows",
            &[],
            &["one.rows", "at least 2 classes, got 1"],
        ),
        (
            "ok.rows",
            "ok.rows",
            &["--classes", "1"],
            &["at least 2 classes, got 1"],
        ),
        (
            "ok.rows",
            "ok.rows",
            &["--likelihood", "probit"],
            &["binary", "3 classes"],
        ),
        // A backend whose algebra is Gaussian-only.
        (
            "ok.rows",
            "ok.rows",
            &["--backend", "nested"],
            &["nested", "does not train"],
        ),
    ];
    for (train, test, extra, want) in cases {
        let mut args = vec![
            "stream",
            "--train",
            &s.arg(train),
            "--test",
            &s.arg(test),
            "--task",
            "classification",
            "--steps",
            "5",
            "--quiet",
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        args.extend(extra.iter().map(|a| a.to_string()));
        let out = bench(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{train} {test} {extra:?}: {err}"
        );
        for w in want {
            assert!(
                err.contains(w),
                "{train} {test} {extra:?}: want {w:?} in {err}"
            );
        }
        assert!(!err.contains("panicked"), "{err}");
    }
    // Per-row predictions, and --classes without a classification task.
    for extra in [
        &["--task", "classification", "--predictions", &s.arg("p.csv")][..],
        &["--classes", "3"][..],
    ] {
        let mut args = vec![
            "stream",
            "--train",
            &s.arg("ok.rows"),
            "--test",
            &s.arg("ok.rows"),
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        args.extend(extra.iter().map(|a| a.to_string()));
        let out = bench(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(!s.path("p.csv").exists());
    }
}

#[test]
fn streamed_sghmc_equals_the_in_memory_run() {
    streamed_equals_in_memory("sghmc", "2", "30", "equal-sghmc", None);
}

#[test]
fn backends_that_need_rows_in_memory_are_refused_before_training() {
    let s = Scratch::new("refuse");
    write_files(&s);
    let out = bench(&[
        "stream",
        "--train",
        &s.arg("train.rows"),
        "--test",
        &s.arg("test.rows"),
        "--backend",
        "dgps",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in memory only") && err.contains("svi"),
        "{err}"
    );
    let out = bench(&[
        "stream",
        "--train",
        &s.arg("train.rows"),
        "--test",
        &s.arg("test.rows"),
        "--json",
        &s.arg("train.rows"),
        "--quiet",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an output naming an input is refused"
    );
    let out = bench(&[
        "stream",
        "--train",
        &s.arg("train.rows"),
        "--test",
        &s.arg("test.rows"),
        "--predictions",
        &s.arg("test.rows"),
        "--quiet",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a prediction file naming an input is refused"
    );
}

/// The arguments of a checkpointed `stream` run of svi (3 000 steps of about a
/// millisecond) writing `json` and `preds`, with `extra` (a classification stream, with
/// `--task classification` in `extra`, reads the class files of [`write_class_files`] and
/// writes no predictions).
fn resumable_args(s: &Scratch, json: &str, preds: &str, extra: &[&str]) -> Vec<String> {
    let class = extra.contains(&"classification");
    let (train, test) = if class {
        ("ctrain.rows", "ctest.rows")
    } else {
        ("train.rows", "test.rows")
    };
    [
        "stream",
        "--train",
        &s.arg(train),
        "--test",
        &s.arg(test),
        "--backend",
        "svi",
        "--inducing",
        "8",
        "--batch",
        "700",
        "--steps",
        "3000",
        "--samples",
        "3",
        "--init-rows",
        "400",
        "--predict-chunk",
        "128",
        "--quiet",
        "--json",
        &s.arg(json),
    ]
    .iter()
    .map(|a| a.to_string())
    .chain(
        (!class)
            .then(|| ["--predictions".to_string(), s.arg(preds)])
            .into_iter()
            .flatten(),
    )
    .chain(extra.iter().map(|a| a.to_string()))
    .collect()
}

/// Waits until the checkpoint `file` holds a state of at least `min_steps` steps.
fn wait_for_state(file: &std::path::Path, min_steps: u64, child: &mut std::process::Child) {
    let t0 = std::time::Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && v["state"]["steps_done"].as_u64().unwrap_or(0) >= min_steps
        {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "run ended first");
        assert!(t0.elapsed().as_secs() < 120, "no checkpoint");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A streamed run stopped by `signal` after its 200-step checkpoint (SIGINT: it saves
/// the state of the step it stops at and exits 130 without a record; SIGKILL: the last
/// periodic state survives), then resumed with `--resume`, ends with the record and the
/// prediction file of the run that was never interrupted, bit for bit.
fn stream_interrupted_then_resumed(signal: &str) {
    stream_interrupted_then_resumed_with(signal, &[]);
}

/// [`stream_interrupted_then_resumed`] with `task` arguments (`--task classification`:
/// the classification counterpart, compared by its record).
fn stream_interrupted_then_resumed_with(signal: &str, task: &[&str]) {
    let class = !task.is_empty();
    let s = Scratch::new(&format!("resume{signal}{}", task.len()));
    write_files(&s);
    write_class_files(&s);
    let with = |extra: &[&str]| -> Vec<String> {
        task.iter().chain(extra).map(|a| a.to_string()).collect()
    };
    let out = bench(
        &resumable_args(&s, "ref.jsonl", "ref.csv", &[task].concat())
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ck = s.arg("ck");
    let argv = resumable_args(
        &s,
        "run.jsonl",
        "run.csv",
        &with(&["--checkpoint", &ck, "--checkpoint-every", "100"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(&argv)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_state(&s.path("ck/stream-svi-L2.json"), 200, &mut child);
    let killed = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if signal == "-INT" {
        assert_eq!(o.status.code(), Some(130), "{err}");
        assert!(
            err.contains("--resume") && !err.contains("panicked"),
            "{err}"
        );
    }
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path("ck/stream-svi-L2.json")).unwrap())
            .unwrap();
    let done = state["state"]["steps_done"].as_u64().unwrap();
    assert!(
        (200..3000).contains(&done),
        "{signal}: saved after {done} steps"
    );
    assert!(
        !s.path("run.jsonl").exists(),
        "no record of an unfinished run"
    );
    assert!(!s.path("run.csv").exists() && !s.path("run.csv.tmp").exists());
    let resumed = resumable_args(
        &s,
        "run.jsonl",
        "run.csv",
        &with(&["--resume", &ck, "--checkpoint-every", "100"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let out = bench(&resumed.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("resuming from step {done}")),
        "{signal}: {err}"
    );
    let (r, f) = (record(&s.path("ref.jsonl")), record(&s.path("run.jsonl")));
    for key in ["nll", "rmse", "steps", "model", "n_train", "classification"] {
        assert_eq!(r[key], f[key], "{signal}: {key} differs after the resume");
    }
    assert_eq!(class, r["classification"].is_object());
    if class {
        return;
    }
    assert_eq!(
        std::fs::read_to_string(s.path("ref.csv")).unwrap(),
        std::fs::read_to_string(s.path("run.csv")).unwrap(),
        "{signal}: predictions differ after the resume"
    );
}

#[test]
fn streamed_run_interrupted_by_sigint_and_resumed_equals_the_uninterrupted_one() {
    stream_interrupted_then_resumed("-INT");
}

#[test]
fn streamed_run_killed_and_resumed_equals_the_uninterrupted_one() {
    stream_interrupted_then_resumed("-KILL");
}

#[test]
fn classification_stream_interrupted_by_sigint_and_resumed_equals_the_uninterrupted_one() {
    stream_interrupted_then_resumed_with("-INT", &["--task", "classification"]);
}

#[test]
fn classification_stream_killed_and_resumed_equals_the_uninterrupted_one() {
    stream_interrupted_then_resumed_with("-KILL", &["--task", "classification"]);
}

/// `--checkpoint` refuses what cannot resume exactly (a backend that does not declare it,
/// held-out early stopping) and a saved state it would overwrite; `--resume` refuses a
/// state written with other settings — each before any training, exit 2.
#[test]
fn stream_checkpoints_refuse_what_cannot_resume_exactly() {
    let s = Scratch::new("ck-refuse");
    write_files(&s);
    let ck = s.arg("ck");
    let short = |extra: &[&str]| -> Output {
        let (train, test) = (s.arg("train.rows"), s.arg("test.rows"));
        let mut argv: Vec<&str> = vec![
            "stream",
            "--train",
            &train,
            "--test",
            &test,
            "--inducing",
            "8",
            "--steps",
            "20",
            "--init-rows",
            "400",
            "--quiet",
        ];
        argv.extend(extra);
        bench(&argv)
    };
    for (extra, expect) in [
        (
            vec!["--backend", "sghmc", "--checkpoint", &ck],
            "cannot resume",
        ),
        (
            vec!["--early-stopping", "patience", "--checkpoint", &ck],
            "early stopping",
        ),
        (vec!["--resume", &ck], "no such checkpoint directory"),
    ] {
        let out = short(&extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(expect), "{extra:?}: {err}");
    }
    let out = short(&["--checkpoint", &ck]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (extra, expect) in [
        (vec!["--checkpoint", &ck], "would overwrite"),
        (vec!["--resume", &ck, "--seed", "4"], "other settings"),
    ] {
        let out = short(&extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(expect), "{extra:?}: {err}");
    }
}
