//! The Rust side of the Python package's checks: one fit and prediction made with the
//! library directly, the way `dgp-bench run` makes one split's (standardise with the
//! training rows' statistics, `Backend::build`, `Model::fit`, `Model::predict` at the
//! standardised test inputs, the mixture mapped back to original units), from a fully
//! resolved configuration — the `config_` a Python estimator reports after its fit.
//!
//! ```text
//! reference_fit TRAIN.csv TEST.csv CONFIG.json TASK [REPEATS]
//! ```
//!
//! `TRAIN.csv` has the input columns and a last column `y` (classification: class indices),
//! or is `synth:N` for the first N rows of `dgp_data::synth` with seed 0, or `rows:N` for N
//! rows `x_ij = sin(9i + j)`, `y_i = cos(i)` made in place (for the memory comparison);
//! `TEST.csv` the input columns and a last column `y_unused` (ignored); `CONFIG.json` is `{"backend", "common", "settings", "fit",
//! "predict"}`; `TASK` is `regression` or `classification`. Prints one JSON object: the
//! predictive mixture (`weights`, `means`, `variances`: per output, row-major N×S),
//! `class_probs` (classification), the steps taken, and `fit_seconds`, the median wall
//! time of standardising, building and training over `REPEATS` fits (default 1), so that
//! the Python tests can compare numbers bit for bit and time the same fit from Rust; and the
//! resident memory before the fits and its peak during them (`VmRSS`, then `VmHWM` after a
//! reset of the high-water mark), to compare the memory a fit
//! adds with the Python package's.

use std::time::Instant;

use dgp_data::{Dataset, StandardizeOptions, Standardizer, load_csv};
use dgp_traits::backend::{CommonSettings, Settings};
use dgp_traits::fit::FitHooks;
use dgp_traits::model::{FitConfig, Model, PredictConfig};
use faer::Mat;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(serde::Deserialize)]
struct Config {
    backend: String,
    common: CommonSettings,
    settings: Settings,
    fit: FitConfig,
    predict: PredictConfig,
}

fn rows(m: &Mat<f64>) -> Vec<Vec<f64>> {
    (0..m.nrows())
        .map(|i| (0..m.ncols()).map(|j| m[(i, j)]).collect())
        .collect()
}

/// A memory figure of this process from `/proc/self/status` (`VmRSS:` now, `VmHWM:` the
/// peak), in bytes (0 where `/proc` does not say).
fn status_bytes(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        return Err("usage: reference_fit TRAIN.csv TEST.csv CONFIG.json TASK [REPEATS]".into());
    }
    let train = if let Some(n) = args[1].strip_prefix("synth:") {
        dgp_data::synth::synth_dataset(n.parse()?, 0)?
    } else if let Some(n) = args[1].strip_prefix("rows:") {
        // Rows made in place (no buffer freed before the fit): x_ij = sin(9i + j),
        // y_i = cos(i), for measuring the memory a fit adds.
        let n: usize = n.parse()?;
        let x = Mat::from_fn(n, 9, |i, j| ((9 * i + j) as f64).sin());
        let y = Mat::from_fn(n, 1, |i, _| (i as f64).cos());
        Dataset::new(x, y)?
    } else {
        load_csv(&args[1], "y")?
    };
    let test = load_csv(&args[2], "y_unused")?;
    let cfg: Config = serde_json::from_str(&std::fs::read_to_string(&args[3])?)?;
    let classify = args[4] == "classification";
    let repeats: usize = args.get(5).map_or(Ok(1), |r| r.parse())?;
    let backend = dgp_registry::find(&cfg.backend)?;
    let opts = if classify {
        StandardizeOptions::default().keep_targets()
    } else {
        StandardizeOptions::default()
    };
    // Peak memory from here on: reset the high-water mark (Linux), keep the current size.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let hwm_before = status_bytes("VmRSS:");
    let mut times = Vec::new();
    let mut fitted: Option<(Box<dyn Model>, Standardizer, usize)> = None;
    for _ in 0..repeats.max(1) {
        let t0 = Instant::now();
        let st = Standardizer::fit_with(&train, opts)?;
        st.check_target_variance_representable()?;
        let train_std: Dataset = st.transform(&train)?;
        let mut hooks = FitHooks::none();
        let mut model = backend.build(&cfg.common, &cfg.settings, &cfg.fit, &train_std, &hooks)?;
        let report = model.fit(&train_std, &cfg.fit, &mut hooks)?;
        times.push(t0.elapsed().as_secs_f64());
        fitted = Some((model, st, report.steps));
    }
    let hwm_after = status_bytes("VmHWM:");
    times.sort_by(f64::total_cmp);
    let (model, st, steps) = fitted.ok_or("no fit")?;
    let xs = st.transform_x(test.x())?;
    let mut pred = model.predict(xs.as_ref(), &cfg.predict)?;
    if !classify {
        pred = pred.unstandardize(&st.y_mean, &st.y_std)?;
    }
    let out = serde_json::json!({
        "steps": steps,
        "fit_seconds": times[times.len() / 2],
        "fit_seconds_all": times,
        "peak_rss_before": hwm_before,
        "peak_rss_after": hwm_after,
        "weights": pred.weights(),
        "means": pred.means().iter().map(rows).collect::<Vec<_>>(),
        "variances": pred.variances().iter().map(rows).collect::<Vec<_>>(),
        "class_probs": pred.class_probs().map(|c| rows(&c.to_owned())),
    });
    println!("{out}");
    Ok(())
}
