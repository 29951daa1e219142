//! Every backend that declares itself resumable
//! ([`dgp_traits::backend::Capabilities::resumable`], read from the registry, so a backend
//! that starts declaring it is tested too) continues exactly through the library's hooks
//! ([`dgp_traits::guard`], used as raw hooks on the backend's model): a fit stopped by its
//! stop flag after 13 steps saves its state in a checkpoint directory, and a fresh model
//! continued from that directory equals the fit that was never stopped, bit for bit
//! (parameters, report history, predictions).

use dgp_bench::backends::{ArchSpec, backends};
use dgp_traits::Error;
use dgp_traits::data::Dataset;
use dgp_traits::fit::{FitHooks, LrSchedule, Progress};
use dgp_traits::guard::{CheckpointDir, Guard, Start, StopFlag};
use dgp_traits::model::{FitConfig, Model, PredictConfig};
use dgp_traits::testing::{ScratchDir, toy_regression};

/// Requests a stop of its flag once `after` steps were shown; counts the steps.
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

/// Parameters, report history and test log densities, as bits.
fn outputs(m: &dyn Model, history: &[(usize, f64)], d: &Dataset) -> Vec<u64> {
    let mut v: Vec<u64> = m.params().flat().iter().map(|x| x.to_bits()).collect();
    v.extend(history.iter().flat_map(|&(s, o)| [s as u64, o.to_bits()]));
    let pc = PredictConfig {
        samples: 4,
        seed: 3,
    };
    let p = m.predict(d.x(), &pc).unwrap().log_density(d.y()).unwrap();
    v.extend(p.iter().map(|x| x.to_bits()));
    v
}

#[test]
fn every_resumable_backend_continues_exactly_through_the_library_guard() {
    let s = ScratchDir::new("guard-every", "backend");
    let d = toy_regression(30, 2, 2.0, 5);
    let cfg = FitConfig {
        steps: 40,
        batch_size: 12,
        ..FitConfig::default()
    };
    let resumable: Vec<_> = backends()
        .iter()
        .filter(|b| b.capabilities().resumable)
        .collect();
    assert!(resumable.len() >= 5, "{}", resumable.len());
    for b in resumable {
        let name = b.name();
        let mut arch = ArchSpec::with_defaults(b, 2);
        arch.num_inducing = 5;
        arch.tune = false;
        let build = || {
            b.build_model(
                &arch,
                0.01,
                &LrSchedule::Constant,
                &cfg,
                &d,
                &FitHooks::none(),
            )
            .unwrap()
        };
        let mut whole = build();
        let report = whole.fit(&d, &cfg, &mut FitHooks::none()).unwrap();
        let reference = outputs(whole.as_ref(), &report.history, &d);

        let ck = CheckpointDir::open(s.join(name)).unwrap();
        let identity = serde_json::json!({ "backend": name, "cfg": cfg });
        let flag = StopFlag::new();
        let mut stop = StopAt {
            flag: flag.clone(),
            after: 13,
            seen: 0,
        };
        let mut guard = Guard::new()
            .stop_flag(&flag)
            .progress(&mut stop)
            .with_checkpoints(&ck, "run.json", identity.clone(), Start::Fresh)
            .unwrap();
        guard.begin().unwrap();
        let mut first = build();
        let fit = first.fit(&d, &cfg, &mut FitHooks::all(&mut guard));
        let e = guard.finish(fit).unwrap_err();
        assert!(matches!(e, Error::Interrupted(_)), "{name}: {e}");
        assert_eq!(guard.saved_step(), Some(13), "{name}");
        drop(guard);

        let mut steps = StopAt {
            flag: StopFlag::new(),
            after: usize::MAX,
            seen: 0,
        };
        let mut guard = Guard::new()
            .progress(&mut steps)
            .with_checkpoints(&ck, "run.json", identity, Start::Resume)
            .unwrap();
        guard.begin().unwrap();
        let mut second = build();
        let fit = second.fit(&d, &cfg, &mut FitHooks::all(&mut guard));
        let report = guard.finish(fit).unwrap();
        assert_eq!(guard.resumed_step(), Some(13), "{name}");
        drop(guard);
        assert_eq!(steps.seen, 27, "{name}: only the remaining steps");
        assert_eq!(
            outputs(second.as_ref(), &report.history, &d),
            reference,
            "{name}: continued = uninterrupted, bit for bit"
        );
    }
}
