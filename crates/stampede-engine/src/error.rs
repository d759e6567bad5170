//! Errors of the engine, each naming the file, the field and the reason.

use std::fmt;
use std::path::PathBuf;

/// One problem found in a scenario: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where: e.g. ``scenario `buy`, step `login`: request.url`` or `load.stages[1]`.
    pub location: String,
    pub message: String,
}

impl Problem {
    pub fn new(location: impl Into<String>, message: impl Into<String>) -> Self {
        Problem { location: location.into(), message: message.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.location, self.message)
        }
    }
}

/// Why a scenario file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{}: cannot read the file: {source}", file.display())]
    Read { file: PathBuf, source: std::io::Error },
    /// The text is not valid YAML, or a field has the wrong name or type.
    #[error("{}{}: {}{message}", file.display(), fmt_position(*line, *column), fmt_path(path))]
    Parse { file: PathBuf, line: Option<usize>, column: Option<usize>, path: String, message: String },
    /// The file parses but does not make sense.
    #[error("{}: invalid scenario:\n{}", file.display(), fmt_problems(problems))]
    Invalid { file: PathBuf, problems: Vec<Problem> },
}

impl ScenarioError {
    /// The problems listed by this error, one per line.
    pub fn problems(&self) -> Vec<String> {
        match self {
            ScenarioError::Invalid { problems, .. } => problems.iter().map(ToString::to_string).collect(),
            other => vec![other.to_string()],
        }
    }
}

fn fmt_position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

fn fmt_path(path: &str) -> String {
    if path.is_empty() || path == "." { String::new() } else { format!("{path}: ") }
}

fn fmt_problems(problems: &[Problem]) -> String {
    problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n")
}

/// Why a run could not take place (distinct from requests failing during a run).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start the built-in target: {0}")]
    Target(#[source] std::io::Error),
    #[error("cannot start worker threads: {0}")]
    Threads(#[source] std::io::Error),
    #[error("a worker thread failed: {0}")]
    Worker(String),
}
