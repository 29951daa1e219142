//! `dgp-bench run`: train and evaluate backends on the splits of a data set.

use std::path::{Path, PathBuf};

use clap::Args;
use dgp_traits::model::PredictConfig;
use serde::Serialize;

use super::{
    ArchArgs, DataFlags, ModelFlags, SettingsInput, TaskFlags, arch_from, nonzero, progress_enabled,
};
use crate::backends::{ArchSpec, BackendEntry, find_backend};
use crate::datasets::{BenchData, SplitKind, parse_splits};
use crate::error::{BenchError, Result};
use crate::experiment::{
    ExperimentSpec, PREDICT_SEED_OFFSET, SplitOutcome, SplitRecord, model_label,
    run_experiment_with,
};
use crate::plots::{
    calibration_curve, calibration_levels, plot_calibration, plot_predictive_1d, predict_curve_1d,
};
use crate::protocol::Protocol;
use crate::report::{JsonLinesWriter, Report, fmt_mean_se, markdown_table, write_report_files};
use crate::summary::{SummaryRow, summarise};
use dgp_traits::fit::Training;
use dgp_traits::optim::LrSchedule;
use dgp_traits::train::HeldOutRule;

/// Arguments of `dgp-bench run`. Unset model settings take the backend's defaults (svi:
/// the DSVI reference settings M = 100, batch min(N, 10 000), 1 training sample, 100
/// predictive samples, with Adam at lr 0.02 for at most 10 000 steps, ended earlier by
/// the backend's convergence stop: [`dgp_traits::backend::Backend::run_defaults`]).
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Where the data come from.
    #[command(flatten)]
    pub source: DataFlags,
    /// Backend name, or several separated by commas (`svi,dspp`); see `dgp-bench backends`.
    #[arg(long, default_value = crate::backends::DEFAULT_BACKEND)]
    pub backend: String,
    /// Number of GP layers (1 = SGP), or several separated by commas (`1,2`): every
    /// backend is run with every layer count, one table.
    #[arg(long, default_value = "2")]
    pub layers: String,
    /// Optimisation steps [default: backend's; svi: at most 10000, ended by its convergence
    /// stop; dspp: 400 epochs, at least 3000]; at most a backend's cap (dgps: its setting
    /// max_iters, L-BFGS iterations per restart).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Predictive mixture components (svi: Monte Carlo samples of eq. 18; dspp: quadrature
    /// sites) [default: backend's; svi: 100, dspp: 8].
    #[arg(long)]
    pub samples: Option<usize>,
    /// Samples in the training objective (svi: Monte Carlo samples per point) [default: 1].
    #[arg(long)]
    pub train_samples: Option<usize>,
    /// Splits: `all`, or indices and ranges such as `0,1,2` or `0-4`.
    #[arg(long, default_value = "all")]
    pub splits: String,
    /// Seed of initialisation, minibatches, Monte Carlo noise and CSV random splits.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write one JSON record per split to this file (JSON Lines, truncated first).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write report.md, results.json and plots into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Hide progress bars.
    #[arg(long)]
    pub quiet: bool,
    /// Model-specific settings.
    #[command(flatten)]
    pub model: ModelFlags,
    /// Do not choose regularisation hyper-parameters on validation data (dspp: β_reg and
    /// the hidden width); use the backend's defaults for those not given.
    #[arg(long)]
    pub no_tune: bool,
    /// svi only (sugar for `--set natgrad.gamma=GAMMA`): natural-gradient steps of size GAMMA in (0, 1] on the last layer's q(u),
    /// alternated with Adam on the rest (the training schedule of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP) [default: off, Adam on
    /// everything as in the paper]; other backends ignore it.
    #[arg(long, value_name = "GAMMA", allow_negative_numbers = true)]
    pub natgrad: Option<f64>,
    /// With --natgrad: alternate (a natural step, then an Adam step evaluated after it;
    /// two evaluations per step, the reference scheme) or joint (both from one
    /// evaluation, half the cost) [default: alternate].
    #[arg(long, value_name = "SCHEME", requires = "natgrad")]
    pub natgrad_scheme: Option<String>,
    /// The named configuration of every backend the run starts from (`dgp-bench backends`
    /// lists each backend's presets): `default` (the backend's own fast default) or
    /// `paper` (the paper's setting) [default: the protocol's: `--protocol lindinger`
    /// selects the structured backends' `paper` preset, `--protocol dspp` dspp's and
    /// ppgpr's; `default` otherwise]. Flags and settings given override it.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Evaluation protocol (the `protocol` module of dgp-bench): published (the data set's own
    /// splits, backend defaults) or lindinger (Lindinger et al. 2020 Table 1: 10 random
    /// 90:10 splits seeded 0..9, their held-out early stopping, at most 20000 steps, batch
    /// 512, 5 training samples, Adam 0.005 ×0.98 every 1000 steps, 100 test samples,
    /// M = 128, hidden 5, no convergence stop of a backend's own; flags given override
    /// these) or dspp (Jankowiak et al. 2020: 10
    /// random 15:3:2 train/test/validation splits seeded 0..9, 5 when any --layers is ≥ 3;
    /// 15 % test, the other 85 % go to fit, where dspp/ppgpr choose β_reg and the width on
    /// 2/17 of them = the paper's 10 % validation part; backend defaults otherwise; tables
    /// in standardised units beside original ones).
    #[arg(long, default_value = "published")]
    pub protocol: String,
    /// How rows are split: published (the data set's own splits), random (10 random 90:10
    /// splits, split k seeded with --seed + k) or extrapolate (protocol §1: the half with
    /// the smaller projection on a random direction is the test set, seeds --seed + 0..9,
    /// with Lindinger's held-out early stopping unless --early-stopping is given) [default:
    /// the protocol's:
    /// published → published, lindinger → random; dspp has its own 15:3:2 splits and
    /// refuses this flag].
    #[arg(long, value_name = "KIND")]
    pub split_kind: Option<String>,
    /// Held-out early stopping: `patience` (the core's patience rule, 2/17 of the
    /// training rows held out, the best held-out parameters kept), `lindinger` (Lindinger
    /// et al. 2020's rule), a rule as JSON (`{"patience": {"every": 50, "patience":
    /// 10}}`) or `none` [default: the protocol's (lindinger, and the extrapolate split
    /// kind: lindinger), else the backend's (nested: patience, checked every hundredth of
    /// the steps, stop after 10 checks without improvement, on 400 training rows or more;
    /// the others: none)].
    #[arg(long, value_name = "RULE")]
    pub early_stopping: Option<String>,
    /// Keep every test point's log predictive density in the JSON records (for
    /// `dgp-bench compare`).
    #[arg(long)]
    pub per_point: bool,
    /// Memory budget: a run whose estimated peak memory exceeds it is refused before any
    /// allocation (bytes, or a number with K, M, G, T: `4G`) [default: 90 % of the
    /// available memory, MemAvailable of /proc/meminfo].
    #[arg(long, value_name = "SIZE")]
    pub memory_budget: Option<String>,
    /// `--task`, `--likelihood`, `--classes`.
    #[command(flatten)]
    pub task: TaskFlags,
    /// `--checkpoint DIR`, `--resume DIR`, `--checkpoint-every N`.
    #[command(flatten)]
    pub ckpt: crate::checkpointing::CheckpointFlags,
}

