//! The guard on a small linear model trained by the core executor: exact resume through a
//! checkpoint directory, and every refusal (a stop before the first step, a directory of
//! another configuration or data set, a damaged or edited state, a fresh start over a
//! saved state, a locked directory, a diverged state), each leaving the saved file as it
//! was.

use faer::{Mat, MatRef};
use serde::Serialize;

use super::*;
use crate::data::RowSource;
use crate::model::{Batch, FitConfig, FitReport, Model, Objective, PredictConfig};
use crate::optim::AdamConfig;
use crate::params::{ParamStore, Role};
use crate::predictive::Predictive;
use crate::rng::{Rng, standard_normal};
use crate::tape::{Tape, Var};
use crate::testing::{ScratchDir, toy_regression};
use crate::train::{AdamStepper, CallerHooks, Executor};

/// y ≈ [x, 1]·w by Adam on −½ Σ residual² (scaled to N rows) plus 0.01 × a standard
/// normal draw, so that the noise stream's position shows in the values.
#[derive(Clone, Debug, Serialize)]
struct LineConfig {
    lr: f64,
    /// A fit that never reaches the executor (as a full-batch backend's).
    no_executor: bool,
    /// The training schedule.
    training: crate::fit::Training,
}

#[derive(Debug)]
struct Line {
    config: LineConfig,
    params: ParamStore,
}

impl Objective for Line {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    fn record(&self, tape: &mut Tape, p: &[Var], batch: &Batch<'_>, rng: &mut Rng) -> Result<Var> {
        let (b, d) = (batch.x.nrows(), batch.x.ncols());
        let design = Mat::from_fn(b, d + 1, |i, j| if j < d { batch.x[(i, j)] } else { 1.0 });
        let x = tape.constant(design);
        let y = tape.constant(batch.y.to_owned());
        let fit = tape.matmul(x, p[0]);
        let r = tape.sub(y, fit);
        let sq = tape.sum_squares(r);
        let v = tape.scale(sq, -0.5 * batch.num_data as f64 / b as f64);
        let eps = standard_normal(rng, 1, 1)[(0, 0)];
        Ok(tape.add_scalar(v, 0.01 * eps))
    }
}

impl Model for Line {
    fn backend(&self) -> &'static str {
        "line"
    }
    fn describe(&self) -> String {
        "line".into()
    }
    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        if self.config.no_executor {
            return Ok(FitReport::default());
        }
        Executor::new(AdamStepper::new(AdamConfig::with_lr(self.config.lr)), cfg)
            .observe(&mut CallerHooks::new(hooks))
            .run(self, data)
    }
    fn predict(&self, x: MatRef<'_, f64>, _cfg: &PredictConfig) -> Result<Predictive> {
        let w = self.params.flat();
        let d = x.ncols();
        let mean = Mat::from_fn(x.nrows(), 1, |i, _| {
            (0..d).map(|j| x[(i, j)] * w[j]).sum::<f64>() + w[d]
        });
        Predictive::single_gaussian(mean, Mat::from_fn(x.nrows(), 1, |_, _| 0.1))
    }
    fn to_json(&self) -> Result<String> {
        serde_json::to_string(&self.params).map_err(|e| Error::Serde(e.to_string()))
    }
}

impl Estimator for LineConfig {
    type Model = Line;
    fn build(&self, train: &Dataset, _fit: &FitConfig, _stop: &FitHooks<'_>) -> Result<Line> {
        let mut params = ParamStore::new();
        params.add("w", Mat::zeros(train.input_dim() + 1, 1), Role::Optimised)?;
        Ok(Line {
            config: self.clone(),
            params,
        })
    }
    fn defaults(&self) -> crate::run_defaults::RunDefaults {
        crate::run_defaults::RunDefaults {
            num_inducing: 0,
            train_samples: 1,
            predict_samples: 1,
            learning_rate: self.lr,
            unguarded_learning_rate: None,
            training: self.training.clone(),
        }
    }
    fn likelihood_family(&self) -> crate::likelihoods::LikelihoodFamily {
        crate::likelihoods::LikelihoodFamily::Gaussian
    }
}

