//! `dgp-bench time`: milliseconds per real training step of one or more backends,
//! interleaved in one run, and per test prediction. A backend's own held-out early
//! stopping (dspp, ppgpr) is off unless the command line sets it ([`TIME_DEFAULTS`]).

use std::path::{Path, PathBuf};

use clap::Args;

use super::{ArchArgs, DataFlags, ModelFlags, arch_from, nonzero};
use crate::backends::{BackendEntry, find_backend};
use crate::error::{BenchError, Result};
use crate::experiment::model_label;
use crate::report::write_json;
use crate::timing::{
    BackendTiming, RatioStats, TimedBackend, TimingResult, TimingSpec, time_backends,
};
use dgp_traits::backend::DEFAULT_PRESET;

/// Arguments of `dgp-bench time`.
#[derive(Debug, Clone, Args)]
pub struct TimeArgs {
    /// Where the data come from.
    #[command(flatten)]
    pub source: DataFlags,
    /// Backend name, or several separated by commas (`svi,star,fc`): timed interleaved in
    /// one run, ratios to the first.
    #[arg(long, default_value = crate::backends::DEFAULT_BACKEND)]
    pub backend: String,
    /// Split whose training set is batched and whose test set is predicted.
    #[arg(long, default_value_t = 0)]
    pub split: usize,
    /// Number of GP layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// TRAINING samples of the timed objective (svi: Monte Carlo samples per point; dspp:
    /// quadrature sites) [default: each backend's].
    #[arg(long)]
    pub samples: Option<usize>,
    /// Predictive mixture components of the timed prediction [default: backend's].
    #[arg(long)]
    pub predict_samples: Option<usize>,
    /// Untimed warm-up steps per backend (at least 1: a fit's first step carries its
    /// set-up).
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Timed steps per backend (sghmc: warm-up + steps is its whole schedule, so it
    /// reaches its sampling phase).
    #[arg(long, default_value_t = 50)]
    pub steps: usize,
    /// Steps per backend per round of the interleaving.
    #[arg(long, default_value_t = 5)]
    pub block: usize,
    /// Timed predictions of the test split per backend.
    #[arg(long, default_value_t = 3)]
    pub predict_reps: usize,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the result as a JSON object to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Memory budget, as for `run`: a backend whose estimated peak memory exceeds it is
    /// refused before any allocation (bytes, or a number with K, M, G, T: `4G`) [default:
    /// 90 % of the available memory, MemAvailable of /proc/meminfo].
    #[arg(long, value_name = "SIZE")]
    pub memory_budget: Option<String>,
    /// Model-specific settings.
    #[command(flatten)]
    pub model: ModelFlags,
}

/// What `time` sets for every backend whose configuration has the key, unless the command
/// line sets it: no held-out early stopping of the backend's own (dspp, ppgpr). `time`
/// measures training steps, and in a fit of a few dozen steps that rule would evaluate
/// the held-out rows after every step (its period is a hundredth of the fit's steps) and
/// could stop the fit early. (The timed fits have no held-out rule and no convergence
/// stop of the configuration's training schedule either.)
pub const TIME_DEFAULTS: &[(&str, serde_json::Value)] =
    &[("early_stopping", serde_json::Value::Null)];

/// The backends of `--backend` with their architectures and settings.
fn timed_backends(a: &TimeArgs) -> Result<Vec<TimedBackend>> {
    let mut settings = a.model.settings_input((None, None))?;
    settings.defaults = TIME_DEFAULTS
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect();
    let names: Vec<&str> = a
        .backend
        .split(',')
        .map(str::trim)
        .filter_map(|n| find_backend(n).ok().map(|b| b.name()))
        .collect();
    settings.check_targets(&names)?;
    let wanted: Vec<&BackendEntry> = a
        .backend
        .split(',')
        .map(str::trim)
        .map(find_backend)
        .collect::<Result<_>>()?;
    a.model.refuse_unused_lr(&wanted)?;
    let mut out: Vec<TimedBackend> = Vec::new();
    for name in a.backend.split(',').map(str::trim) {
        let b = find_backend(name)?;
        if out.iter().any(|t| t.backend.name() == b.name()) {
            return Err(BenchError::Usage(format!("--backend names '{name}' twice")));
        }
        let d = b.defaults();
        let arch = arch_from(
            b,
            &ArchArgs {
                preset: DEFAULT_PRESET,
                layers: a.layers,
                train_samples: a.samples.unwrap_or(d.train_samples),
                predict_samples: a.predict_samples.unwrap_or(d.predict_samples),
                samples: a.samples,
                sample_flags: ["--samples", "--predict-samples"],
                flags: &a.model,
                settings: &settings,
                tune: false,
                seed: a.seed,
            },
        )?;
        out.push(TimedBackend {
            backend: b,
            arch,
            batch_size: a.model.batch_size(b)?,
            // `time` trains without a held-out rule.
            learning_rate: a.model.learning_rate_or(d.learning_rate_for(None, 0))?,
        });
    }
    Ok(out)
}

pub(super) fn cmd_time(a: &TimeArgs) -> Result<()> {
    crate::validate::check_time(
        a.model.inducing,
        &crate::validate::IoPaths {
            data: &a.source.data,
            config: a.model.config.as_deref(),
            json: a.json.as_deref(),
            out: None,
        },
    )?;
    let data = a.source.load(a.seed)?;
    // A partial classification likelihood (`--set likelihood.kind=robust_max`) takes K
    // from the data, as in `run`; the backends see the completed one.
    let completed;
    let a = match super::classify::setting_likelihood(&a.model)?.filter(|v| {
        v.get("kind")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|k| k != "gaussian")
    }) {
        None => a,
        Some(v) => {
            let (k, _) = crate::classification::class_labels_of(&data.name, data.data().y(), None)?;
            let likelihood = crate::classification::likelihood_from_setting(&v, k)?;
            let mut b = a.clone();
            b.model.set.retain(|s| {
                s.split_once('=')
                    .is_none_or(|(k, _)| k.trim().split('.').next() != Some("likelihood"))
            });
            let full = serde_json::to_string(&likelihood)
                .map_err(|e| BenchError::Usage(format!("likelihood: {e}")))?;
            b.model.set.push(format!("likelihood={full}"));
            completed = b;
            &completed
        }
    };
    let backends = timed_backends(a)?;
    if a.split >= data.n_splits() {
        return Err(BenchError::Usage(format!(
            "--split {} does not exist ({} has {} splits)",
            a.split,
            data.name,
            data.n_splits()
        )));
    }
    check_memory(a, &data, &backends)?;
    let spec = TimingSpec {
        data: &data,
        split: a.split,
        backends,
        warmup: a.warmup,
        steps: nonzero("--steps", a.steps)?,
        block: nonzero("--block", a.block)?,
        predict_reps: nonzero("--predict-reps", a.predict_reps)?,
        seed: a.seed,
    };
    if let Some(dir) = a
        .json
        .as_deref()
        .and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).map_err(|e| {
            BenchError::Usage(format!("--json: cannot create {}: {e}", dir.display()))
        })?;
    }
    let r = time_backends(&spec)?;
    print_result(&r, &spec);
    if let Some(p) = &a.json {
        write_json(p, &r)?;
    }
    Ok(())
}