impl RunArgs {
    /// The files this run reads and writes, for [`crate::validate::check_run`].
    pub fn io_paths(&self) -> crate::validate::IoPaths<'_> {
        crate::validate::IoPaths {
            data: &self.source.data,
            config: self.model.config.as_deref(),
            json: self.json.as_deref(),
            out: self.out.as_deref(),
        }
    }
}

/// The protocol and split kind of the command line (checked before any data is read).
pub(super) fn protocol_of(a: &RunArgs) -> Result<(Protocol, SplitKind)> {
    let p = Protocol::parse(&a.protocol)?;
    let given = a.split_kind.as_deref().map(SplitKind::parse).transpose()?;
    let k = p.split_kind(given, &parse_layers(&a.layers)?)?;
    Ok((p, k))
}

/// `flags` with the protocol's defaults filled in where no flag was given.
fn protocol_flags(flags: &ModelFlags, p: Protocol) -> ModelFlags {
    let mut f = flags.clone();
    if let Some(s) = p.settings() {
        f.inducing = f.inducing.or(Some(s.num_inducing));
        f.hidden = f.hidden.or(Some(s.hidden_width));
        f.batch = f.batch.or(Some(s.batch));
        f.lr = f.lr.or(Some(s.learning_rate));
    }
    f
}

