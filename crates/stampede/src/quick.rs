//! What `stampede run` makes of its flags, pure: a scenario for one URL (`stampede run URL -c 50
//! -z 10s`, as oha, hey or `artillery quick` take it), and the load flags (`--vus`/`-c`,
//! `--duration`/`-z`, `--iterations`/`-n`, `--rate`/`-q`) applied to a scenario's load, the
//! same way for a URL and for a file, so that a quick try and the file it prints
//! (`--print-scenario`) run alike.

use std::collections::BTreeMap;

use stampede_model::Dur;
use stampede_model::scenario::{Executor, LoadSpec, ScenarioFile};

/// VUs of a one-URL run when `-c` is not given (oha's and hey's default).
pub(crate) const DEFAULT_VUS: u32 = 50;
/// Requests of a one-URL run when neither `-z` nor `-n` is given (oha's and hey's default).
pub(crate) const DEFAULT_REQUESTS: u64 = 200;
/// An open model's duration when neither `-z` nor `-n` says one.
pub(crate) const DEFAULT_RATE_DURATION: std::time::Duration = std::time::Duration::from_secs(10);

/// The load flags, as given.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LoadFlags {
    pub(crate) vus: Option<u32>,
    pub(crate) duration: Option<Dur>,
    pub(crate) iterations: Option<u64>,
    /// Iterations per second: an open model (`constant-arrival-rate`).
    pub(crate) rate: Option<u32>,
}

impl LoadFlags {
    fn any(&self) -> bool {
        self.vus.is_some() || self.duration.is_some() || self.iterations.is_some() || self.rate.is_some()
    }
}

/// The request flags of a one-URL run.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RequestFlags {
    /// `-m`; default GET, or POST with a body (as curl does).
    pub(crate) method: Option<String>,
    /// `-H "Name: value"`, in order.
    pub(crate) headers: Vec<String>,
    /// `-d`, or the contents of `-D FILE`.
    pub(crate) body: Option<String>,
}

/// A one-URL scenario: one step `METHOD /path` to `url`, with the request flags; `DEFAULT_VUS`
/// VUs for `DEFAULT_REQUESTS` requests until the load flags say otherwise.
pub(crate) fn url_scenario(url: &str, request: &RequestFlags) -> Result<ScenarioFile, String> {
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(format!("`{url}` is not a URL"));
    };
    if !matches!(scheme, "http" | "https") {
        return Err(format!("`{url}`: only http:// and https:// URLs can be loaded"));
    }
    let parsed = stampede_engine::HttpUrl::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let mut headers = BTreeMap::new();
    for h in &request.headers {
        let (name, value) = h.split_once(':').ok_or_else(|| format!("-H `{h}`: expected `Name: value`"))?;
        let name = name.trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("-H `{h}`: `{name}` is not a header name"));
        }
        headers.insert(name.to_string(), value.trim().to_string());
    }
    let method = match &request.method {
        Some(m) => m.to_ascii_uppercase(),
        None if request.body.is_some() => "POST".into(),
        None => "GET".into(),
    };
    let path = parsed.path_and_query.clone();
    let mut req = serde_json::json!({"method": method, "url": url});
    if !headers.is_empty() {
        req["headers"] = serde_json::to_value(&headers).unwrap_or_default();
    }
    if let Some(body) = &request.body {
        req["body"] = body.clone().into();
    }
    let name = parsed.authority.clone();
    let scenario = serde_json::json!({
        "name": name,
        "load": {"executor": "constant-vus", "vus": DEFAULT_VUS, "iterations": DEFAULT_REQUESTS},
        "scenarios": [{"name": "url", "steps": [{"name": format!("{method} {path}"), "request": req}]}],
    });
    serde_json::from_value(scenario).map_err(|e| format!("cannot make a scenario of `{url}`: {e}"))
}

