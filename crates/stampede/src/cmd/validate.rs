//! `stampede validate`: a scenario file checked without running it.

use std::path::Path;
use std::process::ExitCode;

use stampede_engine::CompileOptions;
use stampede_model::scenario::ScenarioFile;

use crate::Failure;

/// The scenario file at `file`, parsed; one that cannot be read or parsed is invalid input.
pub(crate) fn load(file: &Path) -> Result<ScenarioFile, Failure> {
    stampede_engine::load_file(file).map_err(|e| Failure::Invalid(e.into()))
}

/// `stampede validate FILE`: compiled as a run would compile it; what it holds, in one line.
pub(crate) fn validate(file: &Path) -> Result<ExitCode, Failure> {
    let scenario = load(file)?;
    let plan = stampede_engine::validate(&scenario, file, &CompileOptions::default())
        .map_err(|e| Failure::Invalid(e.into()))?;
    let steps: usize = plan.scenarios.iter().map(|s| s.steps.len()).sum();
    println!(
        "{}: ok — `{}`, {} scenario(s), {} step(s), {} up to {} VUs",
        file.display(),
        plan.name,
        plan.scenarios.len(),
        steps,
        plan.executor_name(),
        plan.max_vus()
    );
    Ok(ExitCode::SUCCESS)
}
