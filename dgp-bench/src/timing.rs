//! `dgp-bench time`: milliseconds of one full gradient step and of predicting a test split.
//!
//! A timed step is `value_and_grad` (forward + backward on the tape) + Adam `ascend` +
//! `set_flat`; the minibatch is gathered into preallocated buffers *before* the clock
//! starts, so slicing is excluded. The first `warmup` steps are run but not recorded.
//! The model is built on the standardised training split of split `k`, as in `run`.

use std::time::Instant;

use dgp_traits::data::{Minibatches, Standardizer, gather_rows_into};
use dgp_traits::model::{Batch, FitConfig, Model, PredictConfig};
use dgp_traits::optim::{Adam, AdamConfig};
use dgp_traits::rng::stream;
use dgp_traits::tape::Tape;
use faer::{Mat, MatRef, Par};
use serde::{Deserialize, Serialize};

use crate::backends::{ArchSpec, BackendEntry};
use crate::datasets::BenchData;
use crate::error::{BenchError, Result};

/// Settings of a timing run.
#[derive(Clone, Debug)]
pub struct TimingSpec<'a> {
    /// Data set.
    pub data: &'a BenchData,
    /// Split whose training set is batched and whose test set is predicted.
    pub split: usize,
    /// Backend.
    pub backend: &'static BackendEntry,
    /// Architecture; `train_samples` is what `--samples` sets for `time`.
    pub arch: ArchSpec,
    /// Minibatch size (capped at N_train).
    pub batch_size: usize,
    /// Untimed steps before measuring.
    pub warmup: usize,
    /// Timed steps.
    pub steps: usize,
    /// Timed predictions of the test split.
    pub predict_reps: usize,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Seed of minibatches and Monte Carlo noise.
    pub seed: u64,
}

/// Result of a timing run (all times in milliseconds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingResult {
    /// Backend name.
    pub backend: String,
    /// Data set name.
    pub dataset: String,
    /// Split index.
    pub split: usize,
    /// Layers.
    pub layers: usize,
    /// Inducing points per layer.
    pub num_inducing: usize,
    /// Hidden width (`null` = backend default).
    pub hidden_width: Option<usize>,
    /// Minibatch size used.
    pub batch_size: usize,
    /// Training samples (the `--samples` of `time`).
    pub train_samples: usize,
    /// Prediction mixture components.
    pub predict_samples: usize,
    /// Training rows.
    pub n_train: usize,
    /// Test rows.
    pub n_test: usize,
    /// Input dimension.
    pub input_dim: usize,
    /// Trainable parameters.
    pub n_params: usize,
    /// Untimed warm-up steps.
    pub warmup: usize,
    /// Timed steps.
    pub steps: usize,
    /// Median milliseconds per gradient step.
    pub step_ms_median: f64,
    /// Minimum milliseconds per gradient step.
    pub step_ms_min: f64,
    /// Mean milliseconds per gradient step.
    pub step_ms_mean: f64,
    /// Timed predictions of the test split.
    pub predict_reps: usize,
    /// Median milliseconds to predict the test split.
    pub predict_ms_median: f64,
    /// Minimum milliseconds to predict the test split.
    pub predict_ms_min: f64,
    /// Threads in the rayon pool.
    pub threads: usize,
}

