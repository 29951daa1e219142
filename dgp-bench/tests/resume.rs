//! Checkpoints and exact resume (issue 16): a library-level split of one fit into two
//! (fit k steps, save, load, fit the rest = fit all steps, bit for bit), and the binary
//! interrupted by SIGINT or SIGKILL and resumed, ending with the same records as a run
//! that was never interrupted (timing fields and the command line aside).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dgp_bench::backends::{ArchSpec, find_backend};
use dgp_bench::report::read_json_lines;
use dgp_core::rng::{seeded, standard_normal};
use dgp_data::Dataset;
use dgp_traits::fit::{Checkpoints, FitHooks, LrSchedule, Progress, RunControl};
use dgp_traits::model::{FitConfig, Model, PredictConfig};
use dgp_traits::train::RunState;
use faer::Mat;

/// Stops after `stop_after` steps (if set) and keeps the states it is handed.
#[derive(Default)]
struct Recorder {
    steps: usize,
    stop_after: Option<usize>,
    every: usize,
    saved: Vec<RunState>,
    resume: Option<RunState>,
}

impl Progress for Recorder {
    fn on_step(&mut self, _step: usize, _total: usize, _objective: f64) {
        self.steps += 1;
    }
}

impl RunControl for Recorder {
    fn should_stop(&self) -> bool {
        self.stop_after.is_some_and(|k| self.steps >= k)
    }
    fn take_resume_state(&mut self) -> Option<RunState> {
        self.resume.take()
    }
}

impl Checkpoints for Recorder {
    fn every(&self) -> usize {
        self.every
    }
    fn save(&mut self, state: &RunState) -> dgp_core::Result<()> {
        self.saved.push(state.clone());
        Ok(())
    }
}

fn data() -> Dataset {
    let mut rng = seeded(5);
    let x = standard_normal(&mut rng, 30, 2);
    let y = Mat::from_fn(30, 1, |i, _| (2.0 * x[(i, 0)]).sin() + 0.3 * x[(i, 1)]);
    Dataset::new(x, y).unwrap()
}

type Loader = fn(&str) -> dgp_core::Result<Box<dyn Model>>;

/// Fit 40 steps at once, and 17 + 23 steps with a save (state through JSON) and a model
/// reloaded from its checkpoint in between: the same parameters, report and predictions.
fn split_fit_equals_whole(name: &str, load: Loader) {
    let b = find_backend(name).unwrap();
    let mut arch = ArchSpec::with_defaults(b, 2);
    arch.num_inducing = 5;
    arch.tune = false;
    let d = data();
    let cfg = FitConfig {
        steps: 40,
        batch_size: 12,
        ..FitConfig::default()
    };
    let mut whole = b
        .build_model(
            &arch,
            0.01,
            &LrSchedule::Constant,
            &cfg,
            &d,
            &FitHooks::none(),
        )
        .unwrap();
    let fresh_json = whole.to_json().unwrap();
    let rep_whole = whole
        .fit(&d, &cfg, &mut FitHooks::all(&mut Recorder::default()))
        .unwrap();

    let mut first = load(&fresh_json).unwrap();
    let mut rec = Recorder {
        stop_after: Some(17),
        every: 1000,
        ..Recorder::default()
    };
    first.fit(&d, &cfg, &mut FitHooks::all(&mut rec)).unwrap();
    let state = rec.saved.pop().expect("a state saved on the stop request");
    assert_eq!(state.steps_done, 17, "{name}");
    let text = serde_json::to_string(&state).unwrap();
    let state: RunState = serde_json::from_str(&text).unwrap();

    let mut second = load(&fresh_json).unwrap();
    let mut rec = Recorder {
        resume: Some(state),
        ..Recorder::default()
    };
    let rep = second.fit(&d, &cfg, &mut FitHooks::all(&mut rec)).unwrap();
    assert_eq!(
        rec.steps, 23,
        "{name}: resumed run takes the remaining steps"
    );
    assert_eq!(rep.steps, rep_whole.steps, "{name}");
    assert_eq!(rep.history, rep_whole.history, "{name}");
    assert_eq!(
        rep.final_objective.to_bits(),
        rep_whole.final_objective.to_bits(),
        "{name}"
    );
    let bits =
        |m: &dyn Model| -> Vec<u64> { m.params().flat().iter().map(|v| v.to_bits()).collect() };
    assert_eq!(
        bits(second.as_ref()),
        bits(whole.as_ref()),
        "{name}: parameters"
    );
    let pc = PredictConfig {
        samples: 4,
        seed: 3,
    };
    let p1 = whole
        .predict(d.x(), &pc)
        .unwrap()
        .log_density(d.y())
        .unwrap();
    let p2 = second
        .predict(d.x(), &pc)
        .unwrap()
        .log_density(d.y())
        .unwrap();
    assert_eq!(p1, p2, "{name}: predictions");
}

