//! `dgp-bench time`: milliseconds of each backend's REAL training step, interleaved, and
//! of predicting a test split.
//!
//! Every backend trains through its own [`Model::fit`] — the stepper it really uses (Adam;
//! natural gradient + Adam for the structured families with `natgrad`; SGHMC with MCEM
//! hyper steps during burn-in), its minibatching, its observers — and a timing
//! [`dgp_traits::fit::Progress`] hook timestamps each `on_step` (module `turns`). The
//! backends run in one process, interleaved: after a warm-up turn (every backend, `warmup`
//! steps, not kept; it also absorbs the model's build and the fit's set-up), each round
//! gives every backend a block of `block` steps, in an order rotated from round to round,
//! so slow drifts of a shared machine's load hit all backends alike. Only one backend
//! computes at a time.
//!
//! Reported per backend: median / min / mean ms per step over all timed steps; per phase
//! when the backend announces phases (sghmc: `burn-in`, `sampling` — the budget
//! `warmup + steps` is its whole schedule, shrunk as `SghmcSamplerConfig::schedule` says, so
//! both phases are reached); and the ratio to the FIRST backend: per round, this backend's
//! median step in the round over the first backend's, summarised by the median and the
//! interquartile range over rounds (and the ratio of the overall medians). Then each model
//! predicts the test split `predict_reps` times (interleaved likewise; median / min ms).
//! The model is built on the standardised training split of split `k`, as in `run`. When
//! a backend's settings hold a classification likelihood (a `likelihood` setting whose
//! kind is not `gaussian`, e.g. `--set likelihood.kind=robust_max`), the target column is
//! class labels `0..K`: only the inputs are standardised, a multiclass likelihood without
//! `num_classes` takes K from the data, and every backend of the run must ask for the same
//! task (labels and real targets cannot share one timing).

use std::time::Instant;

use dgp_data::Standardizer;
use dgp_traits::backend::Settings;
use dgp_traits::model::{FitConfig, Model, PredictConfig};
use faer::MatRef;
use serde::{Deserialize, Serialize};

use crate::backends::{ArchSpec, BackendEntry};
use crate::classification::{class_labels_of, likelihood_from_setting, with_likelihood};
use crate::datasets::BenchData;
use crate::error::{BenchError, Result};

mod turns;

use turns::{Job, StepTime, WorkerOutput, run_interleaved};

/// One backend of a timing run and its settings.
#[derive(Clone, Debug)]
pub struct TimedBackend {
    /// Backend.
    pub backend: &'static BackendEntry,
    /// Architecture; `train_samples` is what `--samples` sets for `time`.
    pub arch: ArchSpec,
    /// Minibatch size (capped at N_train).
    pub batch_size: usize,
    /// Learning rate handed to `fit`.
    pub learning_rate: f64,
}

/// Settings of a timing run.
#[derive(Clone, Debug)]
pub struct TimingSpec<'a> {
    /// Data set.
    pub data: &'a BenchData,
    /// Split whose training set is batched and whose test set is predicted.
    pub split: usize,
    /// The backends, the first being the reference of the ratios.
    pub backends: Vec<TimedBackend>,
    /// Untimed steps of the warm-up turn (at least 1: the first step of a fit carries its
    /// set-up).
    pub warmup: usize,
    /// Timed steps per backend.
    pub steps: usize,
    /// Steps per backend per round.
    pub block: usize,
    /// Timed predictions of the test split per backend.
    pub predict_reps: usize,
    /// Seed of minibatches and Monte Carlo noise.
    pub seed: u64,
}

/// Median and spread of the per-round ratios of a backend's step to the first backend's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatioStats {
    /// Median over rounds of (this backend's median step / the first backend's).
    pub median: f64,
    /// 25th percentile of the per-round ratios (linear interpolation).
    pub q25: f64,
    /// 75th percentile of the per-round ratios.
    pub q75: f64,
    /// Rounds with a ratio.
    pub rounds: usize,
    /// Ratio of the overall medians.
    pub of_medians: f64,
}

/// The steps of one phase of a backend that announces phases (sghmc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseTiming {
    /// Phase name (`burn-in`, `sampling`).
    pub phase: String,
    /// Timed steps in this phase.
    pub steps: usize,
    /// Median ms per step.
    pub step_ms_median: f64,
    /// Minimum ms per step.
    pub step_ms_min: f64,
    /// Ratio to the first backend over the rounds that had steps of this phase.
    pub ratio: Option<RatioStats>,
}

