//! `dgp-bench stream`: trains one backend from an out-of-core row store and evaluates it
//! on a test row store chunk by chunk, with memory bounded by the model and the batch, not
//! by the data.
//!
//! 1. Standardisation statistics of the training file in streaming passes
//!    ([`dgp_io::standardize::fit_standardizer`], the same numbers as in memory).
//! 2. The model is built on a seeded reservoir sample of `--init-rows` standardised rows
//!    (k-means++ of the inducing inputs, the hidden layers' mean functions).
//! 3. Training draws its minibatches by index from the memory-mapped file through
//!    [`dgp_io::standardize::StandardizedRows`] (or, with `--in-memory`, from the same rows
//!    loaded into memory: the same seed gives the same run bit for bit).
//! 4. The test file is predicted in chunks of `--predict-chunk` rows, chunk k with
//!    prediction seed `seed + k` (so a test file's predictions are defined by the seed and
//!    the chunk size, whether its rows come from a file or from memory); NLL and RMSE are
//!    accumulated on the way and per-row predictions optionally written as CSV.
//!
//! The record says how long training took, the step rate, and the largest anonymous
//! resident memory (`RssAnon` of `/proc/self/status`, sampled every 50 steps and after
//! prediction; memory-mapped file pages are page cache, not counted there).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use dgp_io::rowstore::RowStore;
use dgp_io::standardize::{StandardizedRows, fit_standardizer};
use dgp_traits::data::{RowSource, Standardizer};
use dgp_traits::fit::{FitHooks, Progress};
use dgp_traits::model::{FitConfig, Model, PredictConfig};
use faer::Mat;
use serde::Serialize;

use super::{ArchArgs, ModelFlags, arch_from, nonzero, progress_enabled};
use crate::backends::find_backend;
use crate::checkpointing::{StopOnSignal, install_interrupt_handler, stop_requested};
use crate::error::{BenchError, Result};
use crate::progress::BarObserver;

/// Arguments of `dgp-bench stream`.
#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Training rows: a row store (written by `dgp-bench synth` or `dgp-bench convert`).
    #[arg(long, value_name = "FILE")]
    pub train: PathBuf,
    /// Test rows: a row store with the same columns.
    #[arg(long, value_name = "FILE")]
    pub test: PathBuf,
    /// Backend (one that declares it streams, unless --in-memory).
    #[arg(long, default_value = crate::backends::DEFAULT_BACKEND)]
    pub backend: String,
    /// Number of GP layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Optimisation steps [default: the backend's].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Monte Carlo samples of the training objective.
    #[arg(long, default_value_t = 1)]
    pub train_samples: usize,
    /// Predictive mixture components.
    #[arg(long, default_value_t = 10)]
    pub samples: usize,
    /// Seed of initialisation, minibatch order, noise and prediction.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Rows of the seeded reservoir sample the model is initialised on.
    #[arg(long, default_value_t = 10_000)]
    pub init_rows: usize,
    /// Load the training rows into memory and train from there (the comparison run).
    #[arg(long)]
    pub in_memory: bool,
    /// Test rows per prediction chunk.
    #[arg(long, default_value_t = 10_000)]
    pub predict_chunk: usize,
    /// Write per-row predictions (mean, variance, log density, target) as CSV here.
    #[arg(long, value_name = "FILE")]
    pub predictions: Option<PathBuf>,
    /// Append the run's record as one JSON line here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The test rows come from `dgp-bench synth`: also report the Bayes-optimal NLL.
    #[arg(long)]
    pub synth: bool,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Model and optimiser flags.
    #[command(flatten)]
    pub model: ModelFlags,
}

