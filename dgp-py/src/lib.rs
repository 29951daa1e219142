//! `dgp._dgp`: the compiled half of the Python package `dgp` (the scikit-learn estimators
//! live in `python/dgp/`). This file converts between Python objects and the adapter
//! [`engine`], which alone calls the library.
//!
//! * Arrays come in as read-only float64 NumPy arrays, C- or Fortran-contiguous, and are
//!   read in place (a [`faer::MatRef`] over the NumPy buffer): the only copy of the
//!   training inputs is the standardised one the library makes.
//! * The GIL is released while the library standardises, trains and predicts; the fit's
//!   hooks (`PyHooks`) take it back briefly, at most every `interval` seconds, to run Python's
//!   signal handlers (so Ctrl-C stops a fit after the current step) and the caller's
//!   progress callback.
//! * Every library error becomes a Python exception (`to_py`); bad input is validated
//!   before it reaches code that could panic.

#![allow(clippy::too_many_arguments)]

pub mod engine;

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use dgp_core::{CheckpointError, Error};
use dgp_traits::fit::{Checkpoints, Progress, RunControl};
use dgp_traits::model::PredictConfig;
use dgp_traits::predictive::Predictive;
use faer::{Mat, MatRef};
use numpy::ndarray::{Array1, Array2, Array3};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArray3, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{
    PyBaseException, PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyRuntimeError,
    PyValueError,
};
use pyo3::prelude::*;

use dgp_traits::request::Task;
use engine::{CheckpointOptions, FitOptions, FitRequest};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A library error as the Python exception a caller expects: bad input of any kind (a
/// checkpoint of another run included) is a `ValueError`, a file that cannot be read or a
/// checkpoint directory another run holds an `OSError`, a numerical failure of training
/// or prediction a `RuntimeError`.
fn to_py(e: Error) -> PyErr {
    let msg = match &e {
        Error::Config(c) => c.to_string(),
        other => other.to_string(),
    };
    match e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(msg)
        }
        Error::Io { .. } | Error::Checkpoint(CheckpointError::Locked { .. }) => {
            PyOSError::new_err(msg)
        }
        // A saved state of another run, a damaged one, one that would be overwritten.
        Error::Checkpoint(_) => PyValueError::new_err(msg),
        Error::Config(_)
        | Error::Shape { .. }
        | Error::NonFinite { .. }
        | Error::Empty(_)
        | Error::Parse { .. }
        | Error::Serde(_)
        | Error::ModelFile { .. }
        | Error::Unsupported(_)
        | Error::Label(_) => PyValueError::new_err(msg),
        Error::Interrupted(_) => PyKeyboardInterrupt::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// A view of a float64 NumPy matrix without copying (C- or Fortran-contiguous).
fn view<'a>(a: &'a PyReadonlyArray2<'_, f64>, what: &str) -> PyResult<MatRef<'a, f64>> {
    let (n, d) = (a.shape()[0], a.shape()[1]);
    let slice = a
        .as_slice()
        .map_err(|_| PyValueError::new_err(format!("{what} must be a contiguous float64 array")))?;
    if a.is_c_contiguous() {
        Ok(MatRef::from_row_major_slice(slice, n, d))
    } else {
        Ok(MatRef::from_column_major_slice(slice, n, d))
    }
}

fn json_arg<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

fn to_json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

fn mat2<'py>(py: Python<'py>, m: MatRef<'_, f64>) -> Bound<'py, PyArray2<f64>> {
    Array2::from_shape_fn((m.nrows(), m.ncols()), |(i, j)| m[(i, j)]).into_pyarray(py)
}

/// One N×S matrix per output as an N×S×P array.
fn stack<'py>(py: Python<'py>, ms: &[Mat<f64>]) -> Bound<'py, PyArray3<f64>> {
    let (n, s) = (ms[0].nrows(), ms[0].ncols());
    Array3::from_shape_fn((n, s, ms.len()), |(i, c, p)| ms[p][(i, c)]).into_pyarray(py)
}