/// Timing of one backend (all times in milliseconds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BackendTiming {
    /// Backend name.
    pub backend: String,
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
    /// Prediction mixture components requested.
    pub predict_samples: usize,
    /// Learning rate handed to `fit`; `None` (omitted) for a backend that does not use
    /// one ([`dgp_traits::backend::Capabilities::uses_learning_rate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    /// Trainable parameters.
    pub n_params: usize,
    /// Steps the fit ran (warm-up included).
    pub fit_steps: usize,
    /// Timed steps.
    pub steps: usize,
    /// Median milliseconds per step.
    pub step_ms_median: f64,
    /// Minimum milliseconds per step.
    pub step_ms_min: f64,
    /// Mean milliseconds per step.
    pub step_ms_mean: f64,
    /// Ratio to the first backend (`null` for the first).
    pub ratio: Option<RatioStats>,
    /// Per phase, for backends that announce phases (empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseTiming>,
    /// Median milliseconds to predict the test split.
    pub predict_ms_median: f64,
    /// Minimum milliseconds to predict the test split.
    pub predict_ms_min: f64,
    /// Mixture components of the prediction (sghmc: kept samples).
    pub predict_components: usize,
    /// The backend settings the model was built with (`--set`, `--config`, and what
    /// `time` sets by default, `dgp_bench::cli::TIME_DEFAULTS`).
    #[serde(default)]
    pub settings: Settings,
}

/// Result of a timing run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingResult {
    /// Data set name.
    pub dataset: String,
    /// Split index.
    pub split: usize,
    /// Training rows.
    pub n_train: usize,
    /// Test rows.
    pub n_test: usize,
    /// Input dimension.
    pub input_dim: usize,
    /// Untimed warm-up steps per backend.
    pub warmup: usize,
    /// Timed steps per backend.
    pub steps: usize,
    /// Steps per backend per round.
    pub block: usize,
    /// Rounds.
    pub rounds: usize,
    /// Timed predictions per backend.
    pub predict_reps: usize,
    /// Threads in the rayon pool.
    pub threads: usize,
    /// Seed.
    pub seed: u64,
    /// Per backend, in the order given (the first is the reference of the ratios).
    pub backends: Vec<BackendTiming>,
}

/// Median of a slice (mean of the two middle values for even lengths; NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