/// The record of one `stream` run.
#[derive(Clone, Debug, Serialize)]
pub struct StreamRecord {
    /// The command line.
    pub command: String,
    /// Backend name.
    pub backend: String,
    /// The model's own description.
    pub model: String,
    /// Number of layers.
    pub layers: usize,
    /// Where the training rows were read from (`file` or `memory`).
    pub rows_from: String,
    /// Training rows.
    pub n_train: usize,
    /// Test rows.
    pub n_test: usize,
    /// Minibatch size.
    pub batch: usize,
    /// Steps taken.
    pub steps: usize,
    /// Training wall-clock seconds.
    pub train_seconds: f64,
    /// Milliseconds per training step.
    pub ms_per_step: f64,
    /// Mean test negative log predictive density, original units.
    pub nll: f64,
    /// Test root mean squared error of the predictive mean, original units.
    pub rmse: f64,
    /// Bayes-optimal mean test NLL (synthetic data only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bayes_nll: Option<f64>,
    /// Best mean test NLL of a predictor with one noise variance (synthetic data only;
    /// [`dgp_io::synth::NoiseFloor::homoscedastic_nll`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homoscedastic_nll: Option<f64>,
    /// Expected test RMSE of the exact mean (synthetic data only;
    /// [`dgp_io::synth::NoiseFloor::rmse`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_rmse: Option<f64>,
    /// Largest anonymous resident memory seen, MiB (`RssAnon`).
    pub peak_rss_anon_mib: f64,
    /// Seconds spent predicting the test file.
    pub predict_seconds: f64,
}

/// Progress bar and memory samples of a streamed fit.
struct StreamObserver {
    bar: BarObserver,
    peak_anon_kib: u64,
}

impl Progress for StreamObserver {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        self.bar.on_step(step, total, objective);
        if step.is_multiple_of(50) {
            self.peak_anon_kib = self.peak_anon_kib.max(rss_anon_kib());
        }
    }
}

/// `RssAnon` of this process in KiB (0 where `/proc` does not say).
pub fn rss_anon_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("RssAnon:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn open(path: &Path, what: &str) -> Result<RowStore> {
    RowStore::open(path).map_err(|e| BenchError::run(format!("opening {what}"), e))
}

