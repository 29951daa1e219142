//! Unit tests of the executor pieces on a small synthetic model.

use crate::fit::{Checkpoints, FitHooks, Progress, RunControl};
use crate::model::{Batch, FitConfig, FitReport, Model, Objective, PredictConfig};
use crate::optim::{Adam, AdamConfig, NatGradConfig, NatGradScheme};
use crate::params::{ParamId, ParamStore, Role};
use crate::predictive::Predictive;
use crate::tape::{Tape, Var};
use crate::testing::{StopAfter, toy_regression};
use crate::train::{
    AdamStepper, CallerHooks, Control, EarlyStopping, Executor, HeldOutRule, HeldOutStopping,
    ModelSnapshots, NaturalAdamStepper, NaturalGradientModel, Observer, SampleCollector, StepInfo,
    best_of,
};
use dgp_core::rng::{Rng, standard_normal, stream};
use dgp_core::{Error, Result};
use dgp_data::{Dataset, Minibatches, RowSource, gather_rows_into};
use faer::{Mat, MatRef, Par, mat};

/// Blocks: `a` (1×2, optimised), `n` (1×1, natural-capable), `s` (1×1, sampled), `f`
/// (1×1, fixed). Objective: −Σ(a − ȳ)² − (n − 1)² − s² − f² + 0.01·ε, ε from the noise
/// stream, so that the stream's use is visible in the values.
#[derive(Clone)]
struct Toy {
    params: ParamStore,
    n: ParamId,
}

fn toy(natural_role: Role) -> Toy {
    toy_with(natural_role, Role::Sampled)
}

fn toy_with(natural_role: Role, sampled_role: Role) -> Toy {
    let mut params = ParamStore::new();
    params.add("a", mat![[0.5, -0.3]], Role::Optimised).unwrap();
    let n = params.add("n", mat![[0.2]], natural_role).unwrap();
    params.add("s", mat![[0.7]], sampled_role).unwrap();
    params.add("f", mat![[0.4]], Role::Fixed).unwrap();
    Toy { params, n }
}

impl Objective for Toy {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    fn record(&self, tape: &mut Tape, p: &[Var], batch: &Batch<'_>, rng: &mut Rng) -> Result<Var> {
        let ybar = (0..batch.len()).map(|i| batch.y[(i, 0)]).sum::<f64>() / batch.len() as f64;
        let eps = standard_normal(rng, 1, 1)[(0, 0)];
        let a = tape.add_scalar(p[0], -ybar);
        let n = tape.add_scalar(p[1], -1.0);
        let mut total = tape.sum_squares(a);
        for v in [n, p[2], p[3]] {
            let sq = tape.sum_squares(v);
            total = tape.add(total, sq);
        }
        let neg = tape.neg(total);
        Ok(tape.add_scalar(neg, 0.01 * eps))
    }
}

impl Model for Toy {
    fn backend(&self) -> &'static str {
        "toy"
    }
    fn describe(&self) -> String {
        "toy".into()
    }
    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        o: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        Executor::new(AdamStepper::new(AdamConfig::with_lr(TOY_LR)), cfg)
            .observe(&mut CallerHooks::new(o))
            .run(self, data)
    }
    fn predict(&self, _x: MatRef<'_, f64>, _cfg: &PredictConfig) -> Result<Predictive> {
        Err(Error::config("test", "toy has no predictive"))
    }
    fn to_json(&self) -> Result<String> {
        serde_json::to_string(&self.params).map_err(|e| Error::Serde(e.to_string()))
    }
}

impl NaturalGradientModel for Toy {
    fn natural_blocks(&self) -> Vec<ParamId> {
        vec![self.n]
    }
    fn natural_step(
        &mut self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        rng: &mut Rng,
        cfg: &NatGradConfig,
    ) -> Result<(f64, Vec<f64>)> {
        let (v, g) = self.value_and_grad(tape, batch, rng)?;
        let k = self.params.flat_range(self.n).unwrap().start;
        let new = self.params.get(self.n)[(0, 0)] + cfg.gamma * g[k];
        self.params.set(self.n, mat![[new]])?;
        Ok((v, g))
    }
}

/// The toy model's Adam learning rate.
const TOY_LR: f64 = 0.05;

fn cfg(steps: usize) -> FitConfig {
    FitConfig {
        steps,
        batch_size: 7,
        seed: 3,
        ..FitConfig::default()
    }
}

