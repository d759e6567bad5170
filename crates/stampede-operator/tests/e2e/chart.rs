//! The Helm chart on the real local control plane (`make e2e`):
//!
//! * its renderings (default values, and ci/test-values.yaml with monitors and dashboards) pass
//!   `kubectl apply --dry-run=server` in namespaces that enforce the `restricted` Pod Security
//!   Standard, with warnings as errors. The prometheus-operator CRDs are not part of the test
//!   cluster: the test installs minimal stand-ins for ServiceMonitor and PodMonitor (any spec
//!   accepted), so those two objects are checked for kind, scope and metadata only;
//! * the operator installed from the rendered chart's objects — its ServiceAccount, its
//!   namespaced Roles, its Deployment run by the node agent as `stampede-operator` with the
//!   account's token — wins the leader Lease and runs a LoadTest to Succeeded with nothing
//!   forbidden in its log, while the same token is refused Secrets, Pods, LoadTests of another
//!   namespace and anything cluster-wide.
//!
//! The chart-installed operator watches only its own fresh namespace, so it never races the
//! in-process operators of the other e2e tests, and is deleted (and its process stopped) at the
//! end, pass or fail.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::conditions;
use kube::{Client, Config, CustomResourceExt, ResourceExt};
use stampede_api::{LoadTest, LoadTestSchedule, LoadTestSpec, Phase};
use stampede_target::TargetServer;
use stampede_testcluster::{TestCluster, wait_deleted, wait_for};

const RELEASE: &str = "stampede";

fn repo() -> PathBuf {
    stampede_testcluster::repo_root()
}

/// `helm template stampede charts/stampede -n <ns> <args>`.
fn render(namespace: &str, args: &[&str]) -> String {
    render_release(RELEASE, namespace, args)
}

/// `helm template <release> charts/stampede -n <ns> <args>`.
pub(crate) fn render_release(release: &str, namespace: &str, args: &[&str]) -> String {
    let chart = repo().join("charts/stampede");
    let out = Command::new(stampede_testcluster::helm())
        .args(["template", release, &chart.to_string_lossy(), "--namespace", namespace])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "helm template failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn objects(yaml: &str) -> Vec<serde_json::Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| serde_json::to_value(serde_yaml::Value::deserialize(doc).unwrap()).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn kubectl(args: &[&str], stdin: Option<&str>) -> Output {
    TestCluster::shared().kubectl_run(args, stdin)
}

fn text(out: &Output) -> String {
    stampede_testcluster::output_text(out)
}

/// A fresh namespace that enforces (and warns about) the `restricted` Pod Security Standard.
async fn restricted_namespace(client: &Client, prefix: &str) -> String {
    let ns = TestCluster::shared().namespace(client, prefix).await.unwrap();
    let patch = serde_json::json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
    }}});
    Api::<Namespace>::all(client.clone()).patch(&ns, &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    ns
}

async fn delete_namespaces(client: &Client, names: &[&str]) {
    let api: Api<Namespace> = Api::all(client.clone());
    for ns in names {
        let _ = api.delete(ns, &DeleteParams::default()).await;
    }
}

async fn ensure_loadtest_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch("loadtests.stampede.dev", &PatchParams::apply("e2e").force(), &Patch::Apply(LoadTest::crd()))
        .await
        .unwrap();
    wait_for(&crds, "loadtests.stampede.dev", Duration::from_secs(20), conditions::is_crd_established()).await.unwrap();
    let schedules = "loadtestschedules.stampede.dev";
    crds.patch(schedules, &PatchParams::apply("e2e").force(), &Patch::Apply(LoadTestSchedule::crd())).await.unwrap();
    wait_for(&crds, schedules, Duration::from_secs(20), conditions::is_crd_established()).await.unwrap();
}

