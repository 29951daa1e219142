//! The command line: argument definitions (clap) and one function per subcommand.
//! `main.rs` only parses, dispatches and maps errors to exit codes.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use dgp_traits::model::PredictConfig;
use dgp_traits::optim::{NatGradConfig, NatGradScheme};
use serde::Serialize;

use crate::backends::{ArchSpec, BackendEntry, backend_names, backends, find_backend};
use crate::datasets::{BenchData, parse_splits};
use crate::default_run::{DefaultRunOptions, default_run};
use crate::error::{BenchError, Result};
use crate::experiment::{
    ExperimentSpec, PREDICT_SEED_OFFSET, SplitOutcome, model_label, run_experiment_with,
};
use crate::plots::{
    calibration_curve, calibration_levels, plot_calibration, plot_predictive_1d, predict_curve_1d,
};
use crate::report::{
    JsonLinesWriter, Report, TABLE_NOTE, fmt_mean_se, markdown_table, read_json_lines, write_json,
    write_results_json,
};
use crate::summary::summarise;
use crate::timing::{TimingSpec, time_backend};

/// Compare deep-GP inference backends on shared data, splits and metrics.
///
/// Without a subcommand, runs the quick default job: every registered backend's SGP, DGP2
/// and DGP3 on the embedded concrete data (published splits 0 and 1) and on the DGPS step
/// function, writing report.md, results.json and SVG plots to --out (default bench-out/).
#[derive(Debug, Parser)]
#[command(name = "dgp-bench", version, about, long_about = None)]
pub struct Cli {
    /// Subcommand (none = the quick default job).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Output directory of the default job.
    #[arg(long, default_value = "bench-out", global = false)]
    pub out: PathBuf,
    /// Seed of the default job.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Hide progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train and evaluate one backend on the splits of a data set (the full protocol).
    Run(RunArgs),
    /// Time one gradient step (forward + backward + Adam update) and one test prediction.
    Time(TimeArgs),
    /// Merge JSON Lines records of earlier `run --json` calls into one table (mean ± s.e.
    /// per data set, backend and depth).
    Table(TableArgs),
    /// List the registered backends and what --samples means for each.
    Backends,
}

/// Arguments of `dgp-bench run`. Unset model settings take the backend's defaults (svi:
/// the DSVI reference settings: M = 100, 10 000 Adam steps at lr 0.01, batch min(N, 10 000),
/// 1 training sample, 100 predictive samples).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the data come from.
    #[command(flatten)]
    pub source: DataFlags,
    /// Backend name, or several separated by commas (`svi,dspp`); see `dgp-bench backends`.
    #[arg(long, default_value = "svi")]
    pub backend: String,
    /// Number of GP layers (1 = SGP), or several separated by commas (`1,2`): every
    /// backend is run with every layer count, one table.
    #[arg(long, default_value = "2")]
    pub layers: String,
    /// Optimisation steps [default: backend's; svi: 10000; dspp: 400 epochs, at least 3000].
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
    /// svi only: natural-gradient steps of size GAMMA in (0, 1] on the last layer's q(u),
    /// alternated with Adam on the rest (shared/specs/dsvi.md §6) [default: off, Adam on
    /// everything as in the paper]; other backends ignore it.
    #[arg(long, value_name = "GAMMA", allow_negative_numbers = true)]
    pub natgrad: Option<f64>,
    /// With --natgrad: alternate (a natural step, then an Adam step evaluated after it;
    /// two evaluations per step, the reference scheme) or joint (both from one
    /// evaluation, half the cost) [default: alternate].
    #[arg(long, value_name = "SCHEME", requires = "natgrad")]
    pub natgrad_scheme: Option<String>,
}

/// Arguments of `dgp-bench table`.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// JSON Lines files written by `run --json`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

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