/// The training loop as it was before the executor (Adam over the whole flat view, the
/// natural blocks' gradient zeroed), kept here as the reference for bit-identity.
fn reference_loop(
    model: &mut Toy,
    data: &Dataset,
    cfg: &FitConfig,
    nat: Option<NatGradConfig>,
) -> Vec<(usize, f64)> {
    let n = data.n();
    let b = cfg.batch_size.min(n);
    let mut batches = Minibatches::new(n, b, cfg.seed).unwrap();
    let mut noise = stream(cfg.seed, 1);
    let mut adam = Adam::new(AdamConfig::with_lr(TOY_LR), model.params.num_free()).unwrap();
    let (mut xb, mut yb) = (Mat::zeros(b, data.input_dim()), Mat::zeros(b, 1));
    let mut tape = Tape::with_par(Par::Seq);
    let mut flat = model.params.flat();
    let mut history = Vec::new();
    let frozen = model.params.flat_range(model.n).unwrap();
    for step in 0..cfg.steps {
        let idx = batches.next_batch();
        gather_rows_into(data.x(), idx, xb.as_mut());
        gather_rows_into(data.y(), idx, yb.as_mut());
        let batch = Batch::new(xb.as_ref(), yb.as_ref(), n).unwrap();
        let (value, grad) = match nat {
            Some(nat) => {
                let vg = model
                    .natural_step(&mut tape, &batch, &mut noise, &nat)
                    .unwrap();
                model.params.flat_into(&mut flat);
                let (v, mut g) = match nat.scheme {
                    NatGradScheme::Joint => vg,
                    NatGradScheme::Alternate => {
                        model.value_and_grad(&mut tape, &batch, &mut noise).unwrap()
                    }
                };
                g[frozen.clone()].fill(0.0);
                (v, g)
            }
            None => model.value_and_grad(&mut tape, &batch, &mut noise).unwrap(),
        };
        adam.ascend(&mut flat, &grad).unwrap();
        history.push((step, value));
        model.params.set_flat(&flat).unwrap();
    }
    history
}

/// Records every step's value.
#[derive(Default)]
struct Trace(Vec<(usize, f64)>);

