//! Held-out early stopping through `FitConfig::early_stopping` on real backends (svi,
//! nested): `None` is bit-identical to the executor run the backends made before the
//! option existed, and a rule stops the run and restores what it says.

use dgp_nested::{NestedConfig, NestedModel};
use dgp_svi::prelude::*;
use dgp_traits::model::FitReport;
use dgp_traits::optim::{AdamConfig, NatGradConfig};
use dgp_traits::testing::toy_regression;
use dgp_traits::train::{
    AdamStepper, CallerHooks, Control, EarlyStopping, Executor, HeldOutRule, HeldOutSplit,
    LindingerStopping, NaturalAdamStepper, Observer, Restore, StepInfo, fit_with_held_out_observed,
};

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn history_bits(r: &FitReport) -> Vec<(usize, u64)> {
    r.history.iter().map(|(s, v)| (*s, v.to_bits())).collect()
}

/// The learning rate of the plain runs.
const LR: f64 = 0.02;

fn svi(data: &Dataset, natgrad: Option<NatGradConfig>, lr: f64) -> SviModel {
    SviModel::new(
        SviConfig {
            layers: 2,
            num_inducing: 8,
            natgrad,
            adam: AdamConfig::with_lr(lr),
            ..Default::default()
        },
        data,
    )
    .unwrap()
}

fn fit_cfg(steps: usize) -> FitConfig {
    FitConfig {
        steps,
        batch_size: 16,
        seed: 5,
        ..FitConfig::default()
    }
}

#[test]
fn no_rule_is_bit_identical_to_the_plain_executor_run() {
    let data = toy_regression(48, 2, 1.0, 3);
    let cfg = fit_cfg(40);
    // svi, Adam only and with natural-gradient steps: the code `fit` ran before.
    for nat in [None, Some(NatGradConfig::default())] {
        let mut a = svi(&data, nat, LR);
        let mut b = a.clone();
        let ra = a.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        let adam = AdamConfig::with_lr(LR);
        let rb = match nat {
            Some(n) => Executor::new(NaturalAdamStepper::new(adam, n).unwrap(), &cfg)
                .observe(&mut CallerHooks::new(&mut FitHooks::none()))
                .run(&mut b, &data),
            None => Executor::new(AdamStepper::new(adam), &cfg)
                .observe(&mut CallerHooks::new(&mut FitHooks::none()))
                .run(&mut b, &data),
        }
        .unwrap();
        assert_eq!(bits(&a.params().flat()), bits(&b.params().flat()));
        assert_eq!(history_bits(&ra), history_bits(&rb));
    }
    // nested (Adam).
    let ncfg = NestedConfig {
        layers: 2,
        num_inducing: 6,
        adam: AdamConfig::with_lr(LR),
        ..Default::default()
    };
    let mut a = NestedModel::new(ncfg, &data).unwrap();
    let mut b = a.clone();
    let ra = a.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
    let rb = Executor::new(AdamStepper::new(AdamConfig::with_lr(LR)), &cfg)
        .observe(&mut CallerHooks::new(&mut FitHooks::none()))
        .run(&mut b, &data)
        .unwrap();
    assert_eq!(bits(&a.params().flat()), bits(&b.params().flat()));
    assert_eq!(history_bits(&ra), history_bits(&rb));
}

/// Keeps the flat parameters after every step.
struct Snap(Vec<Vec<f64>>);

impl<M: Model> Observer<M> for Snap {
    fn on_step(&mut self, model: &M, _info: &StepInfo) -> dgp_core::Result<Control> {
        self.0.push(model.params().flat());
        Ok(Control::Continue)
    }
}

/// A short version of the Lindinger rule (so a test can trigger it) with a large step.
fn quick_rule(restore: Restore) -> HeldOutRule {
    HeldOutRule::Lindinger(LindingerStopping {
        every: 1,
        window: 2,
        lag: 1,
        checks: 2,
        min_steps: 10,
        restore,
        ..LindingerStopping::default()
    })
}

