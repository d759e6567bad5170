//! Errors of the engine, each naming the file, the field and the reason.

use std::fmt;
use std::path::PathBuf;

/// One problem found in a scenario: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where: e.g. ``scenario `buy`, step `login`: request.url`` or `load.stages[1]`.
    pub location: String,
    /// What is wrong; shown after the location.
    pub message: String,
    /// Line and column (from 1) in the file's text, when found there.
    pub position: Option<(usize, usize)>,
}

impl Problem {
    /// A problem at `location` with no position in the file's text.
    pub fn new(location: impl Into<String>, message: impl Into<String>) -> Self {
        Problem { location: location.into(), message: message.into(), position: None }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((line, column)) = self.position {
            write!(f, "line {line}, column {column}: ")?;
        }
        if self.location.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.location, self.message)
        }
    }
}

/// The one way validation collects problems: each under a location, every path of the
/// compiler adding to the same list, so that one pass reports everything wrong with a file.
#[derive(Debug, Default)]
pub struct Problems(Vec<Problem>);

impl Problems {
    /// Adds a problem at `location`.
    pub fn add(&mut self, location: impl Into<String>, message: impl ToString) {
        self.0.push(Problem { location: location.into(), message: message.to_string(), position: None });
    }

    /// A view that adds under `prefix`: `under("http.tls.").add("caFile", …)` files the
    /// problem at `http.tls.caFile`.
    pub fn under(&mut self, prefix: impl Into<String>) -> Under<'_> {
        Under { problems: self, prefix: prefix.into() }
    }

    /// Problems so far (compare before and after a part to see whether it added any).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No problem found so far.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems in the order they were added.
    pub fn into_vec(self) -> Vec<Problem> {
        self.0
    }
}

/// [`Problems`] under a location prefix.
#[derive(Debug)]
pub struct Under<'a> {
    problems: &'a mut Problems,
    prefix: String,
}

impl Under<'_> {
    /// Adds a problem at the prefix followed by `field`.
    pub fn add(&mut self, field: &str, message: impl ToString) {
        self.problems.add(format!("{}{field}", self.prefix), message);
    }
}

/// Why a scenario file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read: missing, not readable, or not UTF-8.
    #[error("{}: cannot read the file: {source}", file.display())]
    Read {
        /// The scenario file, as given.
        file: PathBuf,
        /// The I/O error reading it.
        source: std::io::Error,
    },
    /// The text is not valid YAML, or a field has the wrong name or type.
    #[error("{}{}: {}{message}", file.display(), fmt_position(*line, *column), fmt_path(path))]
    Parse {
        /// The scenario file, as given.
        file: PathBuf,
        /// Line of the error, from 1 (`None`: the file is empty, or the parser gave none).
        line: Option<usize>,
        /// Column of the error, from 1 (`None` as for `line`).
        column: Option<usize>,
        /// Path of the offending field, e.g. `scenarios[0].steps[2].request` (empty or `.`: no
        /// field to name, as for a syntax error).
        path: String,
        /// What is wrong: the parser's words, or a hint at what the field accepts.
        message: String,
    },
    /// The file parses but does not make sense.
    #[error("{}: invalid scenario:\n{}", file.display(), fmt_problems(file, problems))]
    Invalid {
        /// The scenario file, as given.
        file: PathBuf,
        /// Every problem found, in the order the compiler found them.
        problems: Vec<Problem>,
    },
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

/// One line per problem; one found in the text starts `FILE:LINE:COLUMN:`, as compilers write.
fn fmt_problems(file: &std::path::Path, problems: &[Problem]) -> String {
    let line = |p: &Problem| match p.position {
        Some((l, c)) => format!("  - {}:{l}:{c}: {}", file.display(), Problem { position: None, ..p.clone() }),
        None => format!("  - {p}"),
    };
    problems.iter().map(line).collect::<Vec<_>>().join("\n")
}
