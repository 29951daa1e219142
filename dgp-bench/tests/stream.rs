//! End-to-end tests of `dgp-bench stream`: training from a memory-mapped row store equals
//! training on the same rows in memory (same seed: the same records, bit for bit, and the
//! same prediction file), and backends that need rows in memory are refused up front.

use std::path::PathBuf;
use std::process::{Command, Output};

use dgp_io::rowstore::write_dataset;
use dgp_io::synth::synth_dataset;

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

fn record(path: &PathBuf) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// `stream` of `backend` with `layers` layers from the row store and with `--in-memory`:
/// the same records (model, steps, metrics) and the same prediction file.
fn streamed_equals_in_memory(backend: &str, layers: &str, steps: &str, tag: &str) {
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
}

#[test]
fn streamed_run_equals_the_in_memory_run() {
    streamed_equals_in_memory("svi", "2", "15", "equal");
}

/// dspp holds validation rows out for its early stopping: from the file they are read
/// into memory and the training rows stay a view of the file (the in-memory split).
#[test]
fn streamed_dspp_and_ppgpr_equal_the_in_memory_runs() {
    streamed_equals_in_memory("dspp", "2", "15", "equal-dspp");
    streamed_equals_in_memory("ppgpr", "1", "15", "equal-ppgpr");
}

#[test]
fn streamed_sghmc_equals_the_in_memory_run() {
    streamed_equals_in_memory("sghmc", "2", "30", "equal-sghmc");
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
}
