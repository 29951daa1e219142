//! `dgp-bench run --task classification` (or `--likelihood NAME`): the run of
//! [`super::run`] with class labels as targets.
//!
//! Before any training: the target column must hold class labels `0..K` (K from
//! `--classes`, else the largest label plus one; every class present, in every training
//! split), the likelihood must suit K, and every backend must declare the likelihood's
//! family in its capabilities. Per split: inputs standardised with the training rows'
//! statistics (labels untouched), the backend built with the likelihood in its settings,
//! trained, and its class probabilities scored ([`run_class_split`]). Interruption,
//! `--checkpoint` and `--resume` behave as in regression runs ([`crate::checkpointing`]);
//! the likelihood is part of the checkpoint's fingerprint.

use std::path::Path;

use clap::Args;
use dgp_traits::backend::{Settings, insert_dotted};
use dgp_traits::likelihoods::Likelihood;
use serde_json::Value;

use super::ModelFlags;
use super::run::{RunArgs, build_specs, check_memory, command_line, protocol_of};
use crate::classification::{
    CLASS_TABLE_NOTE, CLASSIFICATION_TASK, ClassSplitRecord, check_training_classes,
    class_labels_of, class_table, default_likelihood_name, likelihood_by_name,
    likelihood_from_setting, likelihood_name, reliability_file_name, reliability_series,
    run_class_split, summarise_class, with_likelihood,
};
use crate::datasets::{BenchData, parse_splits};
use crate::error::{BenchError, Result};
use crate::experiment::model_label;
use crate::report::write_text;

/// How a classification run's likelihood is asked for.
#[derive(Debug)]
pub(super) enum Requested {
    /// `--likelihood NAME` or `--task classification` alone (`None`: the default for K).
    Named(Option<String>),
    /// A `likelihood` object in the `--set` / `--config` settings (its `kind` not
    /// gaussian), completed with K by [`likelihood_from_setting`].
    Setting(Value),
}

/// The `likelihood` object of the `--config` and `--set` settings, merged in that order,
/// if any; it must apply to every backend alike.
pub(super) fn setting_likelihood(model: &ModelFlags) -> Result<Option<Value>> {
    let input = model.settings_input((None, None))?;
    if input
        .file_per_backend
        .iter()
        .any(|(_, m)| m.contains_key("likelihood"))
        || input
            .set
            .iter()
            .any(|(b, k, _)| b.is_some() && k.split('.').next() == Some("likelihood"))
    {
        return Err(BenchError::Usage(
            "the likelihood is one per run: set it for every backend alike, not under a \
             backend's name"
                .into(),
        ));
    }
    let mut s = Settings::new();
    if let Some(v) = input.file.get("likelihood") {
        s.insert("likelihood".into(), v.clone());
    }
    for (_, key, value) in &input.set {
        if key.split('.').next() == Some("likelihood") {
            insert_dotted(&mut s, key, value.clone())
                .map_err(|e| BenchError::Usage(format!("--set {key}: {}", e)))?;
        }
    }
    Ok(s.remove("likelihood"))
}

/// The flags that make `run` or `stream` train a classifier.
#[derive(Debug, Clone, Default, Args)]
pub struct TaskFlags {
    /// Task: regression (default) or classification (the target column holds class
    /// labels 0..K-1, checked before training in every file read; inputs alone are
    /// standardised; metrics error, log loss, Brier, ECE, AUC for K = 2).
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// Likelihood of a classification: probit or logit (K = 2), robust-max or softmax (any
    /// K; K latent GPs) [default: probit for K = 2, robust-max otherwise]; implies --task
    /// classification.
    #[arg(long, value_name = "NAME")]
    pub likelihood: Option<String>,
    /// Number of classes K of a classification [default: the largest label + 1; for
    /// `stream`, of the training file].
    #[arg(long, value_name = "K")]
    pub classes: Option<usize>,
}