#[test]
fn svi_fit_saved_loaded_and_finished_equals_one_fit() {
    split_fit_equals_whole("svi", |s| Ok(Box::new(dgp_svi::SviModel::from_json(s)?)));
}

#[test]
fn star_fc_and_mf_fit_saved_loaded_and_finished_equals_one_fit() {
    let load: Loader = |s| Ok(Box::new(dgp_structured::StructuredModel::from_json(s)?));
    split_fit_equals_whole("star", load);
    split_fit_equals_whole("fc", load);
    split_fit_equals_whole("mf", load);
}

#[test]
fn nested_fit_saved_loaded_and_finished_equals_one_fit() {
    split_fit_equals_whole("nested", |s| {
        Ok(Box::new(dgp_nested::NestedModel::from_json(s)?))
    });
}

// ---- the binary ----

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("dgp-resume-{tag}-{}", std::process::id()));
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

/// A UCI folder of 60 rows and 2 splits.
fn write_uci(dir: &Path) {
    std::fs::create_dir_all(dir.join("splits")).unwrap();
    let data: String = (0..60)
        .map(|i| {
            let a = (i % 10) as f64 / 5.0 - 1.0;
            let b = (i / 10) as f64 / 3.0 - 1.0;
            format!(
                "{a} {b} {}\n",
                (2.0 * a).sin() + 0.5 * b + 0.01 * ((i * 7919) % 13) as f64
            )
        })
        .collect();
    std::fs::write(dir.join("data.txt"), data).unwrap();
    std::fs::write(dir.join("index_features.txt"), "0\n1\n").unwrap();
    std::fs::write(dir.join("index_target.txt"), "2\n").unwrap();
    std::fs::write(dir.join("n_splits.txt"), "2\n").unwrap();
    for k in 0..2usize {
        let test: Vec<usize> = (0..60).filter(|i| i % 10 == 3 + k).collect();
        let train: Vec<usize> = (0..60).filter(|i| !test.contains(i)).collect();
        let fmt = |v: &[usize]| v.iter().map(|i| format!("{i}\n")).collect::<String>();
        std::fs::write(dir.join(format!("splits/index_train_{k}.txt")), fmt(&train)).unwrap();
        std::fs::write(dir.join(format!("splits/index_test_{k}.txt")), fmt(&test)).unwrap();
    }
}

fn args(uci: &Path, json: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "run",
        "--backend",
        "svi",
        "--layers",
        "2",
        "--inducing",
        "6",
        "--steps",
        "4000",
        "--batch",
        "16",
        "--samples",
        "5",
        "--hidden",
        "2",
        "--quiet",
        "--data",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(uci.display().to_string());
    v.push("--json".into());
    v.push(json.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn spawn(args: &[String]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dgp-bench")
}

fn run(args: &[String]) -> (Option<i32>, String) {
    let o = spawn(args).wait_with_output().unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
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

/// Waits until `file` holds a state with at least `min_steps` steps done.
fn wait_for_state(file: &Path, min_steps: usize, child: &mut Child) {
    let t0 = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && v["state"]["steps_done"].as_u64().unwrap_or(0) as usize >= min_steps
        {
            return;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "run ended before {}",
            file.display()
        );
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no checkpoint at {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {signal}");
}

fn interrupted_then_resumed(signal: &str) {
    let s = Scratch::new(&signal[1..]);
    let uci = s.path("uci");
    write_uci(&uci);
    let (code, text) = run(&args(&uci, &s.path("ref.jsonl"), &[]));
    assert_eq!(code, Some(0), "{text}");
    let reference = records(&s.path("ref.jsonl"));
    assert_eq!(reference.len(), 2);

    let ck = s.path("ck");
    let ck_s = ck.display().to_string();
    let json = s.path("run.jsonl");
    let mut child = spawn(&args(
        &uci,
        &json,
        &["--checkpoint", &ck_s, "--checkpoint-every", "100"],
    ));
    // Part-way through the second split.
    wait_for_state(&ck.join("svi-L2-split1.json"), 200, &mut child);
    kill(&child, signal);
    let o = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    if signal == "-INT" {
        assert_eq!(o.status.code(), Some(130), "{text}");
        assert!(text.contains("--resume"), "{text}");
        assert!(!text.contains("panicked"), "{text}");
        assert_eq!(records(&json).len(), 1, "the finished split is kept");
    }
    let (code, text) = run(&args(
        &uci,
        &json,
        &["--resume", &ck_s, "--checkpoint-every", "100"],
    ));
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        records(&json),
        reference,
        "resumed records equal the uninterrupted ones"
    );
}

#[test]
fn sigint_part_way_then_resume_gives_the_uninterrupted_records() {
    interrupted_then_resumed("-INT");
}

#[test]
fn sigkill_then_resume_from_the_last_periodic_checkpoint() {
    interrupted_then_resumed("-KILL");
}

/// The classification records of a JSON Lines file without timing fields and the command.
fn class_records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            for k in ["train_seconds", "predict_seconds", "command"] {
                o.remove(k);
            }
            v
        })
        .collect()
}

