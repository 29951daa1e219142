//! Two runs on one checkpoint directory at once (issue 56): while a `run --checkpoint DIR`
//! trains, a `run --resume DIR` and a second `run --checkpoint DIR` are refused with exit
//! code 2 and a message naming the directory and the running process, before writing
//! anything; the first run ends undisturbed with the records of a run that had the
//! directory to itself.

#![cfg(unix)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Scratch, bench, stderr, write_uci};
use dgp_bench::report::read_json_lines;

fn args(uci: &str, json: &str, extra: &[&str]) -> Vec<String> {
    [
        "run",
        "--backend",
        "svi",
        "--layers",
        "2",
        "--inducing",
        "6",
        "--hidden",
        "2",
        "--steps",
        "30000",
        "--batch",
        "16",
        "--samples",
        "3",
        "--splits",
        "0",
        "--quiet",
        // No convergence stop: the first run trains for seconds, long enough for the
        // refused ones to start while it runs.
        "--set",
        "convergence=null",
        "--data",
        uci,
        "--json",
        json,
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect()
}

/// The records without timing fields and the command line.
fn records(path: &Path) -> Vec<serde_json::Value> {
    read_json_lines(path)
        .unwrap()
        .into_iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap();
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
}

#[test]
fn a_second_run_or_resume_on_a_checkpoint_in_use_is_refused_and_the_first_is_intact() {
    let s = Scratch::new("ck-lock");
    write_uci(&s.path("uci"));
    let (uci, ck) = (s.s("uci"), s.s("ck"));
    let reference = bench(
        &args(&uci, &s.s("ref.jsonl"), &[])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(reference.status.success(), "{}", stderr(&reference));

    let mut first = Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(args(
            &uci,
            &s.s("a.jsonl"),
            &["--checkpoint", &ck, "--checkpoint-every", "100"],
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let state = s.path("ck/svi-L2-split0.json");
    let t0 = Instant::now();
    while !state.exists() {
        assert!(first.try_wait().unwrap().is_none(), "the first run ended");
        assert!(t0.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(5));
    }
    let running = format!("process {}", first.id());
    for (flag, json) in [("--resume", "b.jsonl"), ("--checkpoint", "c.jsonl")] {
        let o = bench(
            &args(&uci, &s.s(json), &[flag, &ck])
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag}: {err}");
        assert!(
            err.contains(&format!("{flag} {ck}"))
                && err.contains("in use by another run")
                && err.contains(&running),
            "{flag}: {err}"
        );
        assert!(!s.path(json).exists(), "{flag}: no record written");
    }
    assert!(
        first.try_wait().unwrap().is_none(),
        "the first run was still training during both refusals"
    );
    let o = first.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        records(&s.path("a.jsonl")),
        records(&s.path("ref.jsonl")),
        "the first run's records are those of a run alone"
    );
    // Once it ended, the directory is free again: a resume of the finished run works.
    let o = bench(
        &args(&uci, &s.s("d.jsonl"), &["--resume", &ck])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(records(&s.path("d.jsonl")), records(&s.path("ref.jsonl")));
}