/// The classification likelihood the command line asks for: `None` for a regression run.
///
/// # Errors
/// [`BenchError::Usage`] for an unknown task, a classification likelihood with
/// `--task regression`, or `--likelihood` next to a classification `likelihood` setting.
pub(super) fn requested(a: &RunArgs) -> Result<Option<Requested>> {
    requested_from(&a.task, &a.model)
}

/// [`requested`] from the task flags and the model flags' settings (of `run` or `stream`).
///
/// # Errors
/// As [`requested`].
pub(super) fn requested_from(flags: &TaskFlags, model: &ModelFlags) -> Result<Option<Requested>> {
    let (task, likelihood) = (flags.task.as_deref(), flags.likelihood.as_deref());
    let setting = setting_likelihood(model)?.filter(|v| {
        v.get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k != "gaussian")
    });
    if let Some(v) = setting {
        if likelihood.is_some() {
            return Err(BenchError::Usage(
                "--likelihood and a likelihood setting (--set / --config) both name the \
                 likelihood; keep one"
                    .into(),
            ));
        }
        return match task {
            None | Some(CLASSIFICATION_TASK) => Ok(Some(Requested::Setting(v))),
            Some(_) => Err(BenchError::Usage(
                "the likelihood setting is a classification likelihood but --task is not \
                 classification"
                    .into(),
            )),
        };
    }
    if likelihood == Some("gaussian") && task == Some(CLASSIFICATION_TASK) {
        return Err(BenchError::Usage(
            "--likelihood gaussian is the regression likelihood; a classification run takes \
             probit, logit, robust-max or softmax"
                .into(),
        ));
    }
    let lik = likelihood.filter(|l| *l != "gaussian");
    match task {
        None | Some("regression") if lik.is_none() => Ok(None),
        None | Some(CLASSIFICATION_TASK) => Ok(Some(Requested::Named(lik.map(str::to_string)))),
        Some("regression") => Err(BenchError::Usage(format!(
            "--likelihood {} is a classification likelihood but --task is regression",
            lik.unwrap_or_default()
        ))),
        Some(other) => Err(BenchError::Usage(format!(
            "--task: unknown task '{other}' (regression, classification)"
        ))),
    }
}

impl Requested {
    /// The likelihood asked for, on data with K = `num_classes` classes: the named one (or
    /// the default for K, [`default_likelihood_name`]), or the setting completed with K
    /// ([`likelihood_from_setting`]).
    ///
    /// # Errors
    /// [`BenchError::Usage`] for an unknown name or one that does not suit K.
    pub(super) fn resolve(&self, num_classes: usize) -> Result<Likelihood> {
        match self {
            Requested::Named(n) => likelihood_by_name(
                n.as_deref().unwrap_or(default_likelihood_name(num_classes)),
                num_classes,
            ),
            Requested::Setting(v) => likelihood_from_setting(v, num_classes),
        }
    }

    /// `model` with a likelihood setting replaced by `likelihood` in full (a partial
    /// setting takes K from the data; the backends see the completed one, set after every
    /// other source); `model` unchanged for a named likelihood.
    ///
    /// # Errors
    /// [`BenchError::Usage`] if the likelihood cannot be serialised.
    pub(super) fn completed(
        &self,
        model: &ModelFlags,
        likelihood: &Likelihood,
    ) -> Result<ModelFlags> {
        let mut m = model.clone();
        if let Requested::Setting(_) = self {
            m.set.retain(|s| {
                s.split_once('=')
                    .is_none_or(|(k, _)| k.trim().split('.').next() != Some("likelihood"))
            });
            let full = serde_json::to_string(likelihood)
                .map_err(|e| BenchError::Usage(format!("likelihood: {e}")))?;
            m.set.push(format!("likelihood={full}"));
        }
        Ok(m)
    }