impl Progress for Trace {
    fn on_step(&mut self, step: usize, _total: usize, objective: f64) {
        self.0.push((step, objective));
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn adam_stepper_reproduces_the_old_loop_bit_for_bit() {
    let data = toy_regression(30, 2, 1.0, 1);
    let mut old = toy_with(Role::Optimised, Role::Optimised);
    let want = reference_loop(&mut old, &data, &cfg(25), None);
    let mut new = toy_with(Role::Optimised, Role::Optimised);
    let mut trace = Trace::default();
    let report = new
        .fit(&data, &cfg(25), &mut FitHooks::none().progress(&mut trace))
        .unwrap();
    assert_eq!(bits(&new.params.flat()), bits(&old.params.flat()));
    assert_eq!(trace.0, want);
    assert_eq!(report.steps, 25);
    assert_eq!(report.final_objective, want[24].1);
    let kept: Vec<usize> = report.history.iter().map(|h| h.0).collect();
    assert_eq!(kept, vec![0, 10, 20, 24]);
}

#[test]
fn natural_adam_reproduces_the_old_loop_in_both_schemes() {
    let data = toy_regression(30, 2, 1.0, 2);
    for scheme in [NatGradScheme::Alternate, NatGradScheme::Joint] {
        let nat = NatGradConfig {
            gamma: 0.3,
            scheme,
            ..NatGradConfig::default()
        };
        let mut old = toy_with(Role::Optimised, Role::Optimised);
        let want = reference_loop(&mut old, &data, &cfg(20), Some(nat));
        let mut new = toy_with(Role::Optimised, Role::Optimised);
        let stepper = NaturalAdamStepper::new(AdamConfig::with_lr(0.05), nat).unwrap();
        let mut trace = Trace::default();
        Executor::new(stepper, &cfg(20))
            .observe(&mut CallerHooks::new(
                &mut FitHooks::none().progress(&mut trace),
            ))
            .run(&mut new, &data)
            .unwrap();
        assert_eq!(
            bits(&new.params.flat()),
            bits(&old.params.flat()),
            "{scheme:?}"
        );
        assert_eq!(trace.0, want, "{scheme:?}");
        assert_eq!(
            new.params.role(new.n),
            Role::Natural,
            "natural blocks are marked"
        );
    }
    assert!(
        NaturalAdamStepper::new(
            AdamConfig::default(),
            NatGradConfig {
                gamma: 0.0,
                ..Default::default()
            }
        )
        .is_err()
    );
}

#[test]
fn adam_moves_only_optimised_blocks() {
    let data = toy_regression(20, 1, 1.0, 3);
    let mut m = toy(Role::Natural);
    let before = m.params.clone();
    m.fit(&data, &cfg(30), &mut crate::fit::FitHooks::none())
        .unwrap();
    for (id, role) in [(1, Role::Natural), (2, Role::Sampled), (3, Role::Fixed)] {
        assert_eq!(m.params.role(ParamId(id)), role);
        assert_eq!(
            m.params.get(ParamId(id)),
            before.get(ParamId(id)),
            "{role:?} moved"
        );
    }
    assert_ne!(m.params.get(ParamId(0)), before.get(ParamId(0)));
}

#[test]
fn adam_on_ranges_matches_adam_on_everything_inside_them() {
    let g = [0.3, -1.0, 2.0, 0.5];
    let (mut full, mut part) = (vec![1.0, 2.0, 3.0, 4.0], vec![1.0, 2.0, 3.0, 4.0]);
    let mut a = Adam::new(AdamConfig::default(), 4).unwrap();
    let mut b = a.clone();
    for _ in 0..5 {
        a.ascend(&mut full, &g).unwrap();
        b.ascend_ranges(&mut part, &g, &[0..1, 2..4]).unwrap();
    }
    assert_eq!((part[0], part[2], part[3]), (full[0], full[2], full[3]));
    assert_eq!(part[1], 2.0);
    assert!(
        b.ascend_ranges(&mut part, &g, std::slice::from_ref(&(3..5)))
            .is_err()
    );
    assert!(
        b.ascend_ranges(
            &mut part,
            &[f64::NAN, 0.0, 0.0, 0.0],
            std::slice::from_ref(&(1..4))
        )
        .is_ok()
    );
    assert!(
        b.ascend_ranges(
            &mut part,
            &[f64::NAN, 0.0, 0.0, 0.0],
            std::slice::from_ref(&(0..1))
        )
        .is_err()
    );
}

#[test]
fn value_and_grad_at_leaves_the_store_alone() {
    let data = toy_regression(10, 1, 1.0, 4);
    let m = toy(Role::Optimised);
    let batch = Batch::new(data.x(), data.y(), 10).unwrap();
    let mut tape = Tape::new();
    let here = m
        .value_and_grad(&mut tape, &batch, &mut stream(1, 1))
        .unwrap();
    let at = m
        .value_and_grad_at(&m.params.flat(), &mut tape, &batch, &mut stream(1, 1))
        .unwrap();
    assert_eq!(here, at);
    let there = m
        .value_and_grad_at(&[0.0, 0.0, 1.0, 0.0], &mut tape, &batch, &mut stream(1, 1))
        .unwrap();
    assert_ne!(there.0, here.0);
    assert_eq!(m.params.get(ParamId(0))[(0, 0)], 0.5);
    assert!(
        m.value_and_grad_at(&[0.0], &mut tape, &batch, &mut stream(1, 1))
            .is_err()
    );
}

/// Scores from a fixed trace, one per call (the first call is the start).
fn trace_score(trace: Vec<f64>) -> impl FnMut(&Toy) -> f64 {
    let mut k = 0;
    move |_| {
        let s = trace.get(k).copied().unwrap_or(f64::INFINITY);
        k += 1;
        s
    }
}

#[test]
fn early_stopping_keeps_the_best_and_stops_after_patience() {
    let data = toy_regression(20, 1, 1.0, 5);
    let es = EarlyStopping {
        fraction: 0.1,
        every: 2,
        patience: 3,
        min_rows: 0,
        rises: 0,
    };
    // start 5.0; evaluations after steps 2, 4, 6, 8, 10: 4, 3 (best), 3.5, 3 (a tie keeps
    // the earlier), 9 → three without improvement: stop after step 10.
    let mut stop =
        HeldOutStopping::new(&es, 4, trace_score(vec![5.0, 4.0, 3.0, 3.5, 3.0, 9.0, 1.0]));
    let mut m = toy(Role::Optimised);
    let mut snapshots = Vec::new();
    let mut snap = Snap(&mut snapshots);
    let report = Executor::new(AdamStepper::new(AdamConfig::with_lr(0.05)), &cfg(50))
        .observe(&mut snap)
        .observe(&mut stop)
        .run(&mut m, &data)
        .unwrap();
    assert_eq!(report.steps, 10);
    let s = stop.summary();
    assert_eq!(
        (s.steps, s.best_step, s.best_heldout_nll, s.heldout_rows),
        (10, Some(4), Some(3.0), 4)
    );
    assert!(!s.stopped_on_numerical_failure);
    assert_eq!(
        bits(&m.params.flat()),
        bits(&snapshots[3]),
        "restored to the parameters after step 4"
    );
    assert_eq!(es.period(1000), 2);
    assert_eq!(EarlyStopping::default().period(1000), 10);
    assert_eq!(EarlyStopping::default().period(50), 1);
    assert!(
        EarlyStopping {
            fraction: 1.0,
            ..Default::default()
        }
        .validate()
        .is_err()
    );
}

#[test]
fn early_stopping_absorbs_a_failure_only_after_a_finite_score() {
    let mut stop = HeldOutStopping::new(
        &EarlyStopping::default(),
        2,
        trace_score(vec![f64::INFINITY]),
    );
    let mut m = toy(Role::Optimised);
    stop.on_start(&m, 10).unwrap();
    assert!(!stop.absorbs_failure(&m, &Error::Numerical("x".into())));
    let mut stop = HeldOutStopping::new(&EarlyStopping::default(), 2, trace_score(vec![1.0]));
    stop.on_start(&m, 10).unwrap();
    let start = m.params.flat();
    m.params.set_flat(&[9.0, 9.0, 9.0, 9.0]).unwrap();
    assert!(stop.absorbs_failure(&m, &Error::Numerical("x".into())));
    stop.on_finish(&mut m).unwrap();
    assert_eq!(m.params.flat(), start);
    assert!(stop.summary().stopped_on_numerical_failure);
    assert_eq!(stop.summary().best_step, Some(0));
}

/// Keeps the flat parameters after every step.
struct Snap<'a>(&'a mut Vec<Vec<f64>>);

impl Observer<Toy> for Snap<'_> {
    fn on_step(&mut self, model: &Toy, _info: &StepInfo) -> Result<Control> {
        self.0.push(model.params.flat());
        Ok(Control::Continue)
    }
}

