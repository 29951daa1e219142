//! End-to-end tests of the `dgp-bench` binary on tiny data (a UCI folder and CSV files in
//! a scratch directory) with tiny models (M = 5, 20 steps).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dgp_bench::report::read_json_lines;

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("dgp-bench-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn path(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 40 rows: two features on a grid, target a smooth function of them (column 2).
fn rows() -> Vec<[f64; 3]> {
    (0..40)
        .map(|i| {
            let a = (i % 8) as f64 / 4.0 - 1.0;
            let b = (i / 8) as f64 / 2.0 - 1.0;
            [
                a,
                b,
                (2.0 * a).sin() + 0.5 * b + 0.01 * ((i * 7919) % 13) as f64,
            ]
        })
        .collect()
}

fn write_uci(dir: &Path) {
    std::fs::create_dir_all(dir.join("splits")).unwrap();
    let data: String = rows()
        .iter()
        .map(|r| format!("{} {} {}\n", r[0], r[1], r[2]))
        .collect();
    std::fs::write(dir.join("data.txt"), data).unwrap();
    std::fs::write(dir.join("index_features.txt"), "0\n1\n").unwrap();
    std::fs::write(dir.join("index_target.txt"), "2\n").unwrap();
    std::fs::write(dir.join("n_splits.txt"), "2\n").unwrap();
    for k in 0..2usize {
        let test: Vec<usize> = (0..40).filter(|i| i % 10 == 3 + k).collect();
        let train: Vec<usize> = (0..40).filter(|i| !test.contains(i)).collect();
        let fmt = |v: &[usize]| v.iter().map(|i| format!("{i}\n")).collect::<String>();
        std::fs::write(dir.join(format!("splits/index_train_{k}.txt")), fmt(&train)).unwrap();
        std::fs::write(dir.join(format!("splits/index_test_{k}.txt")), fmt(&test)).unwrap();
    }
}

fn write_csv(path: &Path) {
    let mut s = String::from("a,y,b\n");
    for r in rows() {
        s.push_str(&format!("{},{},{}\n", r[0], r[2], r[1]));
    }
    std::fs::write(path, s).unwrap();
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run dgp-bench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const TINY: [&str; 10] = [
    "--inducing",
    "5",
    "--steps",
    "20",
    "--batch",
    "16",
    "--samples",
    "5",
    "--quiet",
    "--hidden",
];

fn tiny(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["run".into()];
    v.extend(extra.iter().map(|s| s.to_string()));
    v.extend(TINY.iter().map(|s| s.to_string()));
    v.push("2".into());
    v
}

fn run_ok(args: &[String]) -> Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = bench(&refs);
    assert!(
        o.status.success(),
        "dgp-bench {args:?} failed: {}\n{}",
        stderr(&o),
        String::from_utf8_lossy(&o.stdout)
    );
    o
}

#[test]
fn run_on_a_uci_folder_writes_records_and_reports() {
    let s = Scratch::new("uci");
    let uci = s.path("tiny");
    write_uci(&uci);
    let json = s.path("records.jsonl");
    let out = s.path("out");
    let o = run_ok(&tiny(&[
        "--data",
        uci.to_str().unwrap(),
        "--layers",
        "2",
        "--splits",
        "all",
        "--json",
        json.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("ddof = 1"), "{stdout}");
    assert!(stdout.contains("mean ± s.e. over 2 split(s)"), "{stdout}");
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(text.lines().count(), 2);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in [
            "backend",
            "layers",
            "dataset",
            "split",
            "nll",
            "rmse",
            "crps",
            "cov95",
            "train_seconds",
            "steps",
        ] {
            assert!(v.get(key).is_some(), "record lacks {key}: {line}");
        }
        assert_eq!(v["backend"], "svi");
        assert_eq!(v["layers"], 2);
        assert_eq!(v["dataset"], "tiny");
        assert_eq!(v["steps"], 20);
        assert!(v["nll"].as_f64().unwrap().is_finite());
        assert!((0.0..=1.0).contains(&v["cov95"].as_f64().unwrap()));
    }
    let recs = read_json_lines(&json).unwrap();
    assert_eq!(recs.iter().map(|r| r.split).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(recs[0].n_test, 4);
    for f in ["report.md", "results.json", "calibration_tiny.svg"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["records"].as_array().unwrap().len(), 2);
    assert_eq!(results["summary"][0]["n_splits"], 2);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("| tiny | svi | DGP2 | 2 | 20 |"),
        "{report}"
    );
}

#[test]
fn run_on_csv_files_uses_seeded_random_splits() {
    let s = Scratch::new("csv");
    let csv = s.path("tiny.csv");
    write_csv(&csv);
    let j1 = s.path("a.jsonl");
    let j2 = s.path("b.jsonl");
    for (json, target) in [(&j1, Some("y")), (&j2, None)] {
        let mut args = vec![
            "--data",
            csv.to_str().unwrap(),
            "--layers",
            "1",
            "--splits",
            "0-1",
        ];
        args.extend(["--json", json.to_str().unwrap()]);
        if let Some(t) = target {
            args.extend(["--target", t]);
        }
        run_ok(&tiny(&args));
    }
    let a = read_json_lines(&j1).unwrap();
    let b = read_json_lines(&j2).unwrap();
    assert_eq!(a.len(), 2);
    // 90/10 random split of 40 rows: 4 test points.
    assert_eq!((a[0].n_train, a[0].n_test), (36, 4));
    // Default target is the last column (b), so the runs differ; the explicit one is y.
    assert_ne!(a[0].rmse, b[0].rmse);
    // Seeded: the same command gives the same numbers.
    let j3 = s.path("c.jsonl");
    run_ok(&tiny(&[
        "--data",
        csv.to_str().unwrap(),
        "--layers",
        "1",
        "--splits",
        "0-1",
        "--target",
        "y",
        "--json",
        j3.to_str().unwrap(),
    ]));
    let c = read_json_lines(&j3).unwrap();
    assert_eq!(a[1].nll, c[1].nll);
}

/// Writes float columns `names` (row-major `rows`) and, if given, an Int32 column `label`
/// as a Parquet file in two row groups.
fn write_parquet(path: &Path, names: &[&str], rows: &[Vec<f64>], label: Option<&[i32]>) {
    use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;
    let mut fields: Vec<Field> = names
        .iter()
        .map(|n| Field::new(*n, DataType::Float64, false))
        .collect();
    if label.is_some() {
        fields.push(Field::new("label", DataType::Int32, false));
    }
    let schema = Arc::new(Schema::new(fields));
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        schema.clone(),
        None,
    )
    .unwrap();
    let half = rows.len() / 2;
    for range in [0..half, half..rows.len()] {
        let mut cols: Vec<ArrayRef> = (0..names.len())
            .map(|j| {
                Arc::new(Float64Array::from(
                    rows[range.clone()].iter().map(|r| r[j]).collect::<Vec<_>>(),
                )) as ArrayRef
            })
            .collect();
        if let Some(l) = label {
            cols.push(Arc::new(Int32Array::from(l[range.clone()].to_vec())));
        }
        w.write(&RecordBatch::try_new(schema.clone(), cols).unwrap())
            .unwrap();
    }
    w.close().unwrap();
}

/// A Parquet file is read like the CSV file with the same columns: the same default
/// target (the last column), the same seeded splits, bit-identical numbers; the same holds
/// for class labels in an integer column under a classification likelihood.
#[test]
fn run_on_parquet_files_equals_the_same_csv() {
    let s = Scratch::new("parquet");
    let csv = s.path("tiny.csv");
    write_csv(&csv);
    let table: Vec<Vec<f64>> = rows().iter().map(|r| vec![r[0], r[2], r[1]]).collect();
    let pq = s.path("tiny.parquet");
    write_parquet(&pq, &["a", "y", "b"], &table, None);
    let mut records = Vec::new();
    for (data, target) in [(&csv, "y"), (&pq, "y"), (&csv, ""), (&pq, "")] {
        let json = s.path(&format!("r{}.jsonl", records.len()));
        let mut args = vec![
            "--data",
            data.to_str().unwrap(),
            "--layers",
            "1",
            "--splits",
            "0-1",
        ];
        args.extend(["--json", json.to_str().unwrap()]);
        if !target.is_empty() {
            args.extend(["--target", target]);
        }
        run_ok(&tiny(&args));
        records.push(read_json_lines(&json).unwrap());
    }
    for (a, b) in [(&records[0], &records[1]), (&records[2], &records[3])] {
        assert_eq!(a.len(), 2);
        for (ra, rb) in a.iter().zip(b.iter()) {
            assert_eq!((ra.n_train, ra.n_test), (rb.n_train, rb.n_test));
            assert_eq!(
                (ra.nll.to_bits(), ra.rmse.to_bits(), ra.crps.to_bits()),
                (rb.nll.to_bits(), rb.rmse.to_bits(), rb.crps.to_bits())
            );
        }
    }
    assert_ne!(
        records[0][0].rmse, records[2][0].rmse,
        "default target is the last column"
    );

    // Two classes in an integer column (the last one, so the default target).
    let labels: Vec<i32> = (0..40).map(|i| i32::from(rows()[i][0] > 0.0)).collect();
    let feats: Vec<Vec<f64>> = rows().iter().map(|r| vec![r[0], r[1]]).collect();
    let cpq = s.path("class.parquet");
    write_parquet(&cpq, &["a", "b"], &feats, Some(&labels));
    let ccsv = s.path("class.csv");
    let text: String = feats
        .iter()
        .zip(&labels)
        .map(|(r, l)| format!("{:e},{:e},{l}\n", r[0], r[1]))
        .collect();
    std::fs::write(&ccsv, format!("a,b,label\n{text}")).unwrap();
    let mut class = Vec::new();
    for data in [&ccsv, &cpq] {
        let json = s.path(&format!("c{}.jsonl", class.len()));
        run_ok(&tiny(&[
            "--data",
            data.to_str().unwrap(),
            "--likelihood",
            "probit",
            "--layers",
            "1",
            "--splits",
            "0",
            "--json",
            json.to_str().unwrap(),
        ]));
        let line = std::fs::read_to_string(&json).unwrap();
        let v: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        assert_eq!(v["task"], "classification");
        class.push(v["metrics"].clone());
    }
    assert_eq!(class[0], class[1]);

    // A missing file is a usage error naming it (a non-numeric column, a truncated file:
    // dgp-io's `load_parquet` tests).
    let missing = s.path("nope.parquet");
    let e = bench(&["run", "--data", missing.to_str().unwrap(), "--quiet"]);
    assert_eq!(e.status.code(), Some(2), "{}", stderr(&e));
    assert!(stderr(&e).contains("nope.parquet"), "{}", stderr(&e));
}

#[test]
fn time_reports_step_and_prediction_milliseconds() {
    let s = Scratch::new("time");
    let uci = s.path("tiny");
    write_uci(&uci);
    let json = s.path("t.json");
    let o = bench(&[
        "time",
        "--data",
        uci.to_str().unwrap(),
        "--inducing",
        "5",
        "--batch",
        "16",
        "--hidden",
        "2",
        "--samples",
        "3",
        "--warmup",
        "2",
        "--steps",
        "3",
        "--predict-reps",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["steps"], 3);
    let b = &v["backends"][0];
    assert_eq!(b["backend"], "svi");
    assert_eq!(b["train_samples"], 3);
    assert_eq!(b["batch_size"], 16);
    assert_eq!(b["steps"], 3);
    assert_eq!(b["fit_steps"], 5);
    assert!(b["ratio"].is_null());
    assert!(b["step_ms_median"].as_f64().unwrap() >= b["step_ms_min"].as_f64().unwrap());
    assert!(b["predict_ms_min"].as_f64().unwrap() > 0.0);
}

/// `time` switches dspp's own held-out early stopping (it would score the held-out rows
/// after every step of a short timed fit) and svi's convergence stop off unless the command
/// line sets them, and the JSON says which settings each backend ran with.
#[test]
fn time_turns_dspp_early_stopping_off_unless_asked() {
    let s = Scratch::new("time-dspp");
    let uci = s.path("tiny");
    write_uci(&uci);
    let settings_of = |extra: &[&str]| {
        let json = s.path("t.json");
        let mut args = vec![
            "time",
            "--data",
            uci.to_str().unwrap(),
            "--backend",
            "svi,dspp",
            "--inducing",
            "5",
            "--batch",
            "16",
            "--hidden",
            "2",
            "--samples",
            "2",
            "--warmup",
            "2",
            "--steps",
            "4",
            "--predict-reps",
            "1",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = bench(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let b = v["backends"].as_array().unwrap();
        (
            b[0]["settings"].clone(),
            b[1]["settings"].clone(),
            b[1]["fit_steps"].clone(),
        )
    };
    let (svi, dspp, steps) = settings_of(&[]);
    assert!(
        svi.is_null() || svi == serde_json::json!({}),
        "svi: no settings (the timed fit has no stop), got {svi}"
    );
    assert_eq!(dspp, serde_json::json!({"early_stopping": null}));
    assert_eq!(steps, 6);
    let (_, dspp, _) = settings_of(&["--set", "dspp:early_stopping.patience=3"]);
    assert_eq!(dspp["early_stopping"]["patience"], 3);
}

/// Two backends interleaved in one run: every backend reported, ratios to the first with
/// their spread over rounds, and sghmc's burn-in and sampling phases both timed (with the
/// reference's 10 000 burn-in steps and thinning 50, a budget of 2 + 6 steps = 5 burn-in
/// steps and 3 kept samples).
#[test]
fn time_interleaves_backends_and_reports_ratios_and_phases() {
    let s = Scratch::new("time2");
    let uci = s.path("tiny");
    write_uci(&uci);
    let json = s.path("t.json");
    let o = bench(&[
        "time",
        "--data",
        uci.to_str().unwrap(),
        "--backend",
        "svi,sghmc",
        "--inducing",
        "5",
        "--batch",
        "16",
        "--hidden",
        "2",
        "--warmup",
        "2",
        "--steps",
        "6",
        "--block",
        "2",
        "--predict-reps",
        "2",
        "--set",
        "sghmc:sampler.burn_in=10000",
        "--set",
        "sghmc:sampler.thinning=50",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("ratio to svi DGP2") && out.contains("sampling ("),
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (v["rounds"].as_u64(), v["block"].as_u64()),
        (Some(3), Some(2))
    );
    let b = v["backends"].as_array().unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0]["backend"].as_str(), b[1]["backend"].as_str()),
        (Some("svi"), Some("sghmc"))
    );
    for t in b {
        assert_eq!(t["steps"], 6);
        assert!(t["step_ms_median"].as_f64().unwrap() > 0.0);
    }
    let r = &b[1]["ratio"];
    assert_eq!(r["rounds"], 3);
    let (q25, med, q75) = (
        r["q25"].as_f64().unwrap(),
        r["median"].as_f64().unwrap(),
        r["q75"].as_f64().unwrap(),
    );
    assert!(q25 > 0.0 && q25 <= med && med <= q75, "{r}");
    let phases = b[1]["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["burn-in", "sampling"]);
    assert_eq!(
        (phases[0]["steps"].as_u64(), phases[1]["steps"].as_u64()),
        (Some(3), Some(3))
    );
    assert!(phases[1]["ratio"]["median"].as_f64().unwrap() > 0.0);
    assert_eq!(b[1]["predict_components"], 3);
    assert!(b[0]["phases"].is_null());
}

#[test]
fn backends_lists_the_registry() {
    let o = bench(&["backends"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("svi:") && out.contains("time --samples"),
        "{out}"
    );
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let o = bench(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(needle), "{args:?}: '{needle}' not in {err}");
    assert!(o.stdout.is_empty() || !String::from_utf8_lossy(&o.stdout).contains("panicked"));
}

/// Several backends and depths in one command give one table, and `table` rebuilds it
/// from the JSON records; dspp's `--samples` is its number of mixture components.
#[test]
fn run_with_backend_and_layer_lists_then_table() {
    let s = Scratch::new("multi");
    let uci = s.path("tiny");
    write_uci(&uci);
    let json = s.path("records.jsonl");
    let args = tiny(&[
        "--data",
        uci.to_str().unwrap(),
        "--backend",
        "svi,dspp",
        "--layers",
        "1,2",
        "--splits",
        "0",
        "--beta",
        "0.05",
        "--json",
        json.to_str().unwrap(),
    ]);
    let o = run_ok(&args);
    let stdout = String::from_utf8_lossy(&o.stdout);
    for row in [
        "| tiny | svi | SGP |",
        "| tiny | svi | DGP2 |",
        "| tiny | dspp | SGP |",
        "| tiny | dspp | DGP2 |",
    ] {
        assert!(stdout.contains(row), "missing {row}: {stdout}");
    }
    let recs = read_json_lines(&json).unwrap();
    assert_eq!(recs.len(), 4);
    let dspp2 = recs
        .iter()
        .find(|r| r.backend == "dspp" && r.layers == 2)
        .unwrap();
    assert!(dspp2.model.contains("K=5"), "{}", dspp2.model);
    assert!(dspp2.model.contains("beta=0.05"), "{}", dspp2.model);
    let t = bench(&["table", json.to_str().unwrap()]);
    assert!(t.status.success(), "{}", stderr(&t));
    let table = String::from_utf8_lossy(&t.stdout);
    assert!(table.contains("| tiny | dspp | DGP2 | 1 |"), "{table}");
}

/// Runs `backend` on the tiny UCI folder with the extra `flags` and checks that the
/// settings line contains `settings` and that every record has a finite NLL.
fn tiny_run_with_flags(name: &str, backend: &str, flags: &[&str], settings: &str) {
    let s = Scratch::new(name);
    let uci = s.path("tiny");
    write_uci(&uci);
    let json = s.path("records.jsonl");
    let mut args = vec!["--data", uci.to_str().unwrap(), "--backend", backend];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let o = run_ok(&tiny(&args));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains(settings), "{stdout}");
    let recs = read_json_lines(&json).unwrap();
    assert!(!recs.is_empty() && recs.iter().all(|r| r.nll.is_finite()));
}

/// `--mean linear` reaches nested (its settings line says so) and gives a finite result.
#[test]
fn nested_runs_with_a_linear_hidden_mean() {
    tiny_run_with_flags(
        "mean",
        "nested",
        &["--mean", "linear"],
        "hidden mean linear",
    );
}

/// `--natgrad` reaches svi (its settings line says so) and gives a finite result.
#[test]
fn svi_runs_with_natural_gradient_steps() {
    tiny_run_with_flags(
        "natgrad",
        "svi",
        &["--natgrad", "0.5", "--natgrad-scheme", "joint"],
        "natural-gradient steps gamma 0.5 on the last q(u) joint with Adam",
    );
}

#[test]
fn bad_arguments_and_data_exit_with_code_2_and_one_line() {
    let s = Scratch::new("bad");
    let uci = s.path("tiny");
    write_uci(&uci);
    let u = uci.to_str().unwrap();
    assert_usage_error(&["run", "--data", u, "--bogus"], "--bogus");
    assert_usage_error(&["run"], "--data");
    assert_usage_error(&["run", "--data", u, "--layers", "two"], "--layers");
    assert_usage_error(&["run", "--data", "/no/such/dir"], "/no/such/dir");
    assert_usage_error(
        &["run", "--data", u, "--backend", "nope"],
        "unknown backend 'nope'",
    );
    assert_usage_error(&["run", "--data", u, "--splits", "5"], "split 5");
    assert_usage_error(&["run", "--data", u, "--layers", "0"], "--layers");
    assert_usage_error(&["run", "--data", u, "--lr", "-1"], "--lr");
    assert_usage_error(&["run", "--data", u, "--beta", "-1"], "--beta");
    assert_usage_error(&["run", "--data", u, "--mean", "cubic"], "--mean");
    assert_usage_error(&["run", "--data", u, "--natgrad", "0"], "--natgrad");
    assert_usage_error(&["run", "--data", u, "--natgrad", "1.5"], "--natgrad");
    assert_usage_error(
        &[
            "run",
            "--data",
            u,
            "--natgrad",
            "1",
            "--natgrad-scheme",
            "both",
        ],
        "--natgrad-scheme",
    );
    assert_usage_error(
        &["run", "--data", u, "--natgrad-scheme", "joint"],
        "--natgrad",
    );
    assert_usage_error(&["run", "--data", u, "--layers", "1,x"], "--layers");
    assert_usage_error(&["run", "--data", u, "--backend", "svi,nope"], "'nope'");
    assert_usage_error(&["table", "/no/such.jsonl"], "/no/such.jsonl");
    assert_usage_error(&["run", "--data", u, "--target", "y"], "--target");
    assert_usage_error(&["time", "--data", u, "--split", "9"], "--split 9");
    // Output locations that cannot be created are bad arguments too (checked before training).
    let file = s.path("plain-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("sub");
    let uf = under_file.to_str().unwrap();
    assert_usage_error(&["run", "--data", u, "--steps", "1", "--out", uf], "--out");
    assert_usage_error(
        &[
            "run",
            "--data",
            u,
            "--steps",
            "1",
            "--json",
            &format!("{uf}/r.jsonl"),
        ],
        "--json",
    );
    assert_usage_error(&["--out", uf], "--out");
    // A malformed data file: the message names the file, line and field.
    std::fs::write(uci.join("data.txt"), "1 2 3\n4 x 6\n").unwrap();
    assert_usage_error(&["run", "--data", u], "data.txt:2:2");
    let csv = s.path("bad.csv");
    std::fs::write(&csv, "a,y\n1,2\n3\n").unwrap();
    assert_usage_error(
        &["run", "--data", csv.to_str().unwrap(), "--target", "y"],
        "bad.csv",
    );
    std::fs::write(&csv, "a,y\n1,2\n3,4\n").unwrap();
    assert_usage_error(
        &["run", "--data", csv.to_str().unwrap(), "--target", "z"],
        "'z'",
    );
}

/// Backend settings: an unknown key names itself and the allowed keys, a value out of
/// range names the field and its range, a reserved key names its flag, a bad JSON file
/// names the file and line; all exit with code 2 before any training, on one line.
#[test]
fn bad_backend_settings_exit_with_code_2_naming_the_key() {
    let s = Scratch::new("settings");
    let uci = s.path("tiny");
    write_uci(&uci);
    let u = uci.to_str().unwrap();
    assert_usage_error(
        &["run", "--data", u, "--set", "bogus=1"],
        "svi: unknown setting 'bogus' (allowed: ard,",
    );
    assert_usage_error(&["run", "--data", u, "--set", "bogus=1"], "inner_q_scale");
    assert_usage_error(
        &["run", "--data", u, "--set", "natgrad.gama=1"],
        "unknown setting 'natgrad.gama' (allowed under 'natgrad': gamma, max_halvings, scheme)",
    );
    assert_usage_error(
        &["run", "--data", u, "--set", "inner_q_scale=2"],
        "inner_q_scale: must be in (0, 1]",
    );
    assert_usage_error(
        &["run", "--data", u, "--set", "natgrad.gamma=2"],
        "gamma must be in (0, 1]",
    );
    assert_usage_error(
        &[
            "run",
            "--data",
            u,
            "--backend",
            "dspp",
            "--set",
            "restart_fraction=1.5",
        ],
        "restart_fraction: must be in (0, 1)",
    );
    assert_usage_error(
        &["run", "--data", u, "--backend", "dspp", "--rule", "qr9"],
        "qr1, qr2 or qr3",
    );
    assert_usage_error(
        &["run", "--data", u, "--set", "num_inducing=3"],
        "'num_inducing' is set by --inducing",
    );
    assert_usage_error(
        &["run", "--data", u, "--set", "whiten=maybe"],
        "setting 'whiten'",
    );
    assert_usage_error(&["run", "--data", u, "--set", "whiten"], "key=value");
    assert_usage_error(
        &["run", "--data", u, "--set", "nope:beta=1"],
        "unknown backend 'nope'",
    );
    assert_usage_error(
        &[
            "time",
            "--data",
            u,
            "--backend",
            "nested",
            "--set",
            "mean=linear",
        ],
        "nested: unknown setting 'mean'",
    );
    let cfg = s.path("bad.json");
    std::fs::write(&cfg, "{\n  \"beta\": 0.1,\n  \"rule\": qr1\n}\n").unwrap();
    let c = cfg.to_str().unwrap();
    assert_usage_error(
        &["run", "--data", u, "--backend", "dspp", "--config", c],
        "bad.json:3:",
    );
    std::fs::write(&cfg, "{\"dspp\": {\"betta\": 0.1}}").unwrap();
    assert_usage_error(
        &["run", "--data", u, "--backend", "dspp", "--config", c],
        "dspp: unknown setting 'betta'",
    );
    assert_usage_error(
        &["run", "--data", u, "--config", "/no/such.json"],
        "--config /no/such.json",
    );
}

/// Runs the tiny svi/dspp command with `extra` flags and returns its records.
fn tiny_records(
    s: &Scratch,
    tag: &str,
    backend: &str,
    extra: &[&str],
) -> Vec<dgp_bench::SplitRecord> {
    let uci = s.path("tiny");
    if !uci.is_dir() {
        write_uci(&uci);
    }
    let json = s.path(&format!("{tag}.jsonl"));
    let mut args = vec![
        "--data",
        uci.to_str().unwrap(),
        "--backend",
        backend,
        "--splits",
        "0",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run_ok(&tiny(&args));
    read_json_lines(&json).unwrap()
}

/// The sugar flags, `--set` and `--config` reach the same configuration: bit-identical
/// records; the records carry the settings and the command.
#[test]
fn settings_by_flag_set_and_file_give_identical_runs() {
    let s = Scratch::new("sugar");
    let a = tiny_records(
        &s,
        "a",
        "svi",
        &["--natgrad", "0.5", "--natgrad-scheme", "joint"],
    );
    let b = tiny_records(
        &s,
        "b",
        "svi",
        &[
            "--set",
            "natgrad.gamma=0.5",
            "--set",
            "svi:natgrad.scheme=joint",
        ],
    );
    assert_eq!((a[0].nll, a[0].rmse), (b[0].nll, b[0].rmse));
    assert!(
        b[0].command.contains("--set natgrad.gamma=0.5"),
        "{}",
        b[0].command
    );
    assert_eq!(b[0].settings["natgrad"]["gamma"], 0.5);
    let cfg = s.path("beta.json");
    std::fs::write(&cfg, "{\"dspp\": {\"beta\": 0.2, \"rule\": \"QR2\"}}").unwrap();
    let c = tiny_records(&s, "c", "dspp", &["--beta", "0.2", "--rule", "qr2"]);
    let d = tiny_records(&s, "d", "dspp", &["--config", cfg.to_str().unwrap()]);
    assert_eq!((c[0].nll, c[0].rmse), (d[0].nll, d[0].rmse));
    assert!(d[0].model.contains("beta=0.2"), "{}", d[0].model);
}

/// `backends` lists each backend's settings.
#[test]
fn backends_lists_the_settings_keys() {
    let o = bench(&["backends"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("settings (--set KEY=VALUE, --config FILE): ard,"),
        "{out}"
    );
    assert!(
        out.contains("linear_mean") && out.contains("restart_fraction"),
        "{out}"
    );
}