/// Runs `dgp-bench stream`.
///
/// # Errors
/// Usage errors (a backend that cannot stream, bad sizes, an output that names an input),
/// read errors of the files, training and prediction errors.
pub fn cmd_stream(a: &StreamArgs) -> Result<()> {
    for out in [&a.predictions, &a.json].into_iter().flatten() {
        for input in [&a.train, &a.test] {
            if same_file(out, input) {
                return Err(BenchError::Usage(format!(
                    "output {} is the input file {}",
                    out.display(),
                    input.display()
                )));
            }
        }
    }
    let b = find_backend(&a.backend)?;
    if !a.in_memory && !b.capabilities().streams {
        return Err(BenchError::Usage(format!(
            "--backend {}: it trains on rows in memory only (backends that stream: {}); add --in-memory",
            b.name(),
            crate::backends::names_where(|c| c.streams)
        )));
    }
    let init_rows = nonzero("--init-rows", a.init_rows)?;
    let chunk = nonzero("--predict-chunk", a.predict_chunk)?;
    let settings = a.model.settings_input((None, None))?;
    a.model.refuse_unused_lr(&[b])?;
    let arch = arch_from(
        b,
        &ArchArgs {
            layers: a.layers,
            train_samples: a.train_samples,
            predict_samples: a.samples,
            samples: Some(a.samples),
            flags: &a.model,
            settings: &settings,
            tune: false,
            seed: a.seed,
        },
    )?;
    let steps = super::steps_for(b, &arch.settings, a.steps, b.defaults.steps)?;
    let train_file = open(&a.train, "the training rows")?;
    let test_file = open(&a.test, "the test rows")?;
    if (test_file.input_dim(), test_file.output_dim())
        != (train_file.input_dim(), train_file.output_dim())
    {
        return Err(BenchError::Usage(format!(
            "--test has {}+{} columns, --train {}+{}",
            test_file.input_dim(),
            test_file.output_dim(),
            train_file.input_dim(),
            train_file.output_dim()
        )));
    }
    install_interrupt_handler();
    let st = fit_standardizer(
        &train_file,
        Default::default(),
        dgp_io::chunks::DEFAULT_CHUNK_ROWS,
    )
    .map_err(|e| BenchError::run("standardising the training rows", e))?;
    let n = train_file.n();
    let (source, rows_from): (Box<dyn RowSource>, &str) = if a.in_memory {
        let d = train_file
            .to_dataset()
            .and_then(|d| st.transform(&d))
            .map_err(|e| BenchError::run("loading the training rows", e))?;
        (Box::new(d), "memory")
    } else {
        let rows = StandardizedRows::new(train_file, st.clone())
            .map_err(|e| BenchError::run("standardising the training rows", e))?;
        (Box::new(rows), "file")
    };
    let source = source.as_ref();
    let sample = dgp_io::sample::reservoir_sample(source, init_rows.min(n), a.seed)
        .map_err(|e| BenchError::run("sampling rows for the initialisation", e))?;
    let batch = a.model.batch.unwrap_or(b.defaults.batch_cap).min(n);
    let fit = FitConfig {
        steps,
        batch_size: nonzero("--batch", batch)?,
        learning_rate: a.model.lr.unwrap_or(b.defaults.learning_rate),
        seed: a.seed,
        ..FitConfig::default()
    };
    let mut obs = StreamObserver {
        bar: BarObserver::new(
            fit.steps,
            &format!("{} L={}", b.name(), a.layers),
            progress_enabled(!a.quiet),
        ),
        peak_anon_kib: rss_anon_kib(),
    };
    let mut stop = StopOnSignal;
    let mut model = b.build_model(&arch, &fit, &sample, &FitHooks::none().control(&mut stop))?;
    drop(sample);
    let start = Instant::now();
    let report = model
        .fit(
            source,
            &fit,
            &mut FitHooks::none().progress(&mut obs).control(&mut stop),
        )
        .map_err(|e| BenchError::run(format!("training {}", b.name()), e))?;
    let train_seconds = start.elapsed().as_secs_f64();
    obs.bar.finish();
    let t0 = Instant::now();
    let mut writer = match &a.predictions {
        Some(p) => Some(PredictionWriter::create(p)?),
        None => None,
    };
    let eval = predict_file(
        model.as_ref(),
        &st,
        &test_file,
        chunk,
        &PredictConfig {
            samples: a.samples,
            seed: a.seed,
        },
        writer.as_mut(),
    )?;
    if let Some(w) = writer {
        w.finish()?;
    }
    let predict_seconds = t0.elapsed().as_secs_f64();
    obs.peak_anon_kib = obs.peak_anon_kib.max(rss_anon_kib());
    let floor = if a.synth {
        Some(
            dgp_io::synth::noise_floor(&test_file)
                .map_err(|e| BenchError::run("the Bayes-optimal NLL of the test rows", e))?,
        )
    } else {
        None
    };
    let record = StreamRecord {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        backend: b.name().into(),
        model: model.describe(),
        layers: a.layers,
        rows_from: rows_from.into(),
        n_train: n,
        n_test: test_file.n(),
        batch: fit.batch_size,
        steps: report.steps,
        train_seconds,
        ms_per_step: 1e3 * train_seconds / report.steps.max(1) as f64,
        nll: eval.nll,
        rmse: eval.rmse,
        bayes_nll: floor.map(|f| f.bayes_nll),
        homoscedastic_nll: floor.map(|f| f.homoscedastic_nll),
        noise_rmse: floor.map(|f| f.rmse),
        peak_rss_anon_mib: obs.peak_anon_kib as f64 / 1024.0,
        predict_seconds,
    };
    print_record(&record);
    if let Some(path) = &a.json {
        append_json(path, &record)?;
    }
    if stop_requested() {
        return Err(BenchError::Interrupted(format!(
            "training stopped after {} of {} steps; the record above is of that model",
            report.steps, fit.steps
        )));
    }
    Ok(())
}

/// Accumulated test metrics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FileMetrics {
    /// Mean negative log predictive density.
    pub nll: f64,
    /// Root mean squared error of the predictive mean.
    pub rmse: f64,
    /// Rows predicted.
    pub rows: usize,
}

