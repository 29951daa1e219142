//! A library fit that protects itself ([`dgp_traits::guard`]): an svi fit with the
//! checkpoint-directory and stop hooks, in a child process (this test binary run again on
//! [`guarded_fit_child`]), killed with SIGKILL mid-run — twice, the second time while it
//! continues the first — or stopped by SIGINT, and then continued, equals the fit that was
//! never interrupted bit for bit (parameters, report history, predictions). And two runs
//! on one checkpoint directory at once: the second refuses, naming the first's process,
//! and the first's outputs are intact.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dgp_svi::{SviConfig, SviModel};
use dgp_traits::data::Dataset;
use dgp_traits::fit::Training;
use dgp_traits::fitted::{Estimator, Fitted};
use dgp_traits::guard::{CheckpointDir, DEFAULT_FILE, Guard, fit_identity};
use dgp_traits::model::Objective;
use dgp_traits::testing::{ScratchDir, toy_regression};
use dgp_traits::{CheckpointError, Error};

/// The child's checkpoint directory (set: this process is a child).
const CHILD_DIR: &str = "DGP_GUARD_TEST_CHILD_DIR";
/// Where a child that finishes writes its predictions.
const CHILD_OUT: &str = "DGP_GUARD_TEST_CHILD_OUT";

/// 2 000 steps on minibatches of 32 rows, no stop.
fn config() -> SviConfig {
    SviConfig {
        layers: 2,
        num_inducing: 8,
        hidden_width: Some(2),
        train_samples: 2,
        training: Training {
            steps: 2000,
            batch_size: 32,
            seed: 7,
            ..Training::default()
        },
        ..SviConfig::default()
    }
}

/// [`config`] with `steps` steps.
fn config_with_steps(steps: usize) -> SviConfig {
    let mut c = config();
    c.training.steps = steps;
    c
}

fn data() -> Dataset {
    toy_regression(160, 2, 1.5, 3)
}

/// Steps between the child's checkpoints.
const EVERY: usize = 20;

/// The model's parameters, its report history and its test log densities, as bits.
fn outputs(f: &Fitted<SviModel>) -> Vec<u64> {
    let d = toy_regression(40, 2, 1.5, 9);
    let mut v: Vec<u64> = f
        .model()
        .params()
        .flat()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    v.extend(
        f.report()
            .history
            .iter()
            .flat_map(|&(s, o)| [s as u64, o.to_bits()]),
    );
    let p = f.predict(d.x()).unwrap().log_density(d.y()).unwrap();
    v.extend(p.iter().map(|x| x.to_bits()));
    v
}

/// The child: the one line of a guarded fit, then its outputs to `CHILD_OUT`. Exits with
/// 0, or 130 for a stop, or 3 for any other error (printed). Without `CHILD_DIR` (a plain
/// test run) it does nothing.
#[test]
fn guarded_fit_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let fitted = Guard::checkpoint_dir(&dir)
        .and_then(Guard::stop_on_signals)
        .and_then(|g| g.save_every(EVERY).fit(&config(), &data()));
    match fitted {
        Ok(f) => {
            let out = std::env::var_os(CHILD_OUT).expect("CHILD_OUT");
            std::fs::write(out, serde_json::to_string(&outputs(&f)).unwrap()).unwrap();
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("child error: {e}");
            std::process::exit(if matches!(e, Error::Interrupted(_)) {
                130
            } else {
                3
            });
        }
    }
}

