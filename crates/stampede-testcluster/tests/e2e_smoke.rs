//! Smoke suite for the local control plane: what the real API server, controller-manager,
//! scheduler and the node agent do together. Needs a running cluster, so every test is
//! `#[ignore]`d; `make e2e` starts the cluster and runs them with `-- --ignored`.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::wait::conditions;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use stampede_testcluster::{TestCluster, wait_deleted, wait_for};

const JOB_TIMEOUT: Duration = Duration::from_secs(90);
const SHORT: Duration = Duration::from_secs(30);

async fn setup(prefix: &str) -> (&'static TestCluster, Client, String) {
    let cluster = TestCluster::shared();
    let client = cluster.client().await.expect("client for the test cluster");
    let ns = cluster.namespace(&client, prefix).await.expect("test namespace");
    (cluster, client, ns)
}

fn run(mut cmd: Command, stdin: Option<&str>) -> Output {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn job(name: &str, script: &str, completions: i32, backoff_limit: i32) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "completionMode": "Indexed",
            "backoffLimit": backoff_limit,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script]}],
            }},
        }
    }))
    .unwrap()
}

fn job_condition(job: &Job, ty: &str) -> Option<(String, String)> {
    let conds = job.status.as_ref()?.conditions.as_ref()?;
    let c = conds.iter().find(|c| c.type_ == ty && c.status == "True")?;
    Some((c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

fn exit_code(pod: &Pod) -> Option<i32> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    Some(status.state.as_ref()?.terminated.as_ref()?.exit_code)
}

async fn job_pods(client: &Client, ns: &str, job: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.list(&ListParams::default().labels(&format!("job-name={job}"))).await.unwrap().items
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn crd_applied_with_kubectl_becomes_established_and_its_cel_rule_is_enforced() {
    let (cluster, client, ns) = setup("e2e-crd").await;
    let crd_file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/cluster/testdata/widgets.crd.yaml");
    let mut apply = cluster.kubectl();
    apply.args(["apply", "-f", crd_file]);
    let out = run(apply, None);
    assert!(out.status.success(), "kubectl apply failed: {}", text(&out));

    let crds: Api<CustomResourceDefinition> = Api::all(client);
    wait_for(&crds, "widgets.smoke.stampede.dev", SHORT, conditions::is_crd_established())
        .await
        .expect("the CRD becomes Established");

    let widget = |min: i32, max: i32| {
        format!(
            "{{\"apiVersion\":\"smoke.stampede.dev/v1\",\"kind\":\"Widget\",\"metadata\":{{\"name\":\"w{min}{max}\",\"namespace\":\"{ns}\"}},\"spec\":{{\"min\":{min},\"max\":{max}}}}}"
        )
    };
    let mut good = cluster.kubectl();
    good.args(["create", "-f", "-"]);
    let out = run(good, Some(&widget(1, 5)));
    assert!(out.status.success(), "a valid Widget is accepted: {}", text(&out));
    let mut bad = cluster.kubectl();
    bad.args(["create", "-f", "-"]);
    let out = run(bad, Some(&widget(9, 5)));
    assert!(!out.status.success(), "the CEL rule rejects min > max");
    assert!(text(&out).contains("min must not exceed max"), "{}", text(&out));
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn server_side_dry_run_validates_without_persisting() {
    let (cluster, client, ns) = setup("e2e-dryrun").await;
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: planned, namespace: {ns}}}\ndata: {{k: v}}\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: planned, namespace: {ns}}}\nspec:\n  \
         selector: {{matchLabels: {{app: x}}}}\n  template:\n    metadata: {{labels: {{app: x}}}}\n    \
         spec: {{containers: [{{name: c, image: busybox}}]}}\n"
    );
    let mut dry = cluster.kubectl();
    dry.args(["apply", "--dry-run=server", "-f", "-"]);
    let out = run(dry, Some(&manifest));
    assert!(out.status.success(), "dry run succeeds: {}", text(&out));
    assert!(text(&out).contains("(server dry run)"), "{}", text(&out));
    let cms: Api<ConfigMap> = Api::namespaced(client, &ns);
    assert!(cms.get_opt("planned").await.unwrap().is_none(), "a dry run persists nothing");

    // Labels that do not match the selector: only the server knows this is invalid.
    let invalid = manifest.replace("labels: {app: x}", "labels: {app: other}");
    let mut dry = cluster.kubectl();
    dry.args(["apply", "--dry-run=server", "-f", "-"]);
    let out = run(dry, Some(&invalid));
    assert!(!out.status.success(), "server-side validation rejects it");
    assert!(text(&out).contains("does not match template `labels`"), "{}", text(&out));
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn indexed_job_of_three_completes_through_the_node_agent() {
    let (_, client, ns) = setup("e2e-job-ok").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    jobs.create(&PostParams::default(), &job("ok", "exit 0", 3, 0)).await.unwrap();

    let done = wait_for(&jobs, "ok", JOB_TIMEOUT, |j: Option<&Job>| {
        j.is_some_and(|j| job_condition(j, "Complete").is_some() || job_condition(j, "Failed").is_some())
    })
    .await
    .unwrap();
    assert!(job_condition(&done, "Complete").is_some(), "job completes: {:?}", done.status);
    let status = done.status.unwrap();
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));

    let pods = job_pods(&client, &ns, "ok").await;
    assert_eq!(pods.len(), 3, "one pod per index, none retried");
    for pod in &pods {
        assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some("stampede-node"), "scheduled to the agent");
        assert_eq!(pod.status.as_ref().unwrap().phase.as_deref(), Some("Succeeded"));
        assert_eq!(exit_code(pod), Some(0));
    }
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn job_whose_pods_exit_1_fails_by_its_backoff_limit() {
    let (_, client, ns) = setup("e2e-job-fail").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    jobs.create(&PostParams::default(), &job("fails", "exit 1", 1, 1)).await.unwrap();

    let done = wait_for(&jobs, "fails", JOB_TIMEOUT, |j: Option<&Job>| {
        j.is_some_and(|j| job_condition(j, "Failed").is_some() || job_condition(j, "Complete").is_some())
    })
    .await
    .unwrap();
    let (reason, message) = job_condition(&done, "Failed").expect("the Job fails");
    assert_eq!(reason, "BackoffLimitExceeded", "{message}");
    assert_eq!(done.status.as_ref().unwrap().failed, Some(2), "first try plus backoffLimit=1 retry");

    let pods = job_pods(&client, &ns, "fails").await;
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        assert_eq!(pod.status.as_ref().unwrap().phase.as_deref(), Some("Failed"));
        assert_eq!(exit_code(pod), Some(1), "the real exit code is reported");
    }
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn deleting_an_owner_garbage_collects_its_dependents() {
    let (_, client, ns) = setup("e2e-gc").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = cms.create(&PostParams::default(), &owner).await.unwrap();
    let owner_ref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.uid().unwrap()}]);
    for name in ["dependent-a", "dependent-b"] {
        let dep: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": owner_ref}})).unwrap();
        cms.create(&PostParams::default(), &dep).await.unwrap();
    }
    let survivor: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "unowned"}})).unwrap();
    cms.create(&PostParams::default(), &survivor).await.unwrap();

    cms.delete("owner", &DeleteParams::background()).await.unwrap();
    for name in ["dependent-a", "dependent-b"] {
        wait_deleted(&cms, name, SHORT).await.unwrap_or_else(|e| panic!("{name} is garbage-collected: {e}"));
    }
    assert!(cms.get_opt("unowned").await.unwrap().is_some(), "objects without the owner stay");
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn pod_service_account_token_is_bound_by_rbac() {
    let (cluster, client, ns) = setup("e2e-rbac").await;
    let objects = json!([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "read-configmaps"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "runner"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
         "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": ns}]},
    ]);
    for obj in objects.as_array().unwrap() {
        let mut create = cluster.kubectl();
        create.args(["create", "-n", &ns, "-f", "-"]);
        let out = run(create, Some(&obj.to_string()));
        assert!(out.status.success(), "{}", text(&out));
    }

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = |name: &str, resource: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"serviceAccountName": "runner", "restartPolicy": "Never", "containers": [{
                "name": "kubectl", "image": "registry.k8s.io/kubectl:v1.34.4",
                "args": ["get", resource, "-o", "name"],
            }]}
        }))
        .unwrap()
    };
    pods.create(&PostParams::default(), &pod("list-configmaps", "configmaps")).await.unwrap();
    pods.create(&PostParams::default(), &pod("list-secrets", "secrets")).await.unwrap();
    let finished = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.phase.clone()).is_some_and(|ph| ph == "Succeeded" || ph == "Failed")
    };
    let allowed = wait_for(&pods, "list-configmaps", SHORT, finished).await.unwrap();
    let denied = wait_for(&pods, "list-secrets", SHORT, finished).await.unwrap();

    let log = cluster.read_container_log(&ns, "list-configmaps", "kubectl").unwrap();
    assert_eq!(exit_code(&allowed), Some(0), "the Role grants configmaps: {log}");
    assert!(log.contains("configmap/kube-root-ca.crt"), "{log}");

    let log = cluster.read_container_log(&ns, "list-secrets", "kubectl").unwrap();
    assert_eq!(exit_code(&denied), Some(1), "secrets are not granted: {log}");
    assert!(log.contains("Forbidden"), "{log}");
    assert!(
        log.contains(&format!("system:serviceaccount:{ns}:runner")),
        "the request was made as the pod's ServiceAccount: {log}"
    );
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn pod_environment_resolves_downward_api_and_config_maps() {
    let (cluster, client, ns) = setup("e2e-env").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "settings"}, "data": {"rate": "250"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let mut j = job("env", "echo \"index=$JOB_COMPLETION_INDEX ns=$NS pod=$POD rate=$RATE greeting=$GREETING\"", 2, 0);
    let c = &mut j.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0];
    c.env = Some(
        serde_json::from_value(json!([
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "RATE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "rate"}}},
            {"name": "GREETING", "value": "hello-$(NS)-$(UNDEFINED)"},
        ]))
        .unwrap(),
    );
    jobs.create(&PostParams::default(), &j).await.unwrap();
    wait_for(&jobs, "env", JOB_TIMEOUT, |j: Option<&Job>| j.is_some_and(|j| job_condition(j, "Complete").is_some()))
        .await
        .unwrap();
    for pod in job_pods(&client, &ns, "env").await {
        let name = pod.name_any();
        let index = pod.annotations()["batch.kubernetes.io/job-completion-index"].clone();
        let log = cluster.read_container_log(&ns, &name, "main").unwrap();
        assert_eq!(
            log.trim(),
            format!("index={index} ns={ns} pod={name} rate=250 greeting=hello-{ns}-$(UNDEFINED)"),
            "pod {name}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn deleting_a_running_pod_stops_its_processes() {
    let (_, client, ns) = setup("e2e-delete").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "sleeper"},
        "spec": {"terminationGracePeriodSeconds": 2, "containers": [{
            "name": "main", "image": "busybox", "command": ["sh", "-c", "sleep 300 & wait"],
        }]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let running = wait_for(&pods, "sleeper", SHORT, conditions::is_pod_running()).await.unwrap();
    let cid = running.status.unwrap().container_statuses.unwrap()[0].container_id.clone().unwrap();
    let pid: u32 = cid.strip_prefix("stampede://").unwrap().parse().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "the container process runs");

    pods.delete("sleeper", &DeleteParams::default()).await.unwrap();
    wait_deleted(&pods, "sleeper", SHORT).await.unwrap();
    // The whole process group is gone, the backgrounded `sleep` included (zombies awaiting
    // their reaper do not count).
    let group_alive = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
            .any(|stat| {
                let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
                fields[0] != "Z" && fields[2] == pid.to_string()
            })
    };
    for _ in 0..50 {
        if !group_alive() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("a process of the deleted pod's group is still running");
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn on_failure_restarts_the_container_and_the_job_then_completes() {
    let (_, client, ns) = setup("e2e-restart").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    // Fails on its first run, succeeds on the second ($HOME is the pod's folder, kept across restarts).
    let mut j = job("flaky", "test -f \"$HOME/ran-once\" || { touch \"$HOME/ran-once\"; exit 3; }", 1, 0);
    j.spec.as_mut().unwrap().template.spec.as_mut().unwrap().restart_policy = Some("OnFailure".into());
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let done = wait_for(&jobs, "flaky", JOB_TIMEOUT, |j: Option<&Job>| {
        j.is_some_and(|j| job_condition(j, "Complete").is_some() || job_condition(j, "Failed").is_some())
    })
    .await
    .unwrap();
    assert!(job_condition(&done, "Complete").is_some(), "{:?}", done.status);

    let pods = job_pods(&client, &ns, "flaky").await;
    assert_eq!(pods.len(), 1, "the container restarted in place, no new pod");
    let status = &pods[0].status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    assert_eq!(status.restart_count, 1);
    let last = status.last_state.as_ref().and_then(|s| s.terminated.as_ref()).expect("last state is terminated");
    assert_eq!(last.exit_code, 3);
    assert_eq!(exit_code(&pods[0]), Some(0));
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn an_image_the_node_does_not_have_leaves_the_pod_pending() {
    let (_, client, ns) = setup("e2e-image").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "nginx"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "command": ["nginx"]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let waiting_reason = |p: &Pod| -> Option<String> {
        let s = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
        s.state.as_ref()?.waiting.as_ref()?.reason.clone()
    };
    let pending = wait_for(&pods, "nginx", SHORT, |p: Option<&Pod>| {
        p.and_then(waiting_reason).is_some_and(|r| r != "ContainerCreating")
    })
    .await
    .unwrap();
    assert_eq!(waiting_reason(&pending).as_deref(), Some("ErrImagePull"));
    assert_eq!(pending.status.unwrap().phase.as_deref(), Some("Pending"));
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn the_node_stays_ready_and_renews_its_lease() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    let cluster = TestCluster::shared();
    let client = cluster.client().await.unwrap();
    let node: Node = Api::all(client.clone()).get(cluster.node_name()).await.unwrap();
    let ready = node.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True");

    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let renew_time = |l: &Lease| l.spec.as_ref().and_then(|s| s.renew_time.clone());
    let before = renew_time(&leases.get(cluster.node_name()).await.unwrap()).expect("the lease was renewed");
    wait_for(&leases, cluster.node_name(), SHORT, |l: Option<&Lease>| {
        l.and_then(renew_time).is_some_and(|t| t > before)
    })
    .await
    .expect("the lease is renewed again within 30 s");
}

#[tokio::test]
#[ignore = "needs the local cluster: make e2e"]
async fn mounted_config_map_and_service_account_files_are_readable_at_their_mount_paths() {
    let (cluster, client, ns) = setup("e2e-volumes").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "scenario"}, "data": {"scenario.yaml": "name: smoke\n"}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "reader"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "scenario", "configMap": {"name": "scenario"}}],
            "containers": [{
                "name": "main", "image": "busybox", "command": ["cat"],
                "args": ["/etc/stampede/scenario.yaml", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"],
                "volumeMounts": [{"name": "scenario", "mountPath": "/etc/stampede", "readOnly": true}],
            }],
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let done = wait_for(&pods, "reader", SHORT, |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.phase.clone()).is_some_and(|ph| ph == "Succeeded" || ph == "Failed")
    })
    .await
    .unwrap();
    let log = cluster.read_container_log(&ns, "reader", "main").unwrap();
    assert_eq!(exit_code(&done), Some(0), "{log}");
    // The ConfigMap's file, then the namespace file of the projected kube-api-access volume that
    // the ServiceAccount admission plugin added.
    assert_eq!(log, format!("name: smoke\n{ns}"));
}