/// Minimal stand-ins for prometheus-operator's ServiceMonitor and PodMonitor CRDs: the right
/// group, version, kinds and scope, any spec.
fn monitoring_crd_stubs() -> String {
    ["ServiceMonitor", "PodMonitor"]
        .iter()
        .map(|kind| {
            let plural = format!("{}s", kind.to_lowercase());
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  \
                 name: {plural}.monitoring.coreos.com\nspec:\n  group: monitoring.coreos.com\n  scope: Namespaced\n  \
                 names: {{kind: {kind}, plural: {plural}, singular: {}, listKind: {kind}List}}\n  versions:\n  \
                 - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        \
                 type: object\n        x-kubernetes-preserve-unknown-fields: true\n---\n",
                kind.to_lowercase()
            )
        })
        .collect()
}

fn dry_run(manifest: &str) -> Output {
    kubectl(&["apply", "--dry-run=server", "--warnings-as-errors", "-f", "-"], Some(manifest))
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_chart_renderings_pass_a_server_side_dry_run_under_restricted_pod_security() {
    let cluster = TestCluster::shared();
    let client = cluster.client().await.unwrap();
    let ns = restricted_namespace(&client, "chart-dry").await;
    let team_a = restricted_namespace(&client, "chart-dry-a").await;
    let team_b = restricted_namespace(&client, "chart-dry-b").await;
    let stubs = monitoring_crd_stubs();
    let out = kubectl(&["apply", "-f", "-"], Some(&stubs));
    assert!(out.status.success(), "monitoring CRD stand-ins: {}", text(&out));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in ["servicemonitors.monitoring.coreos.com", "podmonitors.monitoring.coreos.com"] {
        wait_for(&crds, name, Duration::from_secs(20), conditions::is_crd_established()).await.unwrap();
    }

    let result = AssertUnwindSafe(async {
        // Default values: CRD, ClusterRole(Binding), leader-election Role, Service, Deployment.
        let default = render(&ns, &[]);
        let out = dry_run(&default);
        assert!(out.status.success(), "default values: {}", text(&out));
        let shown = text(&out);
        for what in [
            "customresourcedefinition.apiextensions.k8s.io/loadtests.stampede.dev",
            "customresourcedefinition.apiextensions.k8s.io/loadtestschedules.stampede.dev",
            "clusterrole.rbac.authorization.k8s.io/stampede",
            "deployment.apps/stampede",
        ] {
            assert!(shown.contains(what), "{what} not in:\n{shown}");
        }

        // The CI values, watching two namespaces: Roles there, monitors, dashboards.
        let watch = format!("watchNamespaces={{{team_a},{team_b}}}");
        let ci = render(
            &ns,
            &["-f", &repo().join("charts/stampede/ci/test-values.yaml").to_string_lossy(), "--set", &watch],
        );
        let out = dry_run(&ci);
        assert!(out.status.success(), "ci values: {}", text(&out));
        let shown = text(&out);
        for what in
            ["servicemonitor.monitoring.coreos.com/stampede", "podmonitor.monitoring.coreos.com/stampede-runners"]
        {
            assert!(shown.contains(what), "{what} not in:\n{shown}");
        }
        let objs = objects(&ci);
        let kinds: Vec<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert!(!kinds.iter().any(|k| k.starts_with("Cluster")), "namespaced RBAC has nothing cluster-wide: {kinds:?}");
        let role_namespaces: Vec<&str> = objs
            .iter()
            .filter(|o| o["kind"] == "Role" && o["metadata"]["name"] == RELEASE)
            .filter_map(|o| o["metadata"]["namespace"].as_str())
            .collect();
        assert_eq!(role_namespaces, [team_a.as_str(), team_b.as_str()]);
        let deploy = objs.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let env = &deploy["spec"]["template"]["spec"]["containers"][0]["env"];
        let var = |name: &str| env.as_array().unwrap().iter().find(|e| e["name"] == name).cloned();
        assert_eq!(var("STAMPEDE_WATCH_NAMESPACE").unwrap()["value"], format!("{team_a},{team_b}"));
        let pod_monitor = objs.iter().find(|o| o["kind"] == "PodMonitor").unwrap();
        assert_eq!(pod_monitor["spec"]["selector"]["matchLabels"]["stampede.dev/role"], "runner");
        assert_eq!(pod_monitor["spec"]["podMetricsEndpoints"][0]["port"], "metrics");
        assert_eq!(pod_monitor["spec"]["namespaceSelector"]["matchNames"], serde_json::json!([team_a, team_b]));

        // The Pod Security check is real: a non-compliant rendering is refused.
        let lax = render(&ns, &["--set", "securityContext.allowPrivilegeEscalation=true"]);
        let out = dry_run(&lax);
        assert!(!out.status.success(), "allowPrivilegeEscalation=true passed the restricted namespace");
        assert!(text(&out).contains("restricted"), "{}", text(&out));
    })
    .catch_unwind()
    .await;

    let _ = kubectl(&["delete", "--ignore-not-found", "--wait=false", "-f", "-"], Some(&stubs));
    delete_namespaces(&client, &[&ns, &team_a, &team_b]).await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port()
}

/// GET `path` on 127.0.0.1:`port` (HTTP/1.0); the body, or None when nothing answers.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s =
        TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)), Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// A client that authenticates with a token of the operator's ServiceAccount, as its pod does.
