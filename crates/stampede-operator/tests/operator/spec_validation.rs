//! What the operator accepts or refuses in a LoadTest's spec before any runner starts: data
//! and TLS files from `spec.data`, the runner pods' environment, gRPC reflection, and an
//! arrival rate split over the runners.

use stampede_api::{LoadTest, LoadTestSpec};
use stampede_operator::desired::desired;
use stampede_operator::validation::{validate, validate_with_files};

use crate::decisions::loadtest;

#[test]
fn spec_data_is_mounted_for_runners_and_validated_from_its_config_maps() {
    let scenario = r#"
name: users
baseUrl: http://my-service.default.svc
load: {executor: constant-vus, vus: 2, duration: 10s}
data: {users: {csv: users.csv, mode: unique}}
scenarios:
  - name: s
    steps: [{name: login, request: {url: "{{baseUrl}}/login?u={{users.email}}"}}]
"#;
    let mut lt = loadtest(2);
    lt.spec.scenario = Some(serde_yaml::from_str(scenario).unwrap());
    lt.spec.data = vec![
        serde_json::from_value(
            serde_json::json!({"name": "users.csv", "configMap": {"name": "users", "key": "data.csv"}}),
        )
        .unwrap(),
    ];
    let job = desired(&lt, 1, scenario, stampede_api::DEFAULT_IMAGE, Default::default()).job;
    let pod = job.spec.unwrap().template.spec.unwrap();
    let volume = &pod.volumes.as_ref().unwrap()[0];
    let source = &volume.projected.as_ref().unwrap().sources.as_ref().unwrap()[0];
    let cm = source.config_map.as_ref().unwrap();
    assert_eq!(cm.name, "users");
    let item = &cm.items.as_ref().unwrap()[0];
    assert_eq!((item.key.as_str(), item.path.as_str()), ("data.csv", "users.csv"));
    let container = &pod.containers[0];
    let mount = &container.volume_mounts.as_ref().unwrap()[0];
    assert_eq!((mount.mount_path.as_str(), mount.read_only), (stampede_api::DATA_MOUNT, Some(true)));
    let env = container.env.as_ref().unwrap();
    assert!(env.iter().any(|e| e.name == "STAMPEDE_DATA_DIR" && e.value.as_deref() == Some(stampede_api::DATA_MOUNT)));

    // The operator validates with the ConfigMaps' contents, named as the runners will see them.
    let files = std::collections::BTreeMap::from([("users.csv".to_string(), b"email\na@x.io\nb@x.io\n".to_vec())]);
    let plan = validate_with_files(&lt, scenario, "test", Some(files)).unwrap();
    assert_eq!(plan.data[0].rows.len(), 2);
    let err = validate_with_files(&lt, scenario, "test", Some(Default::default())).unwrap_err().0;
    assert!(err.contains("no data file `users.csv` in spec.data (it has: none)"), "{err}");
}

/// TLS files come from `spec.data` like data files: a LoadTest whose `caFile` is a key of
/// `spec.data` validates as its runners will run it, and a missing one is named.
#[test]
fn tls_files_from_spec_data_are_validated_with_their_contents() {
    let scenario = r#"
name: tls
baseUrl: https://127.0.0.1:8443
load: {executor: constant-vus, vus: 1, duration: 1s}
http: {tls: {caFile: ca.pem, clientCert: client.pem, clientKey: client.key}}
scenarios:
  - name: s
    steps: [{name: get, request: {url: "{{baseUrl}}/get"}}]
"#;
    let mut lt = loadtest(1);
    lt.spec.scenario = Some(serde_yaml::from_str(scenario).unwrap());
    let ca = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let client = rcgen::generate_simple_self_signed(vec!["client".to_string()]).unwrap();
    let files = std::collections::BTreeMap::from([
        ("ca.pem".to_string(), ca.cert.pem().into_bytes()),
        ("client.pem".to_string(), client.cert.pem().into_bytes()),
        ("client.key".to_string(), client.signing_key.serialize_pem().into_bytes()),
    ]);
    validate_with_files(&lt, scenario, "test", Some(files.clone())).unwrap_or_else(|e| panic!("{e}"));

    let mut without_ca = files;
    without_ca.remove("ca.pem");
    let err = validate_with_files(&lt, scenario, "test", Some(without_ca)).unwrap_err().0;
    assert_eq!(err, "http.tls.caFile: no data file `ca.pem` in spec.data (it has: client.key, client.pem)");
}

