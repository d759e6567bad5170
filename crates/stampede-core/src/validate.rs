//! A scenario checked without running anything: compiled to a [`Plan`], each problem placed at
//! its line and column in the file.

use std::path::Path;

use crate::compile::plan::{self, CompileOptions, Plan};
use crate::error::{Problem, ScenarioError};
use stampede_model::scenario::ScenarioFile;

/// Whether the file asks for the built-in target.
pub fn wants_builtin(file: &ScenarioFile) -> bool {
    file.base_url.as_deref() == Some("builtin")
}

/// Validates without running anything (`builtin` is checked against a placeholder address).
pub fn validate(file: &ScenarioFile, path: &Path, opts: &CompileOptions) -> Result<Plan, ScenarioError> {
    let mut opts = opts.clone();
    if opts.base_dir.is_none() {
        opts.base_dir = path.parent().filter(|p| !p.as_os_str().is_empty()).map(Path::to_path_buf);
    }
    plan::compile(file, &opts).map_err(|problems| invalid(file, path, problems))
}

/// The error for `problems` of `file`, read from `path`: each problem placed at its line and
/// column in the file as it is on disk (the text parsed, unless it changed since).
pub fn invalid(file: &ScenarioFile, path: &Path, mut problems: Vec<Problem>) -> ScenarioError {
    if let Ok(text) = std::fs::read_to_string(path) {
        for p in &mut problems {
            p.position = crate::compile::locate::locate(&p.location, &text, file);
        }
    }
    ScenarioError::Invalid { file: path.to_path_buf(), problems }
}

/// Whether the scenario sends gRPC calls or asks for HTTP/2 (the built-in target then speaks it).
pub fn speaks_http2(file: &ScenarioFile) -> bool {
    file.http.version != stampede_model::scenario::HttpVersion::Http11
        || !crate::compile::grpc::grpc_methods(file).is_empty()
}