/// Fails every step from `from` on with a numerical error.
struct Failing {
    inner: AdamStepper,
    from: usize,
}

impl crate::train::Stepper<Toy> for Failing {
    fn start(&mut self, model: &mut Toy, steps: usize) -> Result<()> {
        self.inner.start(model, steps)
    }
    fn step(
        &mut self,
        model: &mut Toy,
        batch: &Batch<'_>,
        ctx: &mut crate::train::StepContext<'_>,
    ) -> Result<f64> {
        if ctx.step >= self.from {
            return Err(Error::Numerical("boom".into()));
        }
        self.inner.step(model, batch, ctx)
    }
}

/// The rise rule stops a run whose held-out score has risen `rises` evaluations in a
/// row, keeping the best; a wandering score (rises broken by a fall, even one that stays
/// above the best) or an unscorable evaluation between finite ones does not trip it,
/// and with `rises = 0` only the patience rule stops.
#[test]
fn early_stopping_stops_once_the_score_has_risen_rises_times_in_a_row() {
    let data = toy_regression(20, 1, 1.0, 5);
    let run = |rises: usize, trace: Vec<f64>| {
        let es = EarlyStopping {
            every: 1,
            patience: 8,
            rises,
            ..Default::default()
        };
        let mut stop = HeldOutStopping::new(&es, 4, trace_score(trace));
        let mut m = toy(Role::Optimised);
        let report = Executor::new(AdamStepper::new(AdamConfig::with_lr(0.05)), &cfg(50))
            .observe(&mut stop)
            .run(&mut m, &data)
            .unwrap();
        (report.steps, stop.summary().best_step)
    };
    // Best 1.0 after step 2, then 1.1 < 1.2 < 1.3: three rises in a row stop after step 5.
    let turned = vec![3.0, 2.0, 1.0, 1.1, 1.2, 1.3, 0.5, 0.4, 0.3];
    assert_eq!(run(3, turned.clone()), (5, Some(2)));
    // Four rises are not there yet: the later, better scores are found (past the trace
    // every score is +∞, so the patience of 8 ends the run after step 16).
    assert_eq!(run(4, turned.clone()), (16, Some(8)));
    assert_eq!(run(0, turned), (16, Some(8)));
    // Rises broken by a fall (still above the best) start again: 1.1, 1.2 | 1.15, 1.2,
    // 1.3 | ... — never three in a row; the patience of 8 ends the run after step 10.
    let wandering = vec![3.0, 2.0, 1.0, 1.1, 1.2, 1.15, 1.2, 1.25, 1.1, 1.2, 1.3, 1.2];
    assert_eq!(run(4, wandering), (10, Some(2)));
    // An unscorable evaluation (+∞) counts as worse than the finite one before it, and
    // the next finite score as a fall.
    let gap = vec![3.0, 2.0, 1.0, 1.5, f64::INFINITY, 1.6, 1.7, 1.8, 1.9, 0.1];
    assert_eq!(run(3, gap.clone()), (8, Some(2)));
    assert_eq!(run(5, gap), (17, Some(9)));
}

