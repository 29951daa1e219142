//! The identity of a guarded run — what a saved state must have been written with to be
//! continued — and the comparison that names the first field that differs.

use serde::Serialize;
use serde_json::{Value, json};

use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::fit::FitConfig;

/// The identity [`crate::guard::Guard::fit_with`] gives a fit of `estimator` (its type
/// and every field of its configuration), with `cfg` on `data` (its shape and a checksum
/// of every value): a state saved by a fit whose identity differs in any of these is
/// refused rather than continued.
///
/// ```
/// use dgp_traits::guard::fit_identity;
/// use dgp_traits::model::FitConfig;
/// let data = dgp_traits::data::Dataset::new(
///     faer::mat![[0.0], [1.0]], faer::mat![[1.0], [2.0]]).unwrap();
/// #[derive(serde::Serialize)]
/// struct Config { lr: f64 }
/// let a = fit_identity(&Config { lr: 0.01 }, &FitConfig::default(), &data).unwrap();
/// let b = fit_identity(&Config { lr: 0.02 }, &FitConfig::default(), &data).unwrap();
/// assert_eq!(a["config"]["lr"], 0.01);
/// assert_ne!(a, b);
/// ```
///
/// # Errors
/// [`Error::Serde`] when the configuration does not serialise.
pub fn fit_identity<E: Serialize>(estimator: &E, cfg: &FitConfig, data: &Dataset) -> Result<Value> {
    let config = serde_json::to_value(estimator).map_err(|e| Error::Serde(e.to_string()))?;
    let fit = serde_json::to_value(cfg).map_err(|e| Error::Serde(e.to_string()))?;
    Ok(json!({
        "estimator": std::any::type_name::<E>(),
        "config": config,
        "fit": fit,
        "data": {
            "rows": data.n(),
            "inputs": data.input_dim(),
            "outputs": data.output_dim(),
            "checksum": data_checksum(data),
        },
    }))
}

/// A 64-bit FNV-1a hash of the bit patterns of every input and target value of `data`
/// (column by column), as 16 hex digits: tells one data set from another.
pub fn data_checksum(data: &Dataset) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for m in [data.x(), data.y()] {
        h = (h ^ m.nrows() as u64).wrapping_mul(0x0000_0100_0000_01b3);
        h = (h ^ m.ncols() as u64).wrapping_mul(0x0000_0100_0000_01b3);
        for j in 0..m.ncols() {
            for i in 0..m.nrows() {
                h = (h ^ m[(i, j)].to_bits()).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    format!("{h:016x}")
}

/// The first place where `saved` and `now` differ, as (path, saved value, value now):
/// object keys in the order of `now` (then keys only `saved` has), array items by index;
/// the path is dotted (`config.adam.lr`, `arch.settings.likelihood`, `layers[1]`), empty
/// for values that differ as a whole. `None` when they are equal.
pub fn first_difference(saved: &Value, now: &Value) -> Option<(String, String, String)> {
    fn text(v: Option<&Value>) -> String {
        v.map_or_else(|| "absent".to_string(), Value::to_string)
    }
    fn join(at: &str, key: &str) -> String {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    }
    fn walk(at: String, saved: &Value, now: &Value) -> Option<(String, String, String)> {
        match (saved, now) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    match a.get(k) {
                        Some(w) => {
                            if let Some(d) = walk(join(&at, k), w, v) {
                                return Some(d);
                            }
                        }
                        None => return Some((join(&at, k), text(None), text(Some(v)))),
                    }
                }
                a.iter()
                    .find(|(k, _)| !b.contains_key(*k))
                    .map(|(k, w)| (join(&at, k), text(Some(w)), text(None)))
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
                .iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (w, v))| walk(format!("{at}[{i}]"), w, v)),
            _ if saved == now => None,
            _ => Some((at, text(Some(saved)), text(Some(now)))),
        }
    }
    walk(String::new(), saved, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let a = json!({"backend": "svi", "config": {"adam": {"lr": 0.01}, "layers": [2, 3]}});
        assert_eq!(first_difference(&a, &a), None);
        let b = json!({"backend": "svi", "config": {"adam": {"lr": 0.02}, "layers": [2, 3]}});
        assert_eq!(
            first_difference(&a, &b),
            Some(("config.adam.lr".into(), "0.01".into(), "0.02".into()))
        );
        let c = json!({"backend": "svi", "config": {"adam": {"lr": 0.01}, "layers": [2, 4]}});
        assert_eq!(
            first_difference(&a, &c).unwrap().0,
            "config.layers[1]".to_string()
        );
        let d = json!({"backend": "nested", "config": {}});
        assert_eq!(
            first_difference(&a, &d),
            Some(("backend".into(), "\"svi\"".into(), "\"nested\"".into()))
        );
        let e = json!({"backend": "svi"});
        assert_eq!(
            first_difference(&a, &e),
            Some(("config".into(), a["config"].to_string(), "absent".into()))
        );
        assert_eq!(
            first_difference(&json!(1), &json!([1])),
            Some((String::new(), "1".into(), "[1]".into()))
        );
    }

    #[test]
    fn the_data_checksum_sees_every_value() {
        let d = crate::testing::toy_regression(20, 2, 1.0, 3);
        let mut x = d.x().to_owned();
        x[(19, 1)] += 1e-12;
        let e = Dataset::new(x, d.y().to_owned()).unwrap();
        assert_ne!(data_checksum(&d), data_checksum(&e));
        assert_eq!(data_checksum(&d), data_checksum(&d.clone()));
    }
}
