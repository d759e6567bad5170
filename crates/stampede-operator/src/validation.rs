//! The validation policy, pure: a LoadTest's scenario is compiled as its runners will compile
//! it, with what the operator cannot know replaced: values that come from Secrets by a
//! placeholder, `baseUrl: builtin` by a placeholder address, and the files of `spec.data` by
//! their contents (read by the shell).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use kube::ResourceExt;
use stampede_api::{DATA_MOUNT, LoadTest, env as runner_env};
use stampede_core::{BUILTIN_PLACEHOLDER, CompileOptions, Plan};

use crate::Invalid;

/// What an environment value that comes from a Secret or a ConfigMap is validated with.
pub const ENV_PLACEHOLDER: &str = "x";

/// Validates the scenario as a runner would, with the environment the runners get.
pub fn validate(lt: &LoadTest, yaml: &str, source: &str) -> Result<Arc<Plan>, Invalid> {
    validate_with_files(lt, yaml, source, None)
}

/// Like [`validate`], with the data files of `spec.data` (`None`: read the disk).
pub fn validate_with_files(
    lt: &LoadTest,
    yaml: &str,
    source: &str,
    files: Option<BTreeMap<String, Vec<u8>>>,
) -> Result<Arc<Plan>, Invalid> {
    let file = stampede_core::parse_str(yaml, Path::new(source)).map_err(|e| Invalid(e.to_string()))?;
    let mut env = runner_environment(lt);
    // `spec.envFrom` (whole ConfigMaps or Secrets) may set any name; which ones is not known
    // here (the operator reads no Secret), so every `{{env.NAME}}` of the scenario is taken to be
    // set. A runner whose environment lacks one fails at its start, naming it.
    if !lt.spec.env_from.is_empty() {
        for name in env_names(yaml) {
            env.entry(name).or_insert_with(|| ENV_PLACEHOLDER.into());
        }
    }
    let base_url = stampede_core::wants_builtin(&file).then(|| BUILTIN_PLACEHOLDER.to_string());
    // Every runner must be able to run its share: one with a rate and no VU would lose it.
    let runners = u32::try_from(lt.spec.runners.max(1)).unwrap_or(1);
    let shared_used = file.scenarios.iter().any(|s| s.load.is_none());
    let split: Vec<String> = file
        .load
        .iter()
        .filter(|_| shared_used)
        .map(|l| ("load".to_string(), l))
        .chain(
            file.scenarios
                .iter()
                .enumerate()
                .filter_map(|(i, s)| Some((format!("scenarios[{i}].load"), s.load.as_ref()?))),
        )
        .filter_map(|(at, l)| l.share_problem(runners).map(|(field, why)| format!("{at}.{field}: {why}")))
        .collect();
    let plan = stampede_core::validate(
        &file,
        Path::new(source),
        &CompileOptions { base_url, env: Some(env), files: files.map(Arc::new), ..CompileOptions::default() },
    )
    .map(Arc::new)
    .map_err(|e| Invalid(e.problems().join("; ")))?;
    if split.is_empty() { Ok(plan) } else { Err(Invalid(split.join("; "))) }
}

/// The names of the environment variables a scenario's templates use (`{{env.NAME}}`).
pub fn env_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { break };
        // `{{env.NAME:-default}}`'s name is NAME.
        if let Some(name) = after[..close].trim().strip_prefix("env.").map(|n| n.split(":-").next().unwrap_or(n).trim())
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_string());
        }
        rest = &after[close + 2..];
    }
    names
}

/// The environment a runner's `{{env.NAME}}` sees, as far as the operator knows it: what
/// `desired::job` sets, Kubernetes' `JOB_COMPLETION_INDEX` of an Indexed Job (runner 0's here),
/// then `spec.env`, whose values from Secrets and ConfigMaps are unknown here, so any will do.
pub fn runner_environment(lt: &LoadTest) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = [
        (runner_env::LOADTEST, lt.name_any()),
        (runner_env::NAMESPACE, lt.namespace().unwrap_or_default()),
        (runner_env::RUNNERS, lt.spec.runners.to_string()),
        (runner_env::RUNNER_INDEX, "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if !lt.spec.data.is_empty() {
        env.insert(runner_env::DATA_DIR.into(), DATA_MOUNT.into());
    }
    env.extend(lt.spec.env.iter().map(|e| (e.name.clone(), e.value.clone().unwrap_or_else(|| ENV_PLACEHOLDER.into()))));
    env
}
