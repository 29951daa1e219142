//! Data-parallel training over MPI (feature `mpi`): `mpirun -np 2 dgp-bench run ...` gives
//! the records of one process bit for bit (timing fields and the command line aside); a
//! SIGTERM seen by one rank stops both after the same step, and two ranks resume the run to
//! the records of one uninterrupted process; ranks launched with different arguments refuse
//! to run; a rank that is killed ends the launch instead of leaving the
//! other waiting.
//!
//! Needs Open MPI's `mpirun` on PATH (the tests fail, not skip, without it: building with
//! the feature needs MPI anyway).
#![cfg(feature = "mpi")]

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Scratch;
use dgp_bench::report::read_json_lines;

const BIN: &str = env!("CARGO_BIN_EXE_dgp-bench");

/// A launch should never take this long; past it the test fails (and kills mpirun).
const LIMIT: Duration = Duration::from_secs(300);

/// `mpirun` with the flags every test needs: running as root inside containers, more
/// ranks than cores, no interactive prompts.
fn mpirun() -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("RAYON_NUM_THREADS", "1")
        .args(["--oversubscribe", "--bind-to", "none"]);
    c
}

fn spawn(mut c: Command) -> Child {
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun (is Open MPI's mpirun on PATH?)")
}

/// Waits for `child` at most [`LIMIT`]; a launch that outlives it is killed and fails the
/// test (it hung).
fn wait(mut child: Child) -> Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "launch hung for {LIMIT:?}: {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `run` arguments: 2-layer model on the embedded concrete data, split 0 (927 training
/// rows, so a batch of 1024 is two chunks of the minibatch objective).
fn run_args(backend: &str, json: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "run",
        "--data",
        "builtin:concrete",
        "--backend",
        backend,
        "--layers",
        "2",
        "--batch",
        "1024",
        "--splits",
        "0",
        "--quiet",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(json.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
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
                "ranks",
            ] {
                o.remove(k);
            }
            v
        })
        .collect()
}

/// The metric fields of the records, as bits.
fn metric_bits(path: &Path) -> Vec<[u64; 5]> {
    read_json_lines(path)
        .unwrap()
        .iter()
        .map(|r| {
            [
                r.nll.to_bits(),
                r.rmse.to_bits(),
                r.crps.to_bits(),
                r.cov95.to_bits(),
                r.final_objective.to_bits(),
            ]
        })
        .collect()
}

/// One process, then `ranks` MPI ranks with the same arguments: identical records.
fn ranks_equal_one_process(backend: &str, ranks: usize, extra: &[&str]) {
    let s = Scratch::new(&format!("mpi-{backend}-{ranks}"));
    let one = s.path("one.jsonl");
    let o = Command::new(BIN)
        .args(run_args(backend, &one, extra))
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    let many = s.path("many.jsonl");
    let mut c = mpirun();
    c.args(["-np", &ranks.to_string(), BIN])
        .args(run_args(backend, &many, extra));
    let o = wait(spawn(c));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // Only rank 0 prints: one header line, one split line.
    assert_eq!(out.matches("split  0: NLL").count(), 1, "{out}");

    // The records of several ranks say so; one process's have no `ranks`.
    let ranks_of = |p: &Path| read_json_lines(p).unwrap()[0].resources.ranks;
    assert_eq!(ranks_of(&one), None);
    assert_eq!(ranks_of(&many), Some(ranks));
    let (a, b) = (records(&one), records(&many));
    assert_eq!(a.len(), 1);
    assert_eq!(a, b, "{ranks} ranks differ from one process");
    assert_eq!(metric_bits(&one), metric_bits(&many));
}

#[test]
fn two_ranks_equal_one_process_svi() {
    ranks_equal_one_process("svi", 2, &["--steps", "30"]);
}

#[test]
fn three_ranks_with_two_chunks_equal_one_process_svi() {
    // Rank 2 owns no chunk and only receives.
    ranks_equal_one_process("svi", 3, &["--steps", "10", "--samples", "10"]);
}

#[test]
fn two_ranks_equal_one_process_dspp() {
    ranks_equal_one_process("dspp", 2, &["--steps", "20", "--no-tune"]);
}

/// The structured families and sghmc split their minibatch objective into row chunks
/// too (927 training rows: two chunks of the full batch).
#[test]
fn two_ranks_equal_one_process_star_fc_sghmc() {
    let few = ["--steps", "6", "--inducing", "8"];
    ranks_equal_one_process("star", 2, &few);
    // fc trains its q by natural steps: their (μ_M, L) adjoints travel with the gradient.
    ranks_equal_one_process("fc", 2, &few);
    ranks_equal_one_process("sghmc", 2, &["--steps", "12", "--inducing", "8"]);
}

