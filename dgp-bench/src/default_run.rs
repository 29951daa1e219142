//! The job `dgp-bench` runs without arguments: a quick comparison of every registered
//! backend on an embedded real data set and the synthetic step function.
//!
//! * concrete (embedded, published splits 0 and 1 by default) and the DGPS noisy step
//!   function (N = 200, 80/20 split 0, noise std 0.01);
//! * for every backend in [`crate::backends::BACKENDS`], the layer counts of its
//!   `layers_in_default_run` (SGP, DGP2, DGP3), trained with its
//!   [`dgp_traits::backend::DemoSettings`] — fewer steps and inducing points than the full
//!   protocol, so that everything finishes in about three minutes on two cores;
//! * one small classification run: the default backend's SGP and DGP2 with the
//!   Bernoulli-probit likelihood on an embedded 1 483-row subsample of MAGIC gamma
//!   telescope (one split, 1 007 training rows; [`CLASS_QUICK`]), its table in the report
//!   beside a reliability diagram;
//! * writes `report.md`, `results.json`, one SVG of the predictive (mean, 95 % band,
//!   function samples where the backend has them, data) per model on the step function,
//!   one calibration-curve SVG per data set and the reliability diagram of the
//!   classification run.

use std::path::{Path, PathBuf};

use dgp_traits::model::PredictConfig;
use serde::Serialize;

use dgp_traits::backend::DemoSettings;

use crate::backends::{ArchSpec, BackendEntry, backends};
use crate::datasets::{BenchData, STEP_N, STEP_NOISE_STD};
use crate::error::Result;
use crate::experiment::{
    ExperimentSpec, PREDICT_SEED_OFFSET, SplitOutcome, SplitRecord, model_label, run_split,
};
use crate::plots::{
    calibration_curve, calibration_levels, plot_calibration, plot_predictive_1d, predict_curve_1d,
};
use crate::report::{Report, markdown_table, write_report_files};
use crate::summary::{SummaryRow, summarise};

/// Number of posterior function samples drawn in the step-function plots.
pub const FUNCTION_SAMPLES: usize = 5;
/// Plot grid of the step function: 301 points on [−3, 3], beyond the data range [−2, 2]
/// as in the thesis' figures, to show the extrapolation.
pub const STEP_GRID: (f64, f64, usize) = (-3.0, 3.0, 301);

/// Options of the default job.
#[derive(Clone, Debug)]
pub struct DefaultRunOptions {
    /// Output directory (created).
    pub out_dir: PathBuf,
    /// Published concrete splits to run.
    pub concrete_splits: Vec<usize>,
    /// Step-function splits to run.
    pub step_splits: Vec<usize>,
    /// Seed of data generation, initialisation, minibatches and noise.
    pub seed: u64,
    /// Backends to run (default: all registered).
    pub backends: Vec<&'static BackendEntry>,
    /// Replaces every backend's demonstration settings but its layer counts (tests use
    /// tiny models).
    pub quick_override: Option<DemoSettings>,
    /// Show progress bars.
    pub progress: bool,
    /// Backends of the classification run (default: the registry's default backend);
    /// empty = no classification run.
    pub class_backends: Vec<&'static BackendEntry>,
}

/// Layer counts of the default job's classification run (SGP and DGP2).
pub const CLASS_LAYERS: &[usize] = &[1, 2];

/// Settings of the default job's classification run on the MAGIC subsample: 300 Adam
/// steps at lr 0.01 on batches of 500, M = 50, 20 predictive samples.
pub const CLASS_QUICK: DemoSettings = DemoSettings {
    steps: 300,
    steps_1d: 0,
    num_inducing: 50,
    batch_cap: 500,
    learning_rate: 0.01,
    predict_samples: 20,
    layers: CLASS_LAYERS,
    note: "",
};

/// The embedded classification data of the default job: a 1 483-row subsample of MAGIC
/// gamma telescope (binary, 10 features) with one split, as committed in
/// `dgp-bench/data/magic-small/` (its README says how it was drawn).
pub fn magic_small() -> Result<BenchData> {
    static SPLITS: [(&str, &str); 1] = [(
        include_str!("../data/magic-small/splits/index_train_0.txt"),
        include_str!("../data/magic-small/splits/index_test_0.txt"),
    )];
    let src = dgp_io::uci::UciSources {
        name: "magic-small",
        data: include_str!("../data/magic-small/data.txt"),
        index_features: include_str!("../data/magic-small/index_features.txt"),
        index_target: include_str!("../data/magic-small/index_target.txt"),
        n_splits: include_str!("../data/magic-small/n_splits.txt"),
        splits: &SPLITS,
    };
    let uci = dgp_io::uci::load_uci_from_str(&src).map_err(crate::error::BenchError::data)?;
    Ok(BenchData::from_uci(
        uci,
        "embedded (dgp-bench/data/magic-small)",
    ))
}

