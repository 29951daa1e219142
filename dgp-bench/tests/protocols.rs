//! End-to-end tests of `run --protocol / --split-kind / --per-point` and `compare` on a
//! tiny UCI folder with tiny models, and their usage errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dgp_bench::report::read_json_lines;

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("dgp-bench-proto-{tag}-{}", std::process::id()));
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

/// 40 rows, features (a, b, constant), target a smooth function; one published split.
fn write_uci(dir: &Path) {
    std::fs::create_dir_all(dir.join("splits")).unwrap();
    let data: String = (0..40)
        .map(|i| {
            let a = (i % 8) as f64 / 4.0 - 1.0;
            let b = (i / 8) as f64 / 2.0 - 1.0;
            let y = (2.0 * a).sin() + 0.5 * b + 0.01 * ((i * 7919) % 13) as f64;
            format!("{a} {b} 3 {y}\n")
        })
        .collect();
    std::fs::write(dir.join("data.txt"), data).unwrap();
    std::fs::write(dir.join("index_features.txt"), "0\n1\n2\n").unwrap();
    std::fs::write(dir.join("index_target.txt"), "3\n").unwrap();
    std::fs::write(dir.join("n_splits.txt"), "1\n").unwrap();
    let test: Vec<usize> = (0..40).filter(|i| i % 10 == 3).collect();
    let train: Vec<usize> = (0..40).filter(|i| !test.contains(i)).collect();
    let fmt = |v: &[usize]| v.iter().map(|i| format!("{i}\n")).collect::<String>();
    std::fs::write(dir.join("splits/index_train_0.txt"), fmt(&train)).unwrap();
    std::fs::write(dir.join("splits/index_test_0.txt"), fmt(&test)).unwrap();
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run dgp-bench")
}

fn ok(args: &[&str]) -> String {
    let o = bench(args);
    assert!(
        o.status.success(),
        "dgp-bench {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn usage_error(args: &[&str], needle: &str) {
    let o = bench(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(
        err.starts_with("error: ") && err.contains(needle),
        "{args:?}: {err}"
    );
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("split 0:"),
        "trained: {args:?}"
    );
}

const TINY: [&str; 11] = [
    "--inducing",
    "5",
    "--steps",
    "20",
    "--batch",
    "16",
    "--samples",
    "5",
    "--hidden",
    "2",
    "--quiet",
];

fn tiny_run(data: &str, backend: &str, extra: &[&str], json: &str) -> String {
    let mut args = vec!["run", "--data", data, "--backend", backend, "--json", json];
    args.extend(extra);
    args.extend(TINY);
    ok(&args)
}

#[test]
fn extrapolation_and_lindinger_runs_record_their_protocol_and_compare_pairs_them() {
    let s = Scratch::new("extra");
    let uci = s.path("tiny");
    write_uci(&uci);
    let data = uci.to_str().unwrap();
    let (ja, jb) = (s.path("a.jsonl"), s.path("b.jsonl"));
    let common = [
        "--split-kind",
        "extrapolate",
        "--splits",
        "0..3",
        "--per-point",
    ];
    let out = tiny_run(data, "svi", &common, ja.to_str().unwrap());
    assert!(
        out.contains("protocol published (split kind extrapolate), splits [0, 1, 2]"),
        "{out}"
    );
    assert!(
        out.contains("held-out early stopping: lindinger rule"),
        "{out}"
    );
    tiny_run(data, "nested", &common, jb.to_str().unwrap());
    let recs = read_json_lines(&ja).unwrap();
    assert_eq!(recs.len(), 3);
    for r in &recs {
        assert_eq!(r.protocol, "published/extrapolate");
        assert_eq!((r.n_train, r.n_test), (20, 20));
        assert_eq!(r.log_density.len(), 20);
        assert_eq!(r.max_steps, 20);
        assert!(r.steps <= 20);
        // The per-point densities are the NLL's terms (rounded to 1e-6).
        let mean = -r.log_density.iter().sum::<f64>() / 20.0;
        assert!((mean - r.nll).abs() < 1e-5, "{mean} vs {}", r.nll);
    }
    let cmp = ok(&[
        "compare",
        ja.to_str().unwrap(),
        jb.to_str().unwrap(),
        "--a",
        "svi:2",
        "--b",
        "nested",
    ]);
    assert!(
        cmp.contains("| tiny | published/extrapolate | 3 | 20 |"),
        "{cmp}"
    );
    // Lindinger's protocol: random 90:10 splits, its records say so.
    let jl = s.path("l.jsonl");
    let out = tiny_run(
        data,
        "svi",
        &[
            "--protocol",
            "lindinger",
            "--splits",
            "0,9",
            "--layers",
            "1",
        ],
        jl.to_str().unwrap(),
    );
    assert!(
        out.contains("protocol lindinger (split kind random), splits [0, 9]"),
        "{out}"
    );
    assert!(
        out.contains("lr ×0.98 every 1000 steps (staircase)"),
        "{out}"
    );
    let recs = read_json_lines(&jl).unwrap();
    assert_eq!(recs.len(), 2);
    assert!(
        recs.iter()
            .all(|r| r.protocol == "lindinger/random" && r.n_test == 4)
    );
    assert!(
        recs.iter().all(|r| r.log_density.is_empty()),
        "only with --per-point"
    );
    // Records without per-point densities cannot be compared.
    usage_error(
        &["compare", jl.to_str().unwrap(), "--a", "svi", "--b", "svi"],
        "per-point",
    );
}

#[test]
fn bad_protocol_flags_are_one_line_usage_errors_before_training() {
    let s = Scratch::new("bad");
    let uci = s.path("tiny");
    write_uci(&uci);
    let data = uci.to_str().unwrap();
    let run = |extra: &[&str], needle: &str| {
        let mut args = vec!["run", "--data", data];
        args.extend(extra);
        args.extend(TINY);
        usage_error(&args, needle);
    };
    run(
        &["--protocol", "nope"],
        "--protocol must be published, lindinger or dspp",
    );
    run(
        &["--protocol", "dspp", "--split-kind", "random"],
        "leave out --split-kind",
    );
    run(&["--split-kind", "sideways"], "--split-kind must be");
    run(
        &["--split-kind", "extrapolate", "--splits", "10"],
        "split 10 does not exist",
    );
    run(&["--splits", "3..1"], "--splits");
    for sampler in ["sghmc", "dgps"] {
        run(
            &["--backend", sampler, "--protocol", "lindinger"],
            "does not support",
        );
        run(
            &["--backend", sampler, "--split-kind", "extrapolate"],
            "does not support",
        );
    }
    usage_error(
        &[
            "run",
            "--data",
            data,
            "--protocol",
            "lindinger",
            "--steps",
            "0",
        ],
        "--steps must be at least 1",
    );
    let missing = s.path("none.jsonl");
    usage_error(
        &[
            "compare",
            missing.to_str().unwrap(),
            "--a",
            "svi",
            "--b",
            "nested",
        ],
        "cannot read",
    );
    let f = s.path("x.jsonl");
    std::fs::write(&f, "").unwrap();
    usage_error(
        &["compare", f.to_str().unwrap(), "--a", "svi:0", "--b", "x"],
        "--a",
    );
    usage_error(
        &["compare", f.to_str().unwrap(), "--a", "svi", "--b", "x"],
        "no record of 'svi'",
    );
}