/// The hooks of a fit started from Python (see the module docs).
struct PyHooks {
    callback: Option<Py<PyAny>>,
    interval: Duration,
    last: Cell<Instant>,
    stop: Cell<bool>,
    /// The exception to raise once the library returns (KeyboardInterrupt, or one raised
    /// by the callback).
    error: RefCell<Option<PyErr>>,
}

impl PyHooks {
    fn new(callback: Option<Py<PyAny>>, interval: f64) -> Self {
        PyHooks {
            callback,
            interval: Duration::try_from_secs_f64(interval.max(0.0)).unwrap_or(Duration::MAX),
            last: Cell::new(Instant::now()),
            stop: Cell::new(false),
            error: RefCell::new(None),
        }
    }

    /// Takes the GIL (when `force`, or `interval` has passed since the last time) to run
    /// the signal handlers and the callback; an exception from either stops the run.
    fn poll(&self, step: Option<(usize, usize, f64)>, force: bool) {
        if self.stop.get() {
            return;
        }
        let now = Instant::now();
        if !force && now.duration_since(self.last.get()) < self.interval {
            return;
        }
        self.last.set(now);
        Python::attach(|py| {
            let mut result = py.check_signals();
            if result.is_ok()
                && let (Some(cb), Some((s, total, objective))) = (&self.callback, step)
            {
                result = cb.call1(py, (s, total, objective)).map(|_| ());
            }
            if let Err(e) = result {
                self.stop.set(true);
                self.error.borrow_mut().get_or_insert(e);
            }
        });
    }
}

impl Progress for PyHooks {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        self.poll(Some((step + 1, total, objective)), step + 1 >= total);
    }
}

impl RunControl for PyHooks {
    fn should_stop(&self) -> bool {
        self.poll(None, false);
        self.stop.get()
    }
}

/// Checkpoints are kept by the library's guard in front of these hooks
/// (`engine::CheckpointOptions`).
impl Checkpoints for PyHooks {}

/// A trained or loaded model (see `engine::FittedModel`).
#[pyclass(frozen, module = "dgp._dgp")]
struct Model {
    inner: engine::FittedModel,
}

#[pymethods]
impl Model {
    /// The predictive distribution at `x` (N×D float64, original units), with `samples`
    /// mixture components and prediction seed `seed` (`classify`: class probabilities of
    /// a classifier); the GIL is released meanwhile.
    fn predict(
        &self,
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        samples: usize,
        seed: u64,
        classify: bool,
    ) -> PyResult<Prediction> {
        if samples == 0 {
            return Err(PyValueError::new_err("samples must be at least 1"));
        }
        if x.shape()[1] != self.inner.input_dim() {
            return Err(PyValueError::new_err(format!(
                "X has {} features, but the model was fitted on {} features",
                x.shape()[1],
                self.inner.input_dim()
            )));
        }
        let xv = view(&x, "X")?;
        let cfg = PredictConfig { samples, seed };
        let inner = &self.inner;
        let p = py
            .detach(|| inner.predict(xv, &cfg, classify))
            .map_err(to_py)?;
        Ok(Prediction { p })
    }

    /// The model file's text (versioned, checksummed JSON) with `metadata` (a JSON text:
    /// the estimator's parameters and labels) inside it, covered by the checksum.
    #[pyo3(signature = (metadata=None))]
    fn to_text(&self, py: Python<'_>, metadata: Option<&str>) -> PyResult<String> {
        let meta: serde_json::Value = match metadata {
            Some(m) => json_arg(m, "metadata")?,
            None => serde_json::Value::Null,
        };
        let inner = &self.inner;
        py.detach(|| inner.to_text(&meta)).map_err(to_py)
    }

    /// The metadata saved in the model file, as a JSON text (`None` when it holds none).
    #[getter]
    fn metadata(&self) -> PyResult<Option<String>> {
        match self.inner.metadata() {
            serde_json::Value::Null => Ok(None),
            v => to_json(v).map(Some),
        }
    }

