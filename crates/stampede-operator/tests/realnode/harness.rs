//! What the real-node tests share: kubectl and Helm, restricted namespaces, the chart-installed
//! operator (once per test binary), the target Deployment + Service, and waiting for LoadTests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use stampede_api::{LoadTest, RESULT_KEY, RunnerReport, names};
use stampede_testcluster::{TestCluster, wait_for};

pub(crate) const RELEASE: &str = "stampede";
/// The namespace the chart is installed into (restricted Pod Security).
pub(crate) const OPERATOR_NS: &str = "stampede-system";
/// The target's port, in its container and on its Service.
pub(crate) const TARGET_PORT: u16 = 8080;

pub(crate) fn repo() -> PathBuf {
    stampede_testcluster::repo_root()
}

/// The running cluster, which must have a real node.
pub(crate) fn cluster() -> &'static TestCluster {
    let c = TestCluster::shared();
    assert!(
        c.is_real_node(),
        "this suite needs the real node (make e2e-node, or tests/cluster/up.sh --node=real); {} has the node agent",
        c.state_dir().display()
    );
    c
}

/// Stampede's image as imported into the node's containerd: (repository, tag).
pub(crate) fn image() -> (String, String) {
    let reference = cluster().var("STAMPEDE_IMAGE").expect("cluster.env names STAMPEDE_IMAGE").to_string();
    let (repo, tag) = reference.rsplit_once(':').expect("the image reference has a tag");
    (repo.to_string(), tag.to_string())
}

pub(crate) fn image_ref() -> String {
    let (repo, tag) = image();
    format!("{repo}:{tag}")
}

pub(crate) fn kubectl(args: &[&str], stdin: Option<&str>) -> Output {
    cluster().kubectl_run(args, stdin)
}

pub(crate) fn text(out: &Output) -> String {
    stampede_testcluster::output_text(out)
}

/// `helm template stampede charts/stampede -n stampede-system` with the node's image and the
/// dashboard on.
pub(crate) fn render_chart() -> String {
    let (repository, tag) = image();
    let out = Command::new(stampede_testcluster::helm())
        .args(["template", RELEASE, &repo().join("charts/stampede").to_string_lossy(), "--namespace", OPERATOR_NS])
        .args(["--set", &format!("image.repository={repository},image.tag={tag},image.pullPolicy=IfNotPresent")])
        .args(["--set", "replicaCount=1,logLevel=info\\,stampede_operator=debug"])
        // The dashboard, reached by `kubectl port-forward` to the Service (docs/kubernetes.md).
        .args(["--set", "dashboardApi.enabled=true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "helm template failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) const RESTRICTED: [(&str, &str); 2] =
    [("pod-security.kubernetes.io/enforce", "restricted"), ("pod-security.kubernetes.io/warn", "restricted")];

/// Creates (or keeps) namespace `name` and labels it to enforce the `restricted` Pod Security Standard.
pub(crate) async fn restrict(client: &Client, name: &str) {
    let labels: serde_json::Map<String, serde_json::Value> =
        RESTRICTED.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect();
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    Api::<Namespace>::all(client.clone())
        .patch(name, &PatchParams::apply("realnode").force(), &Patch::Apply(ns))
        .await
        .unwrap();
}

/// A fresh restricted namespace `<prefix>-<random>`.
pub(crate) async fn test_namespace(client: &Client, prefix: &str) -> String {
    let ns = cluster().namespace(client, prefix).await.unwrap();
    restrict(client, &ns).await;
    ns
}

pub(crate) async fn delete_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone()).delete(name, &DeleteParams::background()).await;
}