fn spawn_child(dir: &Path, out: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "guarded_fit_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_OUT, out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The steps done in the state of `dir`, if a state is there.
fn saved_steps(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(DEFAULT_FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["state"]["steps_done"].as_u64()
}

/// Waits until `dir` holds a state of at least `steps` steps (the child still running).
fn wait_for_state(dir: &Path, steps: u64, child: &mut Child) -> u64 {
    let t0 = Instant::now();
    loop {
        if let Some(done) = saved_steps(dir).filter(|&d| d >= steps) {
            return done;
        }
        assert!(child.try_wait().unwrap().is_none(), "the child ended first");
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no state of {steps} steps"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

/// Counts the steps it is shown.
struct Steps(usize);

impl dgp_traits::fit::Progress for Steps {
    fn on_step(&mut self, _step: usize, _total: usize, _objective: f64) {
        self.0 += 1;
    }
}

fn uninterrupted() -> Vec<u64> {
    outputs(&config().fit_with(&data(), &mut Default::default()).unwrap())
}

/// The state file verifies (layout, checksum, identity, values) for this fit.
fn verifies(dir: &Path) -> u64 {
    let identity = fit_identity(&config(), &config().fit_config(data().n()), &data()).unwrap();
    let state = CheckpointDir::for_reading(dir)
        .load(DEFAULT_FILE, &identity)
        .unwrap()
        .expect("a saved state");
    state.steps_done as u64
}

#[test]
fn killed_twice_then_continued_equals_the_uninterrupted_fit_bit_for_bit() {
    let reference = uninterrupted();
    let s = ScratchDir::new("svi-guard", "kill");
    let (dir, out) = (s.join("ckpt"), s.join("out.json"));
    // Killed early, then killed again while it continues from the first kill's state.
    let mut first = spawn_child(&dir, &out);
    wait_for_state(&dir, 100, &mut first);
    signal(&first, "-KILL");
    first.wait().unwrap();
    let after_first = verifies(&dir);
    assert!((100..2000).contains(&after_first), "{after_first}");
    let mut second = spawn_child(&dir, &out);
    wait_for_state(&dir, after_first + 300, &mut second);
    signal(&second, "-KILL");
    second.wait().unwrap();
    let after_second = verifies(&dir);
    assert!(
        after_second > after_first && after_second < 2000,
        "{after_second}"
    );
    assert_eq!(
        after_second % EVERY as u64,
        0,
        "only periodic states were written"
    );
    assert!(!out.exists(), "a killed fit returns nothing");
    // The same line once more (here, in this process, counting its steps) finishes the
    // fit: only the steps after the second kill's state are trained.
    let mut steps = Steps(0);
    let mut guard = Guard::checkpoint_dir(&dir)
        .unwrap()
        .save_every(EVERY)
        .progress(&mut steps);
    let resumed = guard.fit(&config(), &data()).unwrap();
    assert_eq!(guard.resumed_step(), Some(after_second as usize));
    drop(guard);
    assert_eq!(steps.0 as u64, 2000 - after_second);
    assert_eq!(
        outputs(&resumed),
        reference,
        "continued = uninterrupted, bit for bit"
    );
}

#[test]
fn stopped_by_sigint_then_continued_equals_the_uninterrupted_fit_bit_for_bit() {
    let reference = uninterrupted();
    let s = ScratchDir::new("svi-guard", "sigint");
    let (dir, out) = (s.join("ckpt"), s.join("out.json"));
    let mut child = spawn_child(&dir, &out);
    wait_for_state(&dir, 200, &mut child);
    signal(&child, "-INT");
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        err.contains("stopped on request") && err.contains("state.json"),
        "{err}"
    );
    // Stopped after a step, it saved that step's state (not only a periodic one).
    let stopped = verifies(&dir);
    assert!((200..2000).contains(&stopped), "{stopped}");
    let mut child = spawn_child(&dir, &out);
    let o = child.wait().unwrap();
    assert!(o.success());
    let written: Vec<u64> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written, reference, "continued = uninterrupted, bit for bit");
    assert_eq!(verifies(&dir), 2000);
}

#[test]
fn a_second_run_on_the_same_directory_refuses_and_the_first_is_intact() {
    let reference = uninterrupted();
    let s = ScratchDir::new("svi-guard", "lock");
    let (dir, out) = (s.join("ckpt"), s.join("out.json"));
    let mut first = spawn_child(&dir, &out);
    wait_for_state(&dir, EVERY as u64, &mut first);
    // A second process on the directory, and a second run in this one: both refused.
    let second = spawn_child(&dir, &s.join("second.json"));
    let o = second.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("in use by another run") && err.contains(&format!("process {}", first.id())),
        "{err}"
    );
    match Guard::checkpoint_dir(&dir) {
        Err(Error::Checkpoint(CheckpointError::Locked { holder, .. })) => {
            assert_eq!(holder, Some(first.id()));
        }
        other => panic!("{other:?}"),
    }
    assert!(!s.join("second.json").exists());
    // The first run finishes undisturbed, with the uninterrupted outputs.
    assert!(first.wait().unwrap().success());
    let written: Vec<u64> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written, reference);
    assert_eq!(verifies(&dir), 2000);
    // Once it ended, the directory is free: the finished state gives the same model.
    let again = Guard::checkpoint_dir(&dir)
        .unwrap()
        .fit(&config(), &data())
        .unwrap();
    assert_eq!(outputs(&again), reference);
}

/// Every bad input of a guarded library fit is a typed error that leaves the saved state
/// as it was: a stop before the first step, a directory of another configuration, an
/// edited state.
#[test]
fn bad_inputs_are_typed_errors_and_nothing_is_written_over() {
    let s = ScratchDir::new("svi-guard", "bad");
    let dir = s.join("ckpt");
    let short = config_with_steps(30);
    Guard::checkpoint_dir(&dir)
        .unwrap()
        .fit(&short, &data())
        .unwrap();
    let file: PathBuf = dir.join(DEFAULT_FILE);
    let bytes = std::fs::read(&file).unwrap();
    let mut stopped = Guard::checkpoint_dir(&dir).unwrap();
    stopped.stop_handle().request();
    let e = stopped.fit(&short, &data()).unwrap_err();
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    drop(stopped);
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    let other = SviConfig {
        num_inducing: 9,
        ..short.clone()
    };
    match Guard::checkpoint_dir(&dir)
        .unwrap()
        .fit(&other, &data())
        .unwrap_err()
    {
        Error::Checkpoint(CheckpointError::OtherRun {
            field, saved, now, ..
        }) => {
            assert_eq!(
                (field.as_str(), saved.as_str(), now.as_str()),
                ("config.num_inducing", "8", "9")
            );
        }
        e => panic!("{e}"),
    }
    let text = String::from_utf8(bytes.clone()).unwrap();
    let at = text.find("\"params\":[").unwrap() + 10;
    let digit = text[at..].find(|c: char| c.is_ascii_digit()).unwrap() + at;
    let mut edited = text.into_bytes();
    edited[digit] = if edited[digit] == b'7' { b'8' } else { b'7' };
    std::fs::write(&file, &edited).unwrap();
    match Guard::checkpoint_dir(&dir)
        .unwrap()
        .fit(&short, &data())
        .unwrap_err()
    {
        Error::Checkpoint(CheckpointError::Damaged { field, .. }) => {
            assert_eq!(field.as_deref(), Some("checksum"));
        }
        e => panic!("{e}"),
    }
    assert_eq!(
        std::fs::read(&file).unwrap(),
        edited,
        "the edited file is kept as it is"
    );
    std::fs::write(&file, &bytes).unwrap();
    assert!(
        Guard::checkpoint_dir(&dir)
            .unwrap()
            .fit(&short, &data())
            .is_ok()
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
}