/// 40 steps on minibatches of 8 rows, seed 5.
fn config() -> LineConfig {
    LineConfig {
        lr: 0.05,
        no_executor: false,
        training: crate::fit::Training {
            steps: 40,
            batch_size: 8,
            seed: 5,
            ..crate::fit::Training::default()
        },
    }
}

fn data() -> Dataset {
    toy_regression(30, 2, 1.0, 4)
}

/// Requests a stop of its flag once `after` steps were reported.
struct StopAt {
    flag: StopFlag,
    after: usize,
    seen: usize,
}

impl Progress for StopAt {
    fn on_step(&mut self, _step: usize, _total: usize, _objective: f64) {
        self.seen += 1;
        if self.seen == self.after {
            self.flag.request();
        }
    }
}

fn bits(f: &Fitted<Line>) -> Vec<u64> {
    f.model()
        .params()
        .flat()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn state_file(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(DEFAULT_FILE)).unwrap()).unwrap()
}

#[test]
fn a_stopped_fit_continues_from_its_directory_bit_for_bit() {
    let d = data();
    let whole = config().fit(&d).unwrap();
    let dir = ScratchDir::new("guard", "resume");
    // Stopped after 17 steps: an error saying what was saved, the state of step 17.
    let flag = StopFlag::new();
    let mut stop = StopAt {
        flag: flag.clone(),
        after: 17,
        seen: 0,
    };
    let e = Guard::checkpoint_dir(&*dir)
        .unwrap()
        .save_every(5)
        .stop_flag(&flag)
        .progress(&mut stop)
        .fit(&config(), &d)
        .unwrap_err();
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    assert!(
        e.to_string().contains("after step 17 of 40") && e.to_string().contains("(step 17)"),
        "{e}"
    );
    assert_eq!(state_file(&dir)["state"]["steps_done"], 17);
    // The same line again continues: the 23 remaining steps, the uninterrupted model.
    let mut guard = Guard::checkpoint_dir(&*dir).unwrap().save_every(5);
    let resumed = guard.fit(&config(), &d).unwrap();
    assert_eq!(guard.resumed_step(), Some(17));
    assert_eq!(bits(&resumed), bits(&whole));
    assert_eq!(resumed.report().history, whole.report().history);
    let pc = PredictConfig::default();
    let (a, b) = (
        whole.predict(d.x()).unwrap().log_density(d.y()).unwrap(),
        resumed
            .predict_with(d.x(), &pc)
            .unwrap()
            .log_density(d.y())
            .unwrap(),
    );
    assert_eq!(a, b);
    drop(guard);
    // A finished state gives the finished model at once (no step replayed).
    let mut steps = StopAt {
        flag: StopFlag::new(),
        after: usize::MAX,
        seen: 0,
    };
    let again = Guard::checkpoint_dir(&*dir)
        .unwrap()
        .progress(&mut steps)
        .fit(&config(), &d)
        .unwrap();
    assert_eq!((bits(&again), steps.seen), (bits(&whole), 0));
}

#[test]
fn a_stop_requested_before_the_first_step_trains_and_writes_nothing() {
    let dir = ScratchDir::new("guard", "early-stop");
    let flag = StopFlag::new();
    flag.request();
    let e = Guard::checkpoint_dir(&*dir)
        .unwrap()
        .stop_flag(&flag)
        .fit(&config(), &data())
        .unwrap_err();
    assert!(
        matches!(&e, Error::Interrupted(m) if m.contains("before the first step")),
        "{e}"
    );
    assert!(!dir.join(DEFAULT_FILE).exists(), "nothing written");
}

/// A finished run's directory, and its state file's bytes.
fn finished_run(name: &str) -> (ScratchDir, Vec<u8>) {
    let dir = ScratchDir::new("guard", name);
    Guard::checkpoint_dir(&*dir)
        .unwrap()
        .fit(&config(), &data())
        .unwrap();
    let bytes = std::fs::read(dir.join(DEFAULT_FILE)).unwrap();
    (dir, bytes)
}

