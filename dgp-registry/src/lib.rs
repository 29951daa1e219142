//! # dgp-registry
//!
//! The ONE list of the workspace's inference backends, for harnesses that choose a backend
//! at run time (the benchmark, the Python package, scripts): [`BACKENDS`], [`find`] by
//! name, and [`load`] of any backend's model file by the model name it carries. A fit by
//! name is [`dgp_traits::request::resolve`] + [`dgp_traits::request::fit`] on the backend
//! [`find`] returns. Adding a backend is one entry here.
//!
//! ```
//! use dgp_traits::request::{FitRequest, fit, resolve};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let data = dgp_traits::testing::toy_regression(40, 2, 1.0, 1);
//! let svi = dgp_registry::find("svi")?;
//! let mut request = FitRequest::default();
//! request.options.steps = Some(50); // a short fit for the example
//! let fitted = fit(svi, &resolve(svi, &request, data.n())?, &data, &mut Default::default())?;
//! let text = fitted.to_file_json()?;
//! let same = dgp_registry::load(&text)?;
//! assert_eq!(same.predict(data.x())?, fitted.predict(data.x())?);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

use dgp_core::{Error, Result};
use dgp_traits::backend::Backend;
use dgp_traits::fitted::Fitted;
use dgp_traits::model::Model;

/// Every registered backend, in the order reports list them.
pub static BACKENDS: &[&dyn Backend] = &[
    &dgp_svi::SVI_BACKEND,
    &dgp_nested::NESTED_BACKEND,
    &dgp_dspp::DSPP_BACKEND,
    &dgp_dspp::PPGPR_BACKEND,
    &dgp_structured::STAR_BACKEND,
    &dgp_structured::MF_BACKEND,
    &dgp_structured::FC_BACKEND,
    &dgp_hmc::DGPS_BACKEND,
    &dgp_hmc::SGHMC_BACKEND,
];

/// The backend a harness uses when none is named.
pub const DEFAULT_BACKEND: &str = "svi";

/// The names of the registered backends, in [`BACKENDS`] order.
pub fn names() -> Vec<&'static str> {
    BACKENDS.iter().map(|b| b.name()).collect()
}

/// The backend called `name`.
///
/// # Errors
/// [`Error::Config`] (field `backend`) naming the registered backends.
pub fn find(name: &str) -> Result<&'static dyn Backend> {
    BACKENDS
        .iter()
        .copied()
        .find(|b| b.name() == name)
        .ok_or_else(|| {
            Error::config(
                "backend",
                format!(
                    "unknown backend '{name}' (registered: {})",
                    names().join(", ")
                ),
            )
        })
}

/// A model file of any registered backend ([`Fitted::from_file_json`]), read by the
/// backend whose models carry the file's model name ([`Backend::model_names`]).
///
/// # Errors
/// [`Error::ModelFile`] for a text that is not a model file or names no registered
/// model; then as [`Backend::load_fitted`].
pub fn load(text: &str) -> Result<Fitted<Box<dyn Model>>> {
    let bad = |message: String| Error::ModelFile {
        path: std::path::PathBuf::new(),
        message,
    };
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| bad(format!("not a model file, or truncated: {e}")))?;
    let name = doc
        .get("backend")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| bad("no \"backend\" field".into()))?;
    let b = BACKENDS
        .iter()
        .find(|b| b.model_names().contains(&name))
        .ok_or_else(|| {
            bad(format!(
                "the file holds a '{name}' model, which no registered backend reads"
            ))
        })?;
    b.load_fitted(text)
}

/// [`load`] from a file.
///
/// # Errors
/// [`Error::Io`] when the file cannot be read; [`Error::ModelFile`] naming the file, as
/// [`load`].
pub fn load_path(path: impl AsRef<std::path::Path>) -> Result<Fitted<Box<dyn Model>>> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    load(&text).map_err(|e| match e {
        Error::ModelFile { message, .. } => Error::ModelFile {
            path: path.to_path_buf(),
            message,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::backend::DEFAULT_PRESET;
    use dgp_traits::request::{FitRequest, fit, resolve};

    #[test]
    fn names_are_unique_findable_and_every_backend_has_a_default_preset() {
        for (i, b) in BACKENDS.iter().enumerate() {
            assert!(BACKENDS[i + 1..].iter().all(|c| c.name() != b.name()));
            assert_eq!(find(b.name()).unwrap().name(), b.name());
            assert_eq!(b.presets()[0].name, DEFAULT_PRESET, "{}", b.name());
            assert!(b.defaults(DEFAULT_PRESET).is_ok(), "{}", b.name());
            assert!(!b.model_names().is_empty(), "{}", b.name());
        }
        assert!(find(DEFAULT_BACKEND).is_ok());
        let e = find("nope").unwrap_err().to_string();
        assert!(e.contains("svi") && e.contains("sghmc"), "{e}");
    }

    /// Every backend's model file, with the caller's metadata, reads back through the
    /// registry to the same predictions and metadata (an edited metadata is refused by
    /// the checksum); a file naming no registered model is refused by name.
    #[test]
    fn every_backends_model_file_loads_by_its_model_name() {
        let data = dgp_traits::testing::toy_regression(30, 2, 1.0, 2);
        for b in BACKENDS.iter() {
            let mut req = FitRequest::default();
            req.options.steps = Some(3);
            req.options.num_inducing = Some(4);
            req.options.tune = Some(false);
            req.options.early_stopping = Some(None);
            let r = resolve(*b, &req, data.n()).unwrap();
            let fitted = fit(*b, &r, &data, &mut Default::default())
                .unwrap_or_else(|e| panic!("{}: {e}", b.name()));
            let mut fitted = fitted;
            let meta = serde_json::json!({"classes": ["a", "b"], "note": b.name()});
            fitted.set_metadata(meta.clone());
            let text = fitted.to_file_json().unwrap();
            let back = load(&text).unwrap();
            assert_eq!(
                back.predict(data.x()).unwrap(),
                fitted.predict(data.x()).unwrap(),
                "{}",
                b.name()
            );
            assert_eq!(back.metadata(), &meta, "{}", b.name());
            // The metadata is covered by the checksum: an edit is refused.
            let edited = text.replacen("\"note\"", "\"nota\"", 1);
            assert_ne!(edited, text);
            let e = load(&edited).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains("checksum"), "{}: {e}", b.name());
        }
        match load("{\"backend\":\"nope\"}") {
            Err(e) => assert!(e.to_string().contains("'nope'"), "{e}"),
            Ok(_) => panic!("a file of no registered model loaded"),
        }
    }
}
