//! The bad-input catalogue of issue 16: misuse of every family (flags, values, backends,
//! settings, data files, split files, outputs that would destroy inputs or each other,
//! unrepresentable data) run against the binary. Every case must fail BEFORE any training
//! with a non-zero exit code, a one-line message holding the expected key words, no panic,
//! and every file of the scratch tree (the inputs) unchanged, byte for byte. Also: the
//! warnings (printed and recorded) and the output-writing policy (symlinks, devices).

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Scratch, bench, csv_text, stderr, stdout, tree_hashes, write_csv, write_uci};

/// One catalogue case: a name, the arguments, the words the message must hold and the
/// test hooks of its environment (`DGP_BENCH_TEST_*`, see `dgp_bench::checkpointing`).
struct Case {
    name: &'static str,
    args: Vec<String>,
    needles: Vec<&'static str>,
    env: Vec<(&'static str, String)>,
}

fn case<S: AsRef<str>>(name: &'static str, args: &[S], needles: &[&'static str]) -> Case {
    Case {
        name,
        args: args.iter().map(|s| s.as_ref().to_string()).collect(),
        needles: needles.to_vec(),
        env: Vec::new(),
    }
}

impl Case {
    /// The case with `key=value` in the environment of the binary.
    fn with_env(mut self, key: &'static str, value: &str) -> Case {
        self.env.push((key, value.to_string()));
        self
    }
}

/// How long one case may run before it counts as hung (the slowest ones train a few
/// steps on 40 rows; all are refused in well under a second on two cores).
const CASE_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the binary with `args` and `env` (no backtraces), killing it after `timeout`:
/// the output, or `None` when it had to be killed.
fn bench_with_timeout(
    args: &[&str],
    env: &[(&'static str, String)],
    timeout: Duration,
) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dgp-bench");
    // Read both pipes while waiting, so a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let read_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
        v
    });
    let read_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut v);
        v
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (read_out.join().unwrap(), read_err.join().unwrap());
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}

/// A copy of the good UCI folder at `dir` with `file` replaced by `contents`.
fn uci_with(s: &Scratch, dir: &str, file: &str, contents: &str) -> String {
    let d = s.path(dir);
    write_uci(&d);
    std::fs::write(d.join(file), contents).unwrap();
    s.s(dir)
}

fn file(s: &Scratch, name: &str, contents: &str) -> String {
    std::fs::write(s.path(name), contents).unwrap();
    s.s(name)
}