    /// The backend's name.
    #[getter]
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    /// The model's own description (architecture, chosen hyper-parameters).
    #[getter]
    fn description(&self) -> String {
        self.inner.describe()
    }

    /// Input columns.
    #[getter]
    fn n_features(&self) -> usize {
        self.inner.input_dim()
    }

    /// Target columns.
    #[getter]
    fn n_outputs(&self) -> usize {
        self.inner.output_dim()
    }

    /// What the fit did, as JSON (steps, final objective, seconds, history, held-out
    /// summary); an empty report for a loaded model.
    fn report_json(&self) -> PyResult<String> {
        to_json(self.inner.report())
    }

    /// Whether the fit stopped before its last step because it was asked to.
    #[getter]
    fn stopped_early(&self) -> bool {
        self.inner.stopped_early()
    }

    /// The Gaussian noise variance of the first target in original units, if any.
    #[getter]
    fn noise_variance(&self) -> Option<f64> {
        self.inner.noise_variance()
    }
}

/// A predictive distribution: per point a Gaussian mixture with weights shared by all
/// points (classification: with class probabilities).
#[pyclass(frozen, module = "dgp._dgp")]
struct Prediction {
    p: Predictive,
}

#[pymethods]
impl Prediction {
    /// Mixture weights, shape (S,).
    fn weights<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, self.p.weights())
    }

    /// Component means, shape (N, S, P).
    fn means<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray3<f64>> {
        stack(py, self.p.means())
    }

    /// Component variances (noise included), shape (N, S, P).
    fn variances<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray3<f64>> {
        stack(py, self.p.variances())
    }

    /// Mixture mean, shape (N, P).
    fn mean<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        mat2(py, self.p.mean().as_ref())
    }

    /// Mixture variance (law of total variance), shape (N, P).
    fn variance<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        mat2(py, self.p.variance().as_ref())
    }

    /// Quantiles at levels `q` (each in (0, 1)), shape (len(q), N, P).
    fn quantiles<'py>(&self, py: Python<'py>, q: Vec<f64>) -> PyResult<Bound<'py, PyArray3<f64>>> {
        let p = &self.p;
        let qs = py.detach(|| engine::quantiles(p, &q)).map_err(to_py)?;
        let (n, np) = (p.n_points(), p.n_outputs());
        Ok(Array3::from_shape_fn((q.len(), n, np), |(k, i, o)| qs[k][(i, o)]).into_pyarray(py))
    }

    /// Class probabilities, shape (N, K); `None` for a regression predictive.
    fn class_probs<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray2<f64>>> {
        self.p.class_probs().map(|c| mat2(py, c))
    }

    /// Index of the most probable class of each point (ties to the lowest), shape (N,).
    fn predicted_classes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let c = engine::predicted_classes(&self.p).map_err(to_py)?;
        Ok(Array1::from_iter(c.into_iter().map(|v| v as i64)).into_pyarray(py))
    }

    /// Mean log predictive density of `y` (N×P float64, original units).
    fn mean_log_density(&self, y: PyReadonlyArray2<'_, f64>) -> PyResult<f64> {
        let yv = view(&y, "y")?;
        engine::mean_log_density(&self.p, yv).map_err(to_py)
    }

    /// Mean log probability of the class indices `labels`.
    fn mean_log_class_prob(&self, labels: Vec<usize>) -> PyResult<f64> {
        engine::mean_log_class_prob(&self.p, &labels).map_err(to_py)
    }

    /// Points N.
    #[getter]
    fn n_points(&self) -> usize {
        self.p.n_points()
    }

    /// Mixture components S.
    #[getter]
    fn n_components(&self) -> usize {
        self.p.n_components()
    }
}