#[test]
fn a_directory_of_another_configuration_or_data_set_is_refused_by_field() {
    let (dir, bytes) = finished_run("other");
    let other = LineConfig {
        lr: 0.02,
        ..config()
    };
    let e = Guard::checkpoint_dir(&*dir)
        .unwrap()
        .fit(&other, &data())
        .unwrap_err();
    match &e {
        Error::Checkpoint(CheckpointError::OtherRun {
            field, saved, now, ..
        }) => assert_eq!(
            (field.as_str(), saved.as_str(), now.as_str()),
            ("config.lr", "0.05", "0.02")
        ),
        e => panic!("{e}"),
    }
    assert!(e.to_string().contains("other settings"), "{e}");
    let e = Guard::checkpoint_dir(&*dir)
        .unwrap()
        .fit(&config(), &toy_regression(30, 2, 1.0, 5))
        .unwrap_err();
    assert!(
        matches!(&e, Error::Checkpoint(CheckpointError::OtherRun { field, .. }) if field == "data.checksum"),
        "{e}"
    );
    let mut reseeded = config();
    reseeded.training.seed = 6;
    let e = Guard::checkpoint_dir(&*dir)
        .unwrap()
        .fit(&reseeded, &data())
        .unwrap_err();
    assert!(
        matches!(&e, Error::Checkpoint(CheckpointError::OtherRun { field, .. }) if field == "config.training.seed"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(dir.join(DEFAULT_FILE)).unwrap(),
        bytes,
        "nothing written over"
    );
}

/// `dir`'s state file edited by `edit`; with `rehash` its checksum recomputed, so that only
/// the checks of the values can catch the edit.
fn edit_state(dir: &Path, rehash: bool, edit: impl Fn(&mut Value)) -> Vec<u8> {
    let mut v = state_file(dir);
    edit(&mut v["state"]);
    let (id, state) = (v["fingerprint"].to_string(), v["state"].to_string());
    let sum = if rehash {
        checksum(&id, &state)
    } else {
        v["checksum"].as_str().unwrap().to_string()
    };
    let text = format!(
        "{{\"version\":{CHECKPOINT_FILE_VERSION},\"fingerprint\":{id},\"checksum\":\"{sum}\",\"state\":{state}}}"
    );
    std::fs::write(dir.join(DEFAULT_FILE), &text).unwrap();
    text.into_bytes()
}

#[test]
fn a_damaged_or_edited_state_is_refused_by_field_and_kept() {
    let (dir, _) = finished_run("damaged");
    let refused = |dir: &Path, bytes: &[u8]| -> (Option<String>, String) {
        let e = Guard::checkpoint_dir(dir)
            .unwrap()
            .fit(&config(), &data())
            .unwrap_err();
        assert_eq!(std::fs::read(dir.join(DEFAULT_FILE)).unwrap(), bytes, "{e}");
        match e {
            Error::Checkpoint(CheckpointError::Damaged { field, message, .. }) => (field, message),
            e => panic!("{e}"),
        }
    };
    let edited = edit_state(&dir, false, |s| {
        s["params"][0] = serde_json::json!(s["params"][0].as_f64().unwrap() + 0.5);
    });
    let (field, message) = refused(&dir, &edited);
    assert_eq!(field.as_deref(), Some("checksum"));
    assert!(message.contains("changed or damaged"), "{message}");
    let negative = edit_state(&dir, true, |s| {
        s["stepper"]["state"]["v"][1] = serde_json::json!(-1e-3);
    });
    let (field, message) = refused(&dir, &negative);
    assert_eq!(field.as_deref(), Some("stepper.state.v[1]"));
    assert!(message.contains("negative"), "{message}");
    let zero_rng = edit_state(&dir, true, |s| {
        s["noise"]["s"] = serde_json::json!([0, 0, 0, 0])
    });
    assert_eq!(refused(&dir, &zero_rng).0.as_deref(), Some("noise.s"));
    let text = String::from_utf8(zero_rng).unwrap();
    let truncated = &text.as_bytes()[..text.len() / 2];
    std::fs::write(dir.join(DEFAULT_FILE), truncated).unwrap();
    let (field, message) = refused(&dir, truncated);
    assert!(
        field.is_none() && message.contains("not a checkpoint"),
        "{message}"
    );
}

#[test]
fn a_fresh_start_never_overwrites_and_a_resume_needs_a_state() {
    let (dir, bytes) = finished_run("fresh");
    let e = Guard::checkpoint_dir(&*dir)
        .unwrap()
        .start(Start::Fresh)
        .fit(&config(), &data())
        .unwrap_err();
    assert!(
        matches!(e, Error::Checkpoint(CheckpointError::WouldOverwrite { .. })),
        "{e}"
    );
    assert_eq!(std::fs::read(dir.join(DEFAULT_FILE)).unwrap(), bytes);
    let empty = ScratchDir::new("guard", "nothing");
    let e = Guard::checkpoint_dir(&*empty)
        .unwrap()
        .start(Start::Resume)
        .fit(&config(), &data())
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Checkpoint(CheckpointError::NothingToResume { .. })
        ),
        "{e}"
    );
    assert!(!empty.join(DEFAULT_FILE).exists());
}