/// Runs the parsed command line.
///
/// # Errors
/// Any [`BenchError`]; the binary prints it on one line and exits with
/// [`BenchError::exit_code`].
pub fn execute(cli: Cli) -> Result<()> {
    match cli.command {
        None => cmd_default(&cli.out, cli.seed, !cli.quiet),
        Some(Command::Run(a)) => cmd_run(&a),
        Some(Command::Time(a)) => cmd_time(&a),
        Some(Command::Table(a)) => cmd_table(&a),
        Some(Command::Backends) => {
            cmd_backends();
            Ok(())
        }
    }
}

fn progress_enabled(wanted: bool) -> bool {
    wanted && std::io::stderr().is_terminal()
}

fn cmd_backends() {
    for b in backends() {
        let d = b.defaults;
        println!("{}: {}", b.name, b.description);
        println!(
            "    run defaults: M = {}, {}, Adam lr {}, batch min(N, {}), {} training sample(s), {} predictive samples",
            d.num_inducing,
            d.epochs.map_or(format!("{} steps", d.steps), |e| format!(
                "{e} epochs (at least {} steps)",
                d.steps
            )),
            d.learning_rate,
            d.batch_cap,
            d.train_samples,
            d.predict_samples
        );
        println!("    run  --samples: {}", b.samples_in_run);
        println!("    time --samples: {}", b.samples_in_time);
    }
}

