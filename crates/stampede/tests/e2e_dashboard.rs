//! The operator's dashboard in a real browser on the real local control plane (`make e2e`):
//! headless Chromium opens the page the operator serves, signs in with a user's own token (a
//! ServiceAccount that may get, list and patch LoadTests in one namespace), sees a 3-runner
//! LoadTest's figures change while it runs, pauses it, raises its VUs and resumes it with the
//! page's controls, and at the end holds the per-step figures of `.status`. Runner pods are `stampede runner` processes run by
//! the node agent, against a built-in target on 127.0.0.1. Every wait is bounded; none measures
//! speed.

// A test reads top to bottom, as the story it checks; the 100-line limit is for the code it tests.
#![allow(clippy::too_many_lines, reason = "a test is one story, read top to bottom")]

#[path = "cli/cdp.rs"]
mod cdp;

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::conditions;
use kube::{CustomResourceExt as _, ResourceExt as _};
use serde_json::{Value, json};
use stampede_api::{LoadTest, LoadTestSpec, Phase};
use stampede_operator::controller::{self, Metrics};
use stampede_operator::dashboard::{DashboardApi, serve};
use stampede_target::TargetServer;
use stampede_testcluster::{TestCluster, wait_for};

use cdp::{CHROMIUM, Cdp};

/// What the page shows of the run.
const SEEN: &str = "(() => { const t = (id) => document.getElementById(id)?.textContent ?? ''; \
    const rows = (id) => Array.from(document.querySelectorAll('#' + id + ' tbody tr')) \
      .map((tr) => Array.from(tr.children).map((c) => c.textContent)); \
    return { list: rows('loadtests'), name: t('run-name'), phase: t('phase'), requests: t('requests'), chartMax: t('chart-max'), \
      steps: rows('steps'), codes: rows('codes'), changes: rows('changes').filter((r) => r[0].startsWith('#')), error: t('error'), message: t('control-msg'), \
      controls: !(document.getElementById('controls')?.hidden ?? true), thresholds: rows('thresholds'), \
      thresholdsTitle: t('thresholds-title'), \
      series: ['chart', 'chart-latency', 'chart-errors', 'chart-vus'].map((id) => document.querySelectorAll('#' + id + ' polyline').length), \
      drawn: Array.from(document.querySelectorAll('svg polyline')).every((l) => /^[0-9., ]+$/.test(l.getAttribute('points'))), \
      errorsMax: t('chart-errors-max'), \
      changeLines: ['chart', 'chart-latency', 'chart-errors', 'chart-vus'].map((id) => \
        Array.from(document.querySelectorAll('#' + id + ' line.change title')).map((e) => e.textContent)) }; })()";

fn count(s: &Value) -> u64 {
    s["requests"].as_str().unwrap_or("0").replace(',', "").parse().unwrap_or(0)
}