/// Parses a `--layers` value: a comma-separated list of layer counts such as `1,2`, each
/// at least 1 and named once.
///
/// # Errors
/// [`BenchError::Usage`] naming the bad or repeated count.
pub fn parse_layers(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let l: usize = part.parse().map_err(|_| {
            BenchError::Usage(format!("--layers: '{part}' is not a number of layers"))
        })?;
        let l = nonzero("--layers", l)?;
        if out.contains(&l) {
            return Err(BenchError::Usage(format!(
                "--layers {s}: {l} is named more than once; each layer count runs once"
            )));
        }
        out.push(l);
    }
    if out.is_empty() {
        return Err(BenchError::Usage("--layers: no layer count given".into()));
    }
    Ok(out)
}

/// Parses a `--backend` value: a comma-separated list of registered backend names such as
/// `svi,dspp`, each named once.
///
/// # Errors
/// [`BenchError::Usage`] naming an unknown or repeated backend.
pub fn parse_backends(s: &str) -> Result<Vec<&'static BackendEntry>> {
    let out: Vec<&'static BackendEntry> = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(find_backend)
        .collect::<Result<_>>()?;
    if out.is_empty() {
        return Err(BenchError::Usage("--backend: no backend given".into()));
    }
    // Refused, not deduplicated: the run would otherwise train the same models twice
    // (or, deduplicated, quietly do less than the command line says).
    if let Some(k) = (1..out.len()).find(|&k| out[..k].iter().any(|b| b.name() == out[k].name())) {
        return Err(BenchError::Usage(format!(
            "--backend {s}: {} is named more than once; each backend runs once per layer \
             count (for repeated runs use several --seed values)",
            out[k].name()
        )));
    }
    Ok(out)
}

#[derive(Serialize)]
struct RunSettings<'a> {
    kind: &'static str,
    data: &'a str,
    split_protocol: String,
    backend: &'a str,
    arch: &'a ArchSpec,
    steps: usize,
    batch_cap: usize,
    /// `None` (omitted) for a backend that does not use one.
    #[serde(skip_serializing_if = "Option::is_none")]
    learning_rate: Option<f64>,
    seed: u64,
    splits: &'a [usize],
    #[serde(skip_serializing_if = "String::is_empty")]
    protocol: String,
}

/// One line describing the settings of an experiment.
fn describe_spec(spec: &ExperimentSpec<'_>) -> String {
    let a = &spec.arch;
    let extra = spec.backend.backend.describe_settings(&a.settings);
    format!(
        "backend {} {}: M = {}, hidden {}, batch min(N_train, {}), {} steps, {}, {} training sample(s), {} predictive samples{extra}, tune {}, seed {}",
        spec.backend.name(),
        model_label(a.layers),
        a.num_inducing,
        a.hidden_width
            .map_or("default".to_string(), |h| h.to_string()),
        spec.batch_size,
        spec.steps,
        spec.recorded_learning_rate()
            .map_or("no learning rate".to_string(), |lr| format!("Adam lr {lr}")),
        a.train_samples,
        a.predict_samples,
        a.tune,
        spec.seed
    ) + &training_note(spec)
}

/// The early stopping and schedule of a spec, for the one-line description.
fn training_note(spec: &ExperimentSpec<'_>) -> String {
    let mut out = String::new();
    match &spec.early_stopping {
        Some(HeldOutRule::Lindinger(_)) => out.push_str(&format!(
            "; held-out early stopping: lindinger rule (Lindinger et al. 2020, §4, and their reference code, Structured_DGP), {} steps at most",
            spec.steps
        )),
        Some(HeldOutRule::Patience(e)) => out.push_str(&format!(
            "; held-out early stopping: patience rule ({:.3} of the training rows held out, stop after {} checks every {} steps without improvement{}{}), {} steps at most",
            e.fraction,
            e.patience,
            e.period(spec.steps),
            if e.rises > 0 {
                format!(" or after {} checks in a row each worse than the last", e.rises)
            } else {
                String::new()
            },
            if e.min_rows > 0 {
                format!("; only on {} training rows or more", e.min_rows)
            } else {
                String::new()
            },
            spec.steps
        )),
        None => {}
    }
    if let LrSchedule::Exponential {
        gamma,
        every,
        staircase,
    } = &spec.lr_schedule
    {
        out.push_str(&format!(
            "; lr ×{gamma} every {every} steps{}",
            if *staircase { " (staircase)" } else { "" }
        ));
    }
    out
}