/// Median of a non-empty slice (mean of the two middle values for even lengths).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Runs the timing described in the module docs.
///
/// # Errors
/// [`BenchError::Usage`] for zero steps, batch or samples; [`BenchError::Run`] when the
/// model fails.
pub fn time_backend(spec: &TimingSpec<'_>) -> Result<TimingResult> {
    check_spec(spec)?;
    let b = spec.backend;
    let label = format!(
        "time {} L={} {} split {}",
        b.name(),
        spec.arch.layers,
        spec.data.name,
        spec.split
    );
    let ctx = |what: &str| format!("{label}: {what}");
    let (train, test) = spec.data.split_data(spec.split)?;
    let st = Standardizer::fit(&train);
    let train = st
        .transform(&train)
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let test_x = st
        .transform_x(test.x())
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let n = train.n();
    let bsz = spec.batch_size.min(n);
    let fit_cfg = FitConfig {
        steps: spec.warmup + spec.steps,
        batch_size: bsz,
        learning_rate: spec.learning_rate,
        seed: spec.seed,
        ..FitConfig::default()
    };
    let mut model = b.build_model(&spec.arch, &fit_cfg, &train)?;
    let mut batches =
        Minibatches::new(n, bsz, spec.seed).map_err(|e| BenchError::run(ctx("batches"), e))?;
    let mut noise = stream(spec.seed, 1);
    let n_params = model.params().num_free();
    let mut adam = Adam::new(AdamConfig::with_lr(spec.learning_rate), n_params)
        .map_err(|e| BenchError::run(ctx("Adam"), e))?;
    let mut xb = Mat::<f64>::zeros(bsz, train.input_dim());
    let mut yb = Mat::<f64>::zeros(bsz, train.output_dim());
    let mut tape = Tape::with_par(Par::rayon(0));
    let mut flat = model.params().flat();
    let mut times = Vec::with_capacity(spec.steps);
    for step in 0..spec.warmup + spec.steps {
        let idx = batches.next_batch();
        gather_rows_into(train.x(), idx, xb.as_mut());
        gather_rows_into(train.y(), idx, yb.as_mut());
        let batch = Batch::new(xb.as_ref(), yb.as_ref(), n)
            .map_err(|e| BenchError::run(ctx("batch"), e))?;
        let t0 = Instant::now();
        let (_, grad) = model
            .value_and_grad(&mut tape, &batch, &mut noise)
            .map_err(|e| BenchError::run(ctx(&format!("gradient step {step}")), e))?;
        adam.ascend(&mut flat, &grad)
            .map_err(|e| BenchError::run(ctx("Adam"), e))?;
        model
            .params_mut()
            .set_flat(&flat)
            .map_err(|e| BenchError::run(ctx("set_flat"), e))?;
        let dt = t0.elapsed().as_secs_f64() * 1e3;
        if step >= spec.warmup {
            times.push(dt);
        }
    }
    let cfg = PredictConfig {
        samples: spec.arch.predict_samples,
        seed: spec.seed.wrapping_add(1),
    };
    let ptimes = time_predictions(model.as_ref(), test_x.as_ref(), &cfg, spec.predict_reps)
        .map_err(|e| BenchError::run(ctx("predicting"), e))?;
    Ok(TimingResult {
        backend: b.name().to_string(),
        dataset: spec.data.name.clone(),
        split: spec.split,
        layers: spec.arch.layers,
        num_inducing: spec.arch.num_inducing,
        hidden_width: spec.arch.hidden_width,
        batch_size: bsz,
        train_samples: spec.arch.train_samples,
        predict_samples: spec.arch.predict_samples,
        n_train: n,
        n_test: test.n(),
        input_dim: train.input_dim(),
        n_params,
        warmup: spec.warmup,
        steps: spec.steps,
        step_ms_median: median(&times),
        step_ms_min: min(&times),
        step_ms_mean: times.iter().sum::<f64>() / times.len() as f64,
        predict_reps: spec.predict_reps,
        predict_ms_median: median(&ptimes),
        predict_ms_min: min(&ptimes),
        threads: rayon::current_num_threads(),
    })
}

/// Zero counts are usage errors, before any work.
fn check_spec(spec: &TimingSpec<'_>) -> Result<()> {
    if spec.steps == 0 || spec.batch_size == 0 || spec.predict_reps == 0 {
        return Err(BenchError::Usage(
            "--steps, --batch and --predict-reps must be at least 1".into(),
        ));
    }
    if spec.arch.train_samples == 0 || spec.arch.predict_samples == 0 || spec.arch.layers == 0 {
        return Err(BenchError::Usage(
            "--layers, --samples and --predict-samples must be at least 1".into(),
        ));
    }
    Ok(())
}

/// Milliseconds of each of `reps` predictions of `x`.
fn time_predictions(
    model: &dyn Model,
    x: MatRef<'_, f64>,
    cfg: &PredictConfig,
    reps: usize,
) -> dgp_traits::Result<Vec<f64>> {
    let mut ptimes = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        let pred = model.predict(x, cfg)?;
        ptimes.push(t0.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(pred);
    }
    Ok(ptimes)
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
