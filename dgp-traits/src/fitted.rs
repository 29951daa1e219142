//! The user-facing shape every backend shares: a configuration → [`Estimator::fit`] → a
//! [`Fitted`] model that standardises internally, predicts in the data's original units,
//! and is saved and loaded through one versioned, checksummed file format.
//!
//! ```text
//!   XxxConfig { .. }  ──fit(&data)──▶  Fitted<XxxModel>  ──predict(x)──▶  Predictive (original units)
//!                                           │  save(path) / Fitted::<XxxModel>::load(path)
//! ```
//!
//! Under the hood [`Estimator::fit_with`] fits a [`Standardizer`] on the training rows
//! (per-column mean and population standard deviation of inputs and targets), builds the
//! backend's model on the standardised rows ([`Estimator::build`]), trains it with
//! [`crate::model::Model::fit`], and keeps the standardizer with the model;
//! [`Fitted::predict`] standardises the test inputs the same way and maps the predictive
//! mixture back (`μ ↦ σ_y μ + m_y`, `v ↦ σ_y² v`, so that log densities in original units
//! are the standardised ones minus `log σ_y`). The lower layer — `Model::new` on data in
//! model units, `Model::fit`, `Model::predict` — stays available.
//!
//! # Model files
//! [`Fitted::save`] writes one JSON document, atomically (a temporary file in the same
//! folder, synced, then renamed):
//! `{"format": "dgp-model", "version": 2, "backend": NAME, "checksum": HEX,
//!   "standardizer": {...}, "predict": {"samples": S, "seed": SEED},
//!   "model": "<the backend's own JSON>"}`. The checksum is the 64-bit FNV-1a hash of the
//! standardizer's JSON, the model's JSON and the prediction settings' JSON (see
//! [`model_checksum`]). [`Fitted::load`] checks, in order: the document parses, the
//! format name, the version ([`MODEL_FILE_VERSION`], or version 1, which has no
//! `predict` field and predicts with [`PredictConfig::default`]; another version is
//! refused, not guessed at), the backend (a file of another backend is refused by name), the checksum
//! (a truncated or edited file is refused), and then the backend's own validated loader
//! ([`Loadable::from_model_json`]). Every refusal is [`Error::ModelFile`] naming the file
//! and what is wrong; none panics.

use std::path::{Path, PathBuf};

use faer::MatRef;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::data::TargetScaling;
use crate::data::{Dataset, StandardizeOptions, Standardizer};
use crate::error::{Error, Result};
use crate::fit::{FitConfig, FitHooks, FitReport};
use crate::likelihoods::LikelihoodFamily;
use crate::model::{Model, PredictConfig};
use crate::predictive::Predictive;
use crate::run_defaults::RunDefaults;

/// The `format` field of a model file.
pub const MODEL_FILE_FORMAT: &str = "dgp-model";

/// The layout version of model files this build writes and reads.
pub const MODEL_FILE_VERSION: u32 = 2;

/// A backend's configuration seen as an estimator: what builds an untrained model on
/// standardised rows, and the common settings (training schedule, sample counts) it holds.
///
/// Every backend configuration's `Default` is the backend's good, fast default — the
/// model `dgp-bench run --backend NAME` trains — and `Config::paper()` (or the backend's
/// named presets) the paper's own setting; `fit` trains what the configuration says.
pub trait Estimator {
    /// The model this configuration builds.
    type Model: Model + 'static;

