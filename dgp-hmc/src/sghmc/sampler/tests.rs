//! Unit tests of the SGHMC stepper (issue 15 tests 1 and 4, resuming, failures, config).

use super::*;
use dgp_core::rng::{Rng, seeded};
use dgp_core::{Error, Result};
use dgp_data::Dataset;
use dgp_traits::model::{Batch, FitConfig, FitHooks, FitReport, Model, Objective, PredictConfig};
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::predictive::Predictive;
use dgp_traits::tape::{Tape, Var};
use dgp_traits::train::Executor;
use faer::{Mat, MatRef, mat};
use rand_distr::{Distribution, StandardNormal};
use std::sync::Mutex;

/// Issue 15 test 1 / spec §7: U = θ²/2 (nll = θ²/(2N), N = 1000), exact gradients,
/// 2000 independent chains (entries of one vector — the update is elementwise),
/// 10⁴ adapting steps, then 2·10⁴ frozen steps. Var(θ) at the end of the run within
/// ±0.15 of 1 (s.e. of a sample variance over 2000 chains ≈ 0.032; the spec's band),
/// and the time average of θ² over the frozen phase after 1500 steps of relaxation
/// within 4 s.e. of 1, the mean within 4 s.e. of 0 (s.e. from batch means over time).
#[test]
fn update_rule_samples_a_standard_normal() {
    let (chains, n) = (2000, 1000);
    let c = SghmcConstants {
        step_size: 0.01,
        mdecay: 0.05,
        num_data: n,
    };
    let mut chain = SghmcChain::new(chains);
    let mut theta = vec![0.0; chains];
    let mut grad = vec![0.0; chains];
    let mut rng = seeded(7);
    for _ in 0..10_000 {
        grad.iter_mut()
            .zip(&theta)
            .for_each(|(g, t)| *g = t / n as f64);
        chain.update(&mut theta, &grad, true, c, &mut rng);
    }
    let (frozen, relax, batches) = (20_000, 1_500, 37);
    let per_batch = (frozen - relax) / batches;
    let mut batch_m2 = vec![0.0; batches];
    let mut batch_m1 = vec![0.0; batches];
    for t in 0..frozen {
        grad.iter_mut()
            .zip(&theta)
            .for_each(|(g, x)| *g = x / n as f64);
        chain.update(&mut theta, &grad, false, c, &mut rng);
        if t >= relax && (t - relax) / per_batch < batches {
            let k = (t - relax) / per_batch;
            batch_m2[k] += theta.iter().map(|x| x * x).sum::<f64>() / chains as f64;
            batch_m1[k] += theta.iter().sum::<f64>() / chains as f64;
        }
    }
    let mean = theta.iter().sum::<f64>() / chains as f64;
    let var = theta.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (chains - 1) as f64;
    assert!((var - 1.0).abs() < 0.15, "end-of-run variance {var}");
    assert!(mean.abs() < 0.15, "end-of-run mean {mean}");
    let stats = |b: &[f64]| {
        let v: Vec<f64> = b.iter().map(|s| s / per_batch as f64).collect();
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let s2 = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
        (m, (s2 / v.len() as f64).sqrt())
    };
    let (m2, se2) = stats(&batch_m2);
    let (m1, se1) = stats(&batch_m1);
    assert!(
        (m2 - 1.0).abs() < 4.0 * se2,
        "time-averaged E θ² = {m2} ± {se2}"
    );
    assert!(m1.abs() < 4.0 * se1, "time-averaged E θ = {m1} ± {se1}");
    assert!(se2 < 0.02, "the time average is informative (s.e. {se2})");
}