#[test]
fn a_numerical_failure_ends_the_run_only_when_absorbed() {
    let data = toy_regression(20, 1, 1.0, 6);
    let failing = || Failing {
        inner: AdamStepper::new(AdamConfig::default()),
        from: 4,
    };
    let mut m = toy(Role::Optimised);
    assert!(
        Executor::new(failing(), &cfg(10))
            .run(&mut m, &data)
            .is_err()
    );
    let es = EarlyStopping {
        every: 1,
        ..Default::default()
    };
    let mut stop = HeldOutStopping::new(&es, 2, trace_score(vec![3.0, 2.0, 1.0, 4.0, 5.0]));
    let mut m = toy(Role::Optimised);
    let report = Executor::new(failing(), &cfg(10))
        .observe(&mut stop)
        .run(&mut m, &data)
        .unwrap();
    assert_eq!(report.steps, 4);
    let s = stop.summary();
    assert!(s.stopped_on_numerical_failure);
    assert_eq!((s.steps, s.best_step), (4, Some(2)));
}

#[test]
fn sample_collector_counts_burn_in_thinning_and_window() {
    let data = toy_regression(20, 1, 1.0, 7);
    let mut m = toy(Role::Optimised);
    let mut snapshots = Vec::new();
    let mut snap = Snap(&mut snapshots);
    // Steps 5, 8, 11, 14, 17 are collected; the window keeps the last 4.
    let mut coll = SampleCollector::new(5, 3, 4).unwrap().role(Role::Optimised);
    Executor::new(AdamStepper::new(AdamConfig::default()), &cfg(20))
        .observe(&mut snap)
        .observe(&mut coll)
        .run(&mut m, &data)
        .unwrap();
    assert_eq!(coll.collected(), 5);
    let kept = coll.into_samples();
    assert_eq!(kept.len(), 4);
    for (sample, step) in kept.iter().zip([8, 11, 14, 17]) {
        assert_eq!(sample, &snapshots[step][0..3].to_vec());
    }
    let mut sampled = SampleCollector::new(0, 1, 100).unwrap();
    Executor::new(AdamStepper::new(AdamConfig::default()), &cfg(6))
        .observe(&mut sampled)
        .run(&mut toy(Role::Optimised), &data)
        .unwrap();
    assert_eq!(sampled.samples().len(), 6);
    assert!(
        sampled.samples().iter().all(|s| s == &vec![0.7]),
        "Adam never moves sampled blocks"
    );
    assert!(SampleCollector::new(0, 0, 1).is_err() && SampleCollector::new(0, 1, 0).is_err());
}