#[test]
fn a_locked_directory_refuses_a_second_run_until_the_first_ends() {
    let dir = ScratchDir::new("guard", "lock");
    let first = CheckpointDir::open(&*dir).unwrap();
    let e = Guard::checkpoint_dir(&*dir).unwrap_err();
    match &e {
        Error::Checkpoint(CheckpointError::Locked { holder, dir: d }) => {
            // Linux names the holder (here this very process).
            if cfg!(target_os = "linux") {
                assert_eq!(*holder, Some(std::process::id()));
            }
            assert_eq!(d, &dir.to_path_buf());
        }
        e => panic!("{e}"),
    }
    assert!(e.to_string().contains("in use by another run"), "{e}");
    // Nothing was written into the directory by the lock or the refusal.
    assert_eq!(std::fs::read_dir(&*dir).unwrap().count(), 0);
    // A clone shares the lock; the lock ends with the last handle.
    let clone = first.clone();
    drop(first);
    assert!(CheckpointDir::open(&*dir).is_err());
    drop(clone);
    Guard::checkpoint_dir(&*dir)
        .unwrap()
        .fit(&config(), &data())
        .unwrap();
    // A reader neither locks nor writes.
    let reader = CheckpointDir::for_reading(&*dir);
    let _writer = CheckpointDir::open(&*dir).unwrap();
    assert!(!reader.writes());
    let id = Value::Null;
    let state = reader.load(DEFAULT_FILE, &id);
    assert!(matches!(
        state,
        Err(Error::Checkpoint(CheckpointError::OtherRun { .. }))
    ));
}

/// A state of `done` steps (its values as a run's, no stepper).
fn state(done: usize) -> RunState {
    RunState {
        version: crate::fit::RUN_STATE_VERSION,
        steps_done: done,
        steps: 20,
        seed: 0,
        batch_size: 4,
        n: 8,
        params: vec![0.5; 3],
        noise: crate::rng::seeded(1),
        stepper: Value::Null,
        observers: vec![],
        report: FitReport {
            steps: done,
            ..FitReport::default()
        },
    }
}