impl Default for DefaultRunOptions {
    fn default() -> Self {
        DefaultRunOptions {
            out_dir: PathBuf::from("bench-out"),
            concrete_splits: vec![0, 1],
            step_splits: vec![0],
            seed: 0,
            backends: backends().iter().collect(),
            quick_override: None,
            progress: true,
            class_backends: crate::backends::find_backend(crate::backends::DEFAULT_BACKEND)
                .into_iter()
                .collect(),
        }
    }
}

impl DefaultRunOptions {
    fn quick(&self, b: &BackendEntry) -> DemoSettings {
        self.quick_override.unwrap_or_else(|| b.quick())
    }

    /// Human-readable lines describing what the job will run.
    pub fn plan(&self) -> Vec<String> {
        let mut lines = vec![
            "quick default run; use `run` for the full protocol (e.g. `dgp-bench run --data <uci-folder> --backend svi --layers 2 --splits all`)".to_string(),
            format!(
                "data: concrete (embedded, published splits {:?}); step function (y = sign(x) + N(0, {STEP_NOISE_STD}²), x ~ U(−2, 2), N = {STEP_N}, 80/20 split {:?})",
                self.concrete_splits, self.step_splits
            ),
        ];
        for b in &self.backends {
            let q = self.quick(b);
            let models: Vec<String> = b
                .layers_in_default_run()
                .iter()
                .map(|&l| model_label(l))
                .collect();
            lines.push(format!(
                "{}: {} with M = {}, {}, batch min(N, {}), {} steps (concrete) / {} steps (step), {} predictive samples",
                b.name(),
                models.join(", "),
                q.num_inducing,
                if b.capabilities().uses_learning_rate {
                    format!("Adam lr {}", q.learning_rate)
                } else {
                    "no learning rate".to_string()
                },
                q.batch_cap,
                q.steps,
                q.steps_1d,
                q.predict_samples
            ) + &if q.note.is_empty() { String::new() } else { format!(" ({})", q.note) });
        }
        if !self.class_backends.is_empty() {
            let q = self.quick_override.unwrap_or(CLASS_QUICK);
            let names: Vec<&str> = self.class_backends.iter().map(|b| b.name()).collect();
            lines.push(format!(
                "classification: {} {} with the Bernoulli-probit likelihood on magic-small (embedded 1 483-row subsample of MAGIC gamma telescope, 1 split), M = {}, Adam lr {}, batch min(N, {}), {} steps, {} predictive samples",
                names.join(", "),
                CLASS_LAYERS
                    .iter()
                    .map(|&l| model_label(l))
                    .collect::<Vec<_>>()
                    .join(", "),
                q.num_inducing,
                q.learning_rate,
                q.batch_cap,
                q.steps,
                q.predict_samples
            ));
        }
        lines.push(format!("output: {}", self.out_dir.display()));
        lines
    }
}

/// What the default job produced.
#[derive(Clone, Debug)]
pub struct DefaultRunOutput {
    /// One record per (data set, backend, layers, split).
    pub records: Vec<SplitRecord>,
    /// Mean ± s.e. rows.
    pub summary: Vec<SummaryRow>,
    /// The Markdown table.
    pub table: String,
    /// The records of the classification run.
    pub class_records: Vec<crate::classification::ClassSplitRecord>,
    /// Its table (empty without a classification run).
    pub class_table: String,
    /// Every file written.
    pub files: Vec<PathBuf>,
}

#[derive(Serialize)]
struct DefaultSettings {
    kind: &'static str,
    concrete_splits: Vec<usize>,
    step_splits: Vec<usize>,
    step_noise_std: f64,
    step_n: usize,
    seed: u64,
    backends: Vec<BackendSettings>,
}

#[derive(Serialize)]
struct BackendSettings {
    name: &'static str,
    layers: Vec<usize>,
    num_inducing: usize,
    steps: usize,
    steps_1d: usize,
    batch_cap: usize,
    /// Omitted for a backend that does not use one.
    #[serde(skip_serializing_if = "Option::is_none")]
    learning_rate: Option<f64>,
    predict_samples: usize,
}