async fn operator_token_client(client: &Client, ns: &str, dir: &Path) -> Client {
    let path = dir.join("operator.kubeconfig");
    TestCluster::shared().service_account_kubeconfig(client, ns, RELEASE, &path).await.unwrap();
    let kubeconfig = Kubeconfig::read_from(&path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

fn forbidden<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) {
    match result {
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_chart_installed_operator_runs_a_loadtest_with_only_the_chart_rbac() {
    let cluster = TestCluster::shared();
    let client = cluster.client().await.unwrap();
    ensure_loadtest_crd(&client).await;
    let ns = restricted_namespace(&client, "chart-op").await;
    let other = cluster.namespace(&client, "chart-other").await.unwrap();
    // One replica (pods share 127.0.0.1), its own port, watching only this namespace.
    let port = free_port();
    let manifest = render(
        &ns,
        &[
            "--set",
            &format!(
                "crds.enabled=false,replicaCount=1,rbac.namespaced=true,watchNamespaces={{{ns}}},\
                 http.host=127.0.0.1,http.port={port},logLevel=info\\,stampede_operator=debug"
            ),
        ],
    );
    let out = kubectl(&["apply", "-f", "-"], Some(&manifest));
    assert!(out.status.success(), "installing the rendered chart: {}", text(&out));
    let tmp = std::env::temp_dir().join(format!("stampede-{ns}"));
    std::fs::create_dir_all(&tmp).unwrap();
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();

    let result = AssertUnwindSafe(async {
        let t0 = std::time::Instant::now();
        // The Deployment's pod runs and its operator takes the Lease with its own identity.
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let lease = wait_for(&leases, "stampede-operator", Duration::from_secs(90), |l: Option<&Lease>| {
            l.and_then(|l| l.spec.as_ref()?.holder_identity.clone()).is_some()
        })
        .await
        .unwrap();
        let holder = lease.spec.unwrap().holder_identity.unwrap();
        let pod =
            pods.get(&holder).await.unwrap_or_else(|e| panic!("the Lease holder {holder} is not a pod here: {e}"));
        assert_eq!(pod.labels().get("app.kubernetes.io/instance").map(String::as_str), Some(RELEASE));
        assert_eq!(pod.spec.as_ref().unwrap().service_account_name.as_deref(), Some(RELEASE));
        eprintln!("operator pod {holder} leads after {:?}", t0.elapsed());
        let mut metrics = None;
        for _ in 0..50 {
            metrics = http_get(port, "/metrics");
            if metrics.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let metrics = metrics.expect("the operator serves /metrics on the chart's port");
        assert!(metrics.contains("stampede_operator"), "{metrics}");
        assert_eq!(http_get(port, "/healthz").as_deref(), Some("ok\n"));

        // A LoadTest, run by the chart-installed operator with nothing but the chart's RBAC.
        let spec: LoadTestSpec = serde_json::from_value(serde_json::json!({
            "runners": 2,
            "env": [{"name": "STAMPEDE_METRICS_ADDR", "value": "off"}],
            "scenario": {
                "name": "chart",
                "baseUrl": target.base_url(),
                "load": {"executor": "constant-vus", "vus": 4, "iterations": 120},
                "scenarios": [{"name": "s", "steps": [{"name": "hit", "request": {"url": "{{baseUrl}}/get"}}]}],
                "thresholds": ["errors.rate == 0%"],
            },
        }))
        .unwrap();
        let lts: Api<LoadTest> = Api::namespaced(client.clone(), &ns);
        lts.create(&PostParams::default(), &LoadTest::new("via-chart", spec)).await.unwrap();
        let finished =
            |lt: Option<&LoadTest>| lt.and_then(|l| l.status.as_ref()).is_some_and(|s| s.phase.is_finished());
        let lt = wait_for(&lts, "via-chart", Duration::from_secs(120), finished).await.unwrap();
        let st = lt.status.unwrap();
        assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
        assert_eq!(st.summary.as_ref().map(|s| s.requests), Some(120));
        assert_eq!(target.stats().requests(), 120, "the target counted every request once");
        eprintln!("LoadTest Succeeded {:?} after the install", t0.elapsed());
        // Its Events were recorded (events.k8s.io create/patch).
        let events: Api<Event> = Api::namespaced(client.clone(), &ns);
        let mut reasons = Vec::new();
        for _ in 0..25 {
            reasons = events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("via-chart"))
                .filter_map(|e| e.reason)
                .collect::<Vec<_>>();
            if reasons.iter().any(|r| r == "Succeeded") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(reasons.iter().any(|r| r == "Succeeded"), "events: {reasons:?}");
        // Nothing the operator tried was refused.
        let log = cluster.read_container_log(&ns, &holder, "operator").unwrap();
        assert!(!log.is_empty(), "no operator log at {}", cluster.container_log(&ns, &holder, "operator").display());
        assert!(!log.to_lowercase().contains("forbidden"), "the operator was refused something:\n{log}");

        // What the chart does not grant, with the operator's own token.
        let op = operator_token_client(&client, &ns, &tmp).await;
        Api::<LoadTest>::namespaced(op.clone(), &ns).list(&ListParams::default()).await.expect("its own namespace");
        forbidden("list Secrets", Api::<Secret>::namespaced(op.clone(), &ns).list(&ListParams::default()).await);
        forbidden("get a Secret", Api::<Secret>::namespaced(op.clone(), &ns).get("anything").await);
        forbidden(
            "list LoadTests in another namespace",
            Api::<LoadTest>::namespaced(op.clone(), &other).list(&ListParams::default()).await,
        );
        forbidden("list LoadTests cluster-wide", Api::<LoadTest>::all(op.clone()).list(&ListParams::default()).await);
        forbidden(
            "create a Pod",
            Api::<Pod>::namespaced(op.clone(), &ns)
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(serde_json::json!({
                        "metadata": {"name": "sneaky"},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                    }))
                    .unwrap(),
                )
                .await,
        );
        forbidden(
            "delete the Deployment",
            Api::<Deployment>::namespaced(op.clone(), &ns).delete(RELEASE, &DeleteParams::default()).await,
        );
        forbidden("read CRDs", Api::<CustomResourceDefinition>::all(op.clone()).get("loadtests.stampede.dev").await);
        forbidden("take another Lease", Api::<Lease>::namespaced(op.clone(), &ns).get("someone-else").await);
    })
    .catch_unwind()
    .await;

    // Stop the operator before anything else goes: delete the Deployment and wait for its pod.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let _ = deployments.delete(RELEASE, &DeleteParams::foreground()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for pod in pods
        .list(&ListParams::default().labels("stampede.dev/role=operator"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let _ = wait_deleted(&pods, &pod.name_any(), Duration::from_secs(30)).await;
    }
    target.stop();
    let _ = std::fs::remove_dir_all(&tmp);
    delete_namespaces(&client, &[&ns, &other]).await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