#[test]
fn a_classification_run_interrupted_and_resumed_gives_the_uninterrupted_records() {
    let s = Scratch::new("class");
    let uci = s.path("uci");
    write_uci(&uci);
    // The same inputs with a binary label: the sign of the regression target.
    let data: String = std::fs::read_to_string(uci.join("data.txt"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: Vec<f64> = l.split_whitespace().map(|t| t.parse().unwrap()).collect();
            format!("{} {} {}\n", v[0], v[1], u8::from(v[2] > 0.0))
        })
        .collect();
    std::fs::write(uci.join("data.txt"), data).unwrap();
    let class = |json: &Path, extra: &[&str]| {
        let mut v = args(&uci, json, extra);
        v.extend(["--task".to_string(), "classification".to_string()]);
        v
    };
    let (code, text) = run(&class(&s.path("ref.jsonl"), &[]));
    assert_eq!(code, Some(0), "{text}");
    let reference = class_records(&s.path("ref.jsonl"));
    assert_eq!(reference.len(), 2);
    assert_eq!(reference[0]["task"], "classification");

    let ck = s.path("ck");
    let ck_s = ck.display().to_string();
    let json = s.path("run.jsonl");
    let mut child = spawn(&class(
        &json,
        &["--checkpoint", &ck_s, "--checkpoint-every", "100"],
    ));
    wait_for_state(&ck.join("svi-L2-split1.json"), 200, &mut child);
    kill(&child, "-INT");
    let o = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{text}");
    assert!(text.contains("--resume"), "{text}");
    assert_eq!(class_records(&json).len(), 1, "the finished split is kept");
    // A resume with another likelihood is refused: the likelihood is in the fingerprint.
    let (code, text) = run(&class(
        &s.path("other.jsonl"),
        &["--resume", &ck_s, "--likelihood", "logit"],
    ));
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("other settings"), "{text}");
    let (code, text) = run(&class(
        &json,
        &["--resume", &ck_s, "--checkpoint-every", "100"],
    ));
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        class_records(&json),
        reference,
        "resumed records equal the uninterrupted ones"
    );
}

#[test]
fn checkpoint_refuses_a_backend_that_cannot_resume_and_resume_checks_settings() {
    let s = Scratch::new("refuse");
    let uci = s.path("uci");
    write_uci(&uci);
    let ck = s.path("ck").display().to_string();
    let mut a = args(&uci, &s.path("x.jsonl"), &["--checkpoint", &ck]);
    a[2] = "dgps".into();
    a[8] = "30".into(); // within dgps's max_iters
    let (code, text) = run(&a);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("dgps cannot resume"), "{text}");
    // A finished checkpointed run, then a resume with another seed: refused.
    let mut a = args(
        &uci,
        &s.path("y.jsonl"),
        &["--checkpoint", &ck, "--splits", "0"],
    );
    a[8] = "30".into();
    let (code, text) = run(&a);
    assert_eq!(code, Some(0), "{text}");
    let mut a = args(
        &uci,
        &s.path("y.jsonl"),
        &["--resume", &ck, "--splits", "0", "--seed", "3"],
    );
    a[8] = "30".into();
    let (code, text) = run(&a);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("other settings"), "{text}");
}

/// Starts `dgp-bench run` with `argv`, waits for its first line of output (printed after
/// the interrupt handler is installed), lets it train for a moment and sends SIGTERM: the
/// run must end within 30 s with exit code 130, a message containing `expect`, and no
/// record. Before the stop request reached every training loop, dspp's β/width selection
/// (the candidate fits inside `build`) and the sghmc sampler trained on until SIGKILL.
fn terminated_promptly(argv: &[String], json: &Path, expect: &str) {
    use std::io::{BufRead, BufReader};
    let mut child = spawn(argv);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with("data "), "{first}");
    std::thread::sleep(Duration::from_millis(700));
    assert!(child.try_wait().unwrap().is_none(), "the run ended early");
    let t = Instant::now();
    kill(&child, "-TERM");
    let o = child.wait_with_output().unwrap();
    let waited = t.elapsed();
    let text = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{text}");
    assert!(waited < Duration::from_secs(30), "took {waited:?} to stop");
    assert!(text.contains(expect), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(records(json).is_empty(), "no split was finished");
}

