//! A model's JSON (configuration and parameters; the backend's part of a model file,
//! [`crate::fitted`]) written with serde, and read back with its whole state validated
//! against its configuration, so that an edited model file is an error at load rather
//! than a panic (or silently different numbers) at prediction.
//!
//! [`from_json_checked`] is what every backend's `from_json` calls. After the
//! configuration's own validation it **rebuilds** a fresh model from the loaded
//! configuration on a small synthetic data set of the loaded dimensions
//! ([`synthetic_data`]) and compares the two states ([`compare_states`]): every integer
//! (parameter indices, counts, widths, numbers of sites), string and flag must be equal,
//! every object must have the same fields and every array the same length; the parameter
//! store must have the same blocks (names, roles, shapes) with finite values of magnitude
//! at most [`MAX_UNCONSTRAINED`]. Only parameter values and other floating-point numbers
//! (which must be finite) may differ, and fields the backend names as data-dependent are
//! skipped. So the configuration alone fixes every index and shape the model will use.

use dgp_core::rng::{seeded, standard_normal};
use dgp_core::{Error, Result};
use dgp_data::Dataset;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Largest magnitude of an unconstrained parameter value a model file may hold (beyond
/// it, `exp`/softplus transforms overflow and predictions would not be finite).
pub const MAX_UNCONSTRAINED: f64 = 1e6;

/// Largest number of entries (rows × columns, inputs and targets) of the synthetic data
/// set a check rebuilds a model on; larger loaded dimensions are an error.
pub const MAX_SYNTHETIC_ENTRIES: usize = 20_000_000;

/// Largest number of rows of the synthetic data set (twice the inducing points): a
/// model file with more than half as many inducing points is refused rather than built
/// (its M×M matrices would not fit in memory).
pub const MAX_SYNTHETIC_ROWS: usize = 20_000;

/// `model` as JSON.
///
/// # Errors
/// [`Error::Serde`] when serialisation fails (a non-finite number, for instance).
pub fn to_json<T: Serialize>(model: &T) -> Result<String> {
    serde_json::to_string(model).map_err(|e| Error::Serde(e.to_string()))
}

/// Restores a model written by [`to_json`] and checks it with `validate` (typically the
/// configuration's own validation). Prefer [`from_json_checked`], which also checks the
/// state against the configuration.
///
/// # Errors
/// [`Error::Serde`] for malformed JSON; whatever `validate` returns (e.g.
/// [`Error::Config`] for a configuration outside its ranges).
pub fn from_json<T: DeserializeOwned>(
    s: &str,
    validate: impl FnOnce(&T) -> Result<()>,
) -> Result<T> {
    let model: T = serde_json::from_str(s).map_err(|e| Error::Serde(e.to_string()))?;
    validate(&model)?;
    Ok(model)
}

/// Restores a model written by [`to_json`], validated as a whole (see the module docs):
/// `check` checks the configuration once and returns it checked (typically
/// `Checked::new(m.config.clone())`, [`crate::backend::Checked`]), `rebuild` builds a
/// fresh model from that checked configuration (typically `Model::from_checked(config,
/// &synthetic_data(d, p, n)?)`, which does not validate again), and [`compare_states`]
/// checks the loaded state against it, skipping the object fields named in `skip`
/// (data-dependent fields such as a fit summary).
///
/// # Errors
/// [`Error::Serde`] for malformed JSON; `check`'s and `rebuild`'s errors;
/// [`Error::Config`] starting with `model file` and naming the JSON path for a state that
/// does not match its configuration.
pub fn from_json_checked<T: Serialize + DeserializeOwned, C>(
    s: &str,
    check: impl FnOnce(&T) -> Result<C>,
    rebuild: impl FnOnce(&T, C) -> Result<T>,
    skip: &[&str],
) -> Result<T> {
    let model: T = serde_json::from_str(s).map_err(|e| Error::Serde(e.to_string()))?;
    let checked = check(&model)?;
    let fresh = rebuild(&model, checked).map_err(|e| {
        Error::config(
            "model file",
            format!("its configuration does not build a model: {e}"),
        )
    })?;
    let fresh = serde_json::to_value(&fresh).map_err(|e| Error::Serde(e.to_string()))?;
    // Compare the state as this version writes it: fields an older model file lacks and
    // that deserialise to their defaults (e.g. an optional setting added later) are
    // filled in, so old model files keep loading.
    let loaded = serde_json::to_value(&model).map_err(|e| Error::Serde(e.to_string()))?;
    compare_states(&loaded, &fresh, skip)?;
    Ok(model)
}

/// A synthetic data set of `n` rows, `d` inputs and `p` targets (standard normal draws
/// from a fixed seed) to rebuild a model on for [`from_json_checked`]; `n` is raised to
/// at least 8.
///
/// # Errors
/// [`Error::Config`] for zero dimensions or more than [`MAX_SYNTHETIC_ENTRIES`] entries.
pub fn synthetic_data(d: usize, p: usize, n: usize) -> Result<Dataset> {
    let n = n.max(8);
    let entries = n
        .checked_mul(d.saturating_add(p))
        .filter(|&e| e <= MAX_SYNTHETIC_ENTRIES && n <= MAX_SYNTHETIC_ROWS && d > 0 && p > 0);
    if entries.is_none() {
        return Err(Error::config(
            "model file",
            format!(
                "implausible dimensions (input_dim {d}, output_dim {p}, {n} inducing-scale rows)"
            ),
        ));
    }
    let mut rng = seeded(0xC4EC);
    let x = standard_normal(&mut rng, n, d);
    let y = standard_normal(&mut rng, n, p);
    Dataset::new(x, y)
}

/// [`synthetic_data`] with targets a model with `likelihood` accepts for training: the
/// standard-normal draws for the Gaussian, alternating labels 0, 1 for Bernoulli
/// likelihoods and the labels `i mod K` for K-class likelihoods (then `n ≥ 2K`).
///
/// # Errors
/// As [`synthetic_data`].
pub fn synthetic_data_for(
    likelihood: &crate::likelihoods::Likelihood,
    d: usize,
    p: usize,
    n: usize,
) -> Result<Dataset> {
    let classes = likelihood.num_classes();
    let n = classes.map_or(n, |k| n.max(2 * k));
    let data = synthetic_data(d, p, n)?;
    match classes {
        None => Ok(data),
        Some(k) => {
            let (x, y) = data.into_parts();
            let labels = faer::Mat::from_fn(y.nrows(), y.ncols(), |i, _| (i % k) as f64);
            Dataset::new(x, labels)
        }
    }
}

/// Checks a loaded state `loaded` against `fresh`, the state a fresh model of the same
/// configuration has (see the module docs); object fields named in `skip` are not
/// compared.
///
/// # Errors
/// [`Error::Config`] naming the first JSON path where the states disagree.
pub fn compare_states(loaded: &Value, fresh: &Value, skip: &[&str]) -> Result<()> {
    compare(loaded, fresh, skip, "$")
}

fn mismatch(path: &str, what: impl std::fmt::Display) -> Error {
    Error::config("model file", format!("{path}: {what}"))
}

fn compare(a: &Value, b: &Value, skip: &[&str], path: &str) -> Result<()> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            if let (Some(blocks), Some(fresh)) = (x.get("blocks"), y.get("blocks"))
                && x.len() == 1
            {
                return compare_blocks(blocks, fresh, &format!("{path}.blocks"));
            }
            if let Some(k) = y.keys().find(|k| !x.contains_key(*k)) {
                return Err(mismatch(path, format!("field `{k}` is missing")));
            }
            for (k, v) in x {
                let p = format!("{path}.{k}");
                match y.get(k) {
                    None => return Err(mismatch(&p, "unexpected field")),
                    Some(_) if skip.contains(&k.as_str()) => {}
                    Some(w) => compare(v, w, skip, &p)?,
                }
            }
            Ok(())
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Err(mismatch(
                    path,
                    format!("{} entries, the configuration gives {}", x.len(), y.len()),
                ));
            }
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                compare(v, w, skip, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y, path),
        _ if a == b => Ok(()),
        _ => Err(mismatch(
            path,
            format!("{a} where the configuration gives {b}"),
        )),
    }
}