fn task_of(task: &str, num_classes: usize, likelihood: Option<String>) -> PyResult<Task> {
    match task {
        "regression" => Ok(Task::Regression),
        "classification" => Ok(Task::Classification {
            num_classes,
            likelihood,
        }),
        other => Err(PyValueError::new_err(format!(
            "task must be 'regression' or 'classification', got '{other}'"
        ))),
    }
}

fn request(
    backend: String,
    layers: Option<usize>,
    task: Task,
    options: &str,
    settings: &str,
) -> PyResult<FitRequest> {
    Ok(FitRequest {
        backend,
        layers,
        task,
        options: json_arg::<FitOptions>(options, "options")?,
        settings: json_arg(settings, "settings")?,
    })
}

/// The resolved configuration as JSON for the Python side.
fn resolved_json(r: &engine::Resolved) -> PyResult<String> {
    to_json(&r.to_json())
}

type FitOut = (Model, String, Option<Py<PyBaseException>>);

/// What a fit returns to Python: the model, the resolved configuration, and the exception
/// the hooks caught (to raise after the model is kept); a library error, or an
/// interrupted build, is raised at once.
fn finish(
    py: Python<'_>,
    out: dgp_core::Result<(engine::FittedModel, engine::Resolved)>,
    hooks: PyHooks,
) -> PyResult<FitOut> {
    let pending = hooks.error.into_inner();
    match out {
        Ok((inner, r)) => Ok((
            Model { inner },
            resolved_json(&r)?,
            pending.map(|e| e.into_value(py)),
        )),
        Err(e) => Err(pending.unwrap_or_else(|| to_py(e))),
    }
}

fn checkpoint_options(dir: Option<PathBuf>, every: usize) -> Option<CheckpointOptions> {
    dir.map(|dir| CheckpointOptions { dir, every })
}

/// Fits a backend on arrays: `x` (N×D), `y` (N×P; classification: one column of class
/// indices), with `options` (the shared options) and `settings` (the backend's own) as
/// JSON objects. Returns `(model, resolved configuration JSON, pending exception)`.
#[pyfunction]
#[pyo3(signature = (backend, layers, task, num_classes, likelihood, options, settings, x, y, callback=None, interval=0.1, checkpoint_dir=None, checkpoint_every=0))]
fn fit(
    py: Python<'_>,
    backend: String,
    layers: Option<usize>,
    task: &str,
    num_classes: usize,
    likelihood: Option<String>,
    options: &str,
    settings: &str,
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray2<'_, f64>,
    callback: Option<Py<PyAny>>,
    interval: f64,
    checkpoint_dir: Option<PathBuf>,
    checkpoint_every: usize,
) -> PyResult<FitOut> {
    let task = task_of(task, num_classes, likelihood)?;
    let req = request(backend, layers, task, options, settings)?;
    let (xv, yv) = (view(&x, "X")?, view(&y, "y")?);
    let mut hooks = PyHooks::new(callback, interval);
    let ckpt = checkpoint_options(checkpoint_dir, checkpoint_every);
    let out = {
        let h = &mut hooks;
        py.detach(|| engine::fit(&req, xv, yv, ckpt.as_ref(), h))
    };
    finish(py, out, hooks)
}