#[test]
fn checkpoints_every_n_steps_and_at_the_end() {
    let data = toy_regression(20, 1, 1.0, 8);
    let mut written = Vec::new();
    let mut ck = ModelSnapshots::new(4, |done, json: String| {
        let back: ParamStore =
            serde_json::from_str(&json).map_err(|e| Error::Serde(e.to_string()))?;
        written.push((done, back.flat()));
        Ok(())
    })
    .unwrap();
    let mut m = toy(Role::Optimised);
    Executor::new(AdamStepper::new(AdamConfig::default()), &cfg(10))
        .observe(&mut ck)
        .run(&mut m, &data)
        .unwrap();
    assert_eq!(ck.written(), 3);
    assert_eq!(
        written.iter().map(|w| w.0).collect::<Vec<_>>(),
        vec![4, 8, 10]
    );
    assert_eq!(written[2].1, m.params.flat());
    assert!(ModelSnapshots::new(0, |_, _: String| Ok(())).is_err());
}

#[test]
fn best_of_keeps_the_first_lowest_finite_score_and_skips_failures() {
    let scores = [3.0, 1.0, f64::NAN, 1.0, 0.5];
    let out = best_of(
        5,
        Ok,
        |&mut r, _| {
            if r == 4 {
                Err(Error::Numerical("candidate 4 fails".into()))
            } else {
                Ok(FitReport {
                    seconds: 1.0,
                    ..Default::default()
                })
            }
        },
        |&r| scores[r],
    )
    .unwrap();
    assert_eq!(out.best, Some((1, 1.0)));
    assert_eq!(out.seconds, 4.0);
    assert!(
        best_of(
            2,
            |_| Err::<usize, _>(Error::config("test", "x")),
            |_, _| Ok(FitReport::default()),
            |_| 0.0
        )
        .is_err()
    );
}

#[test]
fn full_batch_lbfgs_finds_the_optimum_and_numbers_after_the_offset() {
    let data = toy_regression(20, 1, 1.0, 9);
    let ybar = (0..20).map(|i| data.y()[(i, 0)]).sum::<f64>() / 20.0;
    let mut m = toy(Role::Optimised);
    let mut trace = Trace::default();
    let cfg = crate::optim::LbfgsConfig {
        max_iters: 50,
        ..Default::default()
    };
    let report = crate::train::FullBatchLbfgs::new(cfg, 0)
        .offset(7)
        .run(&mut m, &data, &mut FitHooks::none().progress(&mut trace))
        .unwrap();
    assert!((m.params.get(ParamId(0))[(0, 0)] - ybar).abs() < 1e-5);
    assert!((m.params.get(ParamId(1))[(0, 0)] - 1.0).abs() < 1e-5);
    assert_eq!(trace.0[0].0, 7);
    assert_eq!(report.history[0].0, 7);
    assert!(report.steps > 7);
}

#[test]
fn full_batch_lbfgs_ends_with_interrupted_when_the_caller_asks() {
    let data = toy_regression(20, 1, 1.0, 9);
    let mut m = toy(Role::Optimised);
    let cfg = crate::optim::LbfgsConfig {
        max_iters: 50,
        ..Default::default()
    };
    // The toy objective converges after three evaluations: stop before the third.
    let mut stop = StopAfter::new(2);
    let e = crate::train::FullBatchLbfgs::new(cfg, 0)
        .run(&mut m, &data, &mut stop)
        .unwrap_err();
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    assert!(e.to_string().contains("after 2 of at most 50"), "{e}");
    assert_eq!(stop.steps, 2, "no evaluation after the stop request");
}

#[test]
fn best_of_ends_the_search_on_an_interrupted_candidate() {
    let mut trained = Vec::new();
    let e = best_of(
        4,
        Ok,
        |&mut r, _| {
            trained.push(r);
            match r {
                0 => Err(Error::Numerical("dropped, the search goes on".into())),
                1 => Err(Error::Interrupted("candidate 1".into())),
                _ => Ok(FitReport::default()),
            }
        },
        |_| 0.0,
    )
    .unwrap_err();
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    assert_eq!(trained, vec![0, 1]);
}

#[test]
fn stop_only_forwards_the_stop_request_and_nothing_else() {
    let data = toy_regression(20, 1, 1.0, 9);
    let mut m = toy(Role::Optimised);
    let mut inner = StopAfter::new(0);
    let outer = FitHooks::all(&mut inner);
    let report = Executor::new(AdamStepper::new(AdamConfig::default()), &cfg(10))
        .observe(&mut CallerHooks::new(&mut outer.stop_only()))
        .run(&mut m, &data)
        .unwrap();
    assert_eq!(report.steps, 1, "stopped after the first step");
    assert_eq!(inner.steps, 0, "steps are not forwarded");
}