/// The memory budget of `run` ([`crate::memory`]) for every timed backend, before any
/// model is built.
fn check_memory(
    a: &TimeArgs,
    data: &crate::datasets::BenchData,
    backends: &[TimedBackend],
) -> Result<()> {
    let budget = crate::memory::budget(a.memory_budget.as_deref())?;
    let (train, test) = data.split(a.split)?;
    for b in backends {
        let e = crate::memory::Experiment {
            backend: b.backend,
            arch: &b.arch,
            input_dim: data.data().input_dim(),
            n_train: train.len(),
            n_test: test.len(),
            batch: b.batch_size,
        };
        crate::memory::check_experiment(budget.as_ref(), &e, crate::memory::Flags::Time)?;
    }
    Ok(())
}

fn fmt_ratio(r: &Option<RatioStats>) -> String {
    match r {
        Some(r) => format!(
            "{:.2}× [IQR {:.2}–{:.2} over {} rounds; ratio of medians {:.2}×]",
            r.median, r.q25, r.q75, r.rounds, r.of_medians
        ),
        None => "1 (reference)".to_string(),
    }
}

fn print_backend(t: &BackendTiming, samples_meaning: &str, reference: &str) {
    println!(
        "{} {}: M = {}, hidden {}, batch {}, {}, --samples {} = {}; {} parameters, {} fit steps{}",
        t.backend,
        model_label(t.layers),
        t.num_inducing,
        t.hidden_width
            .map_or("default".to_string(), |h| h.to_string()),
        t.batch_size,
        t.learning_rate
            .map_or("no learning rate".to_string(), |lr| format!("lr {lr}")),
        t.train_samples,
        samples_meaning,
        t.n_params,
        t.fit_steps,
        if t.settings.is_empty() {
            String::new()
        } else {
            format!(
                "; settings {}",
                serde_json::Value::Object(t.settings.clone())
            )
        }
    );
    println!(
        "  step ({} timed): median {:.3} ms, min {:.3} ms, mean {:.3} ms; ratio to {reference}: {}",
        t.steps,
        t.step_ms_median,
        t.step_ms_min,
        t.step_ms_mean,
        fmt_ratio(&t.ratio)
    );
    for p in &t.phases {
        println!(
            "  {} ({} timed steps): median {:.3} ms, min {:.3} ms; ratio to {reference}: {}",
            p.phase,
            p.steps,
            p.step_ms_median,
            p.step_ms_min,
            fmt_ratio(&p.ratio)
        );
    }
    println!(
        "  predict test split ({} mixture components): median {:.3} ms, min {:.3} ms",
        t.predict_components, t.predict_ms_median, t.predict_ms_min
    );
}

fn print_result(r: &TimingResult, spec: &TimingSpec<'_>) {
    println!(
        "{} split {} (N_train {}, N_test {}, D {}): each backend's own fit (real stepper), interleaved: \
         {} warm-up steps each, then {} rounds of {} steps per backend in rotating order; \
         {} predictions each; {} threads, seed {}",
        r.dataset,
        r.split,
        r.n_train,
        r.n_test,
        r.input_dim,
        r.warmup,
        r.rounds,
        r.block,
        r.predict_reps,
        r.threads,
        r.seed
    );
    let reference = r.backends.first().map_or(String::new(), |t| {
        format!("{} {}", t.backend, model_label(t.layers))
    });
    for (t, b) in r.backends.iter().zip(&spec.backends) {
        print_backend(t, b.backend.capabilities().samples_in_training, &reference);
    }
}
