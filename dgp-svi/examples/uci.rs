//! Runs the DSVI protocol (train-split standardisation, metrics in original units) on a
//! UCI folder: `cargo run --release -p dgp-svi --example uci -- <folder> <layers> <steps> <splits...>`.
//! Prints one line per split and the mean ± standard error (ddof = 1). The full benchmark
//! CLI is `dgp-bench run`; this example shows the library calls it is made of.

use dgp_data::Standardizer;
use dgp_data::uci::load_uci;
use dgp_svi::prelude::*;
use dgp_traits::metrics::Metrics;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> dgp_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: uci <folder> <layers> <steps> <split> [split ...]");
        std::process::exit(2);
    }
    let uci = load_uci(&args[1])?;
    let layers: usize = args[2].parse().expect("layers");
    let steps: usize = args[3].parse().expect("steps");
    let splits: Vec<usize> = args[4..]
        .iter()
        .map(|s| s.parse().expect("split"))
        .collect();
    let mut nlls = Vec::new();
    for &k in &splits {
        let (tr, te) = uci.split(k)?;
        let (train, test) = (uci.data.select_rows(&tr)?, uci.data.select_rows(&te)?);
        let st = Standardizer::fit(&train);
        let (train_s, test_s) = (st.transform(&train)?, st.transform(&test)?);
        let cfg = SviConfig {
            layers,
            adam: AdamConfig::with_lr(0.01),
            ..Default::default()
        };
        let mut model = SviModel::new(cfg, &train_s)?;
        let fit = FitConfig {
            steps,
            batch_size: 10_000,
            seed: k as u64,
            ..FitConfig::default()
        };
        let t0 = Instant::now();
        model.fit(&train_s, &fit, &mut FitHooks::none())?;
        let secs = t0.elapsed().as_secs_f64();
        let pred = model.predict(
            test_s.x(),
            &PredictConfig {
                samples: 100,
                seed: 7,
            },
        )?;
        let pred = pred.unstandardize(&st.y_mean, &st.y_std)?;
        let m = Metrics::compute(&pred, test.y())?;
        println!(
            "{} L={layers} split {k}: NLL {:.3} RMSE {:.3} CRPS {:.3} cov95 {:.3} train {:.1}s",
            uci.name, m.nll, m.rmse, m.crps, m.cov95, secs
        );
        nlls.push(m.nll);
    }
    let n = nlls.len() as f64;
    let mean = nlls.iter().sum::<f64>() / n;
    let sd = if n > 1.0 {
        (nlls.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    println!(
        "{} L={layers}: mean NLL {:.3} ± {:.3} (s.e., {} splits)",
        uci.name,
        mean,
        sd / n.sqrt(),
        nlls.len()
    );
    Ok(())
}
