//! Milliseconds per ELBO + gradient evaluation of one structured family at the size of
//! issue 14's speed bar (kin8nm-like synthetic data: D = 8, L = 3, M = 128, τ = 5,
//! batch 512, S = 5), with the tape's buffer-pool counters (a steady state has no fresh
//! allocations), or the same through `Model::fit` (Adam, fresh minibatches).
//!
//! `cargo run --release -p dgp-structured --example step_probe -- [star|fc|mf] [fit]`
//! (one thread: `RAYON_NUM_THREADS=1`).

use dgp_core::rng::seeded;
use dgp_structured::{Family, StructuredConfig, StructuredModel};
use dgp_traits::model::{Batch, FitConfig, FitHooks, Model, Objective};
use dgp_traits::optim::AdamConfig;
use dgp_traits::tape::Tape;
use dgp_traits::testing::toy_regression;
use std::time::Instant;

fn main() -> dgp_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let family = match args.get(1).map(String::as_str) {
        Some("fc") => Family::FullyCoupled,
        Some("mf") => Family::MeanField,
        _ => Family::Star,
    };
    let n = 2000;
    let data = toy_regression(n, 8, 1.0, 0);
    let config = StructuredConfig {
        family,
        layers: 3,
        num_inducing: 128,
        tau: 5,
        train_samples: 5,
        adam: AdamConfig::with_lr(0.005),
        ..StructuredConfig::default()
    };
    let mut model = StructuredModel::new(config, &data)?;
    if args.get(2).map(String::as_str) == Some("fit") {
        let steps = 40;
        let fit = FitConfig {
            steps,
            batch_size: 512,
            ..FitConfig::default()
        };
        let t = Instant::now();
        model.fit(&data, &fit, &mut FitHooks::none())?;
        let ms = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
        println!("{family:?}: fit, {steps} steps: {ms:.1} ms per step (first step included)");
        return Ok(());
    }
    let batch = Batch::new(data.x().subrows(0, 512), data.y().subrows(0, 512), n)?;
    let mut tape = Tape::new();
    let mut rng = seeded(1);
    for step in 0..10 {
        let before = tape.pool_stats();
        let t = Instant::now();
        model.value_and_grad(&mut tape, &batch, &mut rng)?;
        let after = tape.pool_stats();
        println!(
            "{family:?} step {step}: {:.1} ms, {} nodes, pool: {} fresh, {} reused",
            t.elapsed().as_secs_f64() * 1e3,
            tape.len(),
            after.fresh - before.fresh,
            after.reused - before.reused,
        );
    }
    Ok(())
}