/// The executor's calls, driven by hand: states handed over after steps 5 and 10, the
/// objective infinite at step 10. The state of step 10 is never written; the file keeps
/// step 5's, and the error says so.
#[test]
fn a_diverged_state_is_never_saved() {
    let dir = ScratchDir::new("guard", "diverge");
    let ck = CheckpointDir::open(&*dir).unwrap();
    let mut g = Guard::new()
        .with_checkpoints(&ck, "run.json", serde_json::json!({"run": 1}), Start::Fresh)
        .unwrap()
        .save_every(5);
    g.begin().unwrap();
    assert_eq!(g.every_steps(), 5);
    assert!(g.take_resume_state().is_none());
    for step in 0..12 {
        let objective = if step < 10 {
            -10.0 - step as f64
        } else {
            f64::INFINITY
        };
        g.on_step(step, 20, objective);
        if (step + 1) % 5 == 0 && !g.should_stop() {
            g.save(&state(step + 1)).unwrap();
        }
        if g.should_stop() {
            break;
        }
    }
    let d = g.divergence().unwrap();
    assert_eq!((d.step, d.first), (10, -10.0));
    let saved = ck
        .load("run.json", &serde_json::json!({"run": 1}))
        .unwrap()
        .unwrap();
    assert_eq!(saved.steps_done, 5, "the last good state is kept");
    let e = g.finish(Ok(())).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, Error::Numerical(_)), "{m}");
    assert!(
        m.contains("diverged at step 10") && m.contains("last good state (step 5)"),
        "{m}"
    );
}

#[test]
fn a_checkpointed_fit_that_never_reaches_the_executor_is_an_error() {
    let dir = ScratchDir::new("guard", "no-executor");
    let cfg = LineConfig {
        no_executor: true,
        ..config()
    };
    let e = Guard::checkpoint_dir(&*dir)
        .unwrap()
        .fit(&cfg, &data())
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
    // Without checkpoints there is nothing to keep, and no error.
    Guard::new().fit(&cfg, &data()).unwrap();
}

#[test]
fn checkpoint_file_names_are_plain() {
    let dir = ScratchDir::new("guard", "names");
    let ck = CheckpointDir::open(&*dir).unwrap();
    for bad in ["", "a/b", "..", ".", LOCK_FILE, "x.tmp"] {
        assert!(matches!(ck.file(bad), Err(Error::Config(_))), "{bad:?}");
    }
    assert_eq!(
        ck.file("svi-L2-split0.json").unwrap(),
        dir.join("svi-L2-split0.json")
    );
}

/// The checksum catches a one-digit edit and costs little next to the serialisation a
/// save does anyway (the times are printed).
#[test]
fn the_checksum_catches_edits_and_costs_little() {
    let v: Vec<f64> = (0..200_000).map(|i| (i as f64 * 0.37).sin()).collect();
    let s = RunState {
        params: v.clone(),
        stepper: serde_json::json!({"state": {"step": 5, "m": v, "v": v.iter().map(|x| x.abs()).collect::<Vec<_>>()}}),
        steps_done: 5,
        report: FitReport {
            steps: 5,
            ..FitReport::default()
        },
        ..state(5)
    };
    let id = serde_json::json!({"backend": "svi", "split": 0});
    let text = checkpoint_text(&id, &s).unwrap();
    let path = Path::new("ck/svi-L2-split0.json");
    assert!(verify_checkpoint(path, &text, &id).is_ok());
    let edited = text.replacen("0.3", "0.4", 1);
    let e = verify_checkpoint(path, &edited, &id).unwrap_err();
    assert!(e.to_string().contains("changed or damaged"), "{e}");
    let (st, f) = (serde_json::to_string(&s).unwrap(), id.to_string());
    let reps = 5;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        std::hint::black_box(serde_json::to_string(&s).unwrap());
    }
    let serialise = t.elapsed().as_secs_f64() / reps as f64;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        std::hint::black_box(checksum(&f, &st));
    }
    let sum_time = t.elapsed().as_secs_f64() / reps as f64;
    println!(
        "state of {} bytes: serialise {:.2} ms, checksum {:.3} ms",
        st.len(),
        serialise * 1e3,
        sum_time * 1e3
    );
    assert!(sum_time < 0.2 * serialise, "{sum_time} vs {serialise}");
}

impl Guard<'_> {
    /// [`Checkpoints::every`] without importing the trait.
    fn every_steps(&self) -> usize {
        Checkpoints::every(self)
    }
}