/// Applies the load flags to every load block of `file`, or gives it one (a file without any
/// load block, run with `--vus`, `--duration`, `--iterations` or `--rate`).
pub(crate) fn apply_load_flags(file: &mut ScenarioFile, flags: &LoadFlags) {
    if !flags.any() {
        return;
    }
    let shared_used = file.scenarios.iter().any(|s| s.load.is_none());
    if shared_used && file.load.is_none() {
        file.load = Some(LoadSpec { executor: Executor::ConstantVus, vus: Some(1), ..LoadSpec::default() });
    }
    for load in file.loads_mut() {
        apply(load, flags);
    }
}

/// Applies the load flags to one load block. `--rate` makes it an open model
/// (`constant-arrival-rate`: the rate per second for the duration given, or the iterations
/// given at that rate, with the VUs given or the block's peak); otherwise any of `--vus`,
/// `--duration` and `--iterations` makes it `constant-vus` (as k6's flags do). What is not
/// given is kept from the block (a ramp keeps its peak as the VU count).
pub(crate) fn apply(load: &mut LoadSpec, flags: &LoadFlags) {
    if !flags.any() {
        return;
    }
    let peak = peak_vus(load);
    if let Some(rate) = flags.rate {
        let duration = match (flags.duration, flags.iterations) {
            (Some(d), _) => d,
            // The iterations asked for, at that rate.
            (None, Some(n)) => Dur(std::time::Duration::from_millis(n.saturating_mul(1000) / u64::from(rate.max(1)))),
            (None, None) => Dur(planned(load).unwrap_or(DEFAULT_RATE_DURATION)),
        };
        let vus = flags.vus.unwrap_or(peak);
        *load = LoadSpec {
            executor: Executor::ConstantArrivalRate,
            rate: Some(rate),
            time_unit: Some(Dur(std::time::Duration::from_secs(1))),
            duration: Some(duration),
            pre_allocated_vus: Some(vus),
            max_vus: Some(vus),
            graceful_stop: load.graceful_stop,
            ..LoadSpec::default()
        };
        return;
    }
    // A constant arrival rate keeps its rate when only the duration changes.
    if load.executor == Executor::ConstantArrivalRate && flags.vus.is_none() && flags.iterations.is_none() {
        load.duration = flags.duration;
        return;
    }
    let (duration, iterations) = match (flags.duration, flags.iterations) {
        (None, None) if load.executor == Executor::ConstantVus => (load.duration, load.iterations),
        (None, None) => (planned(load).map(Dur), None),
        given => given,
    };
    *load = LoadSpec {
        executor: Executor::ConstantVus,
        vus: Some(flags.vus.unwrap_or(peak)),
        duration,
        iterations,
        graceful_stop: load.graceful_stop,
        ..LoadSpec::default()
    };
}

/// The most VUs a load block runs (an open model's VU pool; a closed model's peak).
fn peak_vus(load: &LoadSpec) -> u32 {
    if load.executor.is_open() {
        // Stage targets are rates here, not VUs.
        load.max_vus.or(load.pre_allocated_vus).unwrap_or(1)
    } else {
        load.stages.iter().map(|s| s.target).chain(load.start_vus).chain(load.vus).max().unwrap_or(1)
    }
}

/// How long a load block runs by its own words: its duration, or its stages' sum.
fn planned(load: &LoadSpec) -> Option<std::time::Duration> {
    load.duration.map(Dur::get).or_else(|| {
        let stages: std::time::Duration = load.stages.iter().filter_map(|s| s.duration).map(Dur::get).sum();
        (!stages.is_zero()).then_some(stages)
    })
}

/// `scenario` as YAML a person reads: the settings left at their defaults (`http`, a
/// scenario's `weight: 1`) left out.
pub(crate) fn scenario_yaml(scenario: &ScenarioFile) -> Result<String, String> {
    serde_yaml::to_string(&tidy(scenario)?).map_err(|e| e.to_string())
}