fn long_run(uci: &Path, json: &Path, backend: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "run",
        "--backend",
        backend,
        "--layers",
        "2",
        "--inducing",
        "6",
    ]
    .iter()
    .chain(["--steps", "1000000", "--samples", "3", "--quiet", "--data"].iter())
    .map(|s| s.to_string())
    .collect();
    v.push(uci.display().to_string());
    v.push("--json".into());
    v.push(json.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

#[test]
fn sigterm_during_dspp_beta_and_width_selection_stops_the_run() {
    let s = Scratch::new("term-dspp");
    let uci = s.path("uci");
    write_uci(&uci);
    let json = s.path("run.jsonl");
    // No --beta/--hidden: the run selects both (4 β × 2 widths, and the one-layer PPGPR
    // for each β); no early stopping, so the first candidate would train for a million
    // steps.
    let argv = long_run(&uci, &json, "dspp", &["--set", "early_stopping=null"]);
    terminated_promptly(&argv, &json, "selection, during candidate 1 of 12");
}

#[test]
fn sigterm_during_sghmc_sampling_stops_the_run() {
    let s = Scratch::new("term-sghmc");
    let uci = s.path("uci");
    write_uci(&uci);
    let json = s.path("run.jsonl");
    let argv = long_run(
        &uci,
        &json,
        "sghmc",
        &["--set", "sampler.burn_in=100000000"],
    );
    terminated_promptly(&argv, &json, "interrupted during sghmc");
}

/// Resume through the binary is exact for EVERY backend that declares itself resumable
/// ([`dgp_traits::backend::Capabilities::resumable`], read from the registry, so a backend
/// that starts declaring it is tested too): a run killed (SIGKILL) while its step 17 is
/// stuck (the test hook `DGP_BENCH_TEST_STALL_AT_STEP`) leaves the checkpoint of step 15;
/// resuming it gives the records of a run that was never interrupted, bit for bit (timing
/// fields and the command line aside).
#[test]
fn killed_then_resumed_equals_uninterrupted_for_every_resumable_backend() {
    let s = Scratch::new("every");
    let uci = s.path("uci");
    write_uci(&uci);
    let resumable: Vec<&str> = dgp_bench::backends::backends()
        .iter()
        .filter(|b| b.capabilities().resumable)
        .map(|b| b.name())
        .collect();
    assert!(resumable.len() >= 5, "{resumable:?}");
    for name in resumable {
        let argv = |json: &str, extra: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = [
                "run",
                "--backend",
                name,
                "--layers",
                "2",
                "--inducing",
                "5",
                "--hidden",
                "2",
                "--steps",
                "30",
                "--batch",
                "16",
                "--samples",
                "3",
                "--splits",
                "0",
                "--no-tune",
                "--quiet",
                "--checkpoint-every",
                "5",
                // nested's held-out rule cannot be checkpointed; the others have none.
                "--early-stopping",
                "none",
                "--data",
            ]
            .iter()
            .map(|x| x.to_string())
            .collect();
            v.push(uci.display().to_string());
            v.push("--json".into());
            v.push(s.path(json).display().to_string());
            v.extend(extra.iter().map(|x| x.to_string()));
            v
        };
        let (code, text) = run(&argv(&format!("{name}-ref.jsonl"), &[]));
        assert_eq!(code, Some(0), "{name}: {text}");
        let reference = records(&s.path(&format!("{name}-ref.jsonl")));
        assert_eq!(reference.len(), 1, "{name}");

        let ck = s.path(&format!("ck-{name}"));
        let ck_s = ck.display().to_string();
        let json = format!("{name}.jsonl");
        let mut child = Command::new(env!("CARGO_BIN_EXE_dgp-bench"))
            .args(argv(&json, &["--checkpoint", &ck_s]))
            .env("DGP_BENCH_TEST_STALL_AT_STEP", "17")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let file = ck.join(format!("{name}-L2-split0.json"));
        wait_for_state(&file, 15, &mut child);
        // The state of step 15 is the last one: step 17 never ends.
        std::thread::sleep(Duration::from_millis(200));
        kill(&child, "-KILL");
        child.wait().unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(v["state"]["steps_done"], 15, "{name}");
        let (code, text) = run(&argv(&json, &["--resume", &ck_s]));
        assert_eq!(code, Some(0), "{name}: {text}");
        assert_eq!(
            records(&s.path(&json)),
            reference,
            "{name}: the resumed run's records equal the uninterrupted one's"
        );
    }
}