    /// Refuses settings that name a likelihood next to `--likelihood` (`settings` of one
    /// backend, before the run's likelihood is put in).
    ///
    /// # Errors
    /// [`BenchError::Usage`] as said.
    pub(super) fn check_settings(&self, settings: &Settings) -> Result<()> {
        if matches!(self, Requested::Named(_)) && settings.contains_key("likelihood") {
            return Err(BenchError::Usage(
                "a classification run sets the likelihood from --likelihood; remove \
                 'likelihood' from --set / --config"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Refuses a backend that does not declare `likelihood`'s family in its capabilities.
///
/// # Errors
/// [`BenchError::Usage`] naming the backend, the family, K and the likelihood.
pub(super) fn check_backend_supports(
    b: &crate::backends::BackendEntry,
    likelihood: &Likelihood,
    num_classes: usize,
) -> Result<()> {
    if b.capabilities().supports(likelihood.family()) {
        return Ok(());
    }
    Err(BenchError::Usage(format!(
        "--backend {}: it does not train {} likelihoods ({} classes, likelihood {}); \
         `dgp-bench backends` lists what each backend supports",
        b.name(),
        serde_json::to_value(likelihood.family())
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        num_classes,
        likelihood_name(likelihood)
    )))
}

/// Runs the classification experiments of `a` (see the module docs).
pub(super) fn cmd_run_classification(
    a: &RunArgs,
    requested: &Requested,
    process: &crate::session::Process,
) -> Result<()> {
    crate::validate::check_inducing(a.model.inducing)?;
    if a.per_point {
        return Err(BenchError::Usage(
            "--per-point applies to regression runs (log densities for `compare`)".into(),
        ));
    }
    let (protocol, kind) = protocol_of(a)?;
    let data = a.source.load(a.seed)?.with_split_kind(kind, a.seed)?;
    let splits = parse_splits(&a.splits, data.n_splits())?;
    let (k, labels) = class_labels_of(&data.name, data.data().y(), a.task.classes)?;
    let likelihood = requested.resolve(k)?;
    let name = likelihood_name(&likelihood);
    let completed = RunArgs {
        model: requested.completed(&a.model, &likelihood)?,
        ..a.clone()
    };
    let a = &completed;
    for &s in &splits {
        let (train_idx, _) = data.split(s)?;
        check_training_classes(&data.name, s, &labels, &train_idx, k)?;
    }
    let mut specs = build_specs(a, &data, &splits)?;
    check_memory(a.memory_budget.as_deref(), &data, &specs)?;
    for spec in &specs {
        check_backend_supports(spec.backend, &likelihood, k)?;
        requested.check_settings(&spec.arch.settings)?;
    }
    // Every spec carries the likelihood in its settings: the backend checks them before
    // any training, and a checkpoint's fingerprint (which hashes the settings) tells one
    // likelihood's saved state from another's.
    for spec in &mut specs {
        spec.arch.settings = with_likelihood(&spec.arch.settings, &likelihood)
            .map_err(|e| BenchError::Usage(crate::backends::config_message(e)))?;
        spec.backend
            .backend
            .check(&spec.arch.common(), &spec.arch.settings)
            .map_err(|e| BenchError::Usage(crate::backends::config_message(e)))?;
    }
    // Prints the data's warnings (constant features, ...) and checks the outputs.
    crate::validate::check_run(&a.io_paths(), &data, &specs)?;
    crate::validate::check_checkpoint_dirs(&a.io_paths(), &a.ckpt)?;
    let session = crate::checkpointing::start_session(&a.ckpt, &specs, process)?;
    process.stop_on_signals();
    for spec in &mut specs {
        spec.session = session.clone();
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| {
            BenchError::Usage(format!("--out {}: cannot create it: {e}", dir.display()))
        })?;
    }
    let mut json = a
        .json
        .as_deref()
        .map(|p| {
            crate::report::JsonLinesWriter::create(p)
                .map(|_| p.to_path_buf())
                .map_err(|e| BenchError::Usage(format!("--json {}: {}", p.display(), e.one_line())))
        })
        .transpose()?
        .map(|p| (p, String::new()));
    println!(
        "data {} ({}; N = {}, D = {}, K = {k} classes), {}",
        data.name,
        data.origin,
        data.data().n(),
        data.data().input_dim(),
        data.split_protocol()
    );
    println!(
        "classification, likelihood {name}; protocol {} (split kind {}), splits {:?}; inputs standardised with training-split statistics",
        protocol.name(),
        kind.name(),
        splits
    );
    let command = command_line();
    let mut records: Vec<ClassSplitRecord> = Vec::new();
    for spec in &specs {
        println!(
            "\n{} {}: M = {}, hidden {}, batch min(N_train, {}), {} steps, Adam lr {}, {} predictive samples, seed {}",
            spec.backend.name(),
            model_label(spec.arch.layers),
            spec.arch.num_inducing,
            spec.arch
                .hidden_width
                .map_or("default".to_string(), |h| h.to_string()),
            spec.batch_size,
            spec.steps,
            spec.learning_rate,
            spec.arch.predict_samples,
            spec.seed
        );
        for &s in &spec.splits {
            let mut r = run_class_split(spec, &likelihood, &labels, s).map_err(|e| {
                crate::checkpointing::interrupted_note(
                    e,
                    records.len(),
                    a.json.as_deref(),
                    a.out.as_deref(),
                )
            })?;
            r.command = command.clone();
            println!(
                "split {:>2}: error {:.4}  log loss {:.4}  Brier {:.4}  ECE {:.4}{}  train {:.1} s ({} steps)",
                s,
                r.metrics.error_rate,
                r.metrics.log_loss,
                r.metrics.brier,
                r.metrics.ece,
                r.metrics
                    .auc
                    .map_or(String::new(), |v| format!("  AUC {v:.4}")),
                r.train_seconds,
                r.steps
            );
            if let Some((path, text)) = json.as_mut() {
                text.push_str(
                    &serde_json::to_string(&r).map_err(|e| BenchError::output(&*path, e))?,
                );
                text.push('\n');
                write_text(path, text)?;
            }
            records.push(r);
            if let Some(dir) = &a.out {
                write_class_outputs(dir, &data, &likelihood, &records)?;
            }
        }
    }
    if let Some((p, _)) = &json {
        println!(
            "records: {} (JSON Lines, one object per split)",
            p.display()
        );
    }
    if let Some(dir) = &a.out {
        println!("report: {}", dir.join("report.md").display());
    }
    print!("\n{}", class_table(&summarise_class(&records)));
    println!("\n{CLASS_TABLE_NOTE}");
    Ok(())
}

/// Writes report.md, results.json and the reliability diagram of a classification run.
fn write_class_outputs(
    dir: &Path,
    data: &BenchData,
    likelihood: &Likelihood,
    records: &[ClassSplitRecord],
) -> Result<()> {
    let rows = summarise_class(records);
    let svg = reliability_file_name(&data.name);
    let n_splits = {
        let mut s: Vec<usize> = records.iter().map(|r| r.split).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    };
    let title = format!(
        "Reliability on {} (test points of {n_splits} split(s), 15 equal-width confidence bins)",
        data.name
    );
    crate::reliability::write_reliability(&dir.join(&svg), &title, &reliability_series(records))?;
    let mut md = format!(
        "# dgp-bench run: classification on {}\n\n* data: {} ({}), {}\n* likelihood: {}\n\n## Results\n\n",
        data.name,
        data.name,
        data.origin,
        data.split_protocol(),
        likelihood_name(likelihood)
    );
    md.push_str(&class_table(&rows));
    md.push('\n');
    md.push_str(CLASS_TABLE_NOTE);
    md.push_str(&format!(
        "\n\n## Plots\n\n### {title}\n\n![{title}]({svg})\n"
    ));
    write_text(&dir.join("report.md"), &md)?;
    let doc = serde_json::json!({
        "tool": "dgp-bench",
        "version": env!("CARGO_PKG_VERSION"),
        "task": CLASSIFICATION_TASK,
        "records": records,
        "summary": rows,
        "standard_error": "sd/sqrt(n), sd with ddof = 1",
    });
    crate::report::write_json(&dir.join("results.json"), &doc)
}