fn tidy(scenario: &ScenarioFile) -> Result<serde_yaml::Value, String> {
    use serde_yaml::Value;
    let mut value = serde_yaml::to_value(scenario).map_err(|e| e.to_string())?;
    let defaults: ScenarioFile = serde_yaml::from_str("{name: '', scenarios: []}").map_err(|e| e.to_string())?;
    let default_http = serde_yaml::to_value(&defaults.http).map_err(|e| e.to_string())?;
    if let Some(m) = value.as_mapping_mut()
        && m.get("http") == Some(&default_http)
    {
        m.remove("http");
    }
    if let Some(scenarios) = value.get_mut("scenarios").and_then(Value::as_sequence_mut) {
        for s in scenarios.iter_mut().filter_map(Value::as_mapping_mut) {
            if s.get("weight") == Some(&Value::from(1)) {
                s.remove("weight");
            }
        }
    }
    Ok(value)
}

/// The environment variables `scenario`'s templates read (`{{env.NAME}}`), sorted.
pub(crate) fn env_refs(scenario: &ScenarioFile) -> Result<std::collections::BTreeSet<String>, String> {
    let text = serde_yaml::to_string(scenario).map_err(|e| e.to_string())?;
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { break };
        // `{{env.NAME:-default}}`'s name is NAME.
        if let Some(name) = after[..close].trim().strip_prefix("env.").map(|n| n.split(":-").next().unwrap_or(n).trim())
            && !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            names.insert(name.to_string());
        }
        rest = &after[close + 2..];
    }
    Ok(names)
}