fn compare_numbers(x: &serde_json::Number, y: &serde_json::Number, path: &str) -> Result<()> {
    let integral = |n: &serde_json::Number| n.is_u64() || n.is_i64();
    if integral(y) {
        if x != y {
            return Err(mismatch(
                path,
                format!("{x} where the configuration gives {y} (an index, count or size)"),
            ));
        }
        return Ok(());
    }
    match x.as_f64() {
        Some(v) if v.is_finite() => Ok(()),
        _ => Err(mismatch(path, format!("{x} is not a finite number"))),
    }
}

/// True when the saved block `saved` is `natural` where the freshly built `built` is
/// `optimised`: a natural-gradient stepper marks the blocks it owns as
/// [`crate::params::Role::Natural`] when training starts
/// ([`crate::train::NaturalAdamStepper`]), so a model saved after such training carries
/// that role while a model built from its configuration does not yet.
fn marked_natural(saved: &Value, built: &Value) -> bool {
    saved.get("role").and_then(Value::as_str) == Some("natural")
        && built.get("role").and_then(Value::as_str) == Some("optimised")
}

/// The parameter store's blocks: same names, roles (up to [`marked_natural`]) and shapes;
/// finite values of magnitude at most [`MAX_UNCONSTRAINED`].
fn compare_blocks(a: &Value, b: &Value, path: &str) -> Result<()> {
    let (Some(x), Some(y)) = (a.as_array(), b.as_array()) else {
        return Err(mismatch(path, "the parameter blocks are not a list"));
    };
    if x.len() != y.len() {
        return Err(mismatch(
            path,
            format!(
                "{} parameter blocks, the configuration gives {}",
                x.len(),
                y.len()
            ),
        ));
    }
    for (i, (u, w)) in x.iter().zip(y).enumerate() {
        let p = format!("{path}[{i}]");
        for key in ["name", "role"] {
            if u.get(key) != w.get(key) && !(key == "role" && marked_natural(u, w)) {
                return Err(mismatch(
                    &p,
                    format!(
                        "{key} {} where the configuration gives {}",
                        u.get(key).unwrap_or(&Value::Null),
                        w.get(key).unwrap_or(&Value::Null)
                    ),
                ));
            }
        }
        let shape = |v: &Value| {
            let m = v.get("value");
            (
                m.and_then(|m| m.get("nrows")).cloned(),
                m.and_then(|m| m.get("ncols")).cloned(),
            )
        };
        if shape(u) != shape(w) {
            return Err(mismatch(
                &p,
                format!(
                    "shape {:?} where the configuration gives {:?}",
                    shape(u),
                    shape(w)
                ),
            ));
        }
        let data = u.get("value").and_then(|m| m.get("data"));
        let values = data
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (k, v) in values.iter().enumerate() {
            match v.as_f64() {
                Some(f) if f.is_finite() && f.abs() <= MAX_UNCONSTRAINED => {}
                _ => {
                    return Err(mismatch(
                        &format!("{p}.value.data[{k}]"),
                        format!("{v} is not a finite value of magnitude ≤ {MAX_UNCONSTRAINED:e}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compare_catches_indices_lengths_fields_and_values() {
        let fresh = json!({"z": 3, "w": [1, 2], "f": 0.5, "params": {"blocks": [
            {"name": "a", "role": "optimised", "value": {"nrows": 1, "ncols": 2, "data": [0.0, 1.0]}}]}});
        let ok = json!({"z": 3, "w": [1, 2], "f": 2.5, "params": {"blocks": [
            {"name": "a", "role": "optimised", "value": {"nrows": 1, "ncols": 2, "data": [4.0, -1.0]}}]}});
        assert!(compare_states(&ok, &fresh, &[]).is_ok());
        let bad = [
            json!({"z": 4, "w": [1, 2], "f": 0.5, "params": fresh["params"].clone()}),
            json!({"z": 3, "w": [1], "f": 0.5, "params": fresh["params"].clone()}),
            json!({"z": 3, "f": 0.5, "params": fresh["params"].clone()}),
            json!({"z": 3, "w": [1, 2], "f": 0.5, "params": {"blocks": [
                {"name": "a", "role": "fixed", "value": {"nrows": 1, "ncols": 2, "data": [0.0, 1.0]}}]}}),
            json!({"z": 3, "w": [1, 2], "f": 0.5, "params": {"blocks": [
                {"name": "a", "role": "optimised", "value": {"nrows": 2, "ncols": 1, "data": [0.0, 1.0]}}]}}),
            json!({"z": 3, "w": [1, 2], "f": 0.5, "params": {"blocks": [
                {"name": "a", "role": "optimised", "value": {"nrows": 1, "ncols": 2, "data": [1e300, 1.0]}}]}}),
        ];
        for b in &bad {
            let e = compare_states(b, &fresh, &[]).unwrap_err();
            assert!(e.to_string().contains("model file: $"), "{e}");
        }
        let skipped =
            json!({"z": 3, "w": [1, 2], "f": 0.5, "params": fresh["params"].clone(), "s": [1]});
        let fresh_s =
            json!({"z": 3, "w": [1, 2], "f": 0.5, "params": fresh["params"].clone(), "s": []});
        assert!(compare_states(&skipped, &fresh_s, &["s"]).is_ok());
        assert!(compare_states(&skipped, &fresh_s, &[]).is_err());
    }

    /// A block that natural-gradient training marked `natural` loads against the
    /// `optimised` block of a freshly built model; no other role change does.
    #[test]
    fn natural_marks_from_training_are_the_only_accepted_role_change() {
        let block = |role: &str| {
            json!({"params": {"blocks": [
                {"name": "q", "role": role, "value": {"nrows": 1, "ncols": 1, "data": [0.5]}}]}})
        };
        assert!(compare_states(&block("natural"), &block("optimised"), &[]).is_ok());
        for (saved, built) in [
            ("optimised", "natural"),
            ("natural", "fixed"),
            ("sampled", "optimised"),
            ("fixed", "optimised"),
        ] {
            let e = compare_states(&block(saved), &block(built), &[]).unwrap_err();
            assert!(e.to_string().contains("role"), "{saved} vs {built}: {e}");
        }
    }

    #[test]
    fn synthetic_data_refuses_implausible_sizes() {
        assert!(synthetic_data(3, 1, 5).is_ok_and(|d| d.n() == 8));
        assert!(synthetic_data(usize::MAX / 2, 1, 10).is_err());
        assert!(synthetic_data(0, 1, 10).is_err());
    }
}
