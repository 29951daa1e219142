//! Noisy step function (Vafa 2016, Fig. 5.9, the DGPS thesis' synthetic benchmark):
//! y = sign(x) + ε, ε ~ N(0, 0.01²), x ~ U(−2, 2), N = 200, one seeded 80/20 split;
//! inputs and targets standardised with the training split. Trains 1-, 2- and 3-layer
//! nested models and prints their test NLL (original units), RMSE and final bound.
//!
//! Both optimisers by default: Adam (5000 full-batch steps, learning rate 0.01) and
//! L-BFGS (≤ 1000 iterations). Predictions are the moment-matched Gaussian.
//!
//! `cargo run --release -p dgp-nested --example step [-- --optimiser lbfgs|adam]
//! [--steps N] [--inducing M] [--seed S]`

use dgp_core::rng::{seeded, standard_normal};
use dgp_data::Standardizer;
use dgp_data::random_split;
use dgp_nested::prelude::*;
use dgp_traits::metrics::Metrics;
use rand::RngExt;
use std::time::Instant;

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> dgp_core::Result<()> {
    let seed: u64 = arg("--seed", 0);
    let steps_arg: usize = arg("--steps", 0);
    let m: usize = arg("--inducing", 20);
    let opts = match arg("--optimiser", "both".to_string()).as_str() {
        "adam" => vec![Optimiser::Adam],
        "lbfgs" => vec![Optimiser::Lbfgs],
        _ => vec![Optimiser::Adam, Optimiser::Lbfgs],
    };
    // Data.
    let n = 200;
    let mut rng = seeded(seed);
    let x = Mat::from_fn(n, 1, |_, _| -2.0 + 4.0 * rng.random::<f64>());
    let eps = standard_normal(&mut rng, n, 1);
    let y = Mat::from_fn(n, 1, |i, _| x[(i, 0)].signum() + 0.01 * eps[(i, 0)]);
    let data = Dataset::new(x, y)?;
    let (train_idx, test_idx) = random_split(n, 0.2, seed)?;
    let (train, test) = (data.select_rows(&train_idx)?, data.select_rows(&test_idx)?);
    let st = Standardizer::fit(&train);
    let (train_s, test_s) = (st.transform(&train)?, st.transform(&test)?);
    for opt in opts {
        let steps = match (steps_arg, opt) {
            (0, Optimiser::Adam) => 5000,
            (0, Optimiser::Lbfgs) => 1000,
            (s, _) => s,
        };
        println!(
            "\nnoisy step: N = {n} (train {}, test {}), noise sd 0.01, seed {seed}; {opt:?}, \
         {steps} steps, M = {m}",
            train.n(),
            test.n()
        );
        println!("| layers | test NLL | test RMSE | final bound | seconds |");
        println!("|---|---|---|---|---|");
        for layers in 1..=3 {
            let cfg = NestedConfig {
                layers,
                num_inducing: m,
                optimiser: opt,
                ..Default::default()
            };
            let mut model = NestedModel::new(cfg, &train_s)?;
            let fit = FitConfig {
                steps,
                batch_size: 0,
                seed,
                ..FitConfig::default()
            };
            let t0 = Instant::now();
            let report = model.fit(&train_s, &fit, &mut FitHooks::none())?;
            let secs = t0.elapsed().as_secs_f64();
            let pred = model
                .predict(test_s.x(), &PredictConfig::default())?
                .unstandardize(&st.y_mean, &st.y_std)?;
            let met = Metrics::compute(&pred, test.y())?;
            println!(
                "| {layers} | {:.4} | {:.4} | {:.2} | {secs:.1} |",
                met.nll, met.rmse, report.final_objective
            );
        }
    }
    Ok(())
}