/// Every fixture of the catalogue in one scratch directory, and the cases.
fn catalogue(s: &Scratch) -> Vec<Case> {
    write_uci(&s.path("uci"));
    write_csv(&s.path("good.csv"));
    let u = s.s("uci");
    let csv = s.s("good.csv");
    let data_txt = s.s("uci/data.txt");
    let bad_num = uci_with(s, "u_badnum", "data.txt", "1 2 3\n4 x 6\n");
    let nan = uci_with(s, "u_nan", "data.txt", "1 2 3\n4 nan 6\n7 8 9\n");
    let inf = uci_with(s, "u_inf", "data.txt", "1 2 3\n4 5 inf\n7 8 9\n");
    let ragged = uci_with(s, "u_ragged", "data.txt", "1 2 3\n4 5\n");
    let empty = uci_with(s, "u_empty", "data.txt", "\n\n");
    let feat_range = uci_with(s, "u_featrange", "index_features.txt", "0\n7\n");
    let no_target = uci_with(s, "u_notarget", "index_target.txt", "");
    let n_splits = uci_with(s, "u_nsplits", "n_splits.txt", "two\n");
    let missing_split = uci_with(s, "u_missing", "n_splits.txt", "3\n");
    let empty_test = uci_with(s, "u_emptytest", "splits/index_test_1.txt", "\n");
    let repeated = uci_with(s, "u_repeat", "splits/index_test_0.txt", "3\n13\n3\n");
    let overlap = uci_with(s, "u_overlap", "splits/index_test_0.txt", "0\n3\n");
    let neg_index = uci_with(s, "u_negidx", "splits/index_train_0.txt", "0\n-1\n");
    let ragged_csv = file(s, "ragged.csv", "a,y\n1,2\n3\n");
    let badnum_csv = file(s, "badnum.csv", "a,y\n1,2\n3,abc\n");
    let nan_csv = file(s, "nan.csv", "a,y\n1,2\nNaN,4\n");
    let empty_csv = file(s, "empty.csv", "");
    let header_only = file(s, "header.csv", "a,y\n");
    let one_col = file(s, "onecol.csv", "y\n1\n2\n");
    let huge_target = file(s, "huge.csv", &{
        // Features fine, target at 1e300: its variance (1e600) is not an f64.
        let mut t = String::from("a,y\n");
        for i in 0..20 {
            t.push_str(&format!("{i},{:e}\n", (i as f64 * 0.37).sin() * 1e300));
        }
        t
    });
    let bad_json = file(s, "bad.json", "{\n  \"beta\": 0.1,\n  \"rule\": qr1\n}\n");
    let cfg = file(s, "cfg.json", "{\"whiten\": true}\n");
    let junk_jsonl = file(s, "junk.jsonl", "{\"backend\": 1}\nnot json\n");
    let plain = file(s, "plain-file", "x");
    let under_plain = format!("{plain}/sub");
    std::fs::create_dir_all(s.path("adir")).unwrap();
    let adir = s.s("adir");
    #[cfg(unix)]
    std::os::unix::fs::symlink(s.path("nowhere/x"), s.path("dangling.jsonl")).unwrap();
    let dangling = s.s("dangling.jsonl");
    let od = s.s("outdir");
    let od_results = format!("{od}/results.json");
    let od_report = format!("{od}/report.md");
    let r = |extra: &[&str]| -> Vec<String> {
        let mut v = vec!["run".to_string(), "--quiet".into()];
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let mut cases = vec![
        // Flags and values (clap and our own range checks).
        case(
            "unknown flag",
            &["run", "--data", &u, "--bogus"],
            &["--bogus"],
        ),
        case("missing --data", &["run"], &["--data"]),
        case("unknown subcommand", &["frobnicate"], &["frobnicate"]),
        case(
            "layers not a number",
            &["run", "--data", &u, "--layers", "two"],
            &["--layers"],
        ),
        case(
            "layers 0",
            &["run", "--data", &u, "--layers", "0"],
            &["--layers", "at least 1"],
        ),
        case(
            "layers list with junk",
            &["run", "--data", &u, "--layers", "1,x"],
            &["--layers", "'x'"],
        ),
        case(
            "steps 0",
            &["run", "--data", &u, "--steps", "0"],
            &["--steps", "at least 1"],
        ),
        case(
            "steps negative",
            &["run", "--data", &u, "--steps", "-3"],
            &["'-3'"],
        ),
        case(
            "lr negative",
            &["run", "--data", &u, "--lr", "-1"],
            &["--lr", "> 0"],
        ),
        case("lr NaN", &["run", "--data", &u, "--lr", "NaN"], &["--lr"]),
        case("lr inf", &["run", "--data", &u, "--lr", "inf"], &["--lr"]),
        case(
            "inducing 0",
            &["run", "--data", &u, "--inducing", "0"],
            &["--inducing", "at least 1"],
        ),
        case(
            "inducing huge",
            &["run", "--data", &u, "--inducing", "100000000"],
            &["--inducing 100000000", "at most 10000"],
        ),
        case(
            "batch 0",
            &["run", "--data", &u, "--batch", "0"],
            &["--batch", "at least 1"],
        ),
        case(
            "samples 0",
            &["run", "--data", &u, "--samples", "0"],
            &["--samples", "at least 1"],
        ),
        case(
            "hidden 0",
            &["run", "--data", &u, "--hidden", "0"],
            &["--hidden", "at least 1"],
        ),
        case(
            "beta negative",
            &["run", "--data", &u, "--beta", "-1"],
            &["--beta", ">= 0"],
        ),
        case(
            "mean unknown",
            &["run", "--data", &u, "--mean", "cubic"],
            &["--mean", "zero or linear"],
        ),
        case(
            "natgrad 0",
            &["run", "--data", &u, "--natgrad", "0"],
            &["--natgrad", "(0, 1]"],
        ),
        case(
            "natgrad scheme",
            &[
                "run",
                "--data",
                &u,
                "--natgrad",
                "1",
                "--natgrad-scheme",
                "both",
            ],
            &["--natgrad-scheme", "alternate or joint"],
        ),
        case(
            "splits junk",
            &["run", "--data", &u, "--splits", "x"],
            &["--splits", "'x'"],
        ),
        case(
            "split out of range",
            &["run", "--data", &u, "--splits", "5"],
            &["split 5", "2 splits"],
        ),
        case(
            "protocol unknown",
            &["run", "--data", &u, "--protocol", "nope"],
            &["--protocol"],
        ),
        case(
            "split kind unknown",
            &["run", "--data", &u, "--split-kind", "nope"],
            &["--split-kind", "published, random or extrapolate"],
        ),
        // Backends and their settings, checked for every (backend, layers) before work.
        case(
            "backend unknown",
            &["run", "--data", &u, "--backend", "nope"],
            &["unknown backend 'nope'"],
        ),
        case(
            "backend list with unknown",
            &["run", "--data", &u, "--backend", "svi,nope"],
            &["'nope'"],
        ),
        case(
            "ppgpr with 2 layers",
            &["run", "--data", &u, "--backend", "ppgpr"],
            &["ppgpr", "--layers", "got 2 layers"],
        ),
        case(
            "svi,dspp with bad rule",
            &[
                "run",
                "--data",
                &u,
                "--backend",
                "svi,dspp",
                "--rule",
                "qr9",
            ],
            &["qr9", "qr1, qr2 or qr3"],
        ),
        case(
            "sampler with early stopping",
            &[
                "run",
                "--data",
                &u,
                "--backend",
                "sghmc",
                "--split-kind",
                "extrapolate",
            ],
            &["sghmc", "early stopping"],
        ),
        case(
            "set unknown key",
            &["run", "--data", &u, "--set", "bogus=1"],
            &["unknown setting 'bogus'", "allowed"],
        ),
        case(
            "set without value",
            &["run", "--data", &u, "--set", "whiten"],
            &["key=value"],
        ),
        case(
            "set unknown backend",
            &["run", "--data", &u, "--set", "nope:beta=1"],
            &["unknown backend 'nope'"],
        ),
        case(
            "set reserved key",
            &["run", "--data", &u, "--set", "num_inducing=3"],
            &["--inducing"],
        ),
        case(
            "set out of range",
            &["run", "--data", &u, "--set", "inner_q_scale=2"],
            &["inner_q_scale", "(0, 1]"],
        ),
        case(
            "svi convergence tolerance zero",
            &[
                "run",
                "--data",
                &u,
                "--set",
                "training.convergence.tolerance=0",
            ],
            &["convergence.tolerance", "> 0"],
        ),
        case(
            "star convergence patience zero",
            &[
                "run",
                "--data",
                &u,
                "--backend",
                "star",
                "--set",
                "training.convergence.patience=0",
            ],
            &["convergence.patience", "at least 1"],
        ),
        case(
            "run early stopping rule unknown",
            &["run", "--data", &u, "--early-stopping", "sometimes"],
            &["--early-stopping sometimes", "patience, lindinger, none"],
        ),
        case(
            "nested checkpoint with its held-out rule",
            &[
                "run",
                "--data",
                &u,
                "--backend",
                "nested",
                "--checkpoint",
                &s.s("ck-nested"),
            ],
            &["cannot be checkpointed", "--early-stopping none"],
        ),
        case(
            "config missing",
            &["run", "--data", &u, "--config", "/no/such.json"],
            &["--config /no/such.json"],
        ),
        case(
            "config bad JSON",
            &[
                "run",
                "--data",
                &u,
                "--backend",
                "dspp",
                "--config",
                &bad_json,
            ],
            &["bad.json:3:"],
        ),
        // Data sources.
        case(
            "data missing",
            &["run", "--data", "/no/such/dir"],
            &["/no/such/dir", "no such file"],
        ),
        case(
            "builtin unknown",
            &["run", "--data", "builtin:nope"],
            &["builtin:nope", "builtin:concrete"],
        ),
        case(
            "target on a UCI folder",
            &["run", "--data", &u, "--target", "y"],
            &["--target", "CSV"],
        ),
        case(
            "CSV target missing",
            &["run", "--data", &csv, "--target", "z"],
            &["'z'", "good.csv"],
        ),
        case(
            "CSV ragged row",
            &["run", "--data", &ragged_csv, "--target", "y"],
            &["ragged.csv:3"],
        ),
        case(
            "CSV bad number",
            &["run", "--data", &badnum_csv],
            &["badnum.csv:3:2", "'abc' is not a number"],
        ),
        case(
            "CSV NaN",
            &["run", "--data", &nan_csv],
            &["nan.csv:3:1", "not a finite number"],
        ),
        case(
            "CSV empty file",
            &["run", "--data", &empty_csv],
            &["empty.csv", "the file is empty"],
        ),
        case(
            "CSV header only",
            &["run", "--data", &header_only],
            &["header.csv", "no data rows"],
        ),
        case(
            "CSV one column",
            &["run", "--data", &one_col],
            &["onecol.csv", "two columns"],
        ),
        case(
            "UCI bad number",
            &["run", "--data", &bad_num],
            &["data.txt:2:2", "'x' is not a number"],
        ),
        case(
            "UCI NaN",
            &["run", "--data", &nan],
            &["data.txt:2:2", "not a finite number"],
        ),
        case(
            "UCI inf",
            &["run", "--data", &inf],
            &["data.txt:2:3", "not a finite number"],
        ),
        case(
            "UCI ragged",
            &["run", "--data", &ragged],
            &["data.txt:2", "2 fields"],
        ),
        case(
            "UCI empty data",
            &["run", "--data", &empty],
            &["data.txt", "no data rows"],
        ),
        case(
            "UCI feature index out of range",
            &["run", "--data", &feat_range],
            &["index_features.txt:2:1", "out of range"],
        ),
        case(
            "UCI no target index",
            &["run", "--data", &no_target],
            &["index_target.txt", "no target index"],
        ),
        case(
            "UCI n_splits not a number",
            &["run", "--data", &n_splits],
            &["n_splits.txt:1:1"],
        ),
        case(
            "UCI missing split file",
            &["run", "--data", &missing_split, "--steps", "1"],
            &["index_train_2.txt"],
        ),
        case(
            "UCI empty test file",
            &["run", "--data", &empty_test, "--steps", "1"],
            &["index_test_1.txt", "no row indices"],
        ),
        case(
            "UCI repeated split index",
            &["run", "--data", &repeated],
            &["index_test_0.txt:3:1", "repeated"],
        ),
        case(
            "UCI train/test overlap",
            &["run", "--data", &overlap],
            &["row 0", "both the train and the test"],
        ),
        case(
            "UCI negative split index",
            &["run", "--data", &neg_index],
            &["index_train_0.txt:2:1", "non-negative"],
        ),
        case(
            "target at 1e300",
            &["run", "--data", &huge_target, "--steps", "1"],
            &["huge", "scale", "rescale the target"],
        ),
        // Outputs that would destroy inputs or each other, or cannot be written.
        case(
            "--json is the CSV data",
            &r(&["--data", &csv, "--json", &csv]),
            &["--json", "is an input", "good.csv"],
        ),
        case(
            "--json is UCI data.txt",
            &r(&["--data", &u, "--json", &data_txt]),
            &["--json", "is an input", "data.txt"],
        ),
        case(
            "--json via another path",
            &r(&["--data", &u, "--json", &format!("{u}/splits/../data.txt")]),
            &["is an input"],
        ),
        case(
            "--json is the --config file",
            &r(&["--data", &u, "--config", &cfg, "--json", &cfg]),
            &["is an input", "cfg.json"],
        ),
        case(
            "--json is --out's results.json",
            &r(&["--data", &u, "--out", &od, "--json", &od_results]),
            &["results.json", "same file"],
        ),
        case(
            "--json is --out's report.md",
            &r(&["--data", &u, "--out", &od, "--json", &od_report]),
            &["report.md", "same file"],
        ),
        case(
            "--json is a directory",
            &r(&["--data", &u, "--json", &adir]),
            &["--json", "is a directory"],
        ),
        case(
            "--json under a regular file",
            &r(&["--data", &u, "--json", &format!("{under_plain}/r.jsonl")]),
            &["--json", "plain-file"],
        ),
        case(
            "--out under a regular file",
            &r(&["--data", &u, "--out", &under_plain]),
            &["--out", "plain-file"],
        ),
        case(
            "default job --out under a regular file",
            &["--quiet", "--out", &under_plain],
            &["--out"],
        ),
        case(
            "time --json is the data",
            &["time", "--data", &csv, "--json", &csv],
            &["--json", "is an input"],
        ),
        case(
            "time --json under a regular file",
            &[
                "time",
                "--data",
                &u,
                "--json",
                &format!("{under_plain}/t.json"),
            ],
            &["--json", "plain-file"],
        ),
        case(
            "time split out of range",
            &["time", "--data", &u, "--split", "9"],
            &["--split 9"],
        ),
        case(
            "time inducing huge",
            &["time", "--data", &u, "--inducing", "100000000"],
            &["at most 10000"],
        ),
        case(
            "table missing file",
            &["table", "/no/such.jsonl"],
            &["/no/such.jsonl"],
        ),
        case(
            "table junk records",
            &["table", &junk_jsonl],
            &["junk.jsonl:1", "not a split record"],
        ),
    ];
    cases.extend(reliability_cases(s, &u));
    cases.extend(second_pass_cases(s, &u));
    cases.extend(third_pass_cases(s, &u));
    if cfg!(unix) {
        cases.push(case(
            "--json a dangling symlink",
            &r(&["--data", &u, "--json", &dangling]),
            &["--json", "does not resolve"],
        ));
    }
    cases
}

/// The tiny checkpointed run of the issue-37 cases (its flags must match for a resume).
fn ck_run(u: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "run",
        "--quiet",
        "--data",
        u,
        "--steps",
        "20",
        "--splits",
        "0",
        "--inducing",
        "5",
        "--batch",
        "16",
        "--samples",
        "3",
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    v.extend(extra.iter().map(|x| x.to_string()));
    v
}

/// A copy of the checkpoint directory `ck` as `name`, its state file edited by `edit`;
/// with `rehash` the checksum is recomputed, so only the semantic checks can catch it.
fn ck_variant(
    s: &Scratch,
    name: &str,
    rehash: bool,
    edit: impl Fn(&mut serde_json::Value),
) -> String {
    let file = "svi-L2-split0.json";
    let text = std::fs::read_to_string(s.path("ck").join(file)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut v["state"]);
    let (fp, state) = (v["fingerprint"].to_string(), v["state"].to_string());
    let sum = if rehash {
        dgp_bench::checkpointing::checksum(&fp, &state)
    } else {
        v["checksum"].as_str().unwrap().to_string()
    };
    // The layout the program writes (version, fingerprint, checksum, state).
    let text = format!(
        "{{\"version\":{},\"fingerprint\":{fp},\"checksum\":\"{sum}\",\"state\":{state}}}",
        dgp_bench::checkpointing::FILE_VERSION
    );
    std::fs::create_dir_all(s.path(name)).unwrap();
    std::fs::write(s.path(name).join(file), text).unwrap();
    s.s(name)
}

/// The cases of issue 37 (reliability, second pass): outputs that are inputs of the
/// other subcommands, checkpoints that a fresh start would overwrite or that were edited,
/// outputs that fail only when written.
fn reliability_cases(s: &Scratch, u: &str) -> Vec<Case> {
    // Records and notes of `results`.
    std::fs::create_dir_all(s.path("recs")).unwrap();
    std::fs::write(s.path("recs/a.jsonl"), "{\"backend\": \"svi\"}\n").unwrap();
    std::fs::write(s.path("recs/note.md"), "a note\n").unwrap();
    let recs = s.s("recs");
    // A finished checkpointed run: its state is an input of every case below.
    let ck = s.s("ck");
    let o = bench(
        &ck_run(u, &["--checkpoint", &ck])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let edited = ck_variant(s, "ck_edited", false, |st| {
        let p = st["params"][0].as_f64().unwrap();
        st["params"][0] = serde_json::json!(p + 0.5);
    });
    let negative_v = ck_variant(s, "ck_negv", true, |st| {
        st["stepper"]["state"]["v"][3] = serde_json::json!(-1e-3);
    });
    let step_counter = ck_variant(s, "ck_step", true, |st| {
        st["stepper"]["state"]["step"] = serde_json::json!(7);
    });
    let zero_rng = ck_variant(s, "ck_rng", true, |st| {
        st["noise"]["s"] = serde_json::json!([0, 0, 0, 0]);
    });
    let nan_param = ck_variant(s, "ck_nan", true, |st| {
        st["params"][2] = serde_json::json!("NaN");
    });
    let no_checksum = ck_variant(s, "ck_nosum", false, |_| {});
    {
        let p = s.path("ck_nosum/svi-L2-split0.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("checksum");
        std::fs::write(&p, v.to_string()).unwrap();
    }
    let steps_done = ck_variant(s, "ck_done", true, |st| {
        st["steps_done"] = serde_json::json!(25);
        st["report"]["steps"] = serde_json::json!(25);
    });
    let inf_m = ck_variant(s, "ck_infm", true, |st| {
        st["stepper"]["state"]["m"][0] = serde_json::json!(1e308);
        st["stepper"]["state"]["v"][0] = serde_json::json!("inf");
    });
    let truncated = ck_variant(s, "ck_trunc", false, |_| {});
    {
        let p = s.path("ck_trunc/svi-L2-split0.json");
        let t = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, &t[..t.len() / 2]).unwrap();
    }
    std::fs::create_dir_all(s.path("ck_empty")).unwrap();
    let empty = s.s("ck_empty");
    let mut cases = vec![
        case(
            "results --out is a record of --dir",
            &[
                "results",
                "--dir",
                &recs,
                "--out",
                &format!("{recs}/a.jsonl"),
            ],
            &["--out", "is an input", "a.jsonl"],
        ),
        case(
            "results --out is a note of --dir",
            &[
                "results",
                "--dir",
                &recs,
                "--out",
                &format!("{recs}/note.md"),
            ],
            &["--out", "is an input", "note.md"],
        ),
        case(
            "--checkpoint on a directory holding a saved state",
            &ck_run(u, &["--checkpoint", &ck]),
            &["--checkpoint", "saved training state", "--resume"],
        ),
        case(
            "--resume on a directory with nothing to resume",
            &ck_run(u, &["--resume", &empty]),
            &["--resume", "nothing to resume"],
        ),
        case(
            "--resume a checkpoint with an edited parameter",
            &ck_run(u, &["--resume", &edited]),
            &["svi-L2-split0.json", "checksum", "changed or damaged"],
        ),
        case(
            "--resume a checkpoint with a negative Adam second moment",
            &ck_run(u, &["--resume", &negative_v]),
            &["svi-L2-split0.json", "stepper.state.v[3]", "negative"],
        ),
        case(
            "--resume a checkpoint whose Adam step disagrees with steps_done",
            &ck_run(u, &["--resume", &step_counter]),
            &["svi-L2-split0.json", "stepper.state.step", "steps_done"],
        ),
        case(
            "--resume a checkpoint with an all-zero generator state",
            &ck_run(u, &["--resume", &zero_rng]),
            &["svi-L2-split0.json", "noise.s", "all zeros"],
        ),
        case(
            "--resume a checkpoint with a NaN parameter",
            &ck_run(u, &["--resume", &nan_param]),
            &["svi-L2-split0.json", "NaN"],
        ),
        case(
            "--resume a checkpoint without a checksum",
            &ck_run(u, &["--resume", &no_checksum]),
            &["svi-L2-split0.json", "checksum"],
        ),
    ];
    // Degenerate data.
    let constant_y: String = (0..40)
        .map(|i| format!("{} {} 5\n", i % 8, i / 8))
        .collect();
    let constant_y = uci_with(s, "u_consty", "data.txt", &constant_y);
    let identical: String = (0..40).map(|_| "1 2 3\n".to_string()).collect();
    let identical = uci_with(s, "u_ident", "data.txt", &identical);
    let one_row = uci_with(s, "u_onerow", "splits/index_train_0.txt", "0\n");
    // Settings.
    let dup = file(s, "dup.json", "{\"beta\": 0.1, \"beta\": 0.2}\n");
    let dup_nested = file(
        s,
        "dupnest.json",
        "{\"natgrad\": {\"gamma\": 1, \"gamma\": 0.5}}\n",
    );
    let absent = file(s, "absent.json", "{\"dspp\": {\"beta\": 0.1}}\n");
    let adir = s.s("adir");
    cases.extend([
        case(
            "--resume a checkpoint with steps_done beyond the run",
            &ck_run(u, &["--resume", &steps_done]),
            &["svi-L2-split0.json", "steps_done"],
        ),
        case(
            "--resume a checkpoint with an infinite Adam moment",
            &ck_run(u, &["--resume", &inf_m]),
            &["svi-L2-split0.json", "stepper.state"],
        ),
        case(
            "--resume a truncated checkpoint",
            &ck_run(u, &["--resume", &truncated]),
            &["svi-L2-split0.json", "not a checkpoint"],
        ),
        case(
            "--data /dev/zero (no header line)",
            &["run", "--data", "/dev/zero"],
            &["/dev/zero", "longer than 1048576 bytes", "binary file"],
        ),
        case(
            "--inducing 10000 on 40 rows (over the memory budget)",
            &[
                "run",
                "--data",
                u,
                "--inducing",
                "10000",
                "--memory-budget",
                "4G",
            ],
            &["--inducing 10000", "memory", "budget"],
        ),
        case(
            "--samples 1000000 (over the memory budget)",
            &[
                "run",
                "--data",
                u,
                "--steps",
                "2",
                "--samples",
                "1000000",
                "--memory-budget",
                "4G",
            ],
            &["--samples 1000000", "memory"],
        ),
        case(
            "--train-samples 100000 (over the memory budget)",
            &[
                "run",
                "--data",
                u,
                "--steps",
                "2",
                "--inducing",
                "50",
                "--train-samples",
                "100000",
                "--memory-budget",
                "4G",
            ],
            &["--train-samples 100000", "memory", "--memory-budget 4G"],
        ),
        case(
            "--train-samples 10000000 (over the default memory budget)",
            &ck_run(u, &["--train-samples", "10000000"]),
            &["--train-samples 10000000", "memory", "MemAvailable"],
        ),
        case(
            "--memory-budget not a size",
            &ck_run(u, &["--memory-budget", "lots"]),
            &["--memory-budget", "not a size"],
        ),
        case(
            "constant target",
            &["run", "--data", &constant_y],
            &["target is constant", "nothing to learn"],
        ),
        case(
            "identical rows",
            &["run", "--data", &identical],
            &["target is constant"],
        ),
        case(
            "a single training row",
            &["run", "--data", &one_row],
            &["split 0", "1 training row"],
        ),
        case(
            "--lr 1e6 diverges",
            &ck_run(u, &["--lr", "1e6"]),
            &["diverged", "--lr 1000000", "too large"],
        ),
        case(
            "--set for a backend not in the run",
            &["run", "--data", u, "--set", "dspp:rule=qr9"],
            &["dspp", "not in this run"],
        ),
        case(
            "time --set for a backend not in the run",
            &["time", "--data", u, "--set", "dspp:rule=qr9"],
            &["dspp", "not in this run"],
        ),
        case(
            "--config object for a backend not in the run",
            &["run", "--data", u, "--config", &absent],
            &["dspp", "not in this run"],
        ),
        case(
            "--config with a duplicate key",
            &["run", "--data", u, "--backend", "dspp", "--config", &dup],
            &["'beta'", "twice"],
        ),
        case(
            "--config with a duplicate nested key",
            &["run", "--data", u, "--config", &dup_nested],
            &["'gamma' (in natgrad)", "twice"],
        ),
        case(
            "--config unreadable says I/O",
            &["run", "--data", u, "--config", &adir],
            &["--config", "I/O error"],
        ),
    ]);
    if Path::new("/proc/self").is_dir() {
        // Unwritable even for root.
        cases.push(case(
            "--checkpoint into an unwritable directory",
            &ck_run(u, &["--checkpoint", "/proc/self"]),
            &["--checkpoint /proc/self", "cannot write a checkpoint"],
        ));
    }
    if Path::new("/dev/full").exists() {
        cases.push(case(
            "--json /dev/full",
            &ck_run(u, &["--json", "/dev/full"]),
            &["--json /dev/full", "I/O error", "No space left"],
        ));
    }
    cases
}

/// The state file of the tiny checkpointed svi run in `dir`, as JSON.
fn ck_state(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("svi-L2-split0.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The cases of issue 37 that the first pass left: settings a backend ignores (`--lr` of
/// dgps and sghmc, `--steps` over dgps's `max_iters`), `time`'s memory budget, lines
/// without a bound in the data readers, and a diverged run that must not replace its
/// last good checkpoint.
fn second_pass_cases(s: &Scratch, u: &str) -> Vec<Case> {
    // Data lines over the bound of dgp_traits::data::MAX_LINE_BYTES (1 MiB).
    let limit = dgp_traits::data::MAX_LINE_BYTES;
    let long_row = format!("1 2 3\n{}\n", "1 ".repeat(limit / 2 + 1));
    let long_uci = uci_with(s, "u_longline", "data.txt", &long_row);
    let blank_line = format!("0\n{}\n1\n", " ".repeat(limit + 1));
    let long_split = uci_with(s, "u_longsplit", "splits/index_train_0.txt", &blank_line);
    let long_csv = file(
        s,
        "longline.csv",
        &format!("a,y\n1,2\n{}", "1".repeat(limit + 1)),
    );
    // A data.txt without end and without a line break.
    let zero_uci = s.s("u_zero");
    write_uci(&s.path("u_zero"));
    #[cfg(unix)]
    {
        std::fs::remove_file(s.path("u_zero/data.txt")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", s.path("u_zero/data.txt")).unwrap();
    }
    // A checkpointed run whose objective diverges at step 10 (the test hook; the Adam
    // steps of these fixtures diverge at their first step or never): the checkpoint
    // must hold the state of step 5, the last one whose objective was seen not to
    // diverge, and the message must say so.
    let ckdiv = s.s("ck_div");
    let div_args = ck_run(u, &["--checkpoint", &ckdiv, "--checkpoint-every", "5"]);
    let o = bench_with_timeout(
        &div_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[("DGP_BENCH_TEST_DIVERGE_AT_STEP", "10".to_string())],
        CASE_TIMEOUT,
    )
    .expect("the diverging run ends");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("diverged at step 10") && err.contains("holds the last good state (step 5)"),
        "{err}"
    );
    let saved = ck_state(&s.path("ck_div"));
    assert_eq!(
        saved["state"]["steps_done"], 5,
        "the last good state is kept"
    );
    let resume_div = ck_run(u, &["--resume", &ckdiv, "--checkpoint-every", "5"]);
    let fresh_div = ck_run(
        u,
        &[
            "--lr",
            "1e6",
            "--checkpoint",
            &s.s("ck_div_fresh"),
            "--checkpoint-every",
            "1",
        ],
    );
    let mut cases = vec![
        case(
            "--lr for dgps, which uses no learning rate",
            &["run", "--data", u, "--backend", "dgps", "--lr", "0.1"],
            &["--lr 0.1", "dgps does not use a learning rate", "drop --lr"],
        ),
        case(
            "--lr for sghmc, which uses no learning rate",
            &["run", "--data", u, "--backend", "sghmc", "--lr", "0.1"],
            &["--lr 0.1", "sghmc does not use a learning rate"],
        ),
        case(
            "--lr for svi and dgps together",
            &["run", "--data", u, "--backend", "svi,dgps", "--lr", "0.1"],
            &["dgps does not use a learning rate", "separate run"],
        ),
        case(
            "time --lr for dgps",
            &["time", "--data", u, "--backend", "dgps", "--lr", "0.1"],
            &["--lr 0.1", "dgps does not use a learning rate"],
        ),
        case(
            "stream --lr for dgps (in memory)",
            &[
                "stream",
                "--train",
                "/no/such.rows",
                "--test",
                "/no/such.rows",
                "--backend",
                "dgps",
                "--in-memory",
                "--lr",
                "0.1",
            ],
            &["--lr 0.1", "dgps does not use a learning rate"],
        ),
        case(
            "stream --steps over dgps's max_iters (in memory)",
            &[
                "stream",
                "--train",
                "/no/such.rows",
                "--test",
                "/no/such.rows",
                "--backend",
                "dgps",
                "--in-memory",
                "--steps",
                "2000",
            ],
            &["--steps 2000", "max_iters = 1000"],
        ),
        case(
            "--steps over dgps's max_iters",
            &["run", "--data", u, "--backend", "dgps", "--steps", "5000"],
            &[
                "--steps 5000",
                "max_iters = 1000",
                "--set dgps:max_iters=5000",
            ],
        ),
        case(
            "--steps over a lowered max_iters",
            &[
                "run",
                "--data",
                u,
                "--backend",
                "dgps",
                "--set",
                "max_iters=50",
                "--steps",
                "100",
            ],
            &["--steps 100", "max_iters = 50"],
        ),
        case(
            "time --inducing 10000 (over the memory budget)",
            &[
                "time",
                "--data",
                u,
                "--inducing",
                "10000",
                "--memory-budget",
                "4G",
            ],
            &["--inducing 10000", "memory", "--memory-budget 4G"],
        ),
        case(
            "time --samples 1000000 (training samples over the memory budget)",
            &[
                "time",
                "--data",
                u,
                "--samples",
                "1000000",
                "--memory-budget",
                "4G",
            ],
            &["--samples 1000000", "memory"],
        ),
        case(
            "time --predict-samples 100000000 (over the default memory budget)",
            &["time", "--data", u, "--predict-samples", "100000000"],
            &["--predict-samples 100000000", "memory", "MemAvailable"],
        ),
        case(
            "UCI data.txt with a line over 1 MiB",
            &["run", "--data", &long_uci],
            &["data.txt:2:", "longer than 1048576 bytes"],
        ),
        case(
            "UCI split file with a line over 1 MiB",
            &["run", "--data", &long_split, "--steps", "1"],
            &["index_train_0.txt:2:", "longer than 1048576 bytes"],
        ),
        case(
            "CSV body line over 1 MiB",
            &["run", "--data", &long_csv],
            &["longline.csv:3:", "longer than 1048576 bytes"],
        ),
        case(
            "a diverged resume keeps the last good checkpoint",
            &resume_div,
            &[
                "diverged at step 10",
                "--lr 0.02",
                "holds the last good state (step 5)",
            ],
        )
        .with_env("DGP_BENCH_TEST_DIVERGE_AT_STEP", "10"),
        case(
            "a run diverging before its first checkpoint saves nothing",
            &fresh_div,
            &["diverged at step 1", "--lr 1000000", "Nothing was saved"],
        ),
    ];
    if cfg!(unix) {
        cases.push(case(
            "UCI data.txt linked to /dev/zero",
            &["run", "--data", &zero_uci],
            &["data.txt:1:", "longer than 1048576 bytes"],
        ));
    }
    cases
}

/// The cases of issue 56: answers that were right but unclear (a byte-order mark, a CSV
/// file with another separator or empty, a valid row longer than the line limit, the flag
/// of a zero sample count, a backend or layer count named twice, outputs inside the data
/// folder) and the findings of the fuzz targets (`fuzz/`) that reach the binary.
fn third_pass_cases(s: &Scratch, u: &str) -> Vec<Case> {
    // A byte-order mark inside data.txt (at its start it is ignored: see
    // `a_byte_order_mark_at_the_start_of_a_file_is_ignored`).
    let mut rows = std::fs::read_to_string(Path::new(u).join("data.txt")).unwrap();
    rows.insert(rows.find('\n').unwrap() + 1, '\u{feff}');
    let bom_inside = uci_with(s, "u_bom_inside", "data.txt", &rows);
    let semicolon = file(s, "semicolon.csv", "a;b;y\n1;2;3\n4;5;6\n");
    let spaces = file(s, "spaces.csv", "a b y\n1 2 3\n4 5 6\n");
    let tabs = file(s, "tabs.csv", "a\tb\ty\n1\t2\t3\n");
    let blank = file(s, "blank.csv", "\n \n");
    // One row of a million fields ("1 " × 10⁶: 2 MB, over the 1 MiB line limit).
    let wide_row = format!("{}\n{}\n", "1 ".repeat(1_000_000), "1 ".repeat(1_000_000));
    let wide = uci_with(s, "u_wide", "data.txt", &wide_row);
    let wide_dir = Path::new(&wide).to_path_buf();
    std::fs::write(wide_dir.join("index_features.txt"), "0\n1\n").unwrap();
    std::fs::write(wide_dir.join("index_target.txt"), "2\n").unwrap();
    let uci_out = format!("{u}/report-dir");
    let uci_ck = format!("{u}/splits");
    let uci_json = format!("{u}/records.jsonl");
    let mut cases = vec![
        case(
            "a byte-order mark inside data.txt",
            &["run", "--data", &bom_inside],
            &["data.txt:2:1", "'<BOM>", "byte-order mark (U+FEFF"],
        ),
        case(
            "CSV separated by semicolons",
            &["run", "--data", &semicolon],
            &["semicolon.csv", "one column", "';' (semicolons)"],
        ),
        case(
            "CSV separated by spaces",
            &["run", "--data", &spaces],
            &["spaces.csv", "one column", "separated by spaces"],
        ),
        case(
            "CSV separated by tabs",
            &["run", "--data", &tabs],
            &["tabs.csv", "separated by tabs"],
        ),
        case(
            "CSV of blank lines",
            &["run", "--data", &blank],
            &["blank.csv", "the file is empty"],
        ),
        case(
            "a row of a million fields",
            &["run", "--data", &wide],
            &[
                "data.txt:1:",
                "longer than 1048576 bytes (1.0 MiB)",
                "a row of numbers, at least 524288 fields",
                "DGP_MAX_LINE_BYTES",
            ],
        ),
        case(
            "a row of a million fields, the line limit lifted (read, then refused for its splits)",
            &["run", "--data", &wide],
            &["index_train_0.txt", "out of range (must be < 2)"],
        )
        .with_env("DGP_MAX_LINE_BYTES", "4000000"),
        case(
            "--train-samples 0",
            &["run", "--data", u, "--train-samples", "0"],
            &["--train-samples must be at least 1"],
        ),
        case(
            "--backend svi,svi",
            &["run", "--data", u, "--backend", "svi,svi"],
            &["--backend svi,svi", "svi is named more than once"],
        ),
        case(
            "--layers 1,2,1",
            &["run", "--data", u, "--layers", "1,2,1"],
            &["--layers 1,2,1", "1 is named more than once"],
        ),
        case(
            "--out inside the UCI data folder",
            &["run", "--data", u, "--out", &uci_out],
            &["--out", "inside the data folder", "report-dir"],
        ),
        case(
            "--json inside the UCI data folder",
            &["run", "--data", u, "--json", &uci_json],
            &["--json", "inside the data folder"],
        ),
        case(
            "--checkpoint at the splits of the UCI data folder",
            &ck_run(u, &["--checkpoint", &uci_ck]),
            &["--checkpoint", "inside the data folder"],
        ),
    ];
    // Fuzz finding (target `parquet`): a malformed embedded Arrow schema made the
    // Parquet reader's dependency panic; now the file is read from its Parquet schema.
    let bad_arrow = s.path("bad-arrow-schema.parquet");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../dgp-io/tests/data/fuzz/parquet-bad-arrow-schema.parquet"),
        &bad_arrow,
    )
    .unwrap();
    cases.push(case(
        "Parquet file with a malformed embedded Arrow schema (fuzz finding)",
        &["run", "--data", bad_arrow.to_str().unwrap()],
        &["bad-arrow-schema.parquet"],
    ));
    cases.push(case(
        "--out the UCI data folder itself",
        &["run", "--data", u, "--out", u],
        &["--out", "inside the data folder"],
    ));
    cases
}

/// A byte-order mark at the start of a data file (UCI text or CSV) is ignored, as the
/// CSV reader and `--config` do (issue 56): the run is the run of the same file without it.
#[test]
fn a_byte_order_mark_at_the_start_of_a_file_is_ignored() {
    let s = Scratch::new("bom");
    let u = s.path("uci");
    write_uci(&u);
    for f in ["data.txt", "index_features.txt", "splits/index_test_0.txt"] {
        let text = std::fs::read_to_string(u.join(f)).unwrap();
        std::fs::write(u.join(f), format!("\u{feff}{text}")).unwrap();
    }
    std::fs::write(s.path("bom.csv"), format!("\u{feff}{}", csv_text(1.0))).unwrap();
    for data in [u.to_str().unwrap(), &s.s("bom.csv")] {
        let o = bench(&[
            "run",
            "--quiet",
            "--data",
            data,
            "--steps",
            "2",
            "--splits",
            "0",
            "--inducing",
            "5",
            "--backend",
            "svi",
            "--layers",
            "1",
        ]);
        assert!(o.status.success(), "{data}: {}", stderr(&o));
    }
}

fn check_case(s: &Scratch, c: &Case) -> Result<(), String> {
    let before = tree_hashes(&s.0);
    let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
    let Some(o) = bench_with_timeout(&args, &c.env, CASE_TIMEOUT) else {
        return Err(format!(
            "{}: still running after {CASE_TIMEOUT:?}, killed (dgp-bench {:?})",
            c.name, c.args
        ));
    };
    let err = stderr(&o);
    let out = stdout(&o);
    let mut problems = Vec::new();
    match o.status.code() {
        Some(0) => problems.push("exit code 0".to_string()),
        None => problems.push("killed by a signal".to_string()),
        Some(101) => problems.push("exit code 101 (panic)".to_string()),
        Some(_) => {}
    }
    if err.contains("panicked") || out.contains("panicked") {
        problems.push("panicked".into());
    }
    if out.contains("NLL") {
        problems.push("a split trained before the error".into());
    }
    for n in &c.needles {
        if !err.contains(n) {
            problems.push(format!("'{n}' not in the message"));
        }
    }
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    if errors.len() != 1 {
        problems.push(format!("{} error lines", errors.len()));
    }
    if tree_hashes(&s.0) != before {
        problems.push("files of the scratch tree changed".into());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: {} (dgp-bench {:?})\nstderr: {err}",
            c.name,
            problems.join("; "),
            c.args
        ))
    }
}

/// The catalogue: every case fails before training, with its key words, without a panic
/// and without touching any file.
#[test]
fn bad_input_catalogue_fails_early_with_clear_messages_and_no_damage() {
    let s = Scratch::new("catalogue");
    let cases = catalogue(&s);
    // 77 cases before issue 37, 125 after it (on Linux).
    assert!(cases.len() >= 115, "{} cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| check_case(&s, c).err())
        .collect();
    if std::env::var_os("DGP_PRINT_CATALOGUE").is_some() {
        for c in &cases {
            let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
            let msg = bench_with_timeout(&args, &c.env, CASE_TIMEOUT)
                .map_or("(hung)".to_string(), |o| stderr(&o));
            let root = s.0.to_str().unwrap();
            println!(
                "| {} | `{}` |",
                c.name,
                msg.trim().replace(root, "$T").replace('|', "\\|")
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The memory estimate is an upper bound of the measured peak RSS (VmHWM) on two shapes:
/// the estimate is read from the refusal under a 1 KiB budget, the peak from the record.
#[test]
fn memory_estimate_bounds_measured_peak_rss() {
    let s = Scratch::new("memory");
    write_uci(&s.path("uci"));
    let u = s.s("uci");
    for (backend, extra) in [("svi", ["--samples", "2000"]), ("fc", ["--inducing", "20"])] {
        let mut args: Vec<String> = [
            "run",
            "--quiet",
            "--data",
            &u,
            "--steps",
            "20",
            "--splits",
            "0",
            "--backend",
            backend,
        ]
        .iter()
        .chain(extra.iter())
        .map(|x| x.to_string())
        .collect();
        let mut refused = args.clone();
        refused.extend(["--memory-budget".to_string(), "1K".to_string()]);
        let err = stderr(&bench(
            &refused.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        let about = err.split("about ").nth(1).expect(&err);
        let mut words = about.split_whitespace();
        let value: f64 = words.next().unwrap().parse().unwrap();
        let unit = words.next().unwrap();
        let mib = value
            * match unit {
                "KiB" => 1.0 / 1024.0,
                "MiB" => 1.0,
                "GiB" => 1024.0,
                "TiB" => 1024.0 * 1024.0,
                other => panic!("unit {other}"),
            };
        let json = s.path(&format!("{backend}.jsonl"));
        args.extend(["--json".to_string(), json.to_str().unwrap().to_string()]);
        let o = bench(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(o.status.success(), "{}", stderr(&o));
        let peak = json_lines(&json)[0]["peak_rss_mib"].as_f64().unwrap();
        println!("{backend} {extra:?}: estimate {mib:.1} MiB, measured peak RSS {peak:.1} MiB");
        assert!(
            mib >= peak,
            "{backend}: estimate {mib} MiB < measured {peak} MiB"
        );
    }
}

/// Tiny settings: flag and value, each added unless `args` already has the flag.
const TINY: [(&str, &str); 5] = [
    ("--inducing", "5"),
    ("--steps", "2"),
    ("--batch", "16"),
    ("--samples", "3"),
    ("--splits", "0"),
];

fn run_tiny(args: &[&str]) -> (String, String) {
    let mut v: Vec<&str> = vec!["run", "--quiet"];
    v.extend_from_slice(args);
    for (flag, value) in TINY {
        if !args.contains(&flag) {
            v.extend([flag, value]);
        }
    }
    let o = bench(&v);
    assert!(o.status.success(), "dgp-bench {v:?} failed: {}", stderr(&o));
    (stdout(&o), stderr(&o))
}

fn json_lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A headerless-looking CSV, a target listed as a feature and M ≥ N_train give warnings on
/// stderr and in the records (JSON Lines and results.json); a clean run has none.
#[test]
fn warnings_are_printed_and_recorded() {
    let s = Scratch::new("warnings");
    // Header row all numeric: the first data row was taken as names.
    // (Rows 1.. of the data: the first row's values are distinct, so they are usable names.)
    let text: String = csv_text(1.0)
        .lines()
        .skip(2)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(s.path("nohdr.csv"), &text).unwrap();
    let json = s.path("w.jsonl");
    let (_, err) = run_tiny(&[
        "--data",
        &s.s("nohdr.csv"),
        "--json",
        json.to_str().unwrap(),
        "--inducing",
        "500",
        "--out",
        &s.s("wout"),
    ]);
    assert!(err.contains("warning:") && err.contains("header"), "{err}");
    assert!(
        err.contains("M = 500") && err.contains("M ≥ N_train"),
        "{err}"
    );
    let recs = json_lines(&json);
    let w = recs[0]["warnings"].as_array().expect("warnings recorded");
    assert_eq!(w.len(), 2, "{w:?}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path("wout/results.json")).unwrap())
            .unwrap();
    assert_eq!(
        results["records"][0]["warnings"].as_array().unwrap().len(),
        2
    );
    // A target that is also a feature (UCI).
    let u = s.path("leak");
    write_uci(&u);
    std::fs::write(u.join("index_features.txt"), "0\n1\n2\n").unwrap();
    let json2 = s.path("leak.jsonl");
    let (_, err) = run_tiny(&[
        "--data",
        u.to_str().unwrap(),
        "--json",
        json2.to_str().unwrap(),
    ]);
    assert!(
        err.contains("also listed as features") && err.contains("leakage"),
        "{err}"
    );
    assert_eq!(
        json_lines(&json2)[0]["warnings"].as_array().unwrap().len(),
        1
    );
    // A clean run: no warnings, no field.
    write_uci(&s.path("clean"));
    let json3 = s.path("clean.jsonl");
    let (_, err) = run_tiny(&["--data", &s.s("clean"), "--json", json3.to_str().unwrap()]);
    assert!(!err.contains("warning"), "{err}");
    assert!(json_lines(&json3)[0].get("warnings").is_none());
}

/// Output policy: a symlinked output stays a symlink (its target is written), a device is
/// written through (not replaced by a regular file), an existing regular file is replaced
/// atomically and no temporary file is left behind.
#[cfg(unix)]
#[test]
fn outputs_keep_symlinks_and_devices() {
    use std::os::unix::fs::FileTypeExt;
    let s = Scratch::new("outputs");
    write_uci(&s.path("uci"));
    let u = s.s("uci");
    std::fs::create_dir_all(s.path("out")).unwrap();
    std::fs::write(s.path("real-results.json"), "old").unwrap();
    std::os::unix::fs::symlink(s.path("real-results.json"), s.path("out/results.json")).unwrap();
    std::fs::write(s.path("real.jsonl"), "old").unwrap();
    std::os::unix::fs::symlink(s.path("real.jsonl"), s.path("link.jsonl")).unwrap();
    std::fs::write(s.path("out/report.md"), "old report").unwrap();
    run_tiny(&[
        "--data",
        &u,
        "--out",
        &s.s("out"),
        "--json",
        &s.s("link.jsonl"),
    ]);
    let link = std::fs::symlink_metadata(s.path("out/results.json")).unwrap();
    assert!(
        link.file_type().is_symlink(),
        "results.json is still a symlink"
    );
    let real = std::fs::read_to_string(s.path("real-results.json")).unwrap();
    assert!(real.contains("\"records\""), "{real}");
    assert!(
        std::fs::symlink_metadata(s.path("link.jsonl"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(json_lines(&s.path("real.jsonl")).len(), 1);
    assert!(
        std::fs::read_to_string(s.path("out/report.md"))
            .unwrap()
            .contains("dgp-bench run")
    );
    let leftovers: Vec<_> = std::fs::read_dir(s.path("out"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("tmp-dgp-bench"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    if Path::new("/dev/null").exists() {
        run_tiny(&["--data", &u, "--json", "/dev/null"]);
        let m = std::fs::metadata("/dev/null").unwrap();
        assert!(
            m.file_type().is_char_device(),
            "/dev/null is still a device"
        );
    }
}

/// A step that never ends does not block SIGTERM (issue 37): the run is stopped while
/// its step 12 is stuck (the test hook `DGP_BENCH_TEST_STALL_AT_STEP`), after the
/// checkpoint of step 10; the stop request waits max(20 × the median step, 5 s) for the
/// step, then the process exits with 130, saying that the checkpoint is intact, and the
/// checkpoint is byte for byte what it was. Resuming it gives the records of a run that
/// was never interrupted. Before the watchdog, the run waited for the step forever.
#[cfg(unix)]
#[test]
fn sigterm_during_a_stuck_step_exits_and_keeps_the_checkpoint() {
    let s = Scratch::new("stuck");
    write_uci(&s.path("uci"));
    let u = s.s("uci");
    let ck = s.s("ck");
    let flags = |extra: &[&str]| -> Vec<String> {
        let mut v = ck_run(&u, &["--checkpoint-every", "5"]);
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let reference = flags(&["--json", &s.s("ref.jsonl")]);
    let o = bench(&reference.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    let stuck = flags(&["--checkpoint", &ck, "--json", &s.s("run.jsonl")]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(&stuck)
        .env("DGP_BENCH_TEST_STALL_AT_STEP", "12")
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let file = s.path("ck/svi-L2-split0.json");
    let t0 = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(&file)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && v["state"]["steps_done"] == 10
        {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended");
        assert!(t0.elapsed() < Duration::from_secs(60), "no checkpoint");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Stuck in step 12 by now (steps take well under a millisecond).
    std::thread::sleep(Duration::from_millis(300));
    let before = std::fs::read(&file).unwrap();
    let t = Instant::now();
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let deadline = Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > deadline {
            let _ = child.kill();
            panic!("SIGTERM did not end a run stuck in a step within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let waited = t.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        waited >= Duration::from_secs_f64(dgp_bench::checkpointing::STUCK_STEP_MIN_SECONDS - 0.5)
            && waited < Duration::from_secs(20),
        "waited {waited:?}: {err}"
    );
    assert!(
        err.contains("looks stuck")
            && err.contains("svi-L2-split0.json (step 10), is intact")
            && err.contains("--resume"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the checkpoint changed"
    );
    // The intact checkpoint resumes to the uninterrupted run's records.
    let resume = flags(&["--resume", &ck, "--json", &s.s("run.jsonl")]);
    let o = bench(&resume.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    let strip = |p: &Path| -> Vec<serde_json::Value> {
        json_lines(p)
            .into_iter()
            .map(|mut v| {
                let o = v.as_object_mut().unwrap();
                for k in [
                    "train_seconds",
                    "predict_seconds",
                    "wall_seconds",
                    "peak_rss_mib",
                    "command",
                ] {
                    o.remove(k);
                }
                v
            })
            .collect()
    };
    assert_eq!(strip(&s.path("run.jsonl")), strip(&s.path("ref.jsonl")));
}

// ---- Classification runs (`run --task classification` / `--likelihood`) ----------------

/// A UCI folder of [`common::rows`]' features with `label(i)` as the target of row i and
/// the two published splits of [`write_uci`] (test rows i % 10 == 3 + k).
fn write_class_folder(dir: &Path, label: impl Fn(usize) -> String) {
    write_uci(dir);
    let data: String = common::rows()
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{} {} {}\n", r[0], r[1], label(i)))
        .collect();
    std::fs::write(dir.join("data.txt"), data).unwrap();
}

/// Classification misuse: each case fails before training with a clear message.
#[test]
fn classification_misuse_fails_before_training() {
    let s = Scratch::new("class-catalogue");
    write_uci(&s.path("regression"));
    write_class_folder(&s.path("three"), |i| (i % 3).to_string());
    write_class_folder(&s.path("one_class"), |_| "0".into());
    write_class_folder(&s.path("negative"), |i| {
        if i == 5 {
            "-1".into()
        } else {
            (i % 2).to_string()
        }
    });
    write_class_folder(&s.path("nan_label"), |i| {
        if i == 7 {
            "nan".into()
        } else {
            (i % 2).to_string()
        }
    });
    write_class_folder(&s.path("fraction"), |i| {
        if i == 2 {
            "0.5".into()
        } else {
            (i % 2).to_string()
        }
    });
    // Class 2 only on the test rows of split 0.
    write_class_folder(&s.path("missing"), |i| {
        if i % 10 == 3 {
            "2".into()
        } else {
            (i % 2).to_string()
        }
    });
    let run = |dir: &str, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "run",
            "--data",
            &s.s(dir),
            "--steps",
            "5",
            "--inducing",
            "5",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let cases = vec![
        case(
            "class: regression target",
            &run("regression", &["--task", "classification"]),
            &[
                "classification on regression",
                "not an integer",
                "regression target",
            ],
        ),
        case(
            "class: label outside 0..K-1 (--classes)",
            &run("three", &["--task", "classification", "--classes", "2"]),
            &["label at row 2 is 2", "classes are 0..2"],
        ),
        case(
            "class: negative label",
            &run("negative", &["--likelihood", "probit"]),
            &["label at row 5 is -1"],
        ),
        case(
            "class: non-integer label",
            &run("fraction", &["--likelihood", "probit"]),
            &["label at row 2 is 0.5", "not an integer"],
        ),
        case(
            "class: NaN label",
            &run("nan_label", &["--task", "classification"]),
            &["nan"],
        ),
        case(
            "class: K = 1",
            &run("one_class", &["--task", "classification"]),
            &["at least 2 classes"],
        ),
        case(
            "class: class missing from a training split",
            &run("missing", &["--task", "classification", "--splits", "0"]),
            &["split 0", "class 2 of 0..3 has no training example"],
        ),
        case(
            "class: backend without the likelihood family",
            &run(
                "three",
                &["--task", "classification", "--backend", "nested"],
            ),
            &["--backend nested", "does not train multiclass likelihoods"],
        ),
        case(
            "class: binary likelihood on three classes",
            &run("three", &["--likelihood", "logit"]),
            &["'logit' is binary", "3 classes"],
        ),
        case(
            "class: unknown likelihood",
            &run("three", &["--likelihood", "tanh"]),
            &["unknown classification likelihood 'tanh'"],
        ),
        case(
            "class: classification likelihood with --task regression",
            &run(
                "three",
                &["--task", "regression", "--likelihood", "softmax"],
            ),
            &["--task is regression"],
        ),
        case(
            "class: the Gaussian likelihood with --task classification",
            &run(
                "three",
                &["--task", "classification", "--likelihood", "gaussian"],
            ),
            &["regression likelihood"],
        ),
        case(
            "class: unknown task",
            &run("three", &["--task", "ranking"]),
            &["unknown task 'ranking'"],
        ),
        case(
            "class: a binary likelihood setting on three classes",
            &run(
                "three",
                &[
                    "--task",
                    "classification",
                    "--set",
                    "likelihood.kind=bernoulli_probit",
                ],
            ),
            &["is binary but the data have 3 classes"],
        ),
        case(
            "class: likelihood given both as --likelihood and as a setting",
            &run(
                "three",
                &[
                    "--likelihood",
                    "softmax",
                    "--set",
                    "likelihood.kind=softmax",
                ],
            ),
            &["keep one"],
        ),
        case(
            "class: a likelihood setting whose K disagrees with the data",
            &run(
                "three",
                &[
                    "--set",
                    "likelihood.kind=robust_max",
                    "--set",
                    "likelihood.num_classes=4",
                ],
            ),
            &["num_classes = 4 but the data have K = 3"],
        ),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| check_case(&s, c).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