/// Found on the real node: a scenario that used `{{env.JOB_COMPLETION_INDEX}}` (each runner
/// asks for its own path) was refused as "environment variable `JOB_COMPLETION_INDEX` is not
/// set", though Kubernetes sets it in every runner pod of the Indexed Job.
#[test]
fn a_scenario_may_use_the_environment_every_runner_pod_gets() {
    let scenario = r#"
name: per-runner
baseUrl: http://my-service.default.svc
load: {executor: constant-vus, vus: 1, iterations: 1}
scenarios:
  - name: s
    steps:
      - name: a
        request:
          url: "{{baseUrl}}/r{{env.JOB_COMPLETION_INDEX}}/of/{{env.STAMPEDE_RUNNERS}}/{{env.STAMPEDE_LOADTEST}}/{{env.TEAM}}"
"#;
    let spec: LoadTestSpec = serde_json::from_value(serde_json::json!({
        "runners": 3,
        "env": [{"name": "TEAM", "value": "checkout"}],
        "scenario": serde_yaml::from_str::<serde_json::Value>(scenario).unwrap(),
    }))
    .unwrap();
    let mut lt = LoadTest::new("shop", spec);
    lt.metadata.namespace = Some("perf".into());
    validate(&lt, scenario, "test").expect("the runner's own environment is known");
    // A name no runner gets is still refused, by name.
    let unknown = scenario.replace("env.TEAM", "env.NOT_SET_ANYWHERE");
    let err = validate(&lt, &unknown, "test").unwrap_err().0;
    assert!(err.contains("NOT_SET_ANYWHERE") && err.contains("not set"), "{err}");
    // With `envFrom` (a Secret the operator does not read) any name may be set by it: the
    // scenario is valid, and a runner without it would fail at its start, naming it.
    lt.spec.env_from = serde_json::from_value(serde_json::json!([{"secretRef": {"name": "api-credentials"}}])).unwrap();
    let from_secret = scenario.replace("env.TEAM", "env.API_TOKEN");
    validate(&lt, &from_secret, "test").expect("names from envFrom are not known here");
    assert_eq!(
        stampede_operator::validation::env_names(&from_secret),
        ["JOB_COMPLETION_INDEX", "STAMPEDE_RUNNERS", "STAMPEDE_LOADTEST", "API_TOKEN"]
    );
    // #23: expressions are checked as on the command line; a bad one is the user's to fix,
    // named by step, field and column.
    let generated = scenario.replace("{{env.TEAM}}", "{{ uuid() }}-{{ runner.index }}");
    validate(&lt, &generated, "test").expect("generated values and runner variables");
    // Setup and teardown run once for the LoadTest, in pods of their own (see `once.rs`).
    let once = format!("setup:\n  - name: s\n    request: {{url: \"http://127.0.0.1:1/\"}}\n{scenario}");
    let plan = validate(&lt, &once, "test").expect("setup is run once by the operator's setup pod");
    assert_eq!(plan.setup.flow.len(), 1);
    let typo = scenario.replace("{{env.TEAM}}", "{{ uuidd() }}");
    let err = validate(&lt, &typo, "test").unwrap_err().0;
    assert!(
        err.contains("request.url: in `{{uuidd()}}` at column") && err.contains("unknown function `uuidd`"),
        "{err}"
    );
}

/// #25: with `grpc.reflect` each runner asks the server for its services when it starts; the
/// operator does not call the service, and validates the rest of the scenario without them.
#[test]
fn a_grpc_scenario_that_asks_its_server_for_the_services_is_validated_without_them() {
    let scenario = r#"
name: reflect
baseUrl: http://my-grpc-service.default.svc:50051
grpc: {reflect: true}
load: {executor: constant-vus, vus: 2, duration: 1m}
scenarios:
  - name: s
    steps:
      - name: get
        grpc: {method: shop.v1.Catalog/GetProduct, message: {id: "{{ randomInt(1, 9) }}"}}
thresholds:
  - "latency{step:get}.p99 < 200ms"
"#;
    let spec: LoadTestSpec = serde_json::from_value(serde_json::json!({
        "runners": 3,
        "scenario": serde_yaml::from_str::<serde_json::Value>(scenario).unwrap(),
    }))
    .unwrap();
    let lt = LoadTest::new("catalog", spec);
    let plan = validate(&lt, scenario, "test").expect("the methods are checked by the runners");
    assert_eq!(plan.step_keys.len(), 1);
    // What does not depend on the server is still refused, by field.
    let err = validate(&lt, &scenario.replace("step:get", "step:gte"), "test").unwrap_err().0;
    assert!(err.contains("gte"), "{err}");
    let err = validate(&lt, &scenario.replace("randomInt(1, 9)", "randomInt(1)"), "test").unwrap_err().0;
    assert!(err.contains("step `get`: grpc.message:") && err.contains("`randomInt` takes 2"), "{err}");
}

/// An arrival rate with fewer VUs than runners: some runner would get a share of the rate and no
/// VU to run it, and that share would be lost. The spec is refused, naming the field and the fix.
#[test]
fn an_arrival_rate_that_cannot_be_split_over_the_runners_is_refused_by_field() {
    let scenario = r#"
name: split
baseUrl: http://my-service.default.svc
load: {executor: constant-arrival-rate, rate: 10, duration: 5s, preAllocatedVUs: 2, maxVUs: 2}
scenarios: [{name: s, steps: [{name: a, request: {url: "{{baseUrl}}/"}}]}]
"#;
    let mut lt = loadtest(2);
    lt.spec.scenario = Some(serde_yaml::from_str(scenario).unwrap());
    validate(&lt, scenario, "test").expect("2 VUs over 2 runners: one each");
    lt.spec.runners = 3;
    let err = validate(&lt, scenario, "test").unwrap_err().0;
    assert!(err.starts_with("load.maxVUs: 2 VU(s) cannot be split over 3 runners: runner 2"), "{err}");
    assert!(err.contains("at least 3"), "{err}");
    // A scenario's own load is named by its index.
    let own = scenario.replace("load: {", "other: {").replace(
        "scenarios: [{name: s,",
        "scenarios: [{name: s, load: {executor: constant-arrival-rate, rate: 10, duration: 5s, maxVUs: 1},",
    );
    let own = own.lines().filter(|l| !l.starts_with("other:")).collect::<Vec<_>>().join("\n");
    let err = validate(&lt, &own, "test").unwrap_err().0;
    assert!(err.starts_with("scenarios[0].load.maxVUs: 1 VU(s) cannot be split over 3 runners: runner 1"), "{err}");
}