/// Fits a backend on the rows of a row store at `path`, streamed. Returns `(model,
/// resolved configuration JSON, pending exception, number of classes)` (0 classes for a
/// regression).
#[pyfunction]
#[pyo3(signature = (backend, layers, task, likelihood, options, settings, path, init_rows=10_000, callback=None, interval=0.1, checkpoint_dir=None, checkpoint_every=0))]
fn fit_rowstore(
    py: Python<'_>,
    backend: String,
    layers: Option<usize>,
    task: &str,
    likelihood: Option<String>,
    options: &str,
    settings: &str,
    path: PathBuf,
    init_rows: usize,
    callback: Option<Py<PyAny>>,
    interval: f64,
    checkpoint_dir: Option<PathBuf>,
    checkpoint_every: usize,
) -> PyResult<(Model, String, Option<Py<PyBaseException>>, usize)> {
    let task = task_of(task, 0, likelihood)?;
    let req = request(backend, layers, task, options, settings)?;
    let mut hooks = PyHooks::new(callback, interval);
    let ckpt = checkpoint_options(checkpoint_dir, checkpoint_every);
    let out = {
        let h = &mut hooks;
        py.detach(|| engine::fit_rowstore(&req, &path, init_rows, ckpt.as_ref(), h))
    };
    let (k, out) = match out {
        Ok((m, r, Task::Classification { num_classes, .. })) => (num_classes, Ok((m, r))),
        Ok((m, r, Task::Regression)) => (0, Ok((m, r))),
        Err(e) => (0, Err(e)),
    };
    let (m, r, e) = finish(py, out, hooks)?;
    Ok((m, r, e, k))
}

/// The configuration a fit of `n` rows would train with (resolved configuration JSON),
/// checked by the backend, without data.
#[pyfunction]
fn resolve(
    backend: String,
    layers: Option<usize>,
    task: &str,
    num_classes: usize,
    likelihood: Option<String>,
    options: &str,
    settings: &str,
    n: usize,
) -> PyResult<String> {
    let task = task_of(task, num_classes, likelihood)?;
    let req = request(backend, layers, task, options, settings)?;
    resolved_json(&engine::resolve(&req, n).map_err(to_py)?)
}

/// Reads a model file's text; with `expect`, a file of another backend is refused.
#[pyfunction]
#[pyo3(signature = (text, expect=None))]
fn load_text(py: Python<'_>, text: &str, expect: Option<&str>) -> PyResult<Model> {
    let inner = py
        .detach(|| engine::load_text(text, expect))
        .map_err(to_py)?;
    Ok(Model { inner })
}

/// The registered backends' names.
#[pyfunction]
fn backend_names() -> Vec<&'static str> {
    engine::backend_names()
}

/// A backend's description, capabilities, settings and defaults, as JSON.
#[pyfunction]
fn backend_info(name: &str) -> PyResult<String> {
    to_json(&engine::backend_info(name).map_err(to_py)?)
}

/// Streams columns of a Parquet file into a row store; returns the rows written.
#[pyfunction]
fn parquet_to_rowstore(
    py: Python<'_>,
    path: PathBuf,
    features: Vec<String>,
    targets: Vec<String>,
    dest: PathBuf,
) -> PyResult<u64> {
    py.detach(|| engine::parquet_to_rowstore(&path, &features, &targets, &dest))
        .map_err(to_py)
}

type XY<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

/// The synthetic regression problem: `(X, y)` of `n` rows, or, with `path`, a row store
/// written there (returns `None`).
#[pyfunction]
#[pyo3(signature = (n, seed=0, path=None))]
fn synth<'py>(
    py: Python<'py>,
    n: usize,
    seed: u64,
    path: Option<PathBuf>,
) -> PyResult<Option<XY<'py>>> {
    let d = py
        .detach(|| engine::synth(n, seed, path.as_deref()))
        .map_err(to_py)?;
    Ok(d.map(|d| (mat2(py, d.x()), mat2(py, d.y()))))
}

/// The compiled module.
#[pymodule]
fn _dgp(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Model>()?;
    m.add_class::<Prediction>()?;
    m.add_function(wrap_pyfunction!(fit, m)?)?;
    m.add_function(wrap_pyfunction!(fit_rowstore, m)?)?;
    m.add_function(wrap_pyfunction!(load_text, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(backend_names, m)?)?;
    m.add_function(wrap_pyfunction!(backend_info, m)?)?;
    m.add_function(wrap_pyfunction!(parquet_to_rowstore, m)?)?;
    m.add_function(wrap_pyfunction!(synth, m)?)?;
    m.add("PREDICT_SEED_OFFSET", engine::PREDICT_SEED_OFFSET)?;
    Ok(())
}