/// The command line of this process, for the records (`dgp-bench run ...`).
pub(super) fn command_line() -> String {
    let mut parts = vec!["dgp-bench".to_string()];
    parts.extend(std::env::args().skip(1).map(|a| {
        if !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.,/:=+@%".contains(c))
        {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    }));
    parts.join(" ")
}

/// Every (backend, layers) experiment of the command line, built and checked before any
/// training.
pub(super) fn build_specs<'d>(
    a: &RunArgs,
    data: &'d BenchData,
    splits: &[usize],
) -> Result<Vec<ExperimentSpec<'d>>> {
    let backends_wanted = parse_backends(&a.backend)?;
    let layer_list = parse_layers(&a.layers)?;
    let (protocol, kind) = protocol_of(a)?;
    let given_rule = a
        .early_stopping
        .as_deref()
        .map(super::parse_early_stopping)
        .transpose()?;
    let ps = protocol.settings();
    let flags = protocol_flags(&a.model, protocol);
    // The published splits of a data set all have the same size.
    let n_train = match splits.first() {
        Some(&k) => data.split_data(k)?.0.n(),
        None => data.data().n(),
    };
    let settings: SettingsInput = flags.settings_input((a.natgrad, a.natgrad_scheme.as_deref()))?;
    settings.check_targets(&backends_wanted.iter().map(|b| b.name()).collect::<Vec<_>>())?;
    // The flag as typed: a protocol's learning rate is a default, not a request.
    a.model.refuse_unused_lr(&backends_wanted)?;
    let mut specs = Vec::new();
    for &b in &backends_wanted {
        let preset = match &a.preset {
            Some(p) => p.as_str(),
            None => b.backend.preset_for_protocol(protocol.name()),
        };
        let d = b.preset_defaults(preset)?;
        // A protocol's sample counts apply to Monte Carlo backends, not to backends whose
        // --samples is the number of mixture components of the model (dspp's sites).
        let ps_samples = ps.filter(|_| !b.capabilities().samples_are_components);
        for &layers in &layer_list {
            let arch = arch_from(
                b,
                &ArchArgs {
                    preset,
                    layers,
                    train_samples: a
                        .train_samples
                        .or(ps_samples.map(|s| s.train_samples))
                        .unwrap_or(d.train_samples),
                    predict_samples: a
                        .samples
                        .or(ps_samples.map(|s| s.predict_samples))
                        .unwrap_or(d.predict_samples),
                    samples: a.samples,
                    sample_flags: ["--train-samples", "--samples"],
                    flags: &flags,
                    settings: &settings,
                    tune: !a.no_tune,
                    seed: a.seed,
                },
            )?;
            // The configuration's schedule after the settings (`--set training.…`).
            let t =
                super::TrainingChoice::of(b, &arch, a.steps, a.model.batch, given_rule.is_some())?;
            let early_stopping = match (&given_rule, t.set_early_stopping) {
                (Some(rule), _) => rule.clone(),
                (None, true) => t.defaults.held_out_rule(),
                (None, false) => protocol.early_stopping(kind).or(t.defaults.held_out_rule()),
            };
            let convergence = if t.set_convergence || protocol != Protocol::Lindinger {
                t.defaults.training.convergence
            } else {
                // Lindinger et al.'s protocol ends a run by its held-out rule or its step
                // cap only.
                None
            };
            let lr = flags.learning_rate_or(
                t.defaults
                    .learning_rate_for(early_stopping.as_ref(), n_train),
            )?;
            let batch_size = match (a.model.batch, t.set_batch, ps) {
                (Some(batch), _, _) => batch,
                (None, false, Some(s)) => s.batch,
                _ => t.defaults.training.batch_size,
            };
            let batch_size = nonzero("--batch", batch_size)?;
            let default_steps = match ps {
                Some(s) if !t.set_steps => s.steps,
                _ => Training {
                    batch_size,
                    ..t.defaults.training.clone()
                }
                .steps_for(n_train),
            };
            let steps = super::steps_for(b, &arch.settings, a.steps, default_steps)?;
            let spec = ExperimentSpec {
                data,
                backend: b,
                arch,
                steps: nonzero("--steps", steps)?,
                batch_size,
                learning_rate: lr,
                seed: a.seed,
                splits: splits.to_vec(),
                progress: progress_enabled(!a.quiet),
                early_stopping,
                convergence,
                lr_schedule: ps.map_or(LrSchedule::Constant, |s| s.lr_schedule.clone()),
                per_point: a.per_point,
                protocol: protocol.label(kind),
                session: crate::session::Session::default(),
            };
            spec.validate()?;
            refuse_unsupported_early_stopping(&spec)?;
            specs.push(spec);
        }
    }
    Ok(specs)
}

