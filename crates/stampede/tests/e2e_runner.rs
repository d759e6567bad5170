//! `stampede runner` on the real local control plane, with this test playing the operator: it
//! creates the LoadTest, the scenario and result ConfigMaps and the runner's ServiceAccount,
//! Role and RoleBinding (exactly the permissions a runner needs), starts two runner processes
//! with a kubeconfig holding that account's token, sets `status.startAt` and checks what they
//! report. Needs a running cluster, so every test is `#[ignore]`d; `make e2e` runs them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::runtime::wait::conditions;
use kube::{Api, Client, CustomResourceExt as _};
use serde_json::json;
use stampede_api::{LoadTest, RESULT_KEY, RunnerReport, RunnerState, SCENARIO_KEY, env, names};
use stampede_target::TargetServer;
use stampede_testcluster::{TestCluster, wait_for};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const RUNNERS: u32 = 2;

/// A namespace with a LoadTest, its objects and the runner's RBAC; the runner processes.
struct Setup {
    client: Client,
    kubeconfig: PathBuf,
    ns: String,
    lt: String,
    dir: PathBuf,
    runners: Vec<Child>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        for child in &mut self.runners {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Keep the runners' logs of a failed test (or of every test, with STAMPEDE_E2E_KEEP=1).
        if std::thread::panicking() || std::env::var_os("STAMPEDE_E2E_KEEP").is_some() {
            eprintln!("runner logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Setup {
    fn loadtests(&self) -> Api<LoadTest> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn logs(&self) -> String {
        (0..RUNNERS)
            .map(|i| {
                let log = std::fs::read_to_string(self.dir.join(format!("runner-{i}.log"))).unwrap_or_default();
                format!("--- runner {i} ---\n{log}")
            })
            .collect()
    }

    /// The runners' current reports (None: nothing written yet).
    async fn reports(&self) -> Vec<Option<RunnerReport>> {
        let mut out = Vec::new();
        for i in 0..RUNNERS {
            let cm = self.config_maps().get(&names::result_config_map(&self.lt, i)).await.unwrap();
            let text = cm.data.as_ref().and_then(|d| d.get(RESULT_KEY)).cloned();
            out.push(text.map(|t| serde_json::from_str(&t).unwrap_or_else(|e| panic!("runner {i} report: {e}: {t}"))));
        }
        out
    }

    /// Polls the reports (every 50 ms) until `done` holds for all of them.
    async fn wait_reports(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&RunnerReport) -> bool,
    ) -> Vec<RunnerReport> {
        let deadline = Instant::now() + timeout;
        loop {
            let reports = self.reports().await;
            if reports.iter().all(|r| r.as_ref().is_some_and(&done)) {
                return reports.into_iter().flatten().collect();
            }
            if Instant::now() > deadline {
                panic!("timed out after {timeout:?} waiting for {what}: {reports:#?}\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for every runner process to exit and returns the exit codes.
    fn exit_codes(&mut self, timeout: Duration) -> Vec<Option<i32>> {
        let deadline = Instant::now() + timeout;
        let mut codes = vec![None; self.runners.len()];
        while Instant::now() < deadline && codes.iter().any(Option::is_none) {
            for (code, child) in codes.iter_mut().zip(&mut self.runners) {
                if code.is_none()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    *code = Some(status.code().unwrap_or(-1));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        codes
    }

    async fn set_start_at(&self, start_at: SystemTime) -> String {
        let text = OffsetDateTime::from(start_at).format(&Rfc3339).unwrap();
        self.loadtests()
            .patch_status(&self.lt, &PatchParams::default(), &Patch::Merge(json!({"status": {"startAt": text}})))
            .await
            .unwrap();
        text
    }
}

async fn setup(prefix: &str, scenario_yaml: &str) -> Setup {
    setup_with(prefix, scenario_yaml, &["get", "watch"]).await
}

/// [`setup`] with these verbs on the LoadTest.
async fn setup_with(prefix: &str, scenario_yaml: &str, loadtest_verbs: &[&str]) -> Setup {
    let cluster = TestCluster::shared();
    let client = cluster.client().await.expect("client for the test cluster");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch("loadtests.stampede.dev", &PatchParams::apply("e2e-runner").force(), &Patch::Apply(LoadTest::crd()))
        .await
        .unwrap();
    wait_for(&crds, "loadtests.stampede.dev", Duration::from_secs(20), conditions::is_crd_established()).await.unwrap();
    let ns = cluster.namespace(&client, prefix).await.expect("test namespace");
    let lt = "lt".to_string();
    let pp = PostParams::default();

    let scenario: serde_json::Value = serde_yaml_value(scenario_yaml);
    let loadtest: LoadTest = serde_json::from_value(json!({
        "apiVersion": "stampede.dev/v1alpha1",
        "kind": "LoadTest",
        "metadata": {"name": lt},
        "spec": {"runners": RUNNERS, "scenario": scenario},
    }))
    .unwrap();
    Api::<LoadTest>::namespaced(client.clone(), &ns).create(&pp, &loadtest).await.unwrap();

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = |name: String, data: serde_json::Value, immutable: bool| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": data, "immutable": immutable})).unwrap()
    };
    cms.create(&pp, &cm(names::scenario_config_map(&lt), json!({ SCENARIO_KEY: scenario_yaml }), true)).await.unwrap();
    let results: Vec<String> = (0..RUNNERS).map(|i| names::result_config_map(&lt, i)).collect();
    for name in &results {
        cms.create(&pp, &cm(name.clone(), json!({}), false)).await.unwrap();
    }

    // Exactly what a runner needs: its LoadTest (get, watch), its scenario (get) and its result
    // ConfigMaps (get, patch). No list anywhere.
    let account = names::runner_account(&lt);
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": account}})).unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), &ns).create(&pp, &sa).await.unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": account},
        "rules": [
            {"apiGroups": ["stampede.dev"], "resources": ["loadtests"], "resourceNames": [lt], "verbs": loadtest_verbs},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [names::scenario_config_map(&lt)], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": results, "verbs": ["get", "patch"]},
        ],
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), &ns).create(&pp, &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), &ns).create(&pp, &binding).await.unwrap();

    let dir = std::env::temp_dir().join(format!("stampede-e2e-runner-{ns}"));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig =
        cluster.service_account_kubeconfig(&client, &ns, &account, &dir.join("kubeconfig")).await.expect("token");
    let runners = (0..RUNNERS).map(|i| spawn_runner(&kubeconfig, &ns, &lt, i, &dir)).collect();
    Setup { client, kubeconfig, ns, lt, dir, runners }
}

fn spawn_runner(kubeconfig: &Path, ns: &str, lt: &str, index: u32, dir: &Path) -> Child {
    let log = std::fs::File::create(dir.join(format!("runner-{index}.log"))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("runner")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("KUBECONFIG", kubeconfig)
        .env(env::LOADTEST, lt)
        .env(env::NAMESPACE, ns)
        .env(env::RUNNERS, RUNNERS.to_string())
        .env(env::RUNNER_INDEX, index.to_string())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("the stampede binary runs")
}

fn serde_yaml_value(yaml: &str) -> serde_json::Value {
    // The scenario is plain YAML without anchors: parse it via the engine's model to JSON.
    let file = stampede_engine::parse_str(yaml, Path::new("test.yaml")).expect("valid scenario");
    serde_json::to_value(file).unwrap()
}

fn parse_time(s: &str) -> SystemTime {
    OffsetDateTime::parse(s, &Rfc3339).unwrap().into()
}

/// `a - b` in ms.
fn diff_ms(a: SystemTime, b: SystemTime) -> f64 {
    match a.duration_since(b) {
        Ok(d) => d.as_secs_f64() * 1e3,
        Err(e) => -e.duration().as_secs_f64() * 1e3,
    }
}

fn requests(r: &RunnerReport) -> u64 {
    r.result.as_ref().map(|m| m.steps.iter().map(|s| s.requests).sum()).unwrap_or(0)
}

fn iterations(r: &RunnerReport) -> u64 {
    r.result.as_ref().map(|m| m.iterations.values().sum()).unwrap_or(0)
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn e2e_two_runners_start_together_at_start_at_and_their_results_add_up_exactly() {
    let target = TargetServer::start("127.0.0.1:0".parse().unwrap(), 2).unwrap();
    let yaml = format!(
        "name: exact\nbaseUrl: {}\nload: {{executor: constant-vus, vus: 4, iterations: 3001}}\n\
         scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {{url: \"{{{{baseUrl}}}}/get\"}}\n      \
         - name: post\n        request: {{method: POST, url: \"{{{{baseUrl}}}}/post\", body: hi}}\n",
        target.base_url()
    );
    let mut s = setup("e2e-runner", &yaml).await;
    let t0 = Instant::now();
    s.wait_reports("Ready", Duration::from_secs(20), |r| r.state == RunnerState::Ready).await;
    eprintln!("both runners ready after {:?}", t0.elapsed());
    assert_eq!(target.stats().requests(), 0, "no load before the start");

    let start_at = SystemTime::now() + Duration::from_millis(1500);
    let start_text = s.set_start_at(start_at).await;
    let start_at = parse_time(&start_text);
    let done = s.wait_reports("Done", Duration::from_secs(25), |r| r.state == RunnerState::Done).await;
    let codes = s.exit_codes(Duration::from_secs(10));
    assert_eq!(codes, vec![Some(0); RUNNERS as usize], "{}", s.logs());

    for (i, r) in done.iter().enumerate() {
        assert_eq!(r.index, i as u32);
        let started = parse_time(r.started_at.as_deref().expect("startedAt"));
        let skew = diff_ms(started, start_at);
        eprintln!("runner {i}: started {skew:+.3} ms after startAt, {} requests", requests(r));
        // Never before the start instant; how soon after it depends on the machine's load.
        assert!(skew >= 0.0, "runner {i} started {skew} ms before startAt");
        assert!(r.generator.is_some() && r.duration_seconds > 0.0);
        let result = r.result.as_ref().unwrap();
        assert_eq!(result.steps.iter().map(|s| s.step.as_str()).collect::<Vec<_>>(), vec!["get", "post"]);
        assert!(result.steps.iter().all(|s| s.errors.is_empty()), "{result:?}");
    }
    // The split is exact: 3001 iterations = 1501 + 1500, two requests each.
    assert_eq!(done.iter().map(iterations).collect::<Vec<_>>(), vec![1501, 1500]);
    let total: u64 = done.iter().map(requests).sum();
    assert_eq!(total, 6002);
    assert_eq!(target.stats().requests(), total, "the target counted what the runners report");
    target.stop();
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn e2e_abort_stops_running_runners_within_seconds_with_partial_results() {
    let target = TargetServer::start("127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let yaml = format!(
        "name: long\nbaseUrl: {}\nload: {{executor: constant-vus, vus: 2, duration: 60s}}\n\
         scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {{url: \"{{{{baseUrl}}}}/get\"}}\n        \
         think: 5ms\n",
        target.base_url()
    );
    let mut s = setup("e2e-runner-abort", &yaml).await;
    s.wait_reports("Ready", Duration::from_secs(20), |r| r.state == RunnerState::Ready).await;
    s.set_start_at(SystemTime::now() + Duration::from_millis(300)).await;
    let running = s
        .wait_reports("Running with a live total", Duration::from_secs(10), |r| {
            r.state == RunnerState::Running && r.live.as_ref().is_some_and(|l| l.requests > 0)
        })
        .await;
    for r in &running {
        let live = r.live.as_ref().unwrap();
        assert_eq!((live.scenario.as_str(), live.step.as_str()), ("", "total"));
        assert!(!live.histogram.is_empty() && live.max_us > 0, "{live:?}");
    }

    let asked = Instant::now();
    s.loadtests().patch(&s.lt, &PatchParams::default(), &Patch::Merge(json!({"spec": {"abort": true}}))).await.unwrap();
    let done = s.wait_reports("Done after abort", Duration::from_secs(30), |r| r.state == RunnerState::Done).await;
    let stopped = asked.elapsed();
    let codes = s.exit_codes(Duration::from_secs(5));
    eprintln!("both runners Done {stopped:?} after the abort; exit codes {codes:?}");
    assert_eq!(codes, vec![Some(0); RUNNERS as usize], "{}", s.logs());
    for (i, r) in done.iter().enumerate() {
        assert!(requests(r) > 0, "runner {i}: partial results are kept");
        assert!(r.duration_seconds < 30.0, "runner {i} ran {} s of 60", r.duration_seconds);
    }
    let total: u64 = done.iter().map(requests).sum();
    // Requests in flight at the abort are abandoned: the target may have served them.
    let served = target.stats().requests();
    assert!(served >= total && served <= total + 2, "served {served}, reported {total}");
    target.stop();
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn e2e_a_runner_without_work_reports_ready_then_an_empty_result_and_a_past_start_begins_at_once() {
    let target = TargetServer::start("127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let yaml = format!(
        "name: small\nbaseUrl: {}\nload: {{executor: constant-vus, vus: 1, iterations: 10}}\n\
         scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {{url: \"{{{{baseUrl}}}}/get\"}}\n",
        target.base_url()
    );
    let mut s = setup("e2e-runner-idle", &yaml).await;
    s.wait_reports("Ready", Duration::from_secs(20), |r| r.state == RunnerState::Ready).await;
    // A start instant that has passed: start at once.
    let asked = SystemTime::now();
    s.set_start_at(asked - Duration::from_secs(1)).await;
    let done = s.wait_reports("Done", Duration::from_secs(30), |r| r.state == RunnerState::Done).await;
    assert_eq!(s.exit_codes(Duration::from_secs(30)), vec![Some(0); RUNNERS as usize], "{}", s.logs());
    let started = parse_time(done[0].started_at.as_deref().unwrap());
    let late = diff_ms(started, asked);
    // At once, not never: the wait above bounds how late (how soon is the machine's; printed).
    eprintln!("runner 0 started {late} ms after startAt was set");
    assert!(late >= 0.0, "runner 0 started {late} ms before startAt was set");
    assert_eq!(requests(&done[0]), 10);
    // Runner 1's share is 0 VUs: an empty result that still names every step.
    let idle = &done[1];
    assert_eq!(requests(idle), 0);
    let steps = &idle.result.as_ref().expect("an empty result").steps;
    assert_eq!(steps.iter().map(|s| (s.step.as_str(), s.requests)).collect::<Vec<_>>(), vec![("get", 0)]);
    assert_eq!(target.stats().requests(), 10);
    target.stop();
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn e2e_abort_before_the_start_ends_runners_with_empty_results() {
    let yaml = "name: never\nbaseUrl: http://127.0.0.1:9\nload: {executor: constant-vus, vus: 2, duration: 30s}\n\
                scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {url: \"{{baseUrl}}/\"}\n";
    let mut s = setup("e2e-runner-early-abort", yaml).await;
    s.wait_reports("Ready", Duration::from_secs(20), |r| r.state == RunnerState::Ready).await;
    s.loadtests().patch(&s.lt, &PatchParams::default(), &Patch::Merge(json!({"spec": {"abort": true}}))).await.unwrap();
    let done = s.wait_reports("Done", Duration::from_secs(30), |r| r.state == RunnerState::Done).await;
    assert_eq!(s.exit_codes(Duration::from_secs(30)), vec![Some(0); RUNNERS as usize], "{}", s.logs());
    assert!(done.iter().all(|r| requests(r) == 0 && r.started_at.is_none()), "{done:#?}");
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn e2e_an_invalid_scenario_fails_the_runners_with_a_message_and_exit_code_2() {
    let yaml = "name: broken\nbaseUrl: http://127.0.0.1:9\nload: {executor: constant-vus, vus: 2, iterations: 2}\n\
                scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {url: \"{{baseUrl}}/{{nope}}\"}\n";
    let mut s = setup("e2e-runner-invalid", yaml).await;
    let failed = s.wait_reports("Failed", Duration::from_secs(20), |r| r.state == RunnerState::Failed).await;
    assert_eq!(s.exit_codes(Duration::from_secs(10)), vec![Some(2); RUNNERS as usize], "{}", s.logs());
    for r in &failed {
        let message = r.message.as_deref().unwrap_or_default();
        assert!(message.contains("unknown variable `nope`") && message.contains("step `get`"), "{message}");
    }
}

/// What the runner's Role allows, checked with its own token: its LoadTest by GET and by a
/// watch with a `metadata.name` field selector, nothing listed or watched without it, no
/// other ConfigMap, no writes to its scenario.
#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn e2e_the_runner_role_allows_exactly_what_a_runner_does() {
    let yaml = "name: rbac\nbaseUrl: http://127.0.0.1:9\nload: {executor: constant-vus, vus: 1, iterations: 1}\n\
                scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {url: \"{{baseUrl}}/\"}\n";
    let s = setup("e2e-runner-rbac", yaml).await;
    let kc = kube::config::Kubeconfig::read_from(&s.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    let runner = Client::try_from(config).unwrap();
    let forbidden = |r: Result<(), kube::Error>| matches!(r, Err(kube::Error::Api(s)) if s.code == 403);

    let lts: Api<LoadTest> = Api::namespaced(runner.clone(), &s.ns);
    let lt = lts.get(&s.lt).await.expect("get its LoadTest");
    let rv = lt.metadata.resource_version.clone().unwrap();
    let by_name = WatchParams::default().fields(&format!("metadata.name={}", s.lt)).timeout(1);
    assert!(lts.watch(&by_name, &rv).await.is_ok(), "watch its LoadTest by name");
    assert!(forbidden(lts.watch(&WatchParams::default().timeout(1), &rv).await.map(|_| ())), "watch all");
    assert!(forbidden(lts.list(&ListParams::default()).await.map(|_| ())), "list all");

    let cms: Api<ConfigMap> = Api::namespaced(runner, &s.ns);
    cms.get(&names::scenario_config_map(&s.lt)).await.expect("get its scenario");
    let touch = json!({"metadata": {"labels": {"x": "y"}}});
    let pp = PatchParams::default();
    assert!(forbidden(cms.patch(&names::scenario_config_map(&s.lt), &pp, &Patch::Merge(&touch)).await.map(|_| ())));
    cms.patch(&names::result_config_map(&s.lt, 1), &pp, &Patch::Merge(&touch)).await.expect("patch its results");
    assert!(forbidden(cms.get("kube-root-ca.crt").await.map(|_| ())), "another ConfigMap");
    assert!(forbidden(cms.list(&ListParams::default()).await.map(|_| ())), "list ConfigMaps");
}

/// Without `watch` on the LoadTest a runner polls it and still starts on time.
#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn e2e_without_watch_permission_runners_poll_and_still_start_together() {
    let target = TargetServer::start("127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let yaml = format!(
        "name: poll\nbaseUrl: {}\nload: {{executor: constant-vus, vus: 2, iterations: 20}}\n\
         scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {{url: \"{{{{baseUrl}}}}/get\"}}\n",
        target.base_url()
    );
    let mut s = setup_with("e2e-runner-poll", &yaml, &["get"]).await;
    s.wait_reports("Ready", Duration::from_secs(20), |r| r.state == RunnerState::Ready).await;
    let start_at = parse_time(&s.set_start_at(SystemTime::now() + Duration::from_millis(1000)).await);
    let done = s.wait_reports("Done", Duration::from_secs(15), |r| r.state == RunnerState::Done).await;
    assert_eq!(s.exit_codes(Duration::from_secs(10)), vec![Some(0); RUNNERS as usize], "{}", s.logs());
    for r in &done {
        let skew = diff_ms(parse_time(r.started_at.as_deref().unwrap()), start_at);
        assert!(skew >= 0.0, "started {skew} ms before startAt");
    }
    assert_eq!(done.iter().map(requests).sum::<u64>(), 20);
    assert_eq!(target.stats().requests(), 20);
    target.stop();
}

/// SIGTERM (a deleted pod) stops a running runner: it reports Failed ("terminated") with its
/// partial results and exits 143. Run again for the same index after a Done report, a runner
/// does not repeat its share.
#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn e2e_sigterm_reports_failed_with_partial_results_and_a_finished_runner_does_not_run_again() {
    let target = TargetServer::start("127.0.0.1:0".parse().unwrap(), 1).unwrap();
    let yaml = format!(
        "name: term\nbaseUrl: {}\nload: {{executor: constant-vus, vus: 2, duration: 60s}}\n\
         scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {{url: \"{{{{baseUrl}}}}/get\"}}\n        \
         think: 5ms\n",
        target.base_url()
    );
    let mut s = setup("e2e-runner-term", &yaml).await;
    s.wait_reports("Ready", Duration::from_secs(20), |r| r.state == RunnerState::Ready).await;
    s.set_start_at(SystemTime::now() + Duration::from_millis(200)).await;
    s.wait_reports("Running", Duration::from_secs(10), |r| r.state == RunnerState::Running).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for child in &s.runners {
        let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }
    let ended =
        s.wait_reports("Failed after SIGTERM", Duration::from_secs(30), |r| r.state == RunnerState::Failed).await;
    assert_eq!(s.exit_codes(Duration::from_secs(30)), vec![Some(143); RUNNERS as usize], "{}", s.logs());
    for r in &ended {
        assert!(r.message.as_deref().unwrap_or_default().contains("terminated"), "{r:?}");
        assert!(requests(r) > 0, "partial results are kept");
    }

    // Mark runner 0 Done, as if it had finished, and start it again: it exits 0 at once.
    let done = json!({"index": 0, "state": "done", "durationSeconds": 1.0});
    let patch = json!({"data": {RESULT_KEY: done.to_string()}});
    s.config_maps()
        .patch(&names::result_config_map(&s.lt, 0), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let served = target.stats().requests();
    s.runners = vec![spawn_runner(&s.kubeconfig, &s.ns, &s.lt, 0, &s.dir)];
    assert_eq!(s.exit_codes(Duration::from_secs(10)), vec![Some(0)], "{}", s.logs());
    assert_eq!(s.reports().await[0].as_ref().unwrap().duration_seconds, 1.0, "the report is left alone");
    assert_eq!(target.stats().requests(), served);
    target.stop();
}