#[test]
fn svi_with_the_lindinger_rule_stops_and_restores() {
    let data = toy_regression(60, 2, 1.0, 4);
    for restore in [Restore::Last, Restore::Best] {
        let cfg = FitConfig {
            early_stopping: Some(quick_rule(restore)),
            ..fit_cfg(400)
        };
        let init = svi(&data, None, 0.2);
        // Through `Model::fit` (the svi wiring) …
        let mut a = init.clone();
        let ra = a.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
        assert!(ra.steps < 400, "the rule stopped the run ({restore:?})");
        // … equals the core helper run directly, whose snapshots show what was kept.
        let mut b = init.clone();
        let mut snap = Snap(Vec::new());
        let rb = fit_with_held_out_observed(
            &mut b,
            &data,
            &cfg,
            AdamStepper::new(AdamConfig::with_lr(0.2)),
            &mut FitHooks::none(),
            &mut [&mut snap],
        )
        .unwrap();
        assert_eq!(ra.steps, rb.steps);
        assert_eq!(bits(&a.params().flat()), bits(&b.params().flat()));
        let s = rb.held_out.clone().unwrap();
        let split = HeldOutSplit::draw(cfg.early_stopping.as_ref().unwrap(), 60, cfg.seed)
            .unwrap()
            .unwrap();
        let (kept, held) = (split.kept(), split.held());
        assert_eq!(s.heldout_rows, held.len());
        assert_eq!(kept.len() + held.len(), 60);
        assert_eq!(snap.0.len(), rb.steps);
        // The report carries the summary, with one score per logged evaluation (every
        // step here: `every: 1`, from step 0 to the stop), as (steps done, held-out NLL).
        assert_eq!(ra.held_out.as_ref(), Some(&s));
        assert_eq!(rb.held_out.as_ref(), Some(&s));
        let done: Vec<usize> = s.scores.iter().map(|p| p.0).collect();
        assert_eq!(done, (0..done.len()).collect::<Vec<_>>());
        assert!(done.len() >= rb.steps.saturating_sub(1));
        assert!(s.scores.iter().all(|p| p.1.is_finite()));
        if let Some(at) = s.best_step {
            let best = s.scores.iter().find(|p| p.0 == at).unwrap().1;
            assert_eq!(Some(best), s.best_heldout_nll);
            assert!(s.scores.iter().all(|p| p.1 >= best));
        }
        match restore {
            Restore::Last => {
                assert_eq!(s.best_step, None);
                assert_eq!(bits(&b.params().flat()), bits(snap.0.last().unwrap()));
            }
            Restore::Best => {
                let at = s.best_step.unwrap();
                assert!(s.best_heldout_nll.unwrap().is_finite());
                let want = if at == 0 {
                    init.params().flat()
                } else {
                    snap.0[at - 1].clone()
                };
                assert_eq!(bits(&b.params().flat()), bits(&want));
            }
        }
    }
}

#[test]
fn the_patience_rule_works_for_svi_and_l_bfgs_nested_refuses_a_rule() {
    let data = toy_regression(60, 2, 1.0, 6);
    let cfg = FitConfig {
        early_stopping: Some(HeldOutRule::Patience(EarlyStopping {
            fraction: 0.2,
            every: 2,
            patience: 3,
            min_rows: 0,
            rises: 0,
        })),
        ..fit_cfg(300)
    };
    let mut m = svi(&data, None, 0.2);
    let r = m.fit(&data, &cfg, &mut FitHooks::none()).unwrap();
    assert!(r.steps < 300);
    // Scored at the start and every 2 steps; the kept step is the best of them.
    let h = r.held_out.as_ref().unwrap();
    let done: Vec<usize> = h.scores.iter().map(|p| p.0).collect();
    assert_eq!(done, (0..done.len()).map(|k| 2 * k).collect::<Vec<_>>());
    let best = h.scores.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    assert_eq!(h.best_heldout_nll, Some(best));
    let ncfg = NestedConfig {
        layers: 1,
        num_inducing: 6,
        optimiser: dgp_nested::Optimiser::Lbfgs,
        ..Default::default()
    };
    let mut n = NestedModel::new(ncfg, &data).unwrap();
    let e = n
        .fit(&data, &cfg, &mut FitHooks::none())
        .unwrap_err()
        .to_string();
    assert!(e.contains("early_stopping"), "{e}");
    // Old JSON without the new fields (and with the learning rate, now the backend's)
    // still loads, with no early stopping.
    let old: FitConfig =
        serde_json::from_str(r#"{"steps":5,"batch_size":3,"learning_rate":0.1,"seed":2}"#).unwrap();
    assert_eq!(old.early_stopping, None);
    assert_eq!((old.steps, old.batch_size, old.seed), (5, 3, 2));
}
