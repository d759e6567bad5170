//! #32 in the cluster: hostile LoadTests cannot take the operator down, and no secret leaves a
//! failing run. Each LoadTest over a scenario budget gets `Valid=False` naming the budget (and
//! an Event), while the same operator (the task this test started, in this process) goes on
//! and runs a valid LoadTest after them with exact counts. A run with a Secret's token, a
//! setup value and an answer's cookie, whose checks fail, leaves none of them in the status,
//! the Events, any ConfigMap (the runners' results, the merged report), the runners' logs or
//! the operator's.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use stampede_api::{LoadTest, Phase};
use stampede_testcluster::{TestCluster, wait_for};

use crate::operator::{create, finish, loadtest, phase_is, scenario, setup};

fn one_step(base_url: &str, step: serde_json::Value, vars: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "name": "hostile",
        "baseUrl": base_url,
        "load": {"executor": "constant-vus", "vus": 1, "iterations": 1},
        "vars": vars,
        "scenarios": [{"name": "s", "steps": [step]}],
    })
}

/// `a` to `last`, each repeating the one before ten times.
fn exponential(last: char) -> serde_json::Value {
    let mut vars = serde_json::Map::new();
    vars.insert("a".into(), "abcdefg".into());
    let mut prev = 'a';
    for c in 'b'..=last {
        vars.insert(c.to_string(), format!("{{{{{prev}}}}}").repeat(10).into());
        prev = c;
    }
    serde_json::Value::Object(vars)
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_hostile_loadtests_are_marked_invalid_and_the_same_operator_runs_a_valid_one_after() {
    let env = setup("hostile").await;
    let base = env.target.base_url();
    let get = |url: &str| serde_json::json!({"name": "get", "request": {"url": url}});
    let cases = [
        ("exp-vars", one_step(&base, get("{{baseUrl}}/get?x={{j}}"), exponential('j')), "`template.bytes` budget"),
        (
            "long-expr",
            one_step(
                &base,
                get(&format!("{{{{baseUrl}}}}/get?x={{{{ 1{} }}}}", " + 1".repeat(4999))),
                serde_json::json!({}),
            ),
            "`expression.bytes` budget",
        ),
        (
            "big-foreach",
            one_step(
                &base,
                serde_json::json!({"repeat": {"forEach": "[1, 2, 3]", "max": 10_000_000}, "steps": [get("{{baseUrl}}/get")]}),
                serde_json::json!({}),
            ),
            "`loop.passes` budget",
        ),
        (
            "big-body",
            one_step(
                &base,
                serde_json::json!({"name": "post", "request": {"method": "POST", "url": "{{baseUrl}}/post", "body": "{{g}}{{g}}{{g}}"}}),
                exponential('g'),
            ),
            "`template.bytes` budget",
        ),
    ];
    let api: Api<LoadTest> = Api::namespaced(env.client.clone(), &env.ns);
    for (name, sc, _) in &cases {
        create(&env, &loadtest(name, 2, sc.clone(), serde_json::json!({}))).await;
    }
    for (name, _, budget) in &cases {
        let lt = wait_for(&api, name, Duration::from_secs(60), phase_is(&[Phase::Failed])).await.unwrap();
        let st = lt.status.unwrap();
        let valid = st.conditions.iter().find(|c| c.type_ == "Valid").unwrap();
        assert_eq!((valid.status.as_str(), valid.reason.as_str()), ("False", "InvalidSpec"), "{name}");
        assert!(valid.message.contains(budget), "{name}: {}", valid.message);
    }
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    let mut named = Vec::new();
    for _ in 0..40 {
        let list = events.list(&ListParams::default()).await.unwrap();
        named = cases
            .iter()
            .filter(|(name, ..)| {
                list.items.iter().any(|e| {
                    e.reason.as_deref() == Some("InvalidSpec")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(*name)
                })
            })
            .map(|(name, ..)| *name)
            .collect();
        if named.len() == cases.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(named.len(), cases.len(), "an InvalidSpec Event for each: {named:?}");
    assert!(!env.operator.is_finished(), "the operator that compiled them still runs");
    // The same operator runs a valid LoadTest to its end, with exact counts.
    let sc = scenario(&base, serde_json::json!({"executor": "constant-vus", "vus": 2, "iterations": 40}), "/get", &[]);
    create(&env, &loadtest("valid", 2, sc, serde_json::json!({}))).await;
    let lt =
        wait_for(&api, "valid", Duration::from_secs(120), phase_is(&[Phase::Succeeded, Phase::Failed])).await.unwrap();
    let st = lt.status.unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    assert_eq!(st.summary.unwrap().requests, 40);
    assert_eq!(env.target.stats().requests(), 40, "only the valid LoadTest sent anything");
    assert!(!env.operator.is_finished());
    finish(env).await;
}

const TOKEN: &str = "s3cr3t-cluster-token-8086";
const SESSION: &str = "sess-cluster-setup-5a4b3c";
const COOKIE: &str = "cookie-cluster-val-2718";

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_no_secret_of_a_failing_run_reaches_its_status_events_config_maps_or_logs() {
    let env = setup("secrets").await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    let mut creds = Secret::default();
    creds.metadata.name = Some("creds".into());
    creds.string_data = Some([("token".to_string(), TOKEN.to_string())].into());
    secrets.create(&PostParams::default(), &creds).await.unwrap();
    // The operator's own log: it runs as a task of this test's (one-threaded) runtime, so a
    // subscriber set for this thread gets every line it logs from here on.
    let log = Capture::default();
    let writer = log.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).with_writer(move || writer.clone()).finish(),
    );
    let sc = serde_json::json!({
        "name": "secrets",
        "baseUrl": env.target.base_url(),
        "load": {"executor": "constant-vus", "vus": 2, "iterations": 8},
        "setup": [{
            "name": "login",
            // The value is made by an expression, so that the spec itself never spells it.
            "request": {"url": "{{baseUrl}}/anything?session={{ 'sess-cluster' + '-setup-5a4b3c' }}"},
            "extract": {"session": {"json": "args.session"}},
        }],
        "scenarios": [{"name": "s", "steps": [
            {"name": "with token", "request": {
                "method": "POST",
                "url": "{{baseUrl}}/anything?api_key={{env.API_TOKEN}}&page=1",
                "headers": {"authorization": "Bearer {{env.API_TOKEN}}", "x-trace": "{{setup.session}}"},
                "body": "token={{env.API_TOKEN}}",
            }, "check": {"status": 201}},
            {"name": "cookie", "request": {"url": "{{baseUrl}}/response-headers?set-cookie=sid%3D{{ 'cookie-cluster' + '-val-2718' }}"},
             "check": {"status": 201}},
        ]}],
    });
    let extra = serde_json::json!({
        "env": [{"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}],
        "cleanup": {"onSuccess": "none", "onFailure": "none"},
    });
    let api = create(&env, &loadtest("leaky", 2, sc, extra)).await;
    let lt = wait_for(&api, "leaky", Duration::from_secs(180), |lt: Option<&LoadTest>| {
        lt.and_then(|l| l.status.as_ref())
            .is_some_and(|s| s.phase.is_finished() && s.teardown.as_ref().is_none_or(|t| t.state.is_final()))
    })
    .await
    .unwrap();
    let st = lt.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    let summary = st.summary.clone().unwrap();
    assert_eq!((summary.requests, summary.error_rate), (16, 1.0), "every check failed, so samples were taken");
    let report = crate::reports::merged_report(&env, "leaky").await;
    let samples = serde_json::to_string(&report.error_samples).unwrap();
    assert!(samples.contains("[redacted env.API_TOKEN]") && samples.contains("[redacted setup.session]"), "{samples}");

    let mut outputs: Vec<(String, String)> = vec![("the LoadTest".into(), serde_json::to_string(&lt).unwrap())];
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    for e in events.list(&ListParams::default()).await.unwrap().items {
        outputs.push((
            format!("Event {}", e.metadata.name.clone().unwrap_or_default()),
            serde_json::to_string(&e).unwrap(),
        ));
    }
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let config_maps = cms.list(&ListParams::default()).await.unwrap().items;
    assert!(config_maps.len() >= 3, "two runners' results and the merged report");
    for cm in config_maps {
        outputs.push((
            format!("ConfigMap {}", cm.metadata.name.clone().unwrap_or_default()),
            serde_json::to_string(&cm).unwrap(),
        ));
    }
    // The runners' (and setup's) output, as the node agent keeps it.
    let pods = TestCluster::shared().container_log(&env.ns, "p", "c");
    let pods = pods.parent().and_then(|p| p.parent()).unwrap().to_path_buf();
    let mut logs = 0;
    for pod in std::fs::read_dir(&pods).unwrap().flatten() {
        for log in std::fs::read_dir(pod.path()).unwrap().flatten() {
            outputs.push((log.path().display().to_string(), std::fs::read_to_string(log.path()).unwrap_or_default()));
            logs += 1;
        }
    }
    assert!(logs >= 3, "the setup's and two runners' logs: {logs}");
    let operator_log = String::from_utf8_lossy(&log.0.lock().unwrap()).into_owned();
    assert!(operator_log.contains("leaky"), "the operator logged its work on the LoadTest");
    outputs.push(("the operator's log".into(), operator_log));
    for (what, text) in &outputs {
        for secret in [TOKEN, SESSION, COOKIE] {
            assert!(!text.contains(secret), "{what} holds {secret}");
        }
    }
    finish(env).await;
}

/// A log written into memory.
#[derive(Clone, Default)]
struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