/// A protocol or split kind with held-out early stopping, asked of a backend that does not
/// declare it ([`dgp_traits::backend::Capabilities::held_out_early_stopping`]), is a usage
/// error before any training.
fn refuse_unsupported_early_stopping(spec: &ExperimentSpec<'_>) -> Result<()> {
    let name = spec.backend.name();
    if spec.early_stopping.is_some() && !spec.backend.capabilities().held_out_early_stopping {
        return Err(BenchError::Usage(format!(
            "--backend {name}: this run trains with held-out early stopping (from \
             --early-stopping, the protocol or the split kind), which {name} does not \
             support; use --early-stopping none, or --protocol published --split-kind \
             published or random"
        )));
    }
    Ok(())
}

/// What the splits of all experiments produced.
#[derive(Default)]
struct RunOutputs {
    warnings: crate::validate::Warnings,
    records: Vec<SplitRecord>,
    curves: Vec<(String, Vec<(f64, f64)>)>,
    first_plot: Option<(PathBuf, String)>,
}

/// Runs one experiment: prints each split, streams its record, draws the first 1-D plot.
fn run_one(
    spec: &ExperimentSpec<'_>,
    out_dir: Option<&Path>,
    json: &mut Option<JsonLinesWriter>,
    command: &str,
    acc: &mut RunOutputs,
    after_split: &mut dyn FnMut(&RunOutputs) -> Result<()>,
) -> Result<()> {
    println!("\n{}, splits {:?}", describe_spec(spec), spec.splits);
    let mut pit = Vec::new();
    let warnings = acc.warnings.for_spec(spec);
    let records = run_experiment_with(spec, &mut |o: &SplitOutcome| {
        let r = &o.record;
        println!(
            "split {:>2}: NLL {:>9.4}  RMSE {:>9.4}  CRPS {:>9.4}  cov95 {:.3}  train {:.1} s ({} steps, final objective {:.4e}; {})",
            r.split,
            r.nll,
            r.rmse,
            r.crps,
            r.cov95,
            r.train_seconds,
            r.steps,
            r.final_objective,
            r.model
        );
        if spec.protocol.starts_with("dspp/") {
            println!(
                "         {}",
                crate::units::split_line(r).trim_start_matches(" | ")
            );
        }
        if let Some(line) = r.diagnostics.summary_line() {
            println!("         {line}");
        }
        if let Some(w) = json.as_mut() {
            w.write(&SplitRecord {
                command: command.to_string(),
                settings: spec.arch.settings.clone(),
                warnings: warnings.clone(),
                ..r.clone()
            })?;
        }
        pit.extend_from_slice(&o.pit);
        if let Some(dir) = out_dir
            && acc.first_plot.is_none()
            && o.train.input_dim() == 1
        {
            acc.first_plot = Some(plot_1d_outcome(dir, o, spec)?);
        }
        acc.records.push(SplitRecord {
            warnings: warnings.clone(),
            ..r.clone()
        });
        after_split(acc)
    })?;
    let summary = summarise(&records);
    let row = &summary[0];
    println!(
        "mean ± s.e. over {} split(s) (s.e. = sd/√n, sd with ddof = 1): NLL {}  RMSE {}  CRPS {}  cov95 {}  train s {}",
        row.n_splits,
        fmt_mean_se(&row.nll),
        fmt_mean_se(&row.rmse),
        fmt_mean_se(&row.crps),
        fmt_mean_se(&row.cov95),
        fmt_mean_se(&row.train_seconds)
    );
    if let Some(line) = row.resources_line() {
        println!("resources: {line}");
    }
    let label = format!("{} {}", spec.backend.name(), model_label(spec.arch.layers));
    acc.curves
        .push((label, calibration_curve(&pit, &calibration_levels())));
    Ok(())
}

