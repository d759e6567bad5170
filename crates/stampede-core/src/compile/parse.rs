//! Loading scenario files: YAML text to [`ScenarioFile`], with errors that name the file,
//! the line and column, and the path of the offending field.

use std::path::Path;

use crate::error::ScenarioError;
use stampede_model::scenario::ScenarioFile;

/// Reads and parses a scenario file.
pub fn load_file(path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ScenarioError::Read { file: path.to_path_buf(), source })?;
    parse_str(&text, path)
}

/// Parses scenario YAML; `file` is only used in messages.
pub fn parse_str(text: &str, file: &Path) -> Result<ScenarioFile, ScenarioError> {
    if text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
        return Err(ScenarioError::Parse {
            file: file.to_path_buf(),
            line: None,
            column: None,
            path: String::new(),
            message: "the file is empty; a scenario needs `name`, `load` and `scenarios`".into(),
        });
    }
    let de = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let mut path = err.path().to_string();
        if path.contains('?') {
            path.clear(); // a syntax error: no field to name
        }
        let inner = err.into_inner();
        let location = inner.location();
        let mut message = inner.to_string();
        if let Some(loc) = &location {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            if let Some(stripped) = message.strip_suffix(&suffix) {
                message = stripped.to_string();
            }
        }
        // serde_yaml prefixes its own path ("scenarios[0]: ..."); ours is more complete.
        if let Some((prefix, rest)) = message.split_once(": ")
            && !prefix.contains(' ')
            && (path.starts_with(prefix) || path.is_empty())
        {
            message = rest.to_string();
        }
        if message.contains("did not match any variant of untagged enum") {
            message = untagged_hint(&path);
        }
        ScenarioError::Parse {
            file: file.to_path_buf(),
            line: location.as_ref().map(|l| l.line()),
            column: location.as_ref().map(|l| l.column()),
            path,
            message,
        }
    })
}

/// Untagged enums fail with a generic message; say what the field accepts instead.
fn untagged_hint(path: &str) -> String {
    let field = path.rsplit('.').next().unwrap_or(path);
    let field = field.split('[').next().unwrap_or(field);
    match field {
        "status" => "expected a status code (200), a class (2xx), a range (200-299) or a list of these".into(),
        "think" => "expected a duration (500ms) or a range {min: 1s, max: 3s}".into(),
        _ if path.starts_with("vars.") => format!(
            "`{field}` has an unexpected shape: a variable is a text, a number, true or false, a list, \
             or {{value, scope}}"
        ),
        _ => format!("`{field}` has an unexpected shape"),
    }
}
