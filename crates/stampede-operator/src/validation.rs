//! The validation policy, pure: a LoadTest's scenario is compiled as its runners will compile
//! it, with what the operator cannot know replaced: values that come from Secrets by a
//! placeholder, `baseUrl: builtin` by a placeholder address, and the files of `spec.data` by
//! their contents (read by the shell).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use stampede_api::LoadTest;
use stampede_engine::{BUILTIN_PLACEHOLDER, CompileOptions, Plan};

/// What an environment value that comes from a Secret or a ConfigMap is validated with.
pub const ENV_PLACEHOLDER: &str = "x";

/// Validates the scenario as a runner would, with the environment the runners get.
pub fn validate(lt: &LoadTest, yaml: &str, source: &str) -> Result<Arc<Plan>, String> {
    validate_with_files(lt, yaml, source, None)
}

/// Like [`validate`], with the data files of `spec.data` (`None`: read the disk).
pub fn validate_with_files(
    lt: &LoadTest,
    yaml: &str,
    source: &str,
    files: Option<BTreeMap<String, Vec<u8>>>,
) -> Result<Arc<Plan>, String> {
    let file = stampede_engine::parse_str(yaml, Path::new(source)).map_err(|e| e.to_string())?;
    // Runners see spec.env; values from Secrets are unknown here, so any value will do.
    let env = lt
        .spec
        .env
        .iter()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_else(|| ENV_PLACEHOLDER.into())))
        .collect();
    let base_url = stampede_engine::wants_builtin(&file).then(|| BUILTIN_PLACEHOLDER.to_string());
    stampede_engine::validate(
        &file,
        Path::new(source),
        &CompileOptions { base_url, env: Some(env), files: files.map(Arc::new), ..CompileOptions::default() },
    )
    .map(Arc::new)
    .map_err(|e| e.problems().join("; "))
}