#[test]
fn lindinger_observer_stops_where_the_trace_says_and_restores_per_setting() {
    use crate::train::{LindingerObserver, LindingerStopping, Restore};
    let data = toy_regression(20, 1, 1.0, 8);
    // NLL scores: falling (tll rising) for 10 logs, then rising for ever.
    let nll = |k: usize| {
        if k <= 10 {
            -(k as f64)
        } else {
            k as f64 - 20.0
        }
    };
    let scripted = || {
        let mut k = 0usize;
        move |_: &Toy| {
            k += 1;
            nll(k - 1)
        }
    };
    let rule = LindingerStopping {
        every: 2,
        window: 2,
        lag: 2,
        checks: 2,
        min_steps: 4,
        ..LindingerStopping::default()
    };
    // Independent replay of the rule on the same logs.
    let logs: Vec<f64> = (0..100).map(|k| -nll(k)).collect();
    let sm = |it: usize| {
        let n = it / 2 + 1;
        let lo = n.saturating_sub(2);
        logs[lo..n].iter().sum::<f64>() / (n - lo) as f64
    };
    let expected = (5..100)
        .find(|&it| (0..2).all(|k| sm(it - 2 * k) < sm(it - 2 * (k + 1))))
        .unwrap();
    for restore in [Restore::Last, Restore::Best] {
        let r = LindingerStopping {
            restore,
            ..rule.clone()
        };
        let mut stop = LindingerObserver::new(&r, 3, scripted());
        let mut m = toy(Role::Optimised);
        let mut snapshots = Vec::new();
        let mut snap = Snap(&mut snapshots);
        let report = Executor::new(AdamStepper::new(AdamConfig::with_lr(0.05)), &cfg(100))
            .observe(&mut snap)
            .observe(&mut stop)
            .run(&mut m, &data)
            .unwrap();
        assert_eq!(report.steps, expected + 1, "{restore:?}");
        let s = stop.summary();
        assert_eq!((s.steps, s.heldout_rows), (expected + 1, 3));
        match restore {
            Restore::Last => {
                assert_eq!(s.best_step, None);
                assert_eq!(bits(&m.params.flat()), bits(snapshots.last().unwrap()));
            }
            Restore::Best => {
                // Best log: k = 10, taken after 20 steps.
                assert_eq!((s.best_step, s.best_heldout_nll), (Some(20), Some(-10.0)));
                assert_eq!(bits(&m.params.flat()), bits(&snapshots[19]));
            }
        }
    }
}

fn converging(steps: usize) -> FitConfig {
    FitConfig {
        convergence: Some(crate::model::Convergence {
            window: 20,
            tolerance: 1e-3,
            patience: 2,
            min_steps: 100,
        }),
        ..cfg(steps)
    }
}

#[test]
fn convergence_stops_a_flat_run_early_on_the_same_trajectory_and_says_so() {
    let data = toy_regression(30, 2, 1.0, 1);
    let mut stopped = toy(Role::Optimised);
    let report = stopped
        .fit(
            &data,
            &converging(3000),
            &mut FitHooks::none().progress(&mut Trace::default()),
        )
        .unwrap();
    let k = report.steps;
    assert!((100..3000).contains(&k), "stopped after {k} steps");
    assert_eq!(k % 20, 0, "stops at the end of a window");
    assert_eq!(report.converged_after, Some(k));
    // The same trajectory as a plain run of k steps.
    let mut plain = toy(Role::Optimised);
    let plain_report = plain
        .fit(
            &data,
            &cfg(k),
            &mut FitHooks::none().progress(&mut Trace::default()),
        )
        .unwrap();
    assert_eq!(bits(&stopped.params.flat()), bits(&plain.params.flat()));
    assert_eq!(plain_report.converged_after, None);
    // A cap below the stop: the run ends at the cap, not converged.
    let mut capped = toy(Role::Optimised);
    let r = capped
        .fit(
            &data,
            &converging(k - 20),
            &mut FitHooks::none().progress(&mut Trace::default()),
        )
        .unwrap();
    assert_eq!((r.steps, r.converged_after), (k - 20, None));
}

