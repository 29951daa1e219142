//! Times one SGHMC step against one svi DGP2 step, interleaved in the same run, and the
//! prediction of the test split from 100 kept samples (issue 15's speed acceptance):
//! `cargo run --release -p dgp-hmc --example sghmc_time -- <uci-folder> [steps] [threads]`.
//! Architecture: L = 2, M = 128, batch 1000, hidden width 5, split 0; svi with one
//! training sample. Reported: min and median wall ms of an svi step (gradient + Adam), an
//! SGHMC burn-in step (sampler gradient + MCEM hyper gradient + Adam) and an SGHMC
//! sampling step (one gradient), each through the same machinery as training.

use dgp_core::rng::stream;
use dgp_data::uci::load_uci;
use dgp_data::{Minibatches, Standardizer, gather_rows_into};
use dgp_hmc::sghmc::{SghmcSamplerConfig, SghmcSchedule, SghmcStepper};
use dgp_hmc::{SghmcConfig, SghmcModel};
use dgp_svi::{SviConfig, SviModel};
use dgp_traits::model::{Batch, FitConfig, FitHooks, Model, Objective, PredictConfig};
use dgp_traits::optim::{Adam, AdamConfig};
use dgp_traits::tape::Tape;
use dgp_traits::train::Executor;
use faer::{Mat, Par};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn stats(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

fn main() -> dgp_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: sghmc_time <uci-folder> [steps] [threads]");
        std::process::exit(2);
    }
    let steps: usize = args.get(2).map_or(40, |s| s.parse().expect("steps"));
    let threads: usize = args.get(3).map_or(2, |s| s.parse().expect("threads"));
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("rayon pool");
    let uci = load_uci(&args[1])?;
    let (tr, te) = uci.split(0)?;
    let train = uci.data.select_rows(&tr)?;
    let test = uci.data.select_rows(&te)?;
    let st = Standardizer::fit(&train);
    let train = st.transform(&train)?;
    let test_x = st.transform_x(test.x())?;
    let (n, b) = (train.n(), 1000.min(train.n()));
    let mut svi = SviModel::new(
        SviConfig {
            layers: 2,
            num_inducing: 128,
            hidden_width: Some(5),
            ..Default::default()
        },
        &train,
    )?;
    let sampler = SghmcSamplerConfig {
        burn_in: 100,
        thinning: 1,
        kept: 100,
        window: 100,
        ..SghmcSamplerConfig::default()
    };
    let cfg = SghmcConfig {
        layers: 2,
        num_inducing: 128,
        hidden_width: Some(5),
        sampler: sampler.clone(),
        ..SghmcConfig::default()
    };
    let mut hmc = SghmcModel::new(cfg.clone(), &train)?;
    // Timed SGHMC steps: a long schedule so that the first `steps` are burn-in steps;
    // a second model is moved past burn-in for the sampling steps.
    let burn_sched = SghmcSchedule {
        burn_in: 100_000,
        thinning: 1,
        kept: 1,
        window: 100,
    };
    let samp_sched = SghmcSchedule {
        burn_in: 100,
        thinning: 1,
        kept: 100_000,
        window: 100,
    };
    let mut hmc_s = SghmcModel::new(cfg, &train)?;
    let one = FitConfig {
        steps: 1,
        batch_size: b,
        seed: 0,
        ..FitConfig::default()
    };
    let mut burn = SghmcSamplerConfig {
        burn_in: 100_000,
        ..sampler.clone()
    };
    burn.window = 100;
    Executor::new(
        SghmcStepper::new(sampler.clone(), samp_sched, 0)?,
        &FitConfig {
            steps: 101,
            ..one.clone()
        },
    )
    .run(&mut hmc_s, &train)?;
    let mut batches = Minibatches::new(n, b, 0)?;
    let mut noise = stream(0, 1);
    let mut adam = Adam::new(AdamConfig::with_lr(0.01), svi.params().num_free())?;
    let mut flat = svi.params().flat();
    let (mut xb, mut yb) = (
        Mat::<f64>::zeros(b, train.input_dim()),
        Mat::<f64>::zeros(b, 1),
    );
    let mut tape = Tape::with_par(Par::rayon(0));
    let (mut t_svi, mut t_burn, mut t_samp) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..steps + 5 {
        let idx = batches.next_batch();
        gather_rows_into(train.x(), idx, xb.as_mut());
        gather_rows_into(train.y(), idx, yb.as_mut());
        let batch = Batch::new(xb.as_ref(), yb.as_ref(), n)?;
        let t0 = Instant::now();
        let (_, g) = svi.value_and_grad(&mut tape, &batch, &mut noise)?;
        adam.ascend(&mut flat, &g)?;
        svi.params_mut().set_flat(&flat)?;
        let d_svi = t0.elapsed().as_secs_f64() * 1e3;
        let t0 = Instant::now();
        Executor::new(SghmcStepper::new(burn.clone(), burn_sched, 0)?, &one)
            .run(&mut hmc, &train)?;
        let d_burn = t0.elapsed().as_secs_f64() * 1e3;
        let t0 = Instant::now();
        Executor::new(SghmcStepper::new(sampler.clone(), samp_sched, 0)?, &one)
            .run(&mut hmc_s, &train)?;
        let d_samp = t0.elapsed().as_secs_f64() * 1e3;
        if k >= 5 {
            t_svi.push(d_svi);
            t_burn.push(d_burn);
            t_samp.push(d_samp);
        }
    }
    let (a, b2) = stats(&mut t_svi);
    println!("svi DGP2 step (S=1):       min {a:.2} ms, median {b2:.2} ms");
    let (c, d) = stats(&mut t_burn);
    println!(
        "sghmc burn-in step (+MCEM): min {c:.2} ms, median {d:.2} ms ({:.2}x svi median)",
        d / b2
    );
    let (e, f) = stats(&mut t_samp);
    println!(
        "sghmc sampling step:        min {e:.2} ms, median {f:.2} ms ({:.2}x svi median)",
        f / b2
    );
    // Prediction from 100 kept samples.
    let mut pred_model = SghmcModel::new(
        SghmcConfig {
            layers: 2,
            num_inducing: 128,
            hidden_width: Some(5),
            sampler,
            ..SghmcConfig::default()
        },
        &train,
    )?;
    pred_model.fit(
        &train,
        &FitConfig {
            steps: 200,
            batch_size: b,
            ..FitConfig::default()
        },
        &mut FitHooks::none(),
    )?;
    assert_eq!(pred_model.kept_samples().len(), 100);
    let mut pt = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        let p = pred_model.predict(test_x.as_ref(), &PredictConfig::default())?;
        pt.push(t0.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(p);
    }
    let (g, h) = stats(&mut pt);
    println!(
        "sghmc prediction of {} test points from 100 kept samples: min {g:.0} ms, median {h:.0} ms",
        test_x.nrows()
    );
    Ok(())
}