/// Writes the calibration plot, report.md and results.json of a run into `dir`.
fn write_outputs(
    dir: &Path,
    a: &RunArgs,
    data: &BenchData,
    specs: &[ExperimentSpec<'_>],
    acc: &RunOutputs,
    summary: &[SummaryRow],
) -> Result<()> {
    let splits = specs.first().map(|s| s.splits.clone()).unwrap_or_default();
    let cal_name = crate::validate::calibration_file_name(&data.name);
    plot_calibration(
        &dir.join(&cal_name),
        &format!(
            "Calibration on {} (test PIT, {} split(s))",
            data.name,
            splits.len()
        ),
        &acc.curves,
    )?;
    let mut plots = vec![(format!("Calibration on {}", data.name), cal_name)];
    if let Some((_, caption)) = &acc.first_plot {
        plots.push((caption.clone(), "predictive_1d.svg".to_string()));
    }
    let names: Vec<String> = specs
        .iter()
        .map(|s| format!("{} {}", s.backend.name(), model_label(s.arch.layers)))
        .collect();
    let mut intro = vec![format!(
        "* data: {} ({}), {}",
        data.name,
        data.origin,
        data.split_protocol()
    )];
    if let Ok((protocol, kind)) = protocol_of(a) {
        intro.push(format!(
            "* protocol: {} (split kind {}; the `protocol` module of dgp-bench), seed {} (split k uses seed {} + k for random and extrapolation splits)",
            protocol.name(),
            kind.name(),
            a.seed,
            a.seed
        ));
    }
    intro.extend(specs.iter().map(|s| format!("* {}", describe_spec(s))));
    intro.push(format!("* splits: {splits:?}"));
    let report = Report {
        title: format!("dgp-bench run: {} on {}", names.join(", "), data.name),
        intro,
        rows: summary.to_vec(),
        plots,
        notes: standardised_notes(a, &acc.records, summary),
    };
    let settings: Vec<RunSettings<'_>> = specs
        .iter()
        .map(|spec| RunSettings {
            kind: "run",
            data: &a.source.data,
            split_protocol: data.split_protocol(),
            backend: spec.backend.name(),
            arch: &spec.arch,
            steps: spec.steps,
            batch_cap: spec.batch_size,
            learning_rate: spec.recorded_learning_rate(),
            seed: spec.seed,
            splits: &spec.splits,
            protocol: spec.protocol.clone(),
        })
        .collect();
    write_report_files(dir, &report, settings, &acc.records)?;
    println!("report: {}", dir.join("report.md").display());
    Ok(())
}

/// `run` for regression targets (classification runs go to `classify`, chosen in
/// [`super::run_command`]).
pub(super) fn cmd_run(a: &RunArgs, process: &crate::session::Process) -> Result<()> {
    // Before the backends' configs see M, so the message names the flag.
    crate::validate::check_inducing(a.model.inducing)?;
    let (protocol, kind) = protocol_of(a)?;
    let data = a.source.load(a.seed)?.with_split_kind(kind, a.seed)?;
    let splits = parse_splits(&a.splits, data.n_splits())?;
    let mut specs = build_specs(a, &data, &splits)?;
    check_memory(a.memory_budget.as_deref(), &data, &specs)?;
    let warnings = crate::validate::check_run(&a.io_paths(), &data, &specs)?;
    crate::validate::check_checkpoint_dirs(&a.io_paths(), &a.ckpt)?;
    let session = crate::checkpointing::start_session(&a.ckpt, &specs, process)?;
    process.stop_on_signals();
    for spec in &mut specs {
        spec.session = session.clone();
    }
    // Output locations are arguments: check them before training (exit code 2).
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| {
            BenchError::Usage(format!("--out {}: cannot create it: {e}", dir.display()))
        })?;
    }
    let mut json = a
        .json
        .as_deref()
        .map(|p| {
            JsonLinesWriter::create(p)
                .map_err(|e| BenchError::Usage(format!("--json {}: {}", p.display(), e.one_line())))
        })
        .transpose()?;
    let n = data.data().n();
    println!(
        "data {} ({}; N = {n}, D = {}), {}",
        data.name,
        data.origin,
        data.data().input_dim(),
        data.split_protocol()
    );
    println!(
        "protocol {} (split kind {}), splits {:?}",
        protocol.name(),
        kind.name(),
        splits
    );
    println!(
        "metrics in original target units{}; train/test standardised with training-split statistics",
        if protocol.standardised_units() {
            " and in standardised units (the DSPP paper's)"
        } else {
            ""
        }
    );
    let runner = dgp_traits::distribute::runner();
    if runner.processes() > 1 {
        println!(
            "data-parallel minibatch chunks ({}); results as one process",
            runner.describe()
        );
    }
    let command = command_line();
    let mut acc = RunOutputs {
        warnings,
        ..RunOutputs::default()
    };
    for spec in &specs {
        // --out is rewritten after every split, so an interrupted run keeps what finished.
        let mut after = |acc: &RunOutputs| match &a.out {
            Some(dir) => write_outputs(dir, a, &data, &specs, acc, &summarise(&acc.records)),
            None => Ok(()),
        };
        run_one(
            spec,
            a.out.as_deref(),
            &mut json,
            &command,
            &mut acc,
            &mut after,
        )
        .map_err(|e| {
            crate::checkpointing::interrupted_note(
                e,
                acc.records.len(),
                a.json.as_deref(),
                a.out.as_deref(),
            )
        })?;
    }
    let summary = summarise(&acc.records);
    if let Some(p) = &a.json {
        println!(
            "records: {} (JSON Lines, one object per split)",
            p.display()
        );
    }
    if let Some(dir) = &a.out {
        write_outputs(dir, a, &data, &specs, &acc, &summary)?;
    }
    print!("\n{}", markdown_table(&summary));
    for note in standardised_notes(a, &acc.records, &summary) {
        print!("\n{note}\n");
    }
    Ok(())
}