/// The update is simultaneous: adaptation reads the old g, g², ξ, and the momentum
/// step reads the old g²; frozen steps leave ξ, g, g² alone.
#[test]
fn one_update_by_hand() {
    let c = SghmcConstants {
        step_size: 0.1,
        mdecay: 0.05,
        num_data: 4,
    };
    let mut chain = SghmcChain {
        p: vec![0.2],
        xi: vec![1.5],
        g: vec![0.5],
        g2: vec![2.0],
    };
    let mut theta = vec![1.0];
    let mut rng = seeded(3);
    let z: f64 = StandardNormal.sample(&mut seeded(3));
    chain.update(&mut theta, &[0.3], true, c, &mut rng);
    let minv = 1.0 / ((2.0f64 + 1e-16).sqrt() + 1e-16);
    let sigma = (2.0 * 0.01 / 4.0 * 0.05 * minv).sqrt();
    let p = 0.2 - 0.01 * minv * 0.3 - 0.05 * 0.2 + sigma * z;
    let r = 1.0 / 2.5;
    assert_eq!(chain.p[0], p);
    assert_eq!(theta[0], 1.0 + p);
    assert_eq!(chain.g[0], (1.0 - r) * 0.5 + r * 0.3);
    assert_eq!(chain.g2[0], (1.0 - r) * 2.0 + r * 0.09);
    assert_eq!(chain.xi[0], 1.0 + 1.5 * (1.0 - 0.25 / (2.0 + 1e-16)));
    let before = chain.clone();
    chain.update(&mut theta, &[0.3], false, c, &mut rng);
    assert_eq!(
        (&chain.xi, &chain.g, &chain.g2),
        (&before.xi, &before.g, &before.g2)
    );
}

/// A sampled θ (1×1) and an optimised h (1×1); J = −½θ² − ½(h − θ)² (so the hyper
/// gradient at θ_w is θ_w − h). Every evaluation logs the θ it saw.
struct Toy {
    params: ParamStore,
    theta: ParamId,
    h: ParamId,
    seen: Mutex<Vec<f64>>,
    state: Option<SghmcState>,
    poison_after: Option<usize>,
    /// After this many evaluations the objective stays finite but its gradient is not
    /// (a √0 term: value 0, derivative ∞ − ∞).
    poison_grad_after: Option<usize>,
}

fn toy() -> Toy {
    let mut params = ParamStore::new();
    let theta = params.add("theta", mat![[0.5]], Role::Sampled).unwrap();
    let h = params.add("h", mat![[2.0]], Role::Optimised).unwrap();
    Toy {
        params,
        theta,
        h,
        seen: Mutex::new(Vec::new()),
        state: None,
        poison_after: None,
        poison_grad_after: None,
    }
}

impl Objective for Toy {
    fn params(&self) -> &ParamStore {
        &self.params
    }
    fn record(&self, t: &mut Tape, p: &[Var], _: &Batch<'_>, _: &mut Rng) -> Result<Var> {
        let th = t.value(p[self.theta.0])[(0, 0)];
        let mut seen = self.seen.lock().unwrap();
        seen.push(th);
        let poisoned = self.poison_after.is_some_and(|k| seen.len() > k);
        let a = t.sum_squares(p[self.theta.0]);
        let d = t.sub(p[self.h.0], p[self.theta.0]);
        let b = t.sum_squares(d);
        let s = t.add(a, b);
        let mut j = t.scale(s, -0.5);
        if self.poison_grad_after.is_some_and(|k| seen.len() > k) {
            let zero = t.sub(p[self.theta.0], p[self.theta.0]);
            let root = t.sqrt(zero);
            j = t.add(j, root);
        }
        Ok(if poisoned { t.scale(j, f64::NAN) } else { j })
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
        _: &dyn dgp_data::RowSource,
        _: &FitConfig,
        _: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        Err(Error::config("test", "not used"))
    }
    fn predict(&self, _: MatRef<'_, f64>, _: &PredictConfig) -> Result<Predictive> {
        Err(Error::config("test", "not used"))
    }
    fn to_json(&self) -> Result<String> {
        Err(Error::config("test", "not used"))
    }
}

impl SampledModel for Toy {
    fn sampler_state(&self) -> Option<&SghmcState> {
        self.state.as_ref()
    }
    fn sampler_state_mut(&mut self) -> &mut Option<SghmcState> {
        &mut self.state
    }
}

fn data() -> Dataset {
    Dataset::new(Mat::zeros(4, 1), Mat::zeros(4, 1)).unwrap()
}

fn run(model: &mut Toy, cfg: &SghmcSamplerConfig, steps: usize) -> Result<FitReport> {
    let schedule = cfg.full_schedule();
    let stepper = SghmcStepper::new(cfg.clone(), schedule, 11)?;
    let fit = FitConfig {
        steps,
        seed: 5,
        ..FitConfig::default()
    };
    Executor::new(stepper, &fit).run(model, &data())
}