/// Every row of the page's step table counts requests.
fn live_steps(s: &Value) -> bool {
    let rows = s["steps"].as_array().map_or(&[][..], Vec::as_slice);
    !rows.is_empty() && rows.iter().all(|r| r[1].as_str().is_some_and(|n| n != "0"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_chromium_watches_and_steers_a_three_runner_loadtest_on_the_operators_dashboard() {
    assert!(Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing: `make unit` installs Debian's chromium");
    let cluster = TestCluster::shared();
    let admin = cluster.client().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.patch("loadtests.stampede.dev", &PatchParams::apply("e2e").force(), &Patch::Apply(LoadTest::crd()))
        .await
        .unwrap();
    wait_for(&crds, "loadtests.stampede.dev", Duration::from_secs(20), conditions::is_crd_established()).await.unwrap();
    let ns = cluster.namespace(&admin, "dash-ui").await.unwrap();
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let metrics = Arc::new(Metrics::default());
    let operator = tokio::spawn(controller::run(admin.clone(), metrics.clone(), controller::Options::namespace(&ns)));

    // The user: may get, list and patch LoadTests in this namespace, and nothing else.
    let yaml = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: watcher, namespace: {ns}}}\n\
         rules: [{{apiGroups: [stampede.dev], resources: [loadtests], verbs: [get, list, patch]}}]\n"
    );
    assert!(cluster.kubectl_run(&["apply", "-f", "-"], Some(&yaml)).status.success());
    assert!(cluster.kubectl_run(&["create", "serviceaccount", "watcher", "-n", &ns], None).status.success());
    let binding = format!("--serviceaccount={ns}:watcher");
    let out = cluster.kubectl_run(&["create", "rolebinding", "watcher", "-n", &ns, "--role=watcher", &binding], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cluster.kubectl_run(&["create", "token", "watcher", "-n", &ns, "--duration=10m"], None);
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // The operator's dashboard, as the chart serves it (here on loopback).
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
    let base = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let known = metrics.clone();
    let api = DashboardApi::new(base, admin.clone(), move || -> BTreeSet<String> { known.namespaces() });
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let server = tokio::spawn(serve(listener, api, std::future::pending()));

    let scenario = json!({
        "name": "shop", "baseUrl": target.base_url(),
        // Ended by its iterations, not a clock: each takes at least the target's 20 ms, so 9,000
        // last 30 s or more at 6 VUs, and none start while paused (the page pauses the run
        // first). However slow the machine, the page's changes come while it runs.
        "load": {"executor": "constant-vus", "vus": 6, "maxVUs": 12, "iterations": 9000, "duration": "10m"},
        "scenarios": [{"name": "s", "steps": [
            {"name": "home", "request": {"url": "{{baseUrl}}/delay/20"}},
            {"name": "item", "request": {"url": "{{baseUrl}}/get"}}]}],
        "thresholds": ["latency{step:home}.p99 < 10s", "errors.rate < 1%"],
    });
    let spec: LoadTestSpec = serde_json::from_value(json!({"runners": 3, "scenario": scenario})).unwrap();
    let lts: Api<LoadTest> = Api::namespaced(admin.clone(), &ns);
    lts.create(&PostParams::default(), &LoadTest::new("shop", spec)).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (dir_path, ns_in, token_in) = (dir.path().to_path_buf(), ns.clone(), token.clone());
    let seen_end = tokio::task::spawn_blocking(move || {
        let (browser, mut cdp) = Cdp::start(&dir_path);
        cdp::open_loadtest(&mut cdp, &url, &token_in, &ns_in, "shop");
        // Live: the count of requests grows while the run goes on.
        let first = cdp.wait_until("the run's first requests", SEEN, |s| s["phase"] == "Running" && count(s) > 0);
        cdp.wait_until("more requests", SEEN, |s| s["phase"] == "Running" && count(s) > count(&first));
        // The step table and the status codes move while the run goes on, not only at its end.
        cdp.wait_until("every step's requests and their codes, live", SEEN, |s| {
            s["phase"] == "Running" && live_steps(s) && s["codes"][0][0] == "HTTP 200"
        });
        // Thresholds as live verdicts, on the figures so far.
        let live = cdp.wait_until("the thresholds, judged live", SEEN, |s| {
            s["phase"] == "Running" && s["thresholds"].as_array().is_some_and(|t| t.len() == 2)
        });
        let verdicts: Vec<&str> =
            live["thresholds"].as_array().unwrap().iter().map(|r| r[2].as_str().unwrap()).collect();
        assert_eq!(verdicts, ["passing", "passing"], "{live}");
        assert!(live["thresholdsTitle"].as_str().unwrap().contains("live"), "{live}");
        // The page's controls, each taken by the operator: a pause, 12 VUs for the whole fleet,
        // the resume.
        cdp.wait_until("the controls", SEEN, |s| s["controls"] == json!(true));
        let taken = |n: usize| move |s: &Value| s["changes"].as_array().is_some_and(|c| c.len() == n);
        cdp.eval("document.getElementById('pause').click(); 1");
        cdp.wait_until("the pause, taken", SEEN, taken(1));
        cdp.eval("document.getElementById('vus-input').value = '12'; document.getElementById('vus-apply').click(); 1");
        cdp.wait_until("12 VUs, taken", SEEN, taken(2));
        cdp.eval("document.getElementById('resume').click(); 1");
        let resumed = cdp.wait_until("the resume, taken", SEEN, taken(3));
        // Each of the four charts marks the three changes, titled with them; each draws its lines
        // (the latency chart one per percentile picked: p50, p90, p99).
        let marks = json!(["paused", "vus 12, paused", "vus 12, resumed"]);
        assert_eq!(resumed["changeLines"], json!([marks, marks, marks, marks]), "{resumed}");
        assert_eq!(resumed["series"], json!([1, 3, 1, 1]), "{resumed}");
        assert_eq!(resumed["drawn"], json!(true), "every line has its points: {resumed}");
        let end = cdp.wait_until("the end of the run", SEEN, |s| s["phase"] == "Succeeded" || s["phase"] == "Failed");
        cdp.screenshot(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("operator-dashboard.png"));
        // On a phone's width the page does not scroll sideways: its charts stack, and a wide
        // table scrolls within its own section.
        let phone = json!({"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": true});
        cdp.call("Emulation.setDeviceMetricsOverride", phone);
        let widths = cdp.eval("[document.documentElement.scrollWidth, window.innerWidth]");
        cdp.screenshot(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("operator-dashboard-phone.png"));
        assert_eq!(widths, json!([390, 390]), "the page's width on a phone, and the phone's");
        // The page's numbers, as it writes them, of `.status` at the end (read after this).
        assert!(cdp.complaints.is_empty(), "the page logged or threw: {:?}", cdp.complaints);
        (end, browser, cdp)
    })
    .await
    .unwrap();
    // The browser stays open (for the page's own number format below) until the end.
    let (end, _browser, mut cdp) = seen_end;

    let lt = lts.get("shop").await.unwrap();
    let st = lt.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    let summary = st.summary.clone().unwrap();
    assert_eq!(summary.requests, target.stats().requests(), "every request counted once");
    assert_eq!(summary.requests, 18_000, "every iteration (two requests each) once");
    let changes: Vec<(Option<u32>, Option<bool>)> =
        st.live.as_ref().unwrap().changes.iter().map(|c| (c.vus, c.paused)).collect();
    assert_eq!(changes, [(None, Some(true)), (Some(12), Some(true)), (Some(12), Some(false))], "each taken once");
    let live = lt.spec.live.as_ref().unwrap();
    assert_eq!((live.vus, live.paused), (Some(12), Some(false)), "patched as the user asked");
    // The page's step table is `.status`'s steps, written as the page writes numbers.
    // Each point of the rate chart covers at least 2 s of the run: none can be above half of
    // every request there was (a point per runner's report, a moment apart, once was).
    let chart_max: f64 = end["chartMax"].as_str().unwrap().replace(',', "").parse().unwrap();
    assert!(chart_max <= summary.requests as f64 / 2.0, "a rate of {chart_max}/s charted");
    assert_eq!(end["codes"], json!([["HTTP 200", "18,000"]]), "the page's status codes at the end");
    assert_eq!((&end["errorsMax"], &end["drawn"]), (&json!("0"), &json!(true)), "no error charted: {end}");
    let rows = end["steps"].as_array().unwrap().clone();
    assert_eq!(rows.len(), summary.steps.len());
    let expected = tokio::task::spawn_blocking(move || cdp::status_step_rows(&mut cdp, &summary.steps)).await.unwrap();
    assert_eq!(rows, expected, "the page's step table against .status");
    // Its thresholds at the end: `.status`'s final verdicts.
    let verdicts: Vec<Value> = st
        .thresholds
        .iter()
        .map(|v| json!([v.threshold, v.actual_text, if v.passed { "passed" } else { "failed" }]))
        .collect();
    assert_eq!(end["thresholds"], json!(verdicts), "the page's thresholds against .status");
    assert_eq!(verdicts.len(), 2);
    eprintln!("{} requests; page rows {rows:?}; LoadTest {}", target.stats().requests(), lt.name_any());

    server.abort();
    operator.abort();
    target.stop();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin);
    let _ = namespaces.delete(&ns, &Default::default()).await;
}
