//! The textual forms of backend settings ([`dgp_traits::backend::Settings`]) on the
//! command line: `--set key=value` ([`parse_assignment`]) and a `--config` JSON file
//! ([`settings_from_json`], errors carry the line and column).

use std::path::Path;

use dgp_core::{Error, Result};
use dgp_traits::backend::Settings;
use serde_json::Value;

/// Parses `key=value` (the `--set` syntax): the key may be dotted (`natgrad.gamma`); the
/// value is JSON when it parses as JSON (numbers, `true`, `null`, `"text"`, objects,
/// arrays) and a plain string otherwise (`rule=qr1`).
///
/// # Errors
/// [`Error::Config`] without `=` or with an empty key or key part.
pub fn parse_assignment(s: &str) -> Result<(String, Value)> {
    let Some((key, value)) = s.split_once('=') else {
        return Err(Error::config(
            "setting",
            format!("'{s}' is not of the form key=value"),
        ));
    };
    let key = key.trim();
    if key.is_empty() || key.split('.').any(str::is_empty) {
        return Err(Error::config("setting", format!("'{s}' has an empty key")));
    }
    let value = value.trim();
    let v = serde_json::from_str::<Value>(value).unwrap_or_else(|_| Value::String(value.into()));
    Ok((key.to_string(), v))
}

/// Reads a settings object from JSON text (`origin` names it in errors, e.g. the file).
///
/// # Errors
/// [`Error::Parse`] with the line and column of a syntax error, or when the text is not
/// one JSON object.
pub fn settings_from_json(text: &str, origin: &Path) -> Result<Settings> {
    let v: Value = serde_json::from_str(text).map_err(|e| Error::Parse {
        path: origin.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: format!("not valid JSON: {e}"),
    })?;
    match v {
        Value::Object(m) => Ok(m),
        other => Err(Error::Parse {
            path: origin.to_path_buf(),
            line: 1,
            column: 1,
            message: format!(
                "a settings file holds one JSON object of key: value pairs, not {}",
                json_kind(&other)
            ),
        }),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_and_json_files() {
        assert!(parse_assignment("novalue").is_err());
        assert!(parse_assignment("a..b=1").is_err());
        assert_eq!(
            parse_assignment("natgrad.gamma=0.5").unwrap(),
            ("natgrad.gamma".to_string(), Value::from(0.5))
        );
        assert_eq!(
            parse_assignment("rule = qr1").unwrap(),
            ("rule".to_string(), Value::String("qr1".into()))
        );
        let e = settings_from_json("{\n  \"a\": 1,\n  \"b\": \n}", Path::new("f.json"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f.json:4:"), "{e}");
        assert!(settings_from_json("[1]", Path::new("f.json")).is_err());
    }
}