fn small() -> SghmcSamplerConfig {
    SghmcSamplerConfig {
        burn_in: 40,
        thinning: 3,
        kept: 5,
        window: 8,
        step_size: 0.2,
        ..SghmcSamplerConfig::default()
    }
}

/// Issue 15 test 4: each burn-in step evaluates the objective twice — at the chain's
/// current θ, then (hyper step) at an entry of the window that includes the new
/// sample — and the hyper step leaves the chain exactly where the sampler put it
/// (same θ path with MCEM on and off); several window entries are used, not only the
/// newest; after burn-in one evaluation per step and h never changes; samples are
/// kept after every `thinning`-th frozen step.
#[test]
fn mcem_reads_the_window_and_leaves_the_chain_alone() {
    let cfg = small();
    let mut with = toy();
    for t in 0..cfg.burn_in {
        // The same step without the hyper step, from the same state.
        let mut without = toy();
        without.params = with.params.clone();
        without.state = with.state.clone().map(|s| SghmcState { adam: None, ..s });
        let h_before = with.params.get(with.h)[(0, 0)];
        run(&mut with, &cfg, 1).unwrap();
        run(
            &mut without,
            &SghmcSamplerConfig {
                mcem: false,
                ..cfg.clone()
            },
            1,
        )
        .unwrap();
        let st = with.state.as_ref().unwrap();
        assert_eq!(st.step, t + 1);
        let th = with.params.get(with.theta)[(0, 0)];
        assert_eq!(
            th,
            without.params.get(without.theta)[(0, 0)],
            "chain moved by MCEM"
        );
        let seen = with.seen.lock().unwrap();
        assert_eq!(seen.len(), 2 * (t + 1));
        let at = seen[2 * t + 1];
        assert!(
            st.window.contains(&vec![at]),
            "hyper step at {at}, not in the window"
        );
        assert_eq!(st.window.len(), (t + 1).min(cfg.window));
        assert_ne!(with.params.get(with.h)[(0, 0)], h_before);
        assert_eq!(without.params.get(without.h)[(0, 0)], h_before);
    }
    {
        let seen = with.seen.lock().unwrap();
        let st = with.state.as_ref().unwrap();
        let hyper_at: Vec<f64> = seen.iter().skip(1).step_by(2).copied().collect();
        let current: Vec<f64> = seen.iter().step_by(2).skip(1).copied().collect();
        let stale = hyper_at
            .iter()
            .zip(&current)
            .filter(|(a, b)| a != b)
            .count();
        assert!(
            stale > 10,
            "the hyper step used the newest sample almost always"
        );
        assert!(st.adam.as_ref().unwrap().steps() == cfg.burn_in as u64);
    }
    let h = with.params.get(with.h)[(0, 0)];
    let window = with.state.as_ref().unwrap().window.clone();
    for t in 0..cfg.kept * cfg.thinning {
        run(&mut with, &cfg, 1).unwrap();
        assert_eq!(
            with.params.get(with.h)[(0, 0)],
            h,
            "hyper moved while sampling"
        );
        let st = with.state.as_ref().unwrap();
        assert_eq!(st.window, window);
        assert_eq!(st.kept.len(), (t + 1) / cfg.thinning);
        if (t + 1) % cfg.thinning == 0 {
            assert_eq!(
                st.kept.last().unwrap()[0],
                with.params.get(with.theta)[(0, 0)]
            );
        }
    }
    assert_eq!(
        with.seen.lock().unwrap().len(),
        2 * cfg.burn_in + cfg.kept * cfg.thinning
    );
    assert!(with.state.as_ref().unwrap().finished());
    let e = run(&mut with, &cfg, 1).unwrap_err().to_string();
    assert!(e.contains("past the end"), "{e}");
}

/// Step by step equals one run: the state in the model carries everything.
#[test]
fn split_runs_equal_one_run() {
    let cfg = small();
    let mut a = toy();
    run(&mut a, &cfg, cfg.full_schedule().total()).unwrap();
    let mut b = toy();
    run(&mut b, &cfg, 17).unwrap();
    run(&mut b, &cfg, 30).unwrap();
    run(&mut b, &cfg, cfg.full_schedule().total() - 47).unwrap();
    assert_eq!(a.params.flat(), b.params.flat());
    assert_eq!(a.state, b.state);
    assert_eq!(*a.seen.lock().unwrap(), *b.seen.lock().unwrap());
}

