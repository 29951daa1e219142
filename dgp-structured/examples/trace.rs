//! Training trace of one structured family on one split: every `EVERY` steps the training
//! objective (mean of the last `EVERY` steps), the test NLL and RMSE in original units
//! (100 predictive samples), the likelihood's noise variance (standardised units) and the
//! seconds of training so far, as tab-separated lines.
//!
//! `cargo run --release -p dgp-structured --example trace -- DATA SPLIT FAMILY LAYERS STEPS EVERY LR [KEY=VALUE ...]`
//!
//! DATA is a UCI folder (published split SPLIT) or a CSV file with a header (target the last
//! column; the random 90:10 split seeded SPLIT, as `dgp-bench run` makes it). FAMILY is
//! star, mf or fc. KEY=VALUE pairs set fields of `StructuredConfig` (JSON values:
//! `whitened=true`, `natgrad={"gamma":0.1}`); M = min(128, N), τ = 5, S = 5 and batch
//! min(N, 512) as `dgp-bench run`, no convergence stop.

use dgp_io::uci::load_uci;
use dgp_structured::{StructuredConfig, StructuredModel};
use dgp_traits::data::{Dataset, Standardizer, load_csv, random_split};
use dgp_traits::error::{Error, Result};
use dgp_traits::fit::{Checkpoints, FitHooks, Progress, RunControl, RunState};
use dgp_traits::metrics;
use dgp_traits::model::{FitConfig, Model, PredictConfig};
use dgp_traits::optim::AdamConfig;
use std::path::Path;
use std::time::Instant;

struct Trace<'a> {
    model: StructuredModel,
    test_x: &'a Dataset,
    y_std: f64,
    every: usize,
    objectives: Vec<f64>,
    start: Instant,
}

impl Progress for Trace<'_> {
    fn on_step(&mut self, _step: usize, _total: usize, objective: f64) {
        self.objectives.push(objective);
    }
}

impl RunControl for Trace<'_> {}

impl Checkpoints for Trace<'_> {
    fn every(&self) -> usize {
        self.every
    }

    fn save(&mut self, state: &RunState) -> Result<()> {
        let secs = self.start.elapsed().as_secs_f64();
        self.model.params_mut().set_flat(&state.params)?;
        let pred = self.model.predict(
            self.test_x.x(),
            &PredictConfig {
                samples: 100,
                seed: 0,
            },
        )?;
        let nll = metrics::nll(&pred, self.test_x.y())? + self.y_std.ln();
        let rmse = metrics::rmse(&pred, self.test_x.y())? * self.y_std;
        let tail = &self.objectives[self.objectives.len().saturating_sub(self.every)..];
        let obj = tail.iter().sum::<f64>() / tail.len().max(1) as f64;
        let noise = self.model.noise_variance().unwrap_or(f64::NAN);
        println!(
            "{}\t{secs:.1}\t{obj:.2}\t{nll:.4}\t{rmse:.4}\t{noise:.3e}",
            state.steps_done
        );
        self.start = Instant::now() - std::time::Duration::from_secs_f64(secs);
        Ok(())
    }
}

fn main() -> Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 8 {
        return Err(Error::config(
            "arguments",
            "DATA SPLIT FAMILY LAYERS STEPS EVERY LR [KEY=VALUE ...]",
        ));
    }
    let num = |i: usize| -> Result<f64> {
        a[i].parse::<f64>()
            .map_err(|_| Error::config("arguments", format!("{} is not a number", a[i])))
    };
    let split = num(2)? as usize;
    let (layers, steps, every, lr) = (
        num(4)? as usize,
        num(5)? as usize,
        num(6)? as usize,
        num(7)?,
    );
    let (all, train_idx, test_idx) = if Path::new(&a[1]).is_dir() {
        let u = load_uci(&a[1])?;
        let (tr, te) = u.split(split)?;
        (u.data, tr, te)
    } else {
        let d = load_csv(&a[1], "y")?;
        let (tr, te) = random_split(d.n(), 0.1, split as u64)?;
        (d, tr, te)
    };
    let (train, test) = (all.select_rows(&train_idx)?, all.select_rows(&test_idx)?);
    let s = Standardizer::fit(&train);
    let train = Dataset::new(s.transform_x(train.x())?, s.transform_y(train.y())?)?;
    let test = Dataset::new(s.transform_x(test.x())?, s.transform_y(test.y())?)?;
    let mut cfg = serde_json::to_value(StructuredConfig {
        layers,
        num_inducing: 128.min(train.n()),
        adam: AdamConfig::with_lr(lr),
        ..StructuredConfig::default()
    })
    .map_err(|e| Error::config("config", e.to_string()))?;
    cfg["family"] = serde_json::Value::String(
        match a[3].as_str() {
            "mf" => "mean_field",
            "fc" => "fully_coupled",
            _ => "star",
        }
        .into(),
    );
    for kv in &a[8..] {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| Error::config("arguments", format!("{kv}: not KEY=VALUE")))?;
        cfg[k] = serde_json::from_str(v).unwrap_or(serde_json::Value::String(v.into()));
    }
    let config: StructuredConfig =
        serde_json::from_value(cfg).map_err(|e| Error::config("config", e.to_string()))?;
    let mut model = StructuredModel::new(config, &train)?;
    let fit = FitConfig {
        steps,
        batch_size: train.n().min(512),
        ..FitConfig::default()
    };
    println!("# {}", a[1..].join(" "));
    println!("step\tseconds\tobjective\ttest_nll\ttest_rmse\tnoise_variance");
    let mut trace = Trace {
        model: model.clone(),
        test_x: &test,
        y_std: s.y_std[0],
        every,
        objectives: Vec::new(),
        start: Instant::now(),
    };
    let mut hooks = FitHooks::all(&mut trace);
    model.fit(&train, &fit, &mut hooks)?;
    Ok(())
}
