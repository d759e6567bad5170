//! The operator's dashboard on the real node (`make e2e-node`), reached the way
//! `docs/kubernetes.md` says: the chart with `dashboardApi.enabled=true`, and
//! `kubectl port-forward svc/stampede 8081:8081` to its Service. Headless Chromium signs in
//! with a user's own token (a ServiceAccount that may get, list, watch and patch LoadTests in one
//! namespace), follows a 3-runner LoadTest whose runners are pods of Stampede's image, sees its
//! figures change while it runs, raises its VUs from 6 to 12 with the page's control, and at the
//! end holds `.status`'s per-step table. A screenshot is written next to the test binary.
//!
//! Every wait is bounded; none measures speed. The load goes to the target pod on the node's
//! own bridge; the browser only to the port-forward on 127.0.0.1.

// A test reads top to bottom, as the story it checks; the 100-line limit is for the code it tests.
#![allow(clippy::too_many_lines, reason = "a test is one story, read top to bottom")]

#[path = "cli/cdp.rs"]
mod cdp;
#[allow(dead_code, reason = "the operator's real-node suite uses the rest")]
#[path = "../../stampede-operator/tests/realnode/harness.rs"]
mod harness;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use kube::api::Api;
use serde_json::{Value, json};
use stampede_api::{LoadTest, Phase};

use cdp::{CHROMIUM, Cdp, Killed};
use harness::*;

/// What the page shows of the run.
const SEEN: &str = "(() => { const t = (id) => document.getElementById(id)?.textContent ?? ''; \
    const rows = (id) => Array.from(document.querySelectorAll('#' + id + ' tbody tr')) \
      .map((tr) => Array.from(tr.children).map((c) => c.textContent)); \
    return { list: rows('loadtests'), phase: t('phase'), requests: t('requests'), chartMax: t('chart-max'), vus: t('vus'), \
      steps: rows('steps'), codes: rows('codes'), changes: rows('changes').filter((r) => r[0].startsWith('#')), error: t('error'), \
      controls: !(document.getElementById('controls')?.hidden ?? true) }; })()";

fn count(s: &Value) -> u64 {
    s["requests"].as_str().unwrap_or("0").replace(',', "").parse().unwrap_or(0)
}

/// Every row of the page's step table counts requests.
fn live_steps(s: &Value) -> bool {
    let rows = s["steps"].as_array().map_or(&[][..], Vec::as_slice);
    !rows.is_empty() && rows.iter().all(|r| r[1].as_str().is_some_and(|n| n != "0"))
}