/// A non-finite objective stops the run with a numerical error naming the step and
/// phase; the model keeps the last good state.
#[test]
fn non_finite_stops_with_the_step_and_keeps_the_last_good_state() {
    let cfg = small();
    let mut m = toy();
    m.poison_after = Some(2 * 7);
    let e = run(&mut m, &cfg, 30).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Numerical(_)), "{msg}");
    assert!(msg.contains("step 7") && msg.contains("burn-in"), "{msg}");
    let st = m.state.as_ref().unwrap();
    assert_eq!(st.step, 7);
    let mut good = toy();
    run(&mut good, &cfg, 7).unwrap();
    assert_eq!(good.params.flat(), m.params.flat());
    assert_eq!(good.state, m.state);
}

/// A finite objective with a non-finite gradient (issue 15 "bad input"), here during
/// sampling: a numerical error naming the step, the phase and the gradient; the model
/// keeps the last good state, kept samples included (equal to a run stopped there).
#[test]
fn non_finite_gradient_stops_with_the_step_and_keeps_the_last_good_state() {
    let cfg = small();
    let mut m = toy();
    // Burn-in steps evaluate twice (sampler + hyper step): 80 evaluations for 40 steps,
    // then one per step, so evaluation 84 is step 43 (sampling).
    m.poison_grad_after = Some(83);
    let e = run(&mut m, &cfg, cfg.full_schedule().total()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Numerical(_)), "{msg}");
    assert!(
        msg.contains("step 43") && msg.contains("sampling") && msg.contains("gradient"),
        "{msg}"
    );
    let st = m.state.as_ref().unwrap();
    assert_eq!((st.step, st.kept.len()), (43, 1));
    assert!(m.params.flat().iter().all(|v| v.is_finite()));
    let mut good = toy();
    run(&mut good, &cfg, 43).unwrap();
    assert_eq!(good.params.flat(), m.params.flat());
    assert_eq!(good.state, m.state);
}

#[test]
fn config_errors_name_the_field_and_schedules_fit_the_budget() {
    let c = SghmcSamplerConfig::default();
    for (bad, field) in [
        (
            SghmcSamplerConfig {
                kept: 0,
                ..c.clone()
            },
            "kept",
        ),
        (
            SghmcSamplerConfig {
                thinning: 0,
                ..c.clone()
            },
            "thinning",
        ),
        (
            SghmcSamplerConfig {
                window: 20_000,
                ..c.clone()
            },
            "window",
        ),
        (
            SghmcSamplerConfig {
                step_size: 0.0,
                ..c.clone()
            },
            "step_size",
        ),
        (
            SghmcSamplerConfig {
                step_size: f64::NAN,
                ..c.clone()
            },
            "step_size",
        ),
        (
            SghmcSamplerConfig {
                mdecay: 0.0,
                ..c.clone()
            },
            "mdecay",
        ),
        (
            SghmcSamplerConfig {
                hyper_lr: f64::INFINITY,
                ..c.clone()
            },
            "hyper_lr",
        ),
    ] {
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
    assert_eq!(c.schedule(1_000_000).unwrap(), c.full_schedule());
    let s = c.schedule(3_000).unwrap();
    assert_eq!(
        (s.total(), s.kept, s.thinning, s.burn_in),
        (3_000, 100, 10, 2_000)
    );
    let s = c.schedule(1_000).unwrap();
    assert_eq!(
        (s.burn_in, s.thinning, s.kept, s.window),
        (700, 3, 100, 100)
    );
    let s = c.schedule(20).unwrap();
    assert_eq!(
        (s.total(), s.burn_in, s.thinning, s.kept, s.window),
        (20, 13, 1, 7, 13)
    );
    for b in 2..400 {
        let s = c.schedule(b).unwrap();
        assert_eq!(s.total(), b);
        assert!(
            s.kept >= 1 && s.window >= 1 && s.window <= s.burn_in,
            "{b}: {s:?}"
        );
    }
    let e = c.schedule(1).unwrap_err().to_string();
    assert!(e.contains("steps: must be at least 2"), "{e}");
}