fn cmd_default(out: &Path, seed: u64, progress: bool) -> Result<()> {
    let opts = DefaultRunOptions {
        out_dir: out.to_path_buf(),
        seed,
        progress: progress_enabled(progress),
        ..DefaultRunOptions::default()
    };
    std::fs::create_dir_all(out).map_err(|e| {
        BenchError::Usage(format!("--out {}: cannot create it: {e}", out.display()))
    })?;
    for line in opts.plan() {
        println!("{line}");
    }
    println!();
    let t0 = Instant::now();
    let result = default_run(&opts, &mut |r| {
        println!(
            "  {:<4} {:<5} {:<9} split {:>2}: NLL {:>8.4}  RMSE {:>8.4}  CRPS {:>8.4}  cov95 {:.3}  ({:.1} s)",
            r.backend,
            model_label(r.layers),
            r.dataset,
            r.split,
            r.nll,
            r.rmse,
            r.crps,
            r.cov95,
            r.train_seconds
        );
    })?;
    println!();
    print!("{}", result.table);
    println!("\n{TABLE_NOTE}");
    println!(
        "\nwall time {:.1} s; wrote {}",
        t0.elapsed().as_secs_f64(),
        result
            .files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

fn nonzero(name: &str, v: usize) -> Result<usize> {
    if v == 0 {
        Err(BenchError::Usage(format!("{name} must be at least 1")))
    } else {
        Ok(v)
    }
}

/// The data flags shared by `run` and `time`.
#[derive(Debug, Clone, Args)]
pub struct DataFlags {
    /// Data: a UCI folder (published splits), a CSV file with a header (random 90/10
    /// splits), builtin:concrete or builtin:step.
    #[arg(long)]
    pub data: String,
    /// Target column of a CSV file (default: the last column).
    #[arg(long)]
    pub target: Option<String>,
}

impl DataFlags {
    fn load(&self, seed: u64) -> Result<BenchData> {
        BenchData::load(&self.data, self.target.as_deref(), seed)
    }
}

/// Model and optimiser flags shared by `run` and `time`.
#[derive(Debug, Clone, Args)]
pub struct ModelFlags {
    /// Inducing points per layer [default: backend's; svi: 100].
    #[arg(long)]
    pub inducing: Option<usize>,
    /// Hidden-layer width [default: backend's; svi: min(30, D)].
    #[arg(long)]
    pub hidden: Option<usize>,
    /// Minibatch size, capped at N_train [default: backend's cap; svi: 10000].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Adam learning rate [default: backend's; svi: 0.01].
    #[arg(long, allow_negative_numbers = true)]
    pub lr: Option<f64>,
    /// Quadrature rule of dspp: qr1, qr2 or qr3 [default: qr3]; other backends ignore it.
    #[arg(long)]
    pub rule: Option<String>,
    /// Mean function of nested's hidden layers: zero (the paper) or linear (spec §5)
    /// [default: zero]; other backends ignore it (svi's inner layers are always linear).
    #[arg(long)]
    pub mean: Option<String>,
    /// β_reg of dspp / ppgpr (eq. 21) [default: run: chosen on a validation part of the
    /// training split from 0.01, 0.05, 0.2, 1; time: 0.05]; other backends ignore it.
    #[arg(long, allow_negative_numbers = true)]
    pub beta: Option<f64>,
}

impl ModelFlags {
    /// `--lr`, or the backend's default; a finite positive number.
    fn learning_rate(&self, b: &BackendEntry) -> Result<f64> {
        let lr = self.lr.unwrap_or(b.defaults.learning_rate);
        if lr > 0.0 && lr.is_finite() {
            Ok(lr)
        } else {
            Err(BenchError::Usage(format!(
                "--lr must be a finite number > 0, got {lr}"
            )))
        }
    }

    /// `--batch`, or the backend's cap; at least 1.
    fn batch_size(&self, b: &BackendEntry) -> Result<usize> {
        nonzero("--batch", self.batch.unwrap_or(b.defaults.batch_cap))
    }
}

/// What the command line says about one model.
struct ArchArgs<'a> {
    layers: usize,
    /// Training samples (svi: Monte Carlo samples of the ELBO).
    train_samples: usize,
    /// Predictive mixture components.
    predict_samples: usize,
    /// `--samples` as typed, for backends whose model has a fixed number of components.
    samples: Option<usize>,
    flags: &'a ModelFlags,
    tune: bool,
    seed: u64,
    /// `--natgrad` and `--natgrad-scheme` (run only).
    natgrad: (Option<f64>, Option<&'a str>),
}

fn arch_from(b: &BackendEntry, a: &ArchArgs<'_>) -> Result<ArchSpec> {
    if let Some(beta) = a.flags.beta
        && !(beta >= 0.0 && beta.is_finite())
    {
        return Err(BenchError::Usage(format!(
            "--beta must be a finite number >= 0, got {beta}"
        )));
    }
    if let Some(m) = a.flags.mean.as_deref()
        && !matches!(m, "zero" | "linear")
    {
        return Err(BenchError::Usage(format!(
            "--mean must be zero or linear, got '{m}'"
        )));
    }
    let natgrad = natgrad_config(a.natgrad.0, a.natgrad.1)?;
    let (train_samples, predict_samples) = if b.samples_are_components {
        let s = a.samples.unwrap_or(b.defaults.predict_samples);
        (s, s)
    } else {
        (a.train_samples, a.predict_samples)
    };
    Ok(ArchSpec {
        layers: nonzero("--layers", a.layers)?,
        num_inducing: nonzero(
            "--inducing",
            a.flags.inducing.unwrap_or(b.defaults.num_inducing),
        )?,
        hidden_width: a.flags.hidden.map(|h| nonzero("--hidden", h)).transpose()?,
        train_samples: nonzero("--samples", train_samples)?,
        predict_samples: nonzero("--samples", predict_samples)?,
        seed: a.seed,
        rule: a.flags.rule.clone(),
        hidden_mean: a.flags.mean.clone(),
        beta: a.flags.beta,
        tune: a.tune,
        natgrad,
    })
}

/// The natural-gradient settings of `--natgrad GAMMA` and `--natgrad-scheme`.
fn natgrad_config(gamma: Option<f64>, scheme: Option<&str>) -> Result<Option<NatGradConfig>> {
    let Some(gamma) = gamma else {
        return Ok(None);
    };
    if !(gamma > 0.0 && gamma <= 1.0) {
        return Err(BenchError::Usage(format!(
            "--natgrad must be a step size in (0, 1], got {gamma}"
        )));
    }
    let scheme = match scheme {
        None | Some("alternate") => NatGradScheme::Alternate,
        Some("joint") => NatGradScheme::Joint,
        Some(other) => {
            return Err(BenchError::Usage(format!(
                "--natgrad-scheme must be alternate or joint, got '{other}'"
            )));
        }
    };
    Ok(Some(NatGradConfig {
        gamma,
        scheme,
        ..NatGradConfig::default()
    }))
}

/// Parses a comma-separated list of layer counts such as `1,2`.
fn parse_layers(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let l: usize = part.parse().map_err(|_| {
            BenchError::Usage(format!("--layers: '{part}' is not a number of layers"))
        })?;
        out.push(nonzero("--layers", l)?);
    }
    if out.is_empty() {
        return Err(BenchError::Usage("--layers: no layer count given".into()));
    }
    Ok(out)
}

/// Parses a comma-separated list of backend names such as `svi,dspp`.
fn parse_backends(s: &str) -> Result<Vec<&'static BackendEntry>> {
    let out: Vec<&'static BackendEntry> = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(find_backend)
        .collect::<Result<_>>()?;
    if out.is_empty() {
        return Err(BenchError::Usage("--backend: no backend given".into()));
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
    learning_rate: f64,
    seed: u64,
    splits: &'a [usize],
}

/// One line describing the settings of an experiment.
fn describe_spec(spec: &ExperimentSpec<'_>) -> String {
    let a = &spec.arch;
    let mut extra = String::new();
    if let Some(r) = &a.rule {
        extra.push_str(&format!(", rule {r}"));
    }
    if let Some(beta) = a.beta {
        extra.push_str(&format!(", beta {beta}"));
    }
    if let Some(m) = &a.hidden_mean {
        extra.push_str(&format!(", hidden mean {m}"));
    }
    if let Some(n) = &a.natgrad {
        let scheme = match n.scheme {
            NatGradScheme::Alternate => "alternating with",
            NatGradScheme::Joint => "joint with",
        };
        extra.push_str(&format!(
            ", natural-gradient steps gamma {} on the last q(u) {scheme} Adam",
            n.gamma
        ));
    }
    format!(
        "backend {} {}: M = {}, hidden {}, batch min(N_train, {}), {} steps, Adam lr {}, {} training sample(s), {} predictive samples{extra}, tune {}, seed {}",
        spec.backend.name,
        model_label(a.layers),
        a.num_inducing,
        a.hidden_width
            .map_or("default".to_string(), |h| h.to_string()),
        spec.batch_size,
        spec.steps,
        spec.learning_rate,
        a.train_samples,
        a.predict_samples,
        a.tune,
        spec.seed
    )
}

fn cmd_run(a: &RunArgs) -> Result<()> {
    let backends_wanted = parse_backends(&a.backend)?;
    let layer_list = parse_layers(&a.layers)?;
    let data = a.source.load(a.seed)?;
    let splits = parse_splits(&a.splits, data.n_splits())?;
    // The published splits of a data set all have the same size.
    let n_train = match splits.first() {
        Some(&k) => data.split_data(k)?.0.n(),
        None => data.data().n(),
    };
    // Every (backend, layers) experiment is built and checked before any training.
    let mut specs = Vec::new();
    for &b in &backends_wanted {
        let d = b.defaults;
        let lr = a.model.learning_rate(b)?;
        for &layers in &layer_list {
            let arch = arch_from(
                b,
                &ArchArgs {
                    layers,
                    train_samples: a.train_samples.unwrap_or(d.train_samples),
                    predict_samples: a.samples.unwrap_or(d.predict_samples),
                    samples: a.samples,
                    flags: &a.model,
                    tune: !a.no_tune,
                    seed: a.seed,
                    natgrad: (a.natgrad, a.natgrad_scheme.as_deref()),
                },
            )?;
            let batch_size = a.model.batch_size(b)?;
            let spec = ExperimentSpec {
                data: &data,
                backend: b,
                arch,
                steps: a.steps.unwrap_or(d.steps_for(n_train, batch_size)),
                batch_size,
                learning_rate: lr,
                seed: a.seed,
                splits: splits.clone(),
                progress: progress_enabled(!a.quiet),
            };
            spec.validate()?;
            specs.push(spec);
        }
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
        "metrics in original target units; train/test standardised with training-split statistics"
    );
    let mut all_records = Vec::new();
    let mut curves = Vec::new();
    let mut first_plot: Option<(PathBuf, String)> = None;
    for spec in &specs {
        println!("\n{}, splits {:?}", describe_spec(spec), spec.splits);
        let mut pit = Vec::new();
        let out = a.out.clone();
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
            if let Some(w) = json.as_mut() {
                w.write(r)?;
            }
            pit.extend_from_slice(&o.pit);
            if let Some(dir) = &out
                && first_plot.is_none()
                && o.train.input_dim() == 1
            {
                first_plot = Some(plot_1d_outcome(dir, o, spec)?);
            }
            Ok(())
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
        let label = format!("{} {}", spec.backend.name, model_label(spec.arch.layers));
        curves.push((label, calibration_curve(&pit, &calibration_levels())));
        all_records.extend(records);
    }
    let summary = summarise(&all_records);
    if let Some(p) = &a.json {
        println!(
            "records: {} (JSON Lines, one object per split)",
            p.display()
        );
    }
    if let Some(dir) = &a.out {
        let cal_name = format!(
            "calibration_{}.svg",
            data.name
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
        );
        plot_calibration(
            &dir.join(&cal_name),
            &format!(
                "Calibration on {} (test PIT, {} split(s))",
                data.name,
                splits.len()
            ),
            &curves,
        )?;
        let mut plots = vec![(format!("Calibration on {}", data.name), cal_name)];
        if let Some((_, caption)) = &first_plot {
            plots.push((caption.clone(), "predictive_1d.svg".to_string()));
        }
        let names: Vec<String> = specs
            .iter()
            .map(|s| format!("{} {}", s.backend.name, model_label(s.arch.layers)))
            .collect();
        let mut intro = vec![format!(
            "* data: {} ({}), {}",
            data.name,
            data.origin,
            data.split_protocol()
        )];
        intro.extend(specs.iter().map(|s| format!("* {}", describe_spec(s))));
        intro.push(format!("* splits: {splits:?}"));
        let report = Report {
            title: format!("dgp-bench run: {} on {}", names.join(", "), data.name),
            intro,
            rows: summary.clone(),
            plots,
            notes: vec![],
        };
        report.write(dir)?;
        let settings: Vec<RunSettings<'_>> = specs
            .iter()
            .map(|spec| RunSettings {
                kind: "run",
                data: &a.source.data,
                split_protocol: data.split_protocol(),
                backend: spec.backend.name,
                arch: &spec.arch,
                steps: spec.steps,
                batch_cap: spec.batch_size,
                learning_rate: spec.learning_rate,
                seed: spec.seed,
                splits: &spec.splits,
            })
            .collect();
        write_results_json(dir, settings, &all_records, &summary)?;
        println!("report: {}", dir.join("report.md").display());
    }
    print!("\n{}", markdown_table(&summary));
    Ok(())
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
    let label = format!("{} {}", spec.backend.name, model_label(spec.arch.layers));
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

fn cmd_table(a: &TableArgs) -> Result<()> {
    let mut records = Vec::new();
    for f in &a.files {
        records.extend(read_json_lines(f)?);
    }
    if records.is_empty() {
        return Err(BenchError::Usage("table: the files hold no records".into()));
    }
    print!("{}", markdown_table(&summarise(&records)));
    println!("\n{TABLE_NOTE}");
    Ok(())
}

fn cmd_time(a: &TimeArgs) -> Result<()> {
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
                tune: false,
                seed: a.seed,
                natgrad: (None, None),
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

/// Turns a clap error into one line: the message lines before the usage block, joined.
pub fn clap_error_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Usage:") || t.starts_with("For more information") {
            break;
        }
        if !t.is_empty() {
            parts.push(t.strip_prefix("error: ").unwrap_or(t).to_string());
        }
    }
    format!(
        "{} (see `dgp-bench --help`; backends: {})",
        parts.join(" "),
        backend_names()
    )
}
