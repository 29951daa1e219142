//! Traces any registered backend's fit with `dgp-bench run`'s defaults on one split: the
//! model is built and trained as `run` builds it (the backend's M, learning rate, batch
//! cap, training samples and settings, seed 0), through its own `Model::fit`. Every `EVERY`
//! steps it prints one tab-separated line: steps done, training seconds so far (evaluation
//! excluded), the mean objective over the last `EVERY` steps divided by the training rows
//! (the quantity the convergence stop compares), the test NLL and RMSE in original units
//! (the backend's predictive samples) and the likelihood's noise variance in standardised
//! units.
//!
//! ```text
//! cargo run --release -p dgp-bench --example fit_trace -- \
//!     ../shared/data/uci/concrete 0 svi 2 10000 500 '{"convergence":null}'
//! ```
//!
//! Arguments: `DATA SPLIT BACKEND LAYERS STEPS EVERY [SETTINGS_JSON [LR]]`. DATA is
//! anything `dgp-bench run --data` reads; SETTINGS_JSON holds backend settings as `--set`
//! gives them (`{"natgrad":{"gamma":0.1}}`); LR replaces the backend's learning rate. No selection on validation rows runs (the
//! backend's untuned defaults) and no held-out early stopping, so the whole path is
//! visible; a backend's own convergence stop still applies unless the settings turn it
//! off. For the structured backends' ELBO and KL columns see `structured_trace`.

#[allow(dead_code)]
#[path = "common/trace.rs"]
mod trace;

use dgp_bench::backends::find_backend;
use dgp_bench::datasets::BenchData;
use dgp_bench::spec::ExperimentSpec;
use dgp_traits::backend::Settings;
use dgp_traits::fit::FitHooks;
use dgp_traits::metrics;
use dgp_traits::model::{FitConfig, PredictConfig};
use trace::{FitTrace, Res, TraceArgs};

fn main() -> Res<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 7 {
        return Err(
            "usage: fit_trace DATA SPLIT BACKEND LAYERS STEPS EVERY [SETTINGS_JSON [LR]]".into(),
        );
    }
    let data = BenchData::load(&a[1], None, 0)?;
    let split: usize = a[2].parse()?;
    let backend = find_backend(&a[3])?;
    let layers: usize = a[4].parse()?;
    let steps: usize = a[5].parse()?;
    let every: usize = a[6].parse::<usize>()?.max(1);
    let settings: Settings = match a.get(7) {
        Some(j) => serde_json::from_str(j)?,
        None => Settings::new(),
    };
    let args = TraceArgs {
        data,
        split,
        steps,
        every,
        config: (),
    };
    let (train, test, ystd) = args.standardized_split()?;
    let mut spec = ExperimentSpec::with_defaults(&args.data, backend, layers);
    spec.arch.tune = false;
    spec.arch.settings = settings;
    spec.arch.num_inducing = spec.arch.num_inducing.min(train.n());
    if let Some(lr) = a.get(8) {
        spec.learning_rate = lr.parse()?;
    }
    let fit = FitConfig {
        steps,
        batch_size: spec.batch_size.min(train.n()),
        ..FitConfig::default()
    };
    let build = || {
        backend.build_model(
            &spec.arch,
            spec.learning_rate,
            &spec.lr_schedule,
            &fit,
            &train,
            &FitHooks::none(),
        )
    };
    let mut model = build()?;
    println!("# {}", a[1..].join(" "));
    println!("# {}", model.describe());
    println!("step\tseconds\tobjective_per_row\ttest_nll\ttest_rmse\tnoise_variance_std");
    let mut eval = build()?;
    let samples = spec.arch.predict_samples;
    let rows = train.n() as f64;
    let mut trace = FitTrace::new(every, |state, secs, obj| {
        eval.params_mut().set_flat(&state.params)?;
        let pred = eval.predict(test.x(), &PredictConfig { samples, seed: 0 })?;
        let nll = metrics::nll(&pred, test.y())? + ystd.ln();
        let rmse = metrics::rmse(&pred, test.y())? * ystd;
        let noise = eval.noise_variance().unwrap_or(f64::NAN);
        println!(
            "{}\t{secs:.1}\t{:.5}\t{nll:.4}\t{rmse:.4}\t{noise:.3e}",
            state.steps_done,
            obj / rows
        );
        Ok(())
    });
    let report = model.fit(&train, &fit, &mut FitHooks::all(&mut trace))?;
    if let Some(k) = report.converged_after {
        println!("# stopped: training objective converged after {k} steps");
    }
    Ok(())
}