#[test]
fn convergence_settings_out_of_range_are_config_errors_naming_the_field() {
    let data = toy_regression(30, 2, 1.0, 1);
    let base = converging(1000).convergence.unwrap();
    let cases = [
        (
            crate::model::Convergence {
                tolerance: 0.0,
                ..base
            },
            "convergence.tolerance",
        ),
        (
            crate::model::Convergence {
                patience: 0,
                ..base
            },
            "convergence.patience",
        ),
        (
            crate::model::Convergence {
                min_steps: 1001,
                ..base
            },
            "convergence.min_steps",
        ),
    ];
    for (c, field) in cases {
        let mut m = toy(Role::Optimised);
        let before = m.params.flat();
        let fit = FitConfig {
            convergence: Some(c),
            ..cfg(1000)
        };
        let e = m
            .fit(
                &data,
                &fit,
                &mut FitHooks::none().progress(&mut Trace::default()),
            )
            .unwrap_err();
        assert!(
            matches!(e, Error::Config(_)) && e.to_string().contains(field),
            "{e}"
        );
        assert_eq!(m.params.flat(), before, "no step taken");
    }
}

/// Keeps every saved run state; hands `resume` to the executor once.
#[derive(Default)]
struct Saves {
    every: usize,
    saved: Vec<crate::train::RunState>,
    resume: Option<crate::train::RunState>,
}

impl Checkpoints for Saves {
    fn every(&self) -> usize {
        self.every
    }
    fn save(&mut self, state: &crate::train::RunState) -> Result<()> {
        self.saved.push(state.clone());
        Ok(())
    }
}

impl RunControl for Saves {
    fn take_resume_state(&mut self) -> Option<crate::train::RunState> {
        self.resume.take()
    }
}

impl Progress for Saves {}

#[test]
fn a_resumed_run_stops_on_convergence_where_the_uninterrupted_run_does() {
    let data = toy_regression(30, 2, 1.0, 1);
    let mut whole = toy(Role::Optimised);
    let mut saves = Saves {
        every: 30,
        ..Saves::default()
    };
    let want = whole
        .fit(&data, &converging(3000), &mut FitHooks::all(&mut saves))
        .unwrap();
    // A state in the middle of a window, after the comparisons began.
    let state = saves
        .saved
        .iter()
        .find(|s| s.steps_done > 40 && s.steps_done % 20 != 0)
        .unwrap()
        .clone();
    let mut resumed = toy(Role::Optimised);
    let mut again = Saves {
        every: 30,
        resume: Some(state),
        ..Saves::default()
    };
    let got = resumed
        .fit(&data, &converging(3000), &mut FitHooks::all(&mut again))
        .unwrap();
    assert_eq!(got.converged_after, want.converged_after);
    assert_eq!(bits(&resumed.params.flat()), bits(&whole.params.flat()));
}

/// A held-out rule and checkpoints together are refused before any step: the rule's best
/// parameters are not in the saved state, so a resumed run would differ. With too few
/// rows for the rule, no rule runs and the checkpointed run goes ahead.
#[test]
fn held_out_early_stopping_with_checkpoints_is_refused_before_any_step() {
    let data = toy_regression(30, 2, 1.0, 1);
    let with_rule = FitConfig {
        early_stopping: Some(HeldOutRule::Patience(EarlyStopping::default())),
        ..cfg(20)
    };
    let mut m = toy(Role::Optimised);
    let before = m.params.flat();
    let mut saves = Saves {
        every: 5,
        ..Saves::default()
    };
    let e = crate::train::fit_with_held_out(
        &mut m,
        &data,
        &with_rule,
        AdamStepper::new(AdamConfig::with_lr(TOY_LR)),
        &mut FitHooks::all(&mut saves),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
    assert!(e.to_string().contains("checkpointed"), "{e}");
    assert_eq!(m.params.flat(), before, "no step taken");
    assert!(saves.saved.is_empty());
    // Too few rows for the rule (fewer than MIN_ROWS_FOR_EARLY_STOPPING): no rule runs,
    // so checkpoints are kept as usual.
    let small = toy_regression(10, 2, 1.0, 1);
    let mut m = toy(Role::Optimised);
    let r = crate::train::fit_with_held_out(
        &mut m,
        &small,
        &with_rule,
        AdamStepper::new(AdamConfig::with_lr(TOY_LR)),
        &mut FitHooks::all(&mut saves),
    )
    .unwrap();
    assert!(r.held_out.is_none());
    assert!(!saves.saved.is_empty());
}
