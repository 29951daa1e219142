//! `dgp-bench time`: milliseconds per gradient step and per test prediction.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{ArchArgs, DataFlags, ModelFlags, arch_from, nonzero};
use crate::backends::find_backend;
use crate::error::{BenchError, Result};
use crate::experiment::model_label;
use crate::report::write_json;
use crate::timing::{TimingSpec, time_backend};

/// Arguments of `dgp-bench time`.
#[derive(Debug, Args)]
pub struct TimeArgs {
    /// Where the data come from.
    #[command(flatten)]
    pub source: DataFlags,
    /// Backend name.
    #[arg(long, default_value = "svi")]
    pub backend: String,
    /// Split whose training set is batched and whose test set is predicted.
    #[arg(long, default_value_t = 0)]
    pub split: usize,
    /// Number of GP layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// TRAINING samples of the timed objective (svi: Monte Carlo samples per point; dspp:
    /// quadrature sites) [default: svi 1, dspp 8].
    #[arg(long)]
    pub samples: Option<usize>,
    /// Predictive mixture components of the timed prediction [default: backend's].
    #[arg(long)]
    pub predict_samples: Option<usize>,
    /// Untimed warm-up steps.
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Timed steps.
    #[arg(long, default_value_t = 50)]
    pub steps: usize,
    /// Timed predictions of the test split.
    #[arg(long, default_value_t = 3)]
    pub predict_reps: usize,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the result as a JSON object to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Model-specific settings.
    #[command(flatten)]
    pub model: ModelFlags,
}

pub(super) fn cmd_time(a: &TimeArgs) -> Result<()> {
    crate::validate::check_time(a)?;
    let b = find_backend(&a.backend)?;
    let d = b.defaults;
    let data = a.source.load(a.seed)?;
    if a.split >= data.n_splits() {
        return Err(BenchError::Usage(format!(
            "--split {} does not exist ({} has {} splits)",
            a.split,
            data.name,
            data.n_splits()
        )));
    }
    let lr = a.model.learning_rate(b)?;
    let spec = TimingSpec {
        data: &data,
        split: a.split,
        backend: b,
        arch: arch_from(
            b,
            &ArchArgs {
                layers: a.layers,
                train_samples: a.samples.unwrap_or(d.train_samples),
                predict_samples: a.predict_samples.unwrap_or(d.predict_samples),
                samples: a.samples,
                flags: &a.model,
                settings: &a.model.settings_input((None, None))?,
                tune: false,
                seed: a.seed,
            },
        )?,
        batch_size: a.model.batch_size(b)?,
        warmup: a.warmup,
        steps: nonzero("--steps", a.steps)?,
        predict_reps: nonzero("--predict-reps", a.predict_reps)?,
        learning_rate: lr,
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
    let r = time_backend(&spec)?;
    println!(
        "{} {} on {} split {} (N_train {}, N_test {}, D {}): M = {}, hidden {}, batch {}, --samples {} = {}",
        r.backend,
        model_label(r.layers),
        r.dataset,
        r.split,
        r.n_train,
        r.n_test,
        r.input_dim,
        r.num_inducing,
        r.hidden_width
            .map_or("default".to_string(), |h| h.to_string()),
        r.batch_size,
        r.train_samples,
        b.samples_in_time
    );
    println!(
        "gradient step (value_and_grad + Adam + set_flat; {} warm-up, {} timed, {} threads, {} parameters): median {:.3} ms, min {:.3} ms, mean {:.3} ms",
        r.warmup, r.steps, r.threads, r.n_params, r.step_ms_median, r.step_ms_min, r.step_ms_mean
    );
    println!(
        "predict test split ({} points, {} mixture components, {} reps): median {:.3} ms, min {:.3} ms",
        r.n_test, r.predict_samples, r.predict_reps, r.predict_ms_median, r.predict_ms_min
    );
    if let Some(p) = &a.json {
        write_json(p, &r)?;
    }
    Ok(())
}