    /// An untrained model for the standardised training rows `train` (the backend's
    /// constructor: inducing inputs by k-means, layer widths, ...), after choosing the
    /// hyper-parameters the configuration leaves to a search on validation rows held out
    /// of `train` (dspp's β and width), whose candidates train with `fit` and end when
    /// `stop` asks ([`FitHooks::stop_only`]).
    ///
    /// # Errors
    /// The constructor's error (invalid configuration, too few rows, ...);
    /// [`Error::Interrupted`] when `stop` ended a search.
    fn build(&self, train: &Dataset, fit: &FitConfig, stop: &FitHooks<'_>) -> Result<Self::Model>;

    /// The common settings this configuration holds: inducing points, sample counts,
    /// learning rate and the training schedule ([`RunDefaults`]).
    fn defaults(&self) -> RunDefaults;

    /// The family of the configuration's likelihood: a classification likelihood keeps
    /// the targets (class labels) as they are ([`TargetScaling::Keep`]).
    fn likelihood_family(&self) -> LikelihoodFamily;

    /// How [`Estimator::fit`] standardises the training rows: inputs always; targets for
    /// a Gaussian likelihood, kept as class labels otherwise.
    fn standardize_options(&self) -> StandardizeOptions {
        match self.likelihood_family() {
            LikelihoodFamily::Gaussian => StandardizeOptions::default(),
            _ => StandardizeOptions::default().keep_targets(),
        }
    }

    /// The training settings of a fit on `n_train` standardised rows
    /// ([`RunDefaults::fit_config`] of [`Estimator::defaults`]).
    fn fit_config(&self, n_train: usize) -> FitConfig {
        self.defaults().fit_config(n_train)
    }

    /// The default settings of [`Fitted::predict`]: the configuration's predictive
    /// samples, seeded by [`crate::fit::Training::predict_seed`].
    fn predict_config(&self) -> PredictConfig {
        let d = self.defaults();
        PredictConfig {
            samples: d.predict_samples,
            seed: d.training.predict_seed(),
        }
    }

    /// Standardises `data`, builds and trains a model with the configuration's own
    /// settings and no hooks; see the module docs.
    ///
    /// # Errors
    /// As [`Estimator::fit_with`].
    fn fit(&self, data: &Dataset) -> Result<Fitted<Self::Model>> {
        self.fit_with(data, &mut FitHooks::none())
    }

    /// [`Estimator::fit`] with the caller's hooks ([`FitHooks`]: progress, run control,
    /// checkpoints).
    ///
    /// # Errors
    /// A target column with zero variance cannot be standardised to a usable scale
    /// ([`Standardizer::check_target_variance_representable`]); the build's and the fit's
    /// errors.
    fn fit_with(&self, data: &Dataset, hooks: &mut FitHooks<'_>) -> Result<Fitted<Self::Model>> {
        let standardizer = Standardizer::fit_with(data, self.standardize_options())?;
        standardizer.check_target_variance_representable()?;
        let train = standardizer.transform(data)?;
        let cfg = self.fit_config(train.n());
        let mut model = self.build(&train, &cfg, &hooks.stop_only())?;
        let report = model.fit(&train, &cfg, hooks)?;
        Ok(Fitted {
            model,
            standardizer,
            report,
            predict: self.predict_config(),
        })
    }
}

/// A model type that can be restored from the JSON its [`Model::to_json`] writes.
pub trait Loadable: Model + Sized {
    /// The backend names its files may carry ([`Model::backend`] of its instances: one
    /// name, or one per family when the model type serves several backends).
    const BACKENDS: &'static [&'static str];

    /// The model from its own JSON, validated (shapes, ranges, parameter counts).
    ///
    /// # Errors
    /// Malformed or inconsistent JSON.
    fn from_model_json(json: &str) -> Result<Self>;
}

/// A trained model together with the standardisation of its training rows; predicts in
/// the data's original units. See the module docs.
#[derive(Debug)]
pub struct Fitted<M> {
    model: M,
    standardizer: Standardizer,
    report: FitReport,
    /// The settings [`Fitted::predict`] uses (the configuration's, saved with the model).
    predict: PredictConfig,
}

/// The on-disk document of [`Fitted::save`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    format: String,
    version: u32,
    backend: String,
    checksum: String,
    standardizer: serde_json::Value,
    /// The default prediction settings (layout version 2; absent in version 1, which
    /// reads with [`PredictConfig::default`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    predict: Option<PredictConfig>,
    model: String,
}

