//! Times the parts of one DSVI gradient step on a UCI split, robustly on a shared machine
//! (minimum and median wall time, and process CPU time per step):
//! `cargo run --release -p dgp-svi --example step_time -- <uci-folder> <samples> [steps] [threads]`.
//! Architecture of the speed acceptance: L = 2, M = 128, batch 1000, hidden width 5.

use dgp_core::rng::stream;
use dgp_data::uci::load_uci;
use dgp_data::{Minibatches, Standardizer, gather_rows_into};
use dgp_svi::prelude::*;
use dgp_traits::model::Batch;
use dgp_traits::optim::{Adam, AdamConfig};
use dgp_traits::tape::Tape;
use faer::{Mat, Par};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// User + system CPU seconds of this process (all threads), from `/proc/self/stat`.
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

fn stats(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

fn main() -> dgp_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: step_time <uci-folder> <samples> [steps] [threads]");
        std::process::exit(2);
    }
    let samples: usize = args[2].parse().expect("samples");
    let steps: usize = args.get(3).map_or(60, |s| s.parse().expect("steps"));
    let threads: usize = args.get(4).map_or(2, |s| s.parse().expect("threads"));
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("rayon pool");
    let uci = load_uci(&args[1])?;
    let (tr, _) = uci.split(0)?;
    let train = uci.data.select_rows(&tr)?;
    let train = Standardizer::fit(&train).transform(&train)?;
    let cfg = SviConfig {
        layers: 2,
        num_inducing: 128,
        hidden_width: Some(5),
        train_samples: samples,
        ..Default::default()
    };
    let mut model = SviModel::new(cfg, &train)?;
    let n = train.n();
    let b = 1000.min(n);
    let mut batches = Minibatches::new(n, b, 0)?;
    let mut rng = stream(0, 1);
    let mut adam = Adam::new(AdamConfig::with_lr(0.01), model.params().num_free())?;
    let mut flat = model.params().flat();
    let (mut xb, mut yb) = (Mat::zeros(b, train.input_dim()), Mat::zeros(b, 1));
    let mut tape = Tape::with_par(Par::rayon(0));
    let (mut fwd, mut bwd, mut tot) = (Vec::new(), Vec::new(), Vec::new());
    let warmup = 10;
    let mut cpu0 = 0.0;
    for step in 0..warmup + steps {
        if step == warmup {
            cpu0 = cpu_seconds();
        }
        let idx = batches.next_batch();
        gather_rows_into(train.x(), idx, xb.as_mut());
        gather_rows_into(train.y(), idx, yb.as_mut());
        let batch = Batch::new(xb.as_ref(), yb.as_ref(), n)?;
        let t0 = Instant::now();
        tape.clear();
        let leaves = model.params().record(&mut tape);
        let out = model.record(&mut tape, &leaves, &batch, &mut rng)?;
        let t1 = Instant::now();
        let grads = tape.backward(out);
        let g = model.params().flat_grad(&grads, &leaves);
        drop(grads);
        let t2 = Instant::now();
        adam.ascend(&mut flat, &g)?;
        model.params_mut().set_flat(&flat)?;
        let t3 = Instant::now();
        if step >= warmup {
            fwd.push((t1 - t0).as_secs_f64() * 1e3);
            bwd.push((t2 - t1).as_secs_f64() * 1e3);
            tot.push((t3 - t0).as_secs_f64() * 1e3);
        }
    }
    let cpu = (cpu_seconds() - cpu0) * 1e3 / steps as f64;
    let (f, bw, t) = (stats(&mut fwd), stats(&mut bwd), stats(&mut tot));
    println!(
        "S={samples} threads={threads}: step min {:.2} / median {:.2} ms (forward {:.2}/{:.2}, backward {:.2}/{:.2}); CPU {cpu:.2} ms/step; pool {:?}",
        t.0,
        t.1,
        f.0,
        f.1,
        bw.0,
        bw.1,
        tape.pool_stats()
    );
    Ok(())
}