/// Whether the pod's Ready condition is True.
pub(crate) fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Installs the rendered chart (idempotent: `kubectl apply`) and waits until its operator pod is
/// Ready; returns that pod.
pub(crate) async fn ensure_operator(client: &Client) -> Pod {
    restrict(client, OPERATOR_NS).await;
    let manifest = render_chart();
    let out = kubectl(&["apply", "--warnings-as-errors", "-f", "-"], Some(&manifest));
    assert!(out.status.success(), "installing the rendered chart: {}", text(&out));
    let pods: Api<Pod> = Api::namespaced(client.clone(), OPERATOR_NS);
    let selector = ListParams::default().labels("stampede.dev/role=operator");
    for _ in 0..600 {
        let list = pods.list(&selector).await.unwrap().items;
        if let Some(p) = list.into_iter().find(|p| p.metadata.deletion_timestamp.is_none() && pod_ready(p)) {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let out = kubectl(&["-n", OPERATOR_NS, "describe", "pods", "-l", "stampede.dev/role=operator"], None);
    panic!("the operator pod did not become Ready in 120 s:\n{}", text(&out));
}

/// The target: a Deployment of `stampede target` from the same image, and its Service. Returns
/// the pod's IP (the test reads `/stats` from it; pods are on the node's bridge).
pub(crate) async fn deploy_target(client: &Client, ns: &str) -> String {
    let manifest = format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: target}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: target}}}}
  template:
    metadata: {{labels: {{app: target}}}}
    spec:
      securityContext: {{runAsNonRoot: true, runAsUser: 65532, seccompProfile: {{type: RuntimeDefault}}}}
      containers:
      - name: target
        image: {image}
        imagePullPolicy: IfNotPresent
        # HTTP/2 too (by prior knowledge): the target's gRPC service.
        args: [target, --host, 0.0.0.0, --port, "{TARGET_PORT}", --http2]
        ports: [{{name: http, containerPort: {TARGET_PORT}}}]
        # A TCP probe: an HTTP one would add to the requests the target counts.
        readinessProbe: {{tcpSocket: {{port: http}}, periodSeconds: 1}}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {{drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {{name: target}}
spec:
  selector: {{app: target}}
  ports: [{{name: http, port: {TARGET_PORT}, targetPort: http}}]
"#,
        image = image_ref()
    );
    let out = kubectl(&["-n", ns, "apply", "--warnings-as-errors", "-f", "-"], Some(&manifest));
    assert!(out.status.success(), "the target: {}", text(&out));
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for _ in 0..300 {
        let list = pods.list(&ListParams::default().labels("app=target")).await.unwrap().items;
        if let Some(ip) = list.iter().find(|p| pod_ready(p)).and_then(|p| p.status.as_ref()?.pod_ip.clone()) {
            return ip;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let out = kubectl(&["-n", ns, "describe", "pods", "-l", "app=target"], None);
    panic!("the target pod did not become Ready in 60 s:\n{}", text(&out));
}

/// The target's request count (`/stats` counts itself: subtract 1 from a later reading's delta).
pub(crate) fn target_requests(pod_ip: &str) -> u64 {
    target_stats(pod_ip)["requests"].as_u64().unwrap()
}

/// The target's `/stats` (it counts itself as one request).
pub(crate) fn target_stats(pod_ip: &str) -> serde_json::Value {
    let addr: SocketAddr = format!("{pod_ip}:{TARGET_PORT}").parse().unwrap();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /stats HTTP/1.0\r\nHost: target\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("/stats: {e}: {response}"))
}

/// Creates a LoadTest from YAML (`kubectl apply`, as a user would).
pub(crate) fn apply_loadtest(ns: &str, yaml: &str) {
    let out = kubectl(&["-n", ns, "apply", "-f", "-"], Some(yaml));
    assert!(out.status.success(), "applying the LoadTest: {}\n{yaml}", text(&out));
}

/// A LoadTest `name` of `runners` against the namespace's target (`baseUrl` is its Service
/// name), keeping its children for the test to inspect: `spec` adds lines under `spec:`, `load`,
/// one `step` and `thresholds` are YAML flow values.
pub(crate) fn apply_target_loadtest(
    ns: &str,
    name: &str,
    runners: u32,
    spec: &str,
    load: &str,
    step: &str,
    thresholds: &str,
) {
    apply_loadtest(
        ns,
        &format!(
            "apiVersion: stampede.dev/v1alpha1\nkind: LoadTest\nmetadata: {{name: {name}}}\nspec:\n  runners: {runners}\n  \
             {spec}\n  cleanup: {{onSuccess: none, onFailure: none}}\n  scenario:\n    name: {name}\n    \
             baseUrl: http://target.{ns}.svc:{TARGET_PORT}\n    load: {load}\n    scenarios:\n      - name: s\n        \
             steps:\n          - {step}\n    thresholds: {thresholds}\n"
        ),
    );
}

/// Waits for a final phase; on a timeout, prints what the cluster shows.
pub(crate) async fn wait_finished(client: &Client, ns: &str, name: &str, timeout: Duration) -> LoadTest {
    let lts: Api<LoadTest> = Api::namespaced(client.clone(), ns);
    let finished = |lt: Option<&LoadTest>| lt.and_then(|l| l.status.as_ref()).is_some_and(|s| s.phase.is_finished());
    match wait_for(&lts, name, timeout, finished).await {
        Ok(lt) => lt,
        Err(e) => {
            let shown = kubectl(&["-n", ns, "get", "loadtest,job,pods,events", "-o", "wide"], None);
            let lt = kubectl(&["-n", ns, "get", "loadtest", name, "-o", "yaml"], None);
            panic!("LoadTest {ns}/{name} did not finish: {e}\n{}\n{}", text(&shown), text(&lt));
        }
    }
}

/// The runner's own report in its result ConfigMap.
pub(crate) async fn runner_report(client: &Client, ns: &str, lt: &str, index: u32) -> Option<RunnerReport> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = cms.get_opt(&names::result_config_map(lt, index)).await.unwrap()?;
    let json = cm.data.as_ref()?.get(RESULT_KEY)?;
    Some(serde_json::from_str(json).unwrap_or_else(|e| panic!("{}: {e}", cm.name_any())))
}

/// The runner pods of a LoadTest, by completion index.
pub(crate) async fn runner_pods(client: &Client, ns: &str, lt: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut list = pods
        .list(&ListParams::default().labels(&format!("stampede.dev/loadtest={lt},stampede.dev/role=runner")))
        .await
        .unwrap()
        .items;
    list.sort_by_key(completion_index);
    list
}

pub(crate) fn completion_index(pod: &Pod) -> u32 {
    pod.annotations().get("batch.kubernetes.io/job-completion-index").and_then(|i| i.parse().ok()).unwrap_or(u32::MAX)
}
