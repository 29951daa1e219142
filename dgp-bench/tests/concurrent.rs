//! Two commands on the same outputs at the same time (issue 56): the second refuses
//! before any work with an error naming the output, and the first one's outputs are
//! intact (`dgp_bench::locks`).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Scratch, bench, stderr, write_uci};

#[test]
fn a_second_run_on_the_same_outputs_refuses_and_the_first_finishes_intact() {
    let s = Scratch::new("concurrent");
    write_uci(&s.path("uci"));
    let (out, json) = (s.s("out"), s.s("r.jsonl"));
    // Long enough (no convergence stop) for the second commands to start while it runs.
    let run_steps = |out: &str, json: &str, steps: &str| -> Vec<String> {
        [
            "run",
            "--quiet",
            "--data",
            &s.s("uci"),
            "--backend",
            "svi",
            "--layers",
            "1",
            "--steps",
            steps,
            "--splits",
            "0,1",
            "--inducing",
            "5",
            "--batch",
            "16",
            "--set",
            "convergence=null",
            "--out",
            out,
            "--json",
            json,
        ]
        .iter()
        .map(|x| x.to_string())
        .collect()
    };
    let run = |out: &str, json: &str| run_steps(out, json, "20000");
    let mut first = Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(run(&out, &json))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first run holds its locks once the lock file of --json is there.
    let lock = s.path(".r.jsonl.lock");
    let t0 = Instant::now();
    while !lock.exists() {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first run ended before it locked its outputs"
        );
        assert!(t0.elapsed() < Duration::from_secs(120), "no lock file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = std::fs::read_to_string(&lock).unwrap();
    assert_eq!(pid.trim(), first.id().to_string());
    // Same --out (another --json), then same --json (another --out): both refused.
    let same_out = bench(
        &run(&out, &s.s("other.jsonl"))
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let same_json = bench(
        &run(&s.s("other-out"), &json)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(
        first.try_wait().unwrap().is_none(),
        "the first run ended before the second ones were refused: the test saw no overlap \
         (raise its --steps)"
    );
    let e = stderr(&same_out);
    assert_eq!(same_out.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!("--out {out}")) && e.contains("is locked"),
        "{e}"
    );
    let e = stderr(&same_json);
    assert_eq!(same_json.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!("--json {json}"))
            && e.contains(&format!("locked by process {}", first.id())),
        "{e}"
    );
    // The refused runs wrote no file, not even of their own other outputs (the output
    // directory a run's checks create before it locks may remain, empty).
    assert!(!s.path("other.jsonl").exists());
    let other_out: Vec<_> = std::fs::read_dir(s.path("other-out"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(other_out.is_empty(), "{other_out:?}");
    let status = first.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(first.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    // The first run's outputs are whole: one record per split, its report and results.
    let records = std::fs::read_to_string(&json).unwrap();
    assert_eq!(records.lines().count(), 2, "{records}");
    for l in records.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path("out/results.json")).unwrap())
            .unwrap();
    assert_eq!(results["records"].as_array().unwrap().len(), 2);
    assert!(s.path("out/report.md").is_file());
    // Its locks are gone with it: the lock file removed, and a new run takes the outputs.
    assert!(!lock.exists());
    let again = bench(
        &run_steps(&out, &json, "5")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(again.status.success(), "{}", stderr(&again));
}
