//! The operator's dashboard API on the real local control plane (`make e2e`), with a user that
//! may read LoadTests in one namespace only: the API server decides what the user sees and
//! changes, because the operator makes each request as that user (with their token).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stampede_api::{LoadTest, LoadTestSchedule, REPORT_KEY, names};
use stampede_operator::dashboard::{DashboardApi, serve};
use stampede_testcluster::TestCluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::operator::{install_crds, loadtest, scenario};

/// One request to the dashboard API; the status code and the body.
async fn request(addr: SocketAddr, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: dashboard\r\n{auth}Connection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut text = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut text)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&text).to_string();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// A page following a LoadTest: the events' stream of `path`, read as it comes.
struct Events {
    stream: tokio::net::TcpStream,
    text: String,
}

impl Events {
    async fn open(addr: SocketAddr, path: &str, token: &str) -> Events {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!("GET {path} HTTP/1.1\r\nHost: dashboard\r\nAuthorization: Bearer {token}\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        Events { stream, text: String::new() }
    }

    /// Reads until the text so far holds `what` (at most a minute); returns the text since the
    /// last call.
    async fn until(&mut self, what: &str) -> String {
        let mut buf = [0u8; 8192];
        while !self.text.contains(what) {
            let n = tokio::time::timeout(Duration::from_secs(60), self.stream.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("no {what:?} in a minute; so far: {}", self.text))
                .unwrap();
            assert!(n > 0, "the stream ended before {what:?}: {}", self.text);
            self.text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        std::mem::take(&mut self.text)
    }
}

/// A minimal merged report of `name` (no request yet), as the operator writes it.
fn report_json(name: &str) -> String {
    let yaml = format!(
        "name: {name}\nbaseUrl: http://my-service.default.svc\nload: {{executor: constant-vus, vus: 1, iterations: 1}}\n\
         scenarios:\n  - name: s\n    steps:\n      - {{name: a, request: {{url: \"{{{{baseUrl}}}}/\"}}}}\n"
    );
    let file = stampede_core::parse_str(&yaml, std::path::Path::new("r.yaml")).unwrap();
    let plan = stampede_core::compile(&file, &Default::default()).unwrap();
    let outcome = stampede_core::RunOutcome {
        metrics: stampede_core::WorkerMetrics::new(plan.step_keys.len(), plan.scenarios.len()),
        started_at: std::time::SystemTime::now(),
        duration: Duration::from_secs(1),
        threads: 1,
        worker_cpu: Duration::ZERO,
        timeline: Vec::new(),
        max_active_vus: 0,
        interrupted: false,
        error_samples: Vec::new(),
        aborted: None,
        source_addresses_spread: 0,
        load_changes: Vec::new(),
    };
    let report = stampede_core::build_report(&plan, &outcome, false, Default::default(), Err("none"));
    serde_json::to_string(&report).unwrap()
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_the_dashboard_api_shows_and_changes_only_what_the_users_own_token_may() {
    let cluster = TestCluster::shared();
    let admin = cluster.client().await.unwrap();
    install_crds(&admin).await;
    let (a, b) =
        (cluster.namespace(&admin, "dash-a").await.unwrap(), cluster.namespace(&admin, "dash-b").await.unwrap());
    let load = json!({"executor": "constant-vus", "vus": 2, "duration": "10s"});
    for ns in [&a, &b] {
        let sc = scenario("http://my-service.default.svc", load.clone(), "/", &[]);
        let baseline = json!({"baseline": {"configMap": {"name": "shop-base", "key": REPORT_KEY}}});
        let lt = loadtest("shop", 1, sc.clone(), baseline);
        Api::<LoadTest>::namespaced(admin.clone(), ns).create(&PostParams::default(), &lt).await.unwrap();
        // A schedule too (suspended: no operator runs here anyway).
        let spec =
            json!({"schedule": "0 3 * * *", "suspend": true, "template": {"spec": {"runners": 1, "scenario": sc}}});
        let schedule = LoadTestSchedule::new("nightly", serde_json::from_value(spec).unwrap());
        Api::<LoadTestSchedule>::namespaced(admin.clone(), ns).create(&PostParams::default(), &schedule).await.unwrap();
    }
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(names::report_config_map("shop")), ..Default::default() },
        data: Some([(REPORT_KEY.to_string(), report_json("shop"))].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(admin.clone(), &a).create(&PostParams::default(), &cm).await.unwrap();
    // Its spec.baseline, a report kept in a ConfigMap key; and a second run finished, the first
    // in its history (there is no operator here to run them).
    let base = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("shop-base".into()), ..Default::default() },
        data: Some([(REPORT_KEY.to_string(), report_json("shop"))].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(admin.clone(), &a).create(&PostParams::default(), &base).await.unwrap();
    let record = |run: u32, started: &str, requests: u64| {
        json!({"run": run, "phase": "Succeeded", "verdict": "Passed", "startTime": started, "requests": requests,
            "rps": requests as f64 / 10.0, "errorRate": 0.0, "p50Ms": 2.0, "p95Ms": 4.0, "p99Ms": 5.0})
    };
    let status = json!({"status": {"phase": "Succeeded", "run": 2, "startTime": "2026-12-05T11:00:00Z",
        "history": [record(1, "2026-12-05T10:00:00Z", 1200)]}});
    Api::<LoadTest>::namespaced(admin.clone(), &a)
        .patch_status("shop", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();

    // A user (a ServiceAccount of namespace A) who may get and list LoadTests and schedules in A only.
    let role = |verbs: &[&str]| {
        serde_json::from_value::<Role>(json!({"metadata": {"name": "viewer"}, "rules": [{"apiGroups": ["stampede.dev"],
            "resources": ["loadtests", "loadtestschedules"], "verbs": verbs}]}))
        .unwrap()
    };
    let roles: Api<Role> = Api::namespaced(admin.clone(), &a);
    roles.create(&PostParams::default(), &role(&["get", "list"])).await.unwrap();
    let out = cluster.kubectl_run(&["create", "serviceaccount", "viewer", "-n", &a], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let binding = ["create", "rolebinding", "viewer", "-n", &a, "--role=viewer"];
    let out = cluster.kubectl_run(&[&binding[..], &[&format!("--serviceaccount={a}:viewer")]].concat(), None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cluster.kubectl_run(&["create", "token", "viewer", "-n", &a, "--duration=10m"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // The dashboard API, with the cluster's address and CA (its admin credentials are never
    // used for a user's request) and both namespaces known.
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
    let base = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let known: BTreeSet<String> = [a.clone(), b.clone()].into();
    let api = DashboardApi::new(base, admin.clone(), move || known.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(serve(listener, api, std::future::pending()));
    let t = Some(token.as_str());

    // No token: nothing.
    assert_eq!(request(addr, "GET", "/api/loadtests", None, "").await.0, 401);
    assert_eq!(request(addr, "GET", "/api/loadtests", Some("not-a-token"), "").await.0, 401);
    // The list: A's only.
    let (status, body) = request(addr, "GET", "/api/loadtests", t, "").await;
    assert_eq!(status, 200, "{body}");
    let listed: Vec<String> = serde_json::from_str::<Value>(&body).unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| format!("{}/{}", i["namespace"].as_str().unwrap(), i["name"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [format!("{a}/shop")]);
    let schedules: Vec<(String, String)> = serde_json::from_str::<Value>(&body).unwrap()["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (format!("{}/{}", s["namespace"].as_str().unwrap(), s["name"].as_str().unwrap()), s["schedule"].to_string())
        })
        .collect();
    assert_eq!(schedules, [(format!("{a}/nightly"), "\"0 3 * * *\"".to_string())], "A's schedule only");
    // One LoadTest: A's yes, B's 403 (from the API server).
    assert_eq!(request(addr, "GET", &format!("/api/loadtests/{a}/shop"), t, "").await.0, 200);
    let (status, body) = request(addr, "GET", &format!("/api/loadtests/{b}/shop"), t, "").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("viewer") && body.contains("forbidden"), "the API server's words: {body}");
    // The report outlives the pods: A's as HTML; B's not for this user.
    let (status, html) = request(addr, "GET", &format!("/api/loadtests/{a}/shop/report.html"), t, "").await;
    assert_eq!(status, 200);
    assert!(
        html.starts_with("<!DOCTYPE html>") && html.contains("<title>shop — Stampede report</title>"),
        "{}",
        &html[..html.len().min(200)]
    );
    // With the trend of its runs (#1 from the history, #2 the run the report is of). Not with
    // its baseline: that is a ConfigMap this user may not read.
    let trend_rows = |html: &str| html.matches("<tr><td>#").count();
    assert_eq!(trend_rows(&html), 2, "a trend row per finished run");
    assert!(html.contains("<td>#1</td><td>2026-12-05T10:00:00Z</td>"), "{html}");
    assert!(!html.contains("Compared with the baseline"), "a baseline the user may not read is not shown");
    assert_eq!(request(addr, "GET", &format!("/api/loadtests/{b}/shop/report.html"), t, "").await.0, 403);
    // Allowed to read that ConfigMap (that one only), the user gets the report beside it.
    let reader: Role =
        serde_json::from_value(json!({"metadata": {"name": "baseline-reader"}, "rules": [{"apiGroups": [""],
        "resources": ["configmaps"], "resourceNames": ["shop-base"], "verbs": ["get"]}]}))
        .unwrap();
    roles.create(&PostParams::default(), &reader).await.unwrap();
    let binding = ["create", "rolebinding", "baseline-reader", "-n", &a, "--role=baseline-reader"];
    let out = cluster.kubectl_run(&[&binding[..], &[&format!("--serviceaccount={a}:viewer")]].concat(), None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // (The API server's authorizer learns of the binding from its own watch: asked again a
    // little later while it has not.)
    let mut asked = 0;
    let html = loop {
        let (status, html) = request(addr, "GET", &format!("/api/loadtests/{a}/shop/report.html"), t, "").await;
        assert_eq!(status, 200);
        asked += 1;
        if html.contains("Compared with the baseline") || asked == 30 {
            break html;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert!(html.contains("Compared with the baseline"), "{}", &html[..html.len().min(400)]);
    assert_eq!(trend_rows(&html), 2);

    // A change of load needs `patch`: refused, and nothing changed.
    let live = format!("/api/loadtests/{a}/shop/live");
    let (status, body) = request(addr, "POST", &live, t, r#"{"vus": 3}"#).await;
    assert_eq!(status, 403, "{body}");
    let lts: Api<LoadTest> = Api::namespaced(admin.clone(), &a);
    assert_eq!(lts.get("shop").await.unwrap().spec.live, None);
    // Given `patch`, the same change is made, as the user.
    roles
        .patch("viewer", &PatchParams::apply("e2e").force(), &Patch::Apply(role(&["get", "list", "patch"])))
        .await
        .unwrap();
    let (status, body) = request(addr, "POST", &live, t, r#"{"vus": 3}"#).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(lts.get("shop").await.unwrap().spec.live.and_then(|l| l.vus), Some(3));
    // Nor does patch in A reach B.
    assert_eq!(request(addr, "POST", &format!("/api/loadtests/{b}/shop/live"), t, r#"{"vus": 3}"#).await.0, 403);
    assert_eq!(request(addr, "POST", &live, t, r#"{"users": 3}"#).await.0, 400);

    // Following a LoadTest (server-sent events): B's is refused by the API server.
    assert_eq!(request(addr, "GET", &format!("/api/loadtests/{b}/shop/events"), t, "").await.0, 403);
    // A's, by a user who may not `watch`: the LoadTest first, then each change (their `get`
    // every second).
    let events = format!("/api/loadtests/{a}/shop/events");
    let mut page = Events::open(addr, &events, &token).await;
    let first = page.until("\n\n").await;
    assert!(first.starts_with("HTTP/1.1 200") && first.contains("text/event-stream"), "{first}");
    assert!(first.contains(r#""live":{"vus":3}"#), "{first}");
    let set_vus = |n: i64| json!({"spec": {"live": {"vus": n}}});
    lts.patch("shop", &PatchParams::default(), &Patch::Merge(&set_vus(4))).await.unwrap();
    page.until(r#""live":{"vus":4}"#).await;
    // Given `watch`, the user's own watch: each change as the API server reports it.
    roles
        .patch("viewer", &PatchParams::apply("e2e").force(), &Patch::Apply(role(&["get", "list", "watch", "patch"])))
        .await
        .unwrap();
    let mut watching = Events::open(addr, &events, &token).await;
    watching.until(r#""live":{"vus":4}"#).await;
    lts.patch("shop", &PatchParams::default(), &Patch::Merge(&set_vus(5))).await.unwrap();
    watching.until(r#""live":{"vus":5}"#).await;
    page.until(r#""live":{"vus":5}"#).await;
    // Deleted: both pages are told, and their streams end.
    lts.delete("shop", &Default::default()).await.unwrap();
    watching.until("event: deleted").await;
    page.until("event: deleted").await;

    server.abort();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin);
    for ns in [a, b] {
        let _ = namespaces.delete(&ns, &Default::default()).await;
    }
}