/// Refuses an experiment whose estimated peak memory exceeds the budget
/// ([`crate::memory`]), naming the flag that dominates the estimate.
pub(super) fn check_memory(
    budget: Option<&str>,
    data: &BenchData,
    specs: &[ExperimentSpec<'_>],
) -> Result<()> {
    let budget = crate::memory::budget(budget)?;
    let (mut n_train, mut n_test) = (0, 0);
    for &k in specs.first().map_or(&[][..], |s| s.splits.as_slice()) {
        let (tr, te) = data.split(k)?;
        n_train = n_train.max(tr.len());
        n_test = n_test.max(te.len());
    }
    for spec in specs {
        let e = crate::memory::Experiment {
            backend: spec.backend,
            arch: &spec.arch,
            input_dim: data.data().input_dim(),
            n_train,
            n_test,
            batch: spec.batch_size,
        };
        crate::memory::check_experiment(budget.as_ref(), &e, crate::memory::Flags::Run)?;
    }
    Ok(())
}

/// The standardised-unit table of a run under `--protocol dspp` ([`crate::units::run_notes`]).
fn standardised_notes(a: &RunArgs, records: &[SplitRecord], summary: &[SummaryRow]) -> Vec<String> {
    protocol_of(a).map_or_else(
        |_| Vec::new(),
        |(p, _)| crate::units::run_notes(p, records, summary),
    )
}

fn plot_1d_outcome(
    dir: &Path,
    o: &SplitOutcome,
    spec: &ExperimentSpec<'_>,
) -> Result<(PathBuf, String)> {
    let xs: Vec<f64> = (0..o.train.n()).map(|i| o.train.x()[(i, 0)]).collect();
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let pad = 0.25 * (hi - lo).max(1e-9);
    let grid: Vec<f64> = (0..301)
        .map(|i| lo - pad + (hi - lo + 2.0 * pad) * i as f64 / 300.0)
        .collect();
    let cfg = PredictConfig {
        samples: spec.arch.predict_samples,
        seed: spec.seed.wrapping_add(PREDICT_SEED_OFFSET),
    };
    let label = format!("{} {}", spec.backend.name(), model_label(spec.arch.layers));
    let curve = predict_curve_1d(o.model.as_ref(), &o.standardizer, &grid, &cfg, 5)
        .map_err(|e| BenchError::run(format!("{label}: 1-D plot"), e))?;
    let col = |d: &dgp_traits::data::Dataset, y: bool| -> Vec<f64> {
        (0..d.n())
            .map(|i| if y { d.y()[(i, 0)] } else { d.x()[(i, 0)] })
            .collect()
    };
    let path = dir.join("predictive_1d.svg");
    let caption = format!("{label} on {} split {}", spec.data.name, o.record.split);
    plot_predictive_1d(
        &path,
        &caption,
        &curve,
        (&col(&o.train, false), &col(&o.train, true)),
        (&col(&o.test, false), &col(&o.test, true)),
    )?;
    Ok((path, caption))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use dgp_traits::backend::Backend;

    /// `f` of every spec `run --data builtin:step --splits 0 ARGS` builds, with its
    /// backend's name.
    fn specs_with<T>(args: &[&str], f: impl Fn(&ExperimentSpec<'_>) -> T) -> Vec<(String, T)> {
        let cli = super::super::Cli::try_parse_from(
            [
                "dgp-bench",
                "run",
                "--data",
                "builtin:step",
                "--splits",
                "0",
            ]
            .iter()
            .chain(args),
        )
        .unwrap();
        let Some(super::super::Command::Run(a)) = cli.command else {
            panic!("not a run command")
        };
        let data = BenchData::load("builtin:step", None, 0).unwrap();
        build_specs(&a, &data, &[0])
            .unwrap()
            .iter()
            .map(|s| (s.backend.name().to_string(), f(s)))
            .collect()
    }

    fn specs_of(args: &[&str]) -> Vec<(String, Option<dgp_traits::fit::Convergence>)> {
        specs_with(args, |s| s.convergence)
    }

    /// Which held-out rule each backend's runs train with: `--early-stopping` when given
    /// (`none` turns any off), else the protocol's, else the backend's `run` default
    /// (nested's patience rule; none for svi).
    #[test]
    fn early_stopping_comes_from_the_flag_then_the_protocol_then_the_backend() {
        let rules = |args: &[&str]| specs_with(args, |s| s.early_stopping.clone());
        let nested = dgp_nested::NESTED_BACKEND
            .defaults("default")
            .unwrap()
            .held_out_rule();
        assert!(nested.is_some());
        assert_eq!(
            rules(&["--backend", "svi,nested"]),
            vec![("svi".to_string(), None), ("nested".to_string(), nested)]
        );
        assert_eq!(
            rules(&["--backend", "svi,nested", "--early-stopping", "none"]),
            vec![("svi".to_string(), None), ("nested".to_string(), None)]
        );
        let patience = Some(HeldOutRule::Patience(Default::default()));
        assert_eq!(
            rules(&["--backend", "svi,nested", "--early-stopping", "patience"]),
            vec![
                ("svi".to_string(), patience.clone()),
                ("nested".to_string(), patience)
            ]
        );
        let lindinger = Some(HeldOutRule::lindinger());
        assert_eq!(
            rules(&["--backend", "svi,nested", "--protocol", "lindinger"]),
            vec![
                ("svi".to_string(), lindinger.clone()),
                ("nested".to_string(), lindinger)
            ]
        );
        assert_eq!(
            rules(&[
                "--backend",
                "nested",
                "--protocol",
                "lindinger",
                "--early-stopping",
                "none"
            ]),
            vec![("nested".to_string(), None)]
        );
    }

    /// Lindinger et al.'s protocol turns the backends' own convergence stops off (the
    /// held-out rule ends its runs), unless the command line sets one; the published
    /// protocol leaves each backend's default, and backends without the key get nothing.
    #[test]
    fn lindinger_protocol_turns_the_backends_convergence_stops_off() {
        let own = Some(dgp_traits::fit::Convergence::NO_MINIMUM);
        assert_eq!(
            specs_of(&["--backend", "svi,star,nested", "--protocol", "lindinger"]),
            vec![
                ("svi".to_string(), None),
                ("star".to_string(), None),
                ("nested".to_string(), None)
            ]
        );
        assert_eq!(
            specs_of(&["--backend", "svi,star,nested"]),
            vec![
                ("svi".to_string(), own),
                ("star".to_string(), own),
                ("nested".to_string(), None)
            ]
        );
        // A stop given in the settings is kept under the protocol.
        let given = specs_of(&[
            "--backend",
            "svi",
            "--protocol",
            "lindinger",
            "--set",
            "training.convergence.tolerance=0.01",
        ]);
        assert_eq!(given.len(), 1);
        assert_eq!(given[0].1.map(|c| c.tolerance), Some(0.01));
    }
}