/// A classification `stream` (probit, labels of `synth --task classification`) with
/// held-out early stopping on 2 ranks gives one process's record bit for bit: the label
/// checks and the metrics run on every rank alike, the gradient chunks travel as in
/// regression.
#[test]
fn two_ranks_classification_stream_equal_one_process() {
    use dgp_data::synth::{SynthTask, write_synth_task};
    let s = Scratch::new("mpi-stream-class");
    let (train, test) = (s.path("train.rows"), s.path("test.rows"));
    write_synth_task(&train, 3000, 1, SynthTask::Classification, |_| {}).unwrap();
    write_synth_task(&test, 300, 2, SynthTask::Classification, |_| {}).unwrap();
    let args = |tag: &str| -> Vec<String> {
        [
            "stream",
            "--train",
            &train.display().to_string(),
            "--test",
            &test.display().to_string(),
            "--task",
            "classification",
            "--inducing",
            "16",
            "--batch",
            "1024",
            "--steps",
            "40",
            "--init-rows",
            "500",
            "--samples",
            "3",
            "--early-stopping",
            r#"{"patience": {"every": 5, "patience": 3}}"#,
            "--quiet",
            "--json",
            &s.path(&format!("{tag}.jsonl")).display().to_string(),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let o = Command::new(BIN)
        .args(args("one"))
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut c = mpirun();
    c.args(["-np", "2", BIN]).args(args("many"));
    let o = wait(spawn(c));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let read = |tag: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(s.path(&format!("{tag}.jsonl")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (one, many) = (read("one"), read("many"));
    assert_eq!(many.len(), 1, "rank 0 alone writes the record");
    for key in ["nll", "steps", "model", "held_out", "classification"] {
        assert_eq!(one[0][key], many[0][key], "{key} differs on 2 ranks");
    }
    assert!(one[0]["classification"]["metrics"]["auc"].as_f64().unwrap() > 0.5);
}

/// `stream` from a row store with held-out early stopping on 2 ranks (svi, batch 1024 =
/// two chunks) gives one process's record and prediction file bit for bit; rank 0 alone
/// writes them.
#[test]
fn two_ranks_stream_with_early_stopping_equal_one_process() {
    use dgp_data::rowstore::write_dataset;
    use dgp_data::synth::synth_dataset;
    let s = Scratch::new("mpi-stream");
    let (train, test) = (s.path("train.rows"), s.path("test.rows"));
    write_dataset(&train, &synth_dataset(3000, 1).unwrap(), &[]).unwrap();
    write_dataset(&test, &synth_dataset(300, 2).unwrap(), &[]).unwrap();
    let args = |tag: &str| -> Vec<String> {
        [
            "stream",
            "--train",
            &train.display().to_string(),
            "--test",
            &test.display().to_string(),
            "--inducing",
            "16",
            "--batch",
            "1024",
            "--steps",
            "40",
            "--init-rows",
            "500",
            "--samples",
            "3",
            "--early-stopping",
            r#"{"patience": {"every": 5, "patience": 3}}"#,
            "--quiet",
            "--json",
            &s.path(&format!("{tag}.jsonl")).display().to_string(),
            "--predictions",
            &s.path(&format!("{tag}.csv")).display().to_string(),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let o = Command::new(BIN)
        .args(args("one"))
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut c = mpirun();
    c.args(["-np", "2", BIN]).args(args("many"));
    let o = wait(spawn(c));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let read = |tag: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(s.path(&format!("{tag}.jsonl")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (one, many) = (read("one"), read("many"));
    assert_eq!(many.len(), 1, "rank 0 alone writes the record");
    for key in ["nll", "rmse", "steps", "model", "held_out"] {
        assert_eq!(one[0][key], many[0][key], "{key} differs on 2 ranks");
    }
    assert!(one[0]["held_out"]["heldout_rows"].as_u64().unwrap() > 0);
    assert_eq!(
        std::fs::read_to_string(s.path("one.csv")).unwrap(),
        std::fs::read_to_string(s.path("many.csv")).unwrap()
    );
}

/// A backend that does not declare `data_parallel` (nested: one tape or full-batch
/// L-BFGS) is refused before training by every rank, with one message.
#[test]
fn a_backend_that_is_not_data_parallel_is_refused_under_several_ranks() {
    let s = Scratch::new("mpi-nested");
    let json = s.path("a.jsonl");
    let mut c = mpirun();
    c.args(["-np", "2", BIN])
        .args(run_args("nested", &json, &["--steps", "5"]));
    let o = wait(spawn(c));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("does not split its training steps"), "{t}");
    assert_eq!(
        t.matches("does not split").count(),
        1,
        "rank 0 alone says it: {t}"
    );
    assert!(!json.exists(), "nothing is written");
}

#[test]
fn ranks_with_different_arguments_refuse_to_run() {
    let s = Scratch::new("mpi-args");
    let json = s.path("a.jsonl");
    let mut a = run_args("svi", &json, &["--steps", "5", "--seed", "0"]);
    let b = run_args("svi", &json, &["--steps", "5", "--seed", "1"]);
    let mut c = mpirun();
    c.args(["-np", "1", BIN]);
    c.args(a.drain(..));
    c.args([":", "-np", "1", BIN]);
    c.args(b);
    let o = wait(spawn(c));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("launched with different arguments"), "{t}");
    assert!(t.contains("rank(s) 1 differ"), "{t}");
    assert!(!json.exists(), "nothing is written");
}

/// The process id of rank `rank` of the launch whose ranks carry `tag` in their
/// environment (Linux `/proc`), waiting until it exists.
fn rank_pid(tag: &str, rank: usize) -> u32 {
    let want_tag = format!("DGP_MPI_TEST_TAG={tag}");
    let want_rank = format!("OMPI_COMM_WORLD_RANK={rank}");
    let t0 = Instant::now();
    loop {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(env) = std::fs::read(e.path().join("environ")) else {
                continue;
            };
            let vars: Vec<String> = env
                .split(|&b| b == 0)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect();
            let exe_ok = std::fs::read_link(e.path().join("exe"))
                .is_ok_and(|p| p.to_string_lossy().contains("dgp-bench"));
            if exe_ok && vars.contains(&want_tag) && vars.contains(&want_rank) {
                return pid;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no rank {rank}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// A run of two ranks of `steps` steps; returns the launch and its tag.
fn launch_of(s: &Scratch, json: &Path, steps: &str, extra: &[&str]) -> (Child, String) {
    let tag = format!("{}-{}", std::process::id(), s.0.display());
    let mut c = mpirun();
    c.env("DGP_MPI_TEST_TAG", &tag)
        .args(["-x", "DGP_MPI_TEST_TAG", "-np", "2", BIN])
        .args(run_args(
            "svi",
            json,
            &[&["--steps", steps], extra].concat(),
        ));
    (spawn(c), tag)
}

/// Waits until `file` exists (a checkpoint written by rank 0).
fn wait_for(file: &Path, child: &mut Child) {
    let t0 = Instant::now();
    while !file.exists() {
        assert!(child.try_wait().unwrap().is_none(), "launch ended early");
        assert!(t0.elapsed() < LIMIT, "no {}", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_to_one_rank_stops_both_and_the_run_resumes_exactly() {
    let s = Scratch::new("mpi-term");
    let steps = "400";
    // The uninterrupted reference, one process.
    let reference = s.path("ref.jsonl");
    let o = Command::new(BIN)
        .args(run_args("svi", &reference, &["--steps", steps]))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    let json = s.path("a.jsonl");
    let ck = s.path("ck");
    let ck_s = ck.display().to_string();
    let every = ["--checkpoint-every", "5"];
    let (mut child, tag) = launch_of(
        &s,
        &json,
        steps,
        &[&["--checkpoint", &ck_s], &every[..]].concat(),
    );
    // Rank 0 saves every 5 steps: training is under way.
    wait_for(&ck.join("svi-L2-split0.json"), &mut child);
    signal(rank_pid(&tag, 1), "-TERM");
    let o = wait(child);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(130), "{t}");
    // Rank 0 (which got no signal) stopped, saved and says how to resume.
    assert!(t.contains("--resume"), "{t}");
    assert!(!t.contains("MPI_ABORT"), "a shared stop, not an abort: {t}");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ck.join("svi-L2-split0.json")).unwrap())
            .unwrap();
    let done = state["state"]["steps_done"].as_u64().unwrap();
    assert!(done > 0 && done < 400, "saved after step {done}");

    // Resumed by two ranks: the records of the uninterrupted single process.
    let mut c = mpirun();
    c.args(["-np", "2", BIN]).args(run_args(
        "svi",
        &json,
        &[&["--steps", steps, "--resume", &ck_s], &every[..]].concat(),
    ));
    let o = wait(spawn(c));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(records(&reference), records(&json));
}

#[test]
fn a_killed_rank_ends_the_launch() {
    let s = Scratch::new("mpi-kill");
    let json = s.path("a.jsonl");
    let ck = s.path("ck");
    let ck_s = ck.display().to_string();
    let (mut child, tag) = launch_of(
        &s,
        &json,
        "200000",
        &["--checkpoint", &ck_s, "--checkpoint-every", "5"],
    );
    wait_for(&ck.join("svi-L2-split0.json"), &mut child);
    let t0 = Instant::now();
    signal(rank_pid(&tag, 1), "-KILL");
    let o = wait(child);
    let t = text(&o);
    assert_ne!(o.status.code(), Some(0), "{t}");
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t0.elapsed()
    );
    assert!(
        !json.exists() || records(&json).is_empty(),
        "no record of an unfinished split"
    );
}