fn spec_for<'a>(
    data: &'a BenchData,
    b: &'static BackendEntry,
    q: DemoSettings,
    layers: usize,
    steps: usize,
    splits: &[usize],
    opts: &DefaultRunOptions,
) -> ExperimentSpec<'a> {
    ExperimentSpec {
        session: crate::session::Session::default(),
        data,
        backend: b,
        arch: ArchSpec {
            layers,
            num_inducing: q.num_inducing,
            predict_samples: if b.capabilities().samples_are_components {
                b.defaults().predict_samples
            } else {
                q.predict_samples
            },
            seed: opts.seed,
            // The quick job uses each backend's default regularisation (no validation
            // search).
            tune: false,
            ..ArchSpec::with_defaults(b, layers)
        },
        steps,
        batch_size: q.batch_cap,
        learning_rate: q.learning_rate,
        seed: opts.seed,
        splits: splits.to_vec(),
        progress: opts.progress,
        early_stopping: None,
        // The backend's own convergence stop (svi, star, mf, fc), as in `run`.
        convergence: b.defaults().training.convergence,
        lr_schedule: dgp_traits::optim::LrSchedule::Constant,
        per_point: false,
        protocol: String::new(),
    }
}

fn file_stem(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Draws the predictive of a trained model on the step function; returns its caption,
/// file name and path.
fn plot_step(
    out: &Path,
    o: &SplitOutcome,
    label: &str,
    q: DemoSettings,
    opts: &DefaultRunOptions,
    k: usize,
) -> Result<(String, String, PathBuf)> {
    let (g0, g1, gn) = STEP_GRID;
    let grid: Vec<f64> = (0..gn)
        .map(|i| g0 + (g1 - g0) * i as f64 / (gn - 1) as f64)
        .collect();
    let cfg = PredictConfig {
        samples: q.predict_samples,
        seed: opts.seed.wrapping_add(PREDICT_SEED_OFFSET),
    };
    let curve = predict_curve_1d(
        o.model.as_ref(),
        &o.standardizer,
        &grid,
        &cfg,
        FUNCTION_SAMPLES,
    )
    .map_err(|e| crate::error::BenchError::run(format!("{label} step-function plot"), e))?;
    let col = |d: &dgp_traits::data::Dataset, c: usize| -> Vec<f64> {
        (0..d.n())
            .map(|i| if c == 0 { d.x()[(i, 0)] } else { d.y()[(i, 0)] })
            .collect()
    };
    let name = format!("step_{}.svg", file_stem(label));
    let path = out.join(&name);
    let title = format!(
        "{label} on the step function (split {k}): test NLL {:.3}, RMSE {:.3}",
        o.record.nll, o.record.rmse
    );
    plot_predictive_1d(
        &path,
        &title,
        &curve,
        (&col(&o.train, 0), &col(&o.train, 1)),
        (&col(&o.test, 0), &col(&o.test, 1)),
    )?;
    let caption = if curve.samples.is_some() {
        format!(
            "{label} on the step function (mean, 95 % band, {FUNCTION_SAMPLES} function samples)"
        )
    } else {
        format!(
            "{label} on the step function (mean, 95 % band; the backend gives no function samples)"
        )
    };
    Ok((caption, name, path))
}

/// The default job's report.
fn report_of(
    opts: &DefaultRunOptions,
    summary: &[SummaryRow],
    plots: Vec<(String, String)>,
) -> Report {
    Report {
        title: "dgp-bench: quick default run".into(),
        intro: vec![
            opts.plan()
                .into_iter()
                .map(|l| format!("* {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
        ],
        rows: summary.to_vec(),
        plots,
        notes: vec![
            "This quick run trains far fewer steps (and fewer inducing points) than the papers, so its numbers are \
             not converged and are not comparable with published tables. For reference, Lindinger et al. (2020) \
             Table 1 reports concrete test log-likelihoods (10 random 90:10 splits, original units) of −3.09 (SGP), \
             −3.06 (MF DGP2) and −3.09 (MF DGP3), i.e. NLL 3.09 / 3.06 / 3.09."
                .into(),
            format!(
                "The step function's noise: the DGPS thesis (Vafa 2016, §5.1) writes ε ~ N(0, σ²) and \"ε = .01\"; \
                 we use noise standard deviation {STEP_NOISE_STD} (variance 1e-4)."
            ),
        ],
    }
}

/// The default job's settings for results.json.
fn settings_of(opts: &DefaultRunOptions) -> DefaultSettings {
    DefaultSettings {
        kind: "default",
        concrete_splits: opts.concrete_splits.clone(),
        step_splits: opts.step_splits.clone(),
        step_noise_std: STEP_NOISE_STD,
        step_n: STEP_N,
        seed: opts.seed,
        backends: opts
            .backends
            .iter()
            .map(|b| {
                let q = opts.quick(b);
                BackendSettings {
                    name: b.name(),
                    layers: b.layers_in_default_run().to_vec(),
                    num_inducing: q.num_inducing,
                    steps: q.steps,
                    steps_1d: q.steps_1d,
                    batch_cap: q.batch_cap,
                    learning_rate: b
                        .capabilities()
                        .uses_learning_rate
                        .then_some(q.learning_rate),
                    predict_samples: q.predict_samples,
                }
            })
            .collect(),
    }
}

/// Runs the default job (see the module docs), calling `on_record` after every split.
///
/// # Errors
/// The first failing split or output file.
pub fn default_run(
    opts: &DefaultRunOptions,
    on_record: &mut dyn FnMut(&SplitRecord),
) -> Result<DefaultRunOutput> {
    let out = opts.out_dir.as_path();
    std::fs::create_dir_all(out).map_err(|e| crate::error::BenchError::output(out, e))?;
    let concrete = BenchData::embedded_concrete()?;
    let step = BenchData::step(opts.seed)?;
    let mut records = Vec::new();
    let mut files = Vec::new();
    let mut plots: Vec<(String, String)> = Vec::new();
    for (data, is_step) in [(&concrete, false), (&step, true)] {
        let splits = if is_step {
            &opts.step_splits
        } else {
            &opts.concrete_splits
        };
        if splits.is_empty() {
            continue;
        }
        let mut curves: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for &b in &opts.backends {
            let q = opts.quick(b);
            for &layers in b.layers_in_default_run() {
                let steps = if is_step { q.steps_1d } else { q.steps };
                if steps == 0 {
                    continue;
                }
                let spec = spec_for(data, b, q, layers, steps, splits, opts);
                let label = format!("{} {}", b.name(), model_label(layers));
                let mut pit = Vec::new();
                for &k in splits {
                    let o = run_split(&spec, k)?;
                    on_record(&o.record);
                    pit.extend_from_slice(&o.pit);
                    if is_step && k == splits[0] {
                        let (caption, name, path) = plot_step(out, &o, &label, q, opts, k)?;
                        plots.push((caption, name));
                        files.push(path);
                    }
                    records.push(o.record);
                }
                curves.push((label, calibration_curve(&pit, &calibration_levels())));
            }
        }
        let name = format!("calibration_{}.svg", file_stem(&data.name));
        let path = out.join(&name);
        plot_calibration(
            &path,
            &format!(
                "Calibration on {} (test PIT, splits {:?})",
                data.name, splits
            ),
            &curves,
        )?;
        plots.push((format!("Calibration curves on {}", data.name), name));
        files.push(path);
    }
    let (class_records, class_table) = classification_run(opts, &mut plots, &mut files)?;
    let summary = summarise(&records);
    let table = markdown_table(&summary);
    let mut report = report_of(opts, &summary, plots);
    if !class_table.is_empty() {
        report.notes.push(format!(
            "### Classification (magic-small)\n\n{class_table}\n{}",
            crate::classification::CLASS_TABLE_NOTE
        ));
    }
    let settings = settings_of(opts);
    files.extend(write_report_files(out, &report, settings, &records)?);
    Ok(DefaultRunOutput {
        records,
        summary,
        table,
        class_records,
        class_table,
        files,
    })
}

/// The classification part of the default job: every class backend's [`CLASS_LAYERS`]
/// on [`magic_small`] with the Bernoulli-probit likelihood; draws the reliability
/// diagram. Returns the records and their table.
fn classification_run(
    opts: &DefaultRunOptions,
    plots: &mut Vec<(String, String)>,
    files: &mut Vec<PathBuf>,
) -> Result<(Vec<crate::classification::ClassSplitRecord>, String)> {
    use crate::classification::{
        class_labels_of, class_table, likelihood_by_name, reliability_file_name,
        reliability_series, run_class_split, summarise_class,
    };
    if opts.class_backends.is_empty() {
        return Ok((Vec::new(), String::new()));
    }
    let data = magic_small()?;
    let (k, labels) = class_labels_of(&data.name, data.data().y(), None)?;
    let likelihood = likelihood_by_name("probit", k)?;
    let q = opts.quick_override.unwrap_or(CLASS_QUICK);
    let mut records = Vec::new();
    for &b in &opts.class_backends {
        if !b.capabilities().supports(likelihood.family()) {
            continue;
        }
        for &layers in CLASS_LAYERS {
            let spec = spec_for(&data, b, q, layers, q.steps, &[0], opts);
            records.push(run_class_split(&spec, &likelihood, &labels, 0)?);
        }
    }
    if records.is_empty() {
        return Ok((records, String::new()));
    }
    let name = reliability_file_name(&data.name);
    let path = opts.out_dir.join(&name);
    let caption = format!(
        "Reliability on {} (test split, 15 equal-width confidence bins)",
        data.name
    );
    crate::reliability::write_reliability(&path, &caption, &reliability_series(&records))?;
    plots.push((caption, name));
    files.push(path);
    let table = class_table(&summarise_class(&records));
    Ok((records, table))
}

/// The output directory's report file (for messages).
pub fn report_path(dir: &Path) -> PathBuf {
    dir.join("report.md")
}