/// The 64-bit FNV-1a hash, as 16 hex digits, of `standardizer_json`, a zero byte and
/// `model_json` (layout version 1), followed in version 2 by a zero byte and
/// `predict_json`: the `checksum` of a model file.
pub fn model_checksum(
    standardizer_json: &str,
    model_json: &str,
    predict_json: Option<&str>,
) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let tail = predict_json.map(|p| std::iter::once(0).chain(p.bytes()));
    let bytes = standardizer_json
        .bytes()
        .chain(std::iter::once(0))
        .chain(model_json.bytes())
        .chain(tail.into_iter().flatten());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl<M: Model> Fitted<M> {
    /// A fitted model from its parts (a model trained on rows standardised by
    /// `standardizer`, predicting with `predict` by default).
    pub fn from_parts(
        model: M,
        standardizer: Standardizer,
        report: FitReport,
        predict: PredictConfig,
    ) -> Self {
        Fitted {
            model,
            standardizer,
            report,
            predict,
        }
    }

    /// The settings [`Fitted::predict`] uses: the configuration's predictive samples and
    /// seed ([`Estimator::predict_config`]).
    pub fn predict_config(&self) -> &PredictConfig {
        &self.predict
    }

    /// The trained model (model units).
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The standardisation of the training rows.
    pub fn standardizer(&self) -> &Standardizer {
        &self.standardizer
    }

    /// What the fit did (empty for a loaded model: reports are not saved).
    pub fn report(&self) -> &FitReport {
        &self.report
    }

    /// The predictive distribution at `x` (N×D, original units) in the targets' original
    /// units, with the fitted configuration's prediction settings
    /// ([`Fitted::predict_config`]).
    ///
    /// # Errors
    /// As [`Fitted::predict_with`].
    pub fn predict(&self, x: MatRef<'_, f64>) -> Result<Predictive> {
        self.predict_with(x, &self.predict)
    }

    /// [`Fitted::predict`] with explicit prediction settings.
    ///
    /// # Errors
    /// [`Error::Shape`] for a wrong number of columns; [`Error::NonFinite`] for NaN/∞
    /// inputs; the model's prediction errors.
    pub fn predict_with(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        let xs = self.standardizer.transform_x(x)?;
        let p = self.model.predict(xs.as_ref(), cfg)?;
        p.unstandardize(&self.standardizer.y_mean, &self.standardizer.y_std)
    }

    /// The model file's text (see the module docs).
    ///
    /// # Errors
    /// The model's own serialisation error.
    pub fn to_file_json(&self) -> Result<String> {
        let model = self.model.to_json()?;
        let standardizer =
            serde_json::to_value(&self.standardizer).map_err(|e| Error::Serde(e.to_string()))?;
        let predict =
            serde_json::to_value(&self.predict).map_err(|e| Error::Serde(e.to_string()))?;
        let checksum = model_checksum(
            &standardizer.to_string(),
            &model,
            Some(&predict.to_string()),
        );
        let doc = ModelFile {
            format: MODEL_FILE_FORMAT.into(),
            version: MODEL_FILE_VERSION,
            backend: self.model.backend().into(),
            checksum,
            standardizer,
            predict: Some(self.predict.clone()),
            model,
        };
        serde_json::to_string(&doc).map_err(|e| Error::Serde(e.to_string()))
    }

    /// Writes the model file to `path` atomically (see the module docs).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written; the model's serialisation error.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text = self.to_file_json()?;
        write_atomic(path, text.as_bytes())
    }
}