/// The `q`-quantile of `values` with linear interpolation between order statistics
/// (NumPy's default); NaN when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (pos - lo as f64) * (v[hi] - v[lo])
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The backends' architectures with their classification likelihoods completed (K from
/// the training labels where a multiclass kind leaves `num_classes` out), when the run
/// times classification; `None` for a regression run.
///
/// # Errors
/// [`BenchError::Usage`] when some backends ask for classification and others do not;
/// the errors of [`class_labels_of`] (targets that are not labels `0..K`) and of
/// [`likelihood_from_setting`].
fn classification_archs(
    spec: &TimingSpec<'_>,
    train: &dgp_data::Dataset,
) -> Result<Option<Vec<ArchSpec>>> {
    let kind = |b: &TimedBackend| {
        b.arch
            .settings
            .get("likelihood")
            .and_then(|l| l.get("kind"))
            .and_then(|k| k.as_str())
            .is_some_and(|k| k != "gaussian")
    };
    let classify = spec.backends.iter().filter(|b| kind(b)).count();
    if classify == 0 {
        return Ok(None);
    }
    if classify < spec.backends.len() {
        return Err(BenchError::Usage(
            "time: some backends have a classification likelihood and others not; time \
             classification and regression in separate runs"
                .into(),
        ));
    }
    let (k, _) = class_labels_of(&spec.data.name, train.y(), None)?;
    spec.backends
        .iter()
        .map(|b| {
            let likelihood = likelihood_from_setting(&b.arch.settings["likelihood"], k)?;
            let mut arch = b.arch.clone();
            arch.settings = with_likelihood(&arch.settings, &likelihood)
                .map_err(|e| BenchError::Usage(e.to_string()))?;
            Ok(arch)
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Zero counts are usage errors, before any work.
fn check_spec(spec: &TimingSpec<'_>) -> Result<()> {
    if spec.steps == 0 || spec.block == 0 || spec.predict_reps == 0 {
        return Err(BenchError::Usage(
            "--steps, --block and --predict-reps must be at least 1".into(),
        ));
    }
    if spec.backends.is_empty() {
        return Err(BenchError::Usage("--backend names no backend".into()));
    }
    for b in &spec.backends {
        let a = &b.arch;
        if a.train_samples == 0 || a.predict_samples == 0 || a.layers == 0 || b.batch_size == 0 {
            return Err(BenchError::Usage(
                "--layers, --batch, --samples and --predict-samples must be at least 1".into(),
            ));
        }
    }
    Ok(())
}

/// Runs the timing described in the module docs.
///
/// # Errors
/// [`BenchError::Usage`] for zero counts; [`BenchError::Run`] when a model fails.
pub fn time_backends(spec: &TimingSpec<'_>) -> Result<TimingResult> {
    check_spec(spec)?;
    let ctx = |what: &str| format!("time {} split {}: {what}", spec.data.name, spec.split);
    let (train, test) = spec.data.split_data(spec.split)?;
    let st = Standardizer::fit_with(&train, spec.data.standardize_options())
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let archs = classification_archs(spec, &train)?;
    let train = match archs {
        // Class labels stay labels; the inputs are standardised as in `run`.
        Some(_) => dgp_data::Dataset::new(
            st.transform_x(train.x())
                .map_err(|e| BenchError::run(ctx("standardising"), e))?,
            train.y().to_owned(),
        )
        .map_err(|e| BenchError::run(ctx("standardising"), e))?,
        None => st
            .transform(&train)
            .map_err(|e| BenchError::run(ctx("standardising"), e))?,
    };
    let test_x = st
        .transform_x(test.x())
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let warmup = spec.warmup.max(1);
    let jobs = spec
        .backends
        .iter()
        .enumerate()
        .map(|(i, b)| Job {
            backend: b.backend,
            arch: archs.as_ref().map_or(&b.arch, |a| &a[i]),
            learning_rate: b.learning_rate,
            fit: FitConfig {
                steps: warmup + spec.steps,
                batch_size: b.batch_size.min(train.n()),
                seed: spec.seed,
                ..FitConfig::default()
            },
            train: &train,
        })
        .collect();
    let outputs = run_interleaved(jobs, warmup, spec.steps, spec.block)?;
    let predictions = time_predictions(spec, &outputs, test_x.as_ref())
        .map_err(|e| BenchError::run(ctx("predicting"), e))?;
    let reference = round_medians(&outputs[0].times, None);
    let backends = spec
        .backends
        .iter()
        .zip(&outputs)
        .zip(predictions)
        .enumerate()
        .map(|(i, ((b, o), p))| {
            let r = (i > 0).then_some(reference.as_slice());
            backend_timing(b, o, r, p, train.n())
        })
        .collect();
    Ok(TimingResult {
        dataset: spec.data.name.clone(),
        split: spec.split,
        n_train: train.n(),
        n_test: test.n(),
        input_dim: train.input_dim(),
        warmup,
        steps: spec.steps,
        block: spec.block,
        rounds: spec.steps.div_ceil(spec.block),
        predict_reps: spec.predict_reps,
        threads: rayon::current_num_threads(),
        seed: spec.seed,
        backends,
    })
}

/// Per turn ≥ 1 (a round), the median ms of the steps in it (of phase `phase` when
/// given); `None` for rounds without such steps.
fn round_medians(times: &[StepTime], phase: Option<usize>) -> Vec<Option<f64>> {
    let rounds = times.iter().map(|t| t.turn).max().unwrap_or(0);
    (1..=rounds)
        .map(|r| {
            let v: Vec<f64> = times
                .iter()
                .filter(|t| t.turn == r && (phase.is_none() || t.phase == phase))
                .map(|t| t.ms)
                .collect();
            (!v.is_empty()).then(|| median(&v))
        })
        .collect()
}

/// Per-round ratios of `mine` to `reference` and their summary (`None` without rounds).
fn ratio_stats(
    mine: &[Option<f64>],
    reference: &[Option<f64>],
    of_medians: f64,
) -> Option<RatioStats> {
    let ratios: Vec<f64> = mine
        .iter()
        .zip(reference)
        .filter_map(|(a, b)| Some((*a)? / (*b)?))
        .collect();
    (!ratios.is_empty()).then(|| RatioStats {
        median: median(&ratios),
        q25: quantile(&ratios, 0.25),
        q75: quantile(&ratios, 0.75),
        rounds: ratios.len(),
        of_medians,
    })
}

/// The [`BackendTiming`] of one backend's output (`reference`: the first backend's
/// per-round medians, `None` for the first backend itself).
fn backend_timing(
    b: &TimedBackend,
    o: &WorkerOutput,
    reference: Option<&[Option<f64>]>,
    predict: (Vec<f64>, usize),
    n_train: usize,
) -> BackendTiming {
    let timed: Vec<f64> = o
        .times
        .iter()
        .filter(|t| t.turn > 0)
        .map(|t| t.ms)
        .collect();
    let ref_median = reference.map(|r| median(&r.iter().flatten().copied().collect::<Vec<_>>()));
    let step_ms_median = median(&timed);
    let ratio = reference.and_then(|r| {
        ratio_stats(
            &round_medians(&o.times, None),
            r,
            step_ms_median / ref_median.unwrap_or(f64::NAN),
        )
    });
    let phases = (0..o.phases.len())
        .map(|k| {
            let v: Vec<f64> = o
                .times
                .iter()
                .filter(|t| t.turn > 0 && t.phase == Some(k))
                .map(|t| t.ms)
                .collect();
            let med = median(&v);
            PhaseTiming {
                phase: o.phases[k].clone(),
                steps: v.len(),
                step_ms_median: med,
                step_ms_min: min(&v),
                ratio: reference.and_then(|r| {
                    ratio_stats(
                        &round_medians(&o.times, Some(k)),
                        r,
                        med / ref_median.unwrap_or(f64::NAN),
                    )
                }),
            }
        })
        .filter(|p| p.steps > 0)
        .collect();
    BackendTiming {
        backend: b.backend.name().to_string(),
        layers: b.arch.layers,
        num_inducing: b.arch.num_inducing,
        hidden_width: b.arch.hidden_width,
        batch_size: b.batch_size.min(n_train),
        train_samples: b.arch.train_samples,
        predict_samples: b.arch.predict_samples,
        learning_rate: b
            .backend
            .capabilities()
            .uses_learning_rate
            .then_some(b.learning_rate),
        n_params: o.model.params().num_free(),
        settings: b.arch.settings.clone(),
        fit_steps: o.steps_run,
        steps: timed.len(),
        step_ms_median,
        step_ms_min: min(&timed),
        step_ms_mean: timed.iter().sum::<f64>() / timed.len().max(1) as f64,
        ratio,
        phases,
        predict_ms_median: median(&predict.0),
        predict_ms_min: min(&predict.0),
        predict_components: predict.1,
    }
}

/// Per backend, the milliseconds of each of `predict_reps` predictions of `x` (rounds in
/// rotating order, like the training steps) and the number of mixture components.
fn time_predictions(
    spec: &TimingSpec<'_>,
    outputs: &[WorkerOutput],
    x: MatRef<'_, f64>,
) -> dgp_core::Result<Vec<(Vec<f64>, usize)>> {
    let k = outputs.len();
    let mut out = vec![(Vec::with_capacity(spec.predict_reps), 0); k];
    for r in 0..spec.predict_reps {
        for j in 0..k {
            let i = (r + j) % k;
            let cfg = PredictConfig {
                samples: spec.backends[i].arch.predict_samples,
                seed: spec.seed.wrapping_add(1),
            };
            let model: &dyn Model = outputs[i].model.as_ref();
            let t0 = Instant::now();
            let pred = model.predict(x, &cfg)?;
            out[i].0.push(t0.elapsed().as_secs_f64() * 1e3);
            out[i].1 = pred.n_components();
            std::hint::black_box(pred);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quantiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        // NumPy: np.percentile([1, 2, 3, 4], 25) = 1.75, 75 → 3.25.
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.25), 1.75);
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.75), 3.25);
    }

    #[test]
    fn ratios_per_round_skip_rounds_without_steps() {
        let t = |turn, phase, ms| StepTime { turn, phase, ms };
        // Warm-up (turn 0) is ignored; round 1: 2 ms and 4 ms; round 2 only phase 1.
        let times = [
            t(0, Some(0), 99.0),
            t(1, Some(0), 2.0),
            t(1, Some(0), 4.0),
            t(2, Some(1), 6.0),
        ];
        assert_eq!(round_medians(&times, None), vec![Some(3.0), Some(6.0)]);
        assert_eq!(round_medians(&times, Some(1)), vec![None, Some(6.0)]);
        let reference = [Some(1.5), Some(2.0)];
        let r = ratio_stats(&round_medians(&times, None), &reference, 2.5).unwrap();
        assert_eq!((r.median, r.rounds, r.of_medians), (2.5, 2, 2.5));
        assert_eq!((r.q25, r.q75), (2.25, 2.75));
        let r = ratio_stats(&round_medians(&times, Some(1)), &reference, 3.0).unwrap();
        assert_eq!((r.median, r.rounds), (3.0, 1));
        assert!(ratio_stats(&[None], &reference, 1.0).is_none());
    }
}