/// `kubectl port-forward -n stampede-system svc/stampede :8081`, and the local port it chose.
fn port_forward() -> (Killed, u16) {
    let mut child = cluster()
        .kubectl()
        .args(["-n", OPERATOR_NS, "port-forward", &format!("svc/{RELEASE}"), ":8081", "--address=127.0.0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("kubectl port-forward");
    let stdout = child.stdout.take().unwrap();
    let killed = Killed(child);
    // "Forwarding from 127.0.0.1:PORT -> 8081"
    let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
    let line = lines.find(|l| l.starts_with("Forwarding from")).expect("kubectl port-forward said where it listens");
    // It says "Handling connection for …" for each connection: read on, so it never blocks.
    std::thread::spawn(move || lines.for_each(drop));
    let port = line.split(" -> ").next().and_then(|a| a.rsplit(':').next()).and_then(|p| p.parse().ok());
    (killed, port.unwrap_or_else(|| panic!("no port in {line:?}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real node: make e2e-node"]
async fn realnode_chromium_follows_and_steers_a_loadtest_through_a_port_forward_to_the_charts_service() {
    assert!(Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing: `make unit` installs Debian's chromium");
    let client = cluster().client().await.unwrap();
    ensure_operator(&client).await;
    let ns = test_namespace(&client, "rn-dash").await;
    let target_ip = deploy_target(&client, &ns).await;
    let before = target_requests(&target_ip);

    // The user: may get, list, watch and patch LoadTests in this namespace, and nothing else.
    let yaml = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: watcher, namespace: {ns}}}\n\
         rules: [{{apiGroups: [stampede.dev], resources: [loadtests], verbs: [get, list, watch, patch]}}]\n"
    );
    assert!(kubectl(&["apply", "-f", "-"], Some(&yaml)).status.success());
    assert!(kubectl(&["create", "serviceaccount", "watcher", "-n", &ns], None).status.success());
    let binding = format!("--serviceaccount={ns}:watcher");
    let out = kubectl(&["create", "rolebinding", "watcher", "-n", &ns, "--role=watcher", &binding], None);
    assert!(out.status.success(), "{}", text(&out));
    let out = kubectl(&["create", "token", "watcher", "-n", &ns, "--duration=15m"], None);
    assert!(out.status.success(), "{}", text(&out));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // The route the docs give: a port-forward to the chart's Service, port `dashboard`.
    let (_forward, port) = port_forward();
    let url = format!("http://127.0.0.1:{port}/");

    // 3 runners, 6 VUs that may go to 12. Ended by its iterations, not a clock: each takes at
    // least the target's 20 ms, so 6,000 last 20 s or more at 6 VUs, and the page's change
    // comes while it runs however slow the machine is.
    apply_target_loadtest(
        &ns,
        "shop",
        3,
        "",
        "{executor: constant-vus, vus: 6, maxVUs: 12, iterations: 6000, duration: 10m}",
        r#"{name: home, request: {url: "{{baseUrl}}/delay/20"}}"#,
        "[]",
    );

    let dir = tempfile::tempdir().unwrap();
    let (dir_path, ns_in) = (dir.path().to_path_buf(), ns.clone());
    let seen_end = tokio::task::spawn_blocking(move || {
        let (browser, mut cdp) = Cdp::start(&dir_path);
        cdp::open_loadtest(&mut cdp, &url, &token, &ns_in, "shop");
        // Live: the count of requests grows while the run goes on, with 6 VUs running.
        let first = cdp.wait_until("the run's first requests", SEEN, |s| s["phase"] == "Running" && count(s) > 0);
        cdp.wait_until("more requests", SEEN, |s| s["phase"] == "Running" && count(s) > count(&first));
        // The step table and the status codes move while the run goes on, not only at its end.
        cdp.wait_until("every step's requests and their codes, live", SEEN, |s| {
            s["phase"] == "Running" && live_steps(s) && s["codes"][0][0] == "HTTP 200"
        });
        cdp.wait_until("6 VUs running", SEEN, |s| s["vus"] == "6");
        cdp.wait_until("the controls", SEEN, |s| s["controls"] == json!(true));
        cdp.eval("document.getElementById('vus-input').value = '12'; document.getElementById('vus-apply').click(); 1");
        cdp.wait_until("12 VUs, taken", SEEN, |s| s["changes"].as_array().is_some_and(|c| c.len() == 1));
        cdp.wait_until("12 VUs running", SEEN, |s| s["vus"] == "12" || s["phase"] != "Running");
        let end = cdp.wait_until("the end of the run", SEEN, |s| s["phase"] == "Succeeded" || s["phase"] == "Failed");
        cdp.screenshot(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("operator-dashboard-realnode.png"));
        assert!(cdp.complaints.is_empty(), "the page logged or threw: {:?}", cdp.complaints);
        (end, browser, cdp)
    })
    .await
    .unwrap();
    let (end, _browser, mut cdp) = seen_end;

    let lt = Api::<LoadTest>::namespaced(client.clone(), &ns).get("shop").await.unwrap();
    let st = lt.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    let summary = st.summary.clone().unwrap();
    // `/stats` counts itself once.
    assert_eq!(summary.requests, target_requests(&target_ip) - before - 1, "every request counted once");
    assert_eq!(summary.requests, 6_000, "every iteration once");
    let changes: Vec<Option<u32>> = st.live.as_ref().unwrap().changes.iter().map(|c| c.vus).collect();
    assert_eq!(changes, [Some(12)], "taken once, from the page");
    // The page's step table is `.status`'s steps, written as the page writes numbers.
    // Each point of the rate chart covers at least 2 s of the run: none can be above half of
    // every request there was (a point per runner's report, a moment apart, once was).
    let chart_max: f64 = end["chartMax"].as_str().unwrap().replace(',', "").parse().unwrap();
    assert!(chart_max <= summary.requests as f64 / 2.0, "a rate of {chart_max}/s charted");
    assert_eq!(end["codes"], json!([["HTTP 200", "6,000"]]), "the page's status codes at the end");
    let rows = end["steps"].as_array().unwrap().clone();
    let expected = tokio::task::spawn_blocking(move || cdp::status_step_rows(&mut cdp, &summary.steps)).await.unwrap();
    assert_eq!(rows, expected, "the page's step table against .status");
    delete_namespace(&client, &ns).await;
}