/// Predicts the rows of `test` (original units) in chunks of `chunk` rows — chunk k with
/// prediction seed `cfg.seed + k` — accumulating NLL and squared error in row order and
/// handing each chunk's predictive to `writer`.
///
/// # Errors
/// Read errors of `test`, prediction errors, write errors.
pub fn predict_file(
    model: &dyn Model,
    st: &Standardizer,
    test: &dyn RowSource,
    chunk: usize,
    cfg: &PredictConfig,
    mut writer: Option<&mut PredictionWriter>,
) -> Result<FileMetrics> {
    let n = test.n();
    let (d, p) = (test.input_dim(), test.output_dim());
    let (mut nll, mut se) = (0.0, 0.0);
    let mut idx = Vec::with_capacity(chunk);
    let mut start = 0;
    let mut k = 0u64;
    while start < n {
        let len = chunk.min(n - start);
        idx.clear();
        idx.extend(start..start + len);
        let mut x = Mat::zeros(len, d);
        let mut y = Mat::zeros(len, p);
        test.gather(&idx, x.as_mut(), y.as_mut())
            .map_err(|e| BenchError::run("reading the test rows", e))?;
        let run = |e| BenchError::run("predicting the test rows", e);
        let xs = st.transform_x(x.as_ref()).map_err(run)?;
        let pc = PredictConfig {
            samples: cfg.samples,
            seed: cfg.seed.wrapping_add(k),
        };
        let pred = model
            .predict(xs.as_ref(), &pc)
            .and_then(|p| p.unstandardize(&st.y_mean, &st.y_std))
            .map_err(run)?;
        let ld = pred.log_density(y.as_ref()).map_err(run)?;
        let mean = pred.mean();
        for (i, l) in ld.iter().enumerate() {
            nll -= l;
            for j in 0..p {
                let e = mean[(i, j)] - y[(i, j)];
                se += e * e;
            }
        }
        if let Some(w) = writer.as_deref_mut() {
            w.write_chunk(&pred, &ld, y.as_ref())?;
        }
        start += len;
        k += 1;
    }
    Ok(FileMetrics {
        nll: nll / n as f64,
        rmse: (se / (n * p) as f64).sqrt(),
        rows: n,
    })
}

/// Per-row predictions as CSV (`mean,variance,log_density,y` for the first output),
/// written to a temporary file and renamed at the end.
pub struct PredictionWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

impl PredictionWriter {
    /// A writer to `path` (through `path.tmp`).
    ///
    /// # Errors
    /// [`BenchError::Output`] when the file cannot be created.
    pub fn create(path: &Path) -> Result<Self> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let f = std::fs::File::create(&tmp).map_err(|e| BenchError::output(path, e))?;
        let mut out = std::io::BufWriter::new(f);
        writeln!(out, "mean,variance,log_density,y").map_err(|e| BenchError::output(path, e))?;
        Ok(PredictionWriter {
            path: path.to_path_buf(),
            tmp,
            out,
        })
    }

    fn write_chunk(
        &mut self,
        pred: &dgp_traits::predictive::Predictive,
        ld: &[f64],
        y: faer::MatRef<'_, f64>,
    ) -> Result<()> {
        let (mean, var) = (pred.mean(), pred.variance());
        for (i, l) in ld.iter().enumerate() {
            writeln!(
                self.out,
                "{},{},{},{}",
                mean[(i, 0)],
                var[(i, 0)],
                l,
                y[(i, 0)]
            )
            .map_err(|e| BenchError::output(&self.path, e))?;
        }
        Ok(())
    }

    /// Flushes, syncs and renames the file into place.
    ///
    /// # Errors
    /// [`BenchError::Output`] on a write failure.
    pub fn finish(self) -> Result<()> {
        let path = self.path.clone();
        let f = self
            .out
            .into_inner()
            .map_err(|e| BenchError::output(&path, e))?;
        f.sync_all().map_err(|e| BenchError::output(&path, e))?;
        std::fs::rename(&self.tmp, &path).map_err(|e| BenchError::output(&path, e))
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn print_record(r: &StreamRecord) {
    println!(
        "{} L={} ({} rows from {}; batch {}, {} steps): test NLL {:.4}, RMSE {:.4}{}{}; train {:.1} s ({:.2} ms/step); predict {:.1} s; peak RssAnon {:.0} MiB",
        r.backend,
        r.layers,
        r.n_train,
        r.rows_from,
        r.batch,
        r.steps,
        r.nll,
        r.rmse,
        r.bayes_nll
            .map(|b| format!(" (Bayes-optimal {b:.4}, gap {:.4})", r.nll - b))
            .unwrap_or_default(),
        r.homoscedastic_nll
            .zip(r.noise_rmse)
            .map(|(h, e)| format!(" (one noise variance: best NLL {h:.4}, RMSE floor {e:.4})"))
            .unwrap_or_default(),
        r.train_seconds,
        r.ms_per_step,
        r.predict_seconds,
        r.peak_rss_anon_mib
    );
}

fn append_json(path: &Path, r: &StreamRecord) -> Result<()> {
    let line = serde_json::to_string(r).map_err(|e| BenchError::output(path, e))?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| BenchError::output(path, e))?;
    writeln!(f, "{line}").map_err(|e| BenchError::output(path, e))
}
