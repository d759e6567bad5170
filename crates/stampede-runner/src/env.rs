//! What a runner learns from its environment: the operator's contract with its runner pods.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use stampede_api::env;

/// Most runners a LoadTest may have (the CRD's limit).
pub(crate) const MAX_RUNNERS: u32 = 1000;

/// An environment variable that is missing or wrong, named.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvError(String);

/// What a runner learns from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerEnv {
    /// The name of the LoadTest this pod runs for (`STAMPEDE_LOADTEST`).
    pub loadtest: String,
    /// The LoadTest's namespace (`STAMPEDE_NAMESPACE`).
    pub namespace: String,
    /// This runner's index, 0 to `runners` − 1 (`JOB_COMPLETION_INDEX`).
    pub index: u32,
    /// How many runners share the load, 1–1000 (`STAMPEDE_RUNNERS`).
    pub runners: u32,
    /// Where to serve `/metrics` (`None`: nowhere).
    pub metrics_addr: Option<SocketAddr>,
    /// The run this runner belongs to (`<LoadTest UID>/<run number>`), when the operator says.
    pub run: Option<String>,
    /// What the LoadTest's `setup` gave, when the scenario has `setup` or `teardown`: those run
    /// once for the LoadTest in pods of their own, never in a runner.
    pub setup_values: Option<BTreeMap<String, String>>,
    /// This pod runs the scenario's `setup` or `teardown` once, not a share of the load.
    pub once: Option<stampede_engine::Once>,
}

/// Reads the runner's environment through `get` (e.g. `std::env::var`): the LoadTest's name and
/// namespace, the runner count and Kubernetes' `JOB_COMPLETION_INDEX`.
pub fn parse_env(get: impl Fn(&str) -> Option<String>) -> Result<RunnerEnv, EnvError> {
    let required = |name: &str| -> Result<String, EnvError> {
        let v = get(name).ok_or_else(|| EnvError(format!("{name} is not set")))?;
        let v = v.trim().to_string();
        if v.is_empty() { Err(EnvError(format!("{name} is empty"))) } else { Ok(v) }
    };
    let number = |name: &str| -> Result<u32, EnvError> {
        let v = required(name)?;
        v.parse::<u32>().map_err(|_| EnvError(format!("{name}={v:?} is not a non-negative integer")))
    };
    let loadtest = required(env::LOADTEST)?;
    let namespace = required(env::NAMESPACE)?;
    let runners = number(env::RUNNERS)?;
    let index = number(env::RUNNER_INDEX)?;
    if !(1..=MAX_RUNNERS).contains(&runners) {
        return Err(EnvError(format!("{}={runners} is out of range (1–{MAX_RUNNERS})", env::RUNNERS)));
    }
    if index >= runners {
        return Err(EnvError(format!("{}={index} is not below {}={runners}", env::RUNNER_INDEX, env::RUNNERS)));
    }
    let metrics_addr = match get(env::METRICS_ADDR).map(|v| v.trim().to_string()) {
        None => Some(SocketAddr::from(([0, 0, 0, 0], stampede_api::METRICS_PORT))),
        Some(v) if v.is_empty() || v == "off" => None,
        Some(v) => Some(
            v.parse()
                .map_err(|_| EnvError(format!("{}={v:?} is not an address like 0.0.0.0:9464", env::METRICS_ADDR)))?,
        ),
    };
    let run = get(env::RUN).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if let Some(r) = &run
        && !r.rsplit_once('/').is_some_and(|(uid, n)| !uid.is_empty() && n.parse::<u32>().is_ok())
    {
        return Err(EnvError(format!("{}={r:?} is not `<uid>/<run number>`", env::RUN)));
    }
    let setup_values = match get(env::SETUP_VALUES) {
        None => None,
        Some(v) => Some(serde_json::from_str(&v).map_err(|e| {
            EnvError(format!("{} is not a JSON object of strings (name → value): {e}", env::SETUP_VALUES))
        })?),
    };
    let once = match get(env::ONCE).as_deref().map(str::trim) {
        None | Some("") => None,
        Some("setup") => Some(stampede_engine::Once::Setup),
        Some("teardown") => Some(stampede_engine::Once::Teardown),
        Some(other) => return Err(EnvError(format!("{}={other:?} is neither `setup` nor `teardown`", env::ONCE))),
    };
    Ok(RunnerEnv { loadtest, namespace, index, runners, metrics_addr, run, setup_values, once })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    const GOOD: [(&str, &str); 4] = [
        ("STAMPEDE_LOADTEST", "checkout"),
        ("STAMPEDE_NAMESPACE", "load"),
        ("STAMPEDE_RUNNERS", "3"),
        ("JOB_COMPLETION_INDEX", "2"),
    ];

    #[test]
    fn env_parses_the_operators_contract() {
        let env = parse_env(env_of(&GOOD)).unwrap();
        assert_eq!(
            env,
            RunnerEnv {
                loadtest: "checkout".into(),
                namespace: "load".into(),
                index: 2,
                runners: 3,
                metrics_addr: Some(([0, 0, 0, 0], 9464).into()),
                run: None,
                setup_values: None,
                once: None,
            }
        );
        let mut pairs = GOOD.to_vec();
        pairs.extend([("STAMPEDE_SETUP_VALUES", r#"{"token":"t-1"}"#), ("STAMPEDE_ONCE", "teardown")]);
        let env = parse_env(env_of(&pairs)).unwrap();
        assert_eq!(env.setup_values.unwrap()["token"], "t-1");
        assert_eq!(env.once, Some(stampede_engine::Once::Teardown));
    }

    #[test]
    fn env_problems_name_the_variable() {
        let with = |k: &str, v: Option<&str>| {
            let mut pairs: Vec<(&str, &str)> = GOOD.iter().copied().filter(|(n, _)| *n != k).collect();
            if let Some(v) = v {
                pairs.push((k, v));
            }
            parse_env(env_of(&pairs)).unwrap_err().to_string()
        };
        assert!(with("STAMPEDE_LOADTEST", None).contains("STAMPEDE_LOADTEST is not set"));
        assert!(with("STAMPEDE_NAMESPACE", Some("  ")).contains("STAMPEDE_NAMESPACE is empty"));
        assert!(with("STAMPEDE_RUNNERS", Some("two")).contains("STAMPEDE_RUNNERS=\"two\""));
        assert!(with("STAMPEDE_RUNNERS", Some("0")).contains("out of range"));
        assert!(with("STAMPEDE_RUNNERS", Some("1001")).contains("out of range"));
        assert!(with("JOB_COMPLETION_INDEX", Some("-1")).contains("JOB_COMPLETION_INDEX"));
        assert!(with("JOB_COMPLETION_INDEX", Some("3")).contains("not below STAMPEDE_RUNNERS=3"));
        assert!(with("JOB_COMPLETION_INDEX", None).contains("JOB_COMPLETION_INDEX is not set"));
        assert!(with("STAMPEDE_SETUP_VALUES", Some("[1]")).contains("STAMPEDE_SETUP_VALUES is not a JSON object"));
        assert!(with("STAMPEDE_ONCE", Some("both")).contains("STAMPEDE_ONCE=\"both\" is neither"));
        assert!(with("STAMPEDE_RUN", Some("u1")).contains("STAMPEDE_RUN=\"u1\" is not `<uid>/<run number>`"));
        let mut pairs = GOOD.to_vec();
        pairs.push(("STAMPEDE_RUN", "0f1e-aa/3"));
        assert_eq!(parse_env(env_of(&pairs)).unwrap().run.as_deref(), Some("0f1e-aa/3"));
    }
}