impl<M: Loadable> Fitted<M> {
    /// Reads a model file written by [`Fitted::save`] (see the module docs for what is
    /// checked).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::ModelFile`] naming the file and
    /// what is wrong with it.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_file_json(&text).map_err(|e| match e {
            Error::ModelFile { message, .. } => Error::ModelFile {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        })
    }

    /// [`Fitted::load`] from the file's text (errors name no file).
    ///
    /// # Errors
    /// [`Error::ModelFile`] as [`Fitted::load`].
    pub fn from_file_json(text: &str) -> Result<Self> {
        let bad = |message: String| Error::ModelFile {
            path: PathBuf::new(),
            message,
        };
        let doc: ModelFile = serde_json::from_str(text)
            .map_err(|e| bad(format!("not a model file, or truncated: {e}")))?;
        if doc.format != MODEL_FILE_FORMAT {
            return Err(bad(format!(
                "format is '{}', expected '{MODEL_FILE_FORMAT}'",
                doc.format
            )));
        }
        let predict = match (doc.version, doc.predict) {
            (1, None) => None,
            (MODEL_FILE_VERSION, Some(p)) => Some(p),
            (1 | MODEL_FILE_VERSION, _) => {
                return Err(bad(format!(
                    "layout version {} with{} a \"predict\" field",
                    doc.version,
                    if doc.version == 1 { "" } else { "out" }
                )));
            }
            (v, _) => {
                return Err(bad(format!(
                    "layout version {v} (this build reads versions 1 and {MODEL_FILE_VERSION})"
                )));
            }
        };
        if !M::BACKENDS.contains(&doc.backend.as_str()) {
            return Err(bad(format!(
                "the file holds a '{}' model, not a {} model",
                doc.backend,
                M::BACKENDS.join(" / ")
            )));
        }
        let predict_json = predict
            .as_ref()
            .map(|p| serde_json::to_value(p).map(|v| v.to_string()))
            .transpose()
            .map_err(|e| bad(format!("predict: {e}")))?;
        let sum = model_checksum(
            &doc.standardizer.to_string(),
            &doc.model,
            predict_json.as_deref(),
        );
        if sum != doc.checksum {
            return Err(bad(format!(
                "checksum {} does not match the contents ({sum}): the file was edited or damaged",
                doc.checksum
            )));
        }
        let standardizer: Standardizer = serde_json::from_value(doc.standardizer)
            .map_err(|e| bad(format!("standardizer: {e}")))?;
        check_standardizer(&standardizer).map_err(bad)?;
        let model = M::from_model_json(&doc.model).map_err(|e| bad(format!("model: {e}")))?;
        if model.backend() != doc.backend {
            return Err(bad(format!(
                "the file says backend '{}' but holds a '{}' model",
                doc.backend,
                model.backend()
            )));
        }
        let predict = predict.unwrap_or_default();
        if predict.samples == 0 {
            return Err(bad("predict: samples must be at least 1".into()));
        }
        Ok(Fitted {
            model,
            standardizer,
            report: FitReport::default(),
            predict,
        })
    }
}

/// The standardizer's own consistency (lengths agree, scales finite and positive).
fn check_standardizer(s: &Standardizer) -> std::result::Result<(), String> {
    let k = s.kept_features.len();
    if s.x_mean.len() != k || s.x_std.len() != k || s.y_mean.len() != s.y_std.len() {
        return Err("standardizer: inconsistent lengths".into());
    }
    if s.kept_features.iter().any(|&j| j >= s.input_dim) || s.y_mean.is_empty() {
        return Err("standardizer: feature index out of range or no targets".into());
    }
    let finite = |v: &[f64]| v.iter().all(|x| x.is_finite());
    let positive = |v: &[f64]| v.iter().all(|x| x.is_finite() && *x > 0.0);
    if !(finite(&s.x_mean) && finite(&s.y_mean) && positive(&s.x_std) && positive(&s.y_std)) {
        return Err("standardizer: a mean is not finite or a scale is not finite and > 0".into());
    }
    Ok(())
}

/// Writes `bytes` to `path` through a temporary file in the same folder, synced, then
/// renamed over `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_io(path, bytes).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `bytes` to `path` atomically: to `<path>.tmp` in the same folder, synced to
/// disk, renamed over `path`, and the folder synced (where folders can be opened), so
/// that at every moment — a crash or `kill -9` included — `path` holds either its old
/// contents or the new ones, never a part.
pub(crate) fn write_atomic_io(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    // The rename itself is durable once the folder is synced; a platform that cannot
    // open a folder (Windows) keeps the rename's own guarantee.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}