/// A LoadTest (YAML) that runs `scenario` with one runner in a cluster, named after it. Each
/// `{{env.NAME}}` of the scenario comes from the Secret `NAME-secrets` (key: the variable's
/// name) through `spec.env`, by reference: no value is written.
pub(crate) fn loadtest_yaml(scenario: &ScenarioFile) -> Result<String, String> {
    let name: String = scenario
        .name
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let name = if name.is_empty() { "quick".to_string() } else { name.chars().take(50).collect() };
    let name = name.trim_end_matches('-').to_string();
    let secret = format!("{name}-secrets");
    let vars = env_refs(scenario)?;
    let mut spec = serde_yaml::Mapping::new();
    spec.insert("runners".into(), 1.into());
    spec.insert("scenario".into(), tidy(scenario)?);
    if !vars.is_empty() {
        let env: Vec<serde_yaml::Value> = vars
            .iter()
            .map(|v| {
                let var = k8s_openapi::api::core::v1::EnvVar {
                    name: v.clone(),
                    value_from: Some(k8s_openapi::api::core::v1::EnvVarSource {
                        secret_key_ref: Some(k8s_openapi::api::core::v1::SecretKeySelector {
                            name: secret.clone(),
                            key: v.clone(),
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                serde_yaml::to_value(var).map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        spec.insert("env".into(), env.into());
    }
    let mut metadata = serde_yaml::Mapping::new();
    metadata.insert("name".into(), name.into());
    let mut lt = serde_yaml::Mapping::new();
    lt.insert("apiVersion".into(), "stampede.dev/v1alpha1".into());
    lt.insert("kind".into(), "LoadTest".into());
    lt.insert("metadata".into(), metadata.into());
    lt.insert("spec".into(), spec.into());
    let mut text = String::new();
    let loopback = [scenario.base_url.as_deref()]
        .into_iter()
        .flatten()
        .chain(
            scenario
                .scenarios
                .iter()
                .flat_map(|s| s.steps.iter())
                .filter_map(|s| Some(s.request.as_ref()?.url.as_str())),
        )
        .any(|u| u.contains("://127.") || u.contains("://localhost") || u.contains("://[::1]"));
    if loopback {
        text.push_str(
            "# In a pod, 127.0.0.1 and localhost are the runner pod itself: point the URLs at the\n\
             # Service under test (e.g. http://my-service.default.svc) before applying this.\n",
        );
    }
    if !vars.is_empty() {
        let literals: Vec<String> = vars.iter().map(|v| format!("--from-literal={v}=…")).collect();
        text.push_str(&format!(
            "# The scenario's {{{{env.NAME}}}}s come from the Secret {secret} (spec.env); create it first:\n\
             #   kubectl create secret generic {secret} {}\n",
            literals.join(" ")
        ));
    }
    text.push_str(&serde_yaml::to_string(&lt).map_err(|e| e.to_string())?);
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dur(s: &str) -> Option<Dur> {
        Some(Dur(stampede_model::parse_duration(s).unwrap()))
    }

    #[test]
    fn a_url_becomes_one_step_with_the_request_flags() {
        let request = RequestFlags {
            method: None,
            headers: vec!["Authorization: Bearer t".into(), "X-Trace:1".into()],
            body: Some(r#"{"a":1}"#.into()),
        };
        let file = url_scenario("http://127.0.0.1:8080/post?x=1", &request).unwrap();
        assert_eq!(file.name, "127.0.0.1:8080");
        let step = &file.scenarios[0].steps[0];
        assert_eq!(step.name, "POST /post?x=1", "a body without -m is a POST, as curl sends it");
        let req = step.request.as_ref().unwrap();
        assert_eq!((req.method.as_str(), req.url.as_str()), ("POST", "http://127.0.0.1:8080/post?x=1"));
        assert_eq!(req.headers["Authorization"], "Bearer t");
        assert_eq!(req.headers["X-Trace"], "1");
        assert_eq!(req.body.as_deref(), Some(r#"{"a":1}"#));
        let load = file.load.unwrap();
        assert_eq!((load.vus, load.iterations), (Some(DEFAULT_VUS), Some(DEFAULT_REQUESTS)));

        for (url, why) in [
            ("127.0.0.1:8080/", "not a URL"),
            ("ftp://127.0.0.1/", "only http:// and https://"),
            ("http://[::1/", "not a URL"),
        ] {
            let err = url_scenario(url, &RequestFlags::default()).unwrap_err();
            assert!(err.contains(why), "{url}: {err}");
        }
        let bad = RequestFlags { headers: vec!["no colon".into()], ..RequestFlags::default() };
        assert_eq!(url_scenario("http://127.0.0.1/", &bad).unwrap_err(), "-H `no colon`: expected `Name: value`");
    }

    #[test]
    fn load_flags_make_the_load_they_say() {
        let base =
            LoadSpec { executor: Executor::ConstantVus, vus: Some(50), iterations: Some(200), ..LoadSpec::default() };
        // -c 10 -z 5s: constant VUs for that long (the file's iteration count goes).
        let mut l = base.clone();
        apply(&mut l, &LoadFlags { vus: Some(10), duration: dur("5s"), ..LoadFlags::default() });
        assert_eq!((l.executor, l.vus, l.duration, l.iterations), (Executor::ConstantVus, Some(10), dur("5s"), None));
        // -c 10 alone keeps the iterations.
        let mut l = base.clone();
        apply(&mut l, &LoadFlags { vus: Some(10), ..LoadFlags::default() });
        assert_eq!((l.vus, l.iterations), (Some(10), Some(200)));
        // -q 2000 -z 5s: an open model at 2000/s for 5 s with the 50 VUs as its pool.
        let mut l = base.clone();
        apply(&mut l, &LoadFlags { rate: Some(2000), duration: dur("5s"), ..LoadFlags::default() });
        assert_eq!(
            (l.executor, l.rate, l.time_unit, l.duration, l.pre_allocated_vus, l.max_vus),
            (Executor::ConstantArrivalRate, Some(2000), dur("1s"), dur("5s"), Some(50), Some(50))
        );
        // -q 100 -n 250: 250 iterations at 100/s.
        let mut l = base.clone();
        apply(&mut l, &LoadFlags { rate: Some(100), iterations: Some(250), ..LoadFlags::default() });
        assert_eq!(l.duration, dur("2500ms"));
        // A ramp keeps its peak as the VU count and its stages' length.
        let mut ramp: LoadSpec = serde_yaml::from_str(
            "{executor: ramping-vus, stages: [{duration: 5s, target: 20}, {duration: 10s, target: 5}]}",
        )
        .unwrap();
        apply(&mut ramp, &LoadFlags { iterations: Some(7), ..LoadFlags::default() });
        assert_eq!((ramp.executor, ramp.vus, ramp.iterations), (Executor::ConstantVus, Some(20), Some(7)));
        let mut ramp2: LoadSpec =
            serde_yaml::from_str("{executor: ramping-vus, stages: [{duration: 5s, target: 20}]}").unwrap();
        apply(&mut ramp2, &LoadFlags { rate: Some(30), ..LoadFlags::default() });
        assert_eq!((ramp2.duration, ramp2.pre_allocated_vus), (dur("5s"), Some(20)));
        // No flag: untouched.
        let mut l = base.clone();
        apply(&mut l, &LoadFlags::default());
        assert_eq!(l, base);
    }

    #[test]
    fn a_file_without_a_load_gets_one_from_the_flags() {
        let mut file: ScenarioFile = serde_yaml::from_str(
            "{name: t, scenarios: [{name: s, steps: [{name: a, request: {url: 'http://127.0.0.1/'}}]}]}",
        )
        .unwrap();
        apply_load_flags(&mut file, &LoadFlags { vus: Some(3), iterations: Some(9), ..LoadFlags::default() });
        let load = file.load.unwrap();
        assert_eq!((load.executor, load.vus, load.iterations), (Executor::ConstantVus, Some(3), Some(9)));
    }

    #[test]
    fn a_loadtest_takes_the_scenarios_environment_from_a_secret_by_reference() {
        let mut file = url_scenario("http://my-service.default.svc/", &RequestFlags::default()).unwrap();
        file.name = "Shop API".into();
        let req = file.scenarios[0].steps[0].request.as_mut().unwrap();
        req.headers.insert("Authorization".into(), "Bearer {{env.SHOP_AUTHORIZATION}}".into());
        req.url.push_str("?k={{ env.API_KEY }}&u={{env.SHOP_AUTHORIZATION}}");
        let yaml = loadtest_yaml(&file).unwrap();
        assert!(yaml.starts_with("# The scenario's {{env.NAME}}s come from the Secret shop-api-secrets"), "{yaml}");
        let lt: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        let secret = |k: &str| serde_json::json!({"name": k, "valueFrom": {"secretKeyRef": {"name": "shop-api-secrets", "key": k}}});
        assert_eq!(lt["spec"]["env"], serde_json::json!([secret("API_KEY"), secret("SHOP_AUTHORIZATION")]));
        let plain = url_scenario("http://my-service.default.svc/", &RequestFlags::default()).unwrap();
        assert!(
            serde_yaml::from_str::<serde_json::Value>(&loadtest_yaml(&plain).unwrap()).unwrap()["spec"]
                .get("env")
                .is_none()
        );
    }

    #[test]
    fn a_loadtest_of_a_quick_try_is_named_after_it_and_warns_about_loopback() {
        let file = url_scenario("http://127.0.0.1:8080/", &RequestFlags::default()).unwrap();
        let yaml = loadtest_yaml(&file).unwrap();
        assert!(yaml.starts_with("# In a pod, 127.0.0.1"), "{yaml}");
        let lt: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(lt["metadata"]["name"], "127-0-0-1-8080");
        assert_eq!(lt["spec"]["scenario"]["scenarios"][0]["steps"][0]["name"], "GET /");
        let placeholder = url_scenario("http://my-service.default.svc/", &RequestFlags::default()).unwrap();
        assert!(!loadtest_yaml(&placeholder).unwrap().starts_with('#'));
    }
}
