//! The GitOps gate examples on the real local control plane (`make e2e`):
//!
//! * every object of `gitops/argocd/postsync-loadtest.yaml` and
//!   `gitops/argo-rollouts/analysistemplate.yaml` passes `kubectl apply --dry-run=server` in a
//!   namespace that enforces (and warns about) the `restricted` Pod Security Standard, warnings
//!   as errors: the AnalysisTemplate against Argo Rollouts' own CRD at a pinned release
//!   (`tests/gitops/argo-crds.sh`, path in `$STAMPEDE_ANALYSIS_TEMPLATE_CRD`), and so do the
//!   LoadTests in their ConfigMaps and the analysis Job as the job provider creates it. Two
//!   counter-checks show that these checks bite;
//! * `stampede launch` (the binary built in this workspace) on the analysis example's LoadTest
//!   with `--base-url` of a target on 127.0.0.1, an in-process operator deciding: exit 0 when it
//!   passes, 1 when a threshold fails, 3 when nothing decides within `--timeout`;
//! * the analysis Job itself, run by the node agent with its own ServiceAccount's token in a
//!   restricted namespace: Complete when the load test passes and Failed when it fails, which is
//!   what Argo Rollouts' job provider turns into a successful or failed measurement.
//!
//! The examples' load (a minute or two at a fixed rate) is replaced by 100 iterations of 2 VUs
//! in the runs: the rest of the LoadTest (runners, scenario, checks, thresholds) is the file's.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use futures::FutureExt as _;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::conditions;
use kube::{Client, CustomResourceExt, ResourceExt};
use serde::Deserialize as _;
use stampede_api::{LoadTest, Phase};
use stampede_testcluster::{TestCluster, wait_for};

use crate::operator::{finish, setup};

const POSTSYNC: &str = "gitops/argocd/postsync-loadtest.yaml";
const ANALYSIS: &str = "gitops/argo-rollouts/analysistemplate.yaml";
/// What the runs put in place of the examples' load.
const ITERATIONS: u64 = 100;

fn repo() -> PathBuf {
    stampede_testcluster::repo_root()
}

fn objects(path: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_json::Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn find<'a>(objects: &'a [serde_json::Value], kind: &str) -> &'a serde_json::Value {
    objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
}

fn kubectl(args: &[&str], stdin: Option<&str>) -> Output {
    TestCluster::shared().kubectl_run(args, stdin)
}

fn text(out: &Output) -> String {
    stampede_testcluster::output_text(out)
}

/// How `kubectl apply` names an object: `job.batch/NAME`, `configmap/NAME`.
fn kubectl_name(o: &serde_json::Value) -> String {
    let kind = o["kind"].as_str().unwrap().to_lowercase();
    let name = o["metadata"]["name"].as_str().unwrap();
    match o["apiVersion"].as_str().unwrap().split_once('/') {
        Some((group, _)) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// Argo Rollouts' AnalysisTemplate CRD: `$STAMPEDE_ANALYSIS_TEMPLATE_CRD` (set by `e2e.sh`), or
/// what `tests/gitops/argo-crds.sh` fetches (once; cached).
fn analysis_template_crd() -> PathBuf {
    if let Some(path) = std::env::var_os("STAMPEDE_ANALYSIS_TEMPLATE_CRD") {
        return path.into();
    }
    let script = repo().join("tests/gitops/argo-crds.sh");
    let out = std::process::Command::new("bash").arg(&script).output().expect("bash runs");
    assert!(out.status.success(), "{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().into()
}

/// Installs (or updates) the LoadTest CRD and Argo Rollouts' AnalysisTemplate CRD.
async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let path = analysis_template_crd();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let analysis: CustomResourceDefinition = serde_yaml::from_str(&text).unwrap();
    for crd in [LoadTest::crd(), analysis] {
        let name = crd.name_any();
        crds.patch(&name, &PatchParams::apply("e2e").force(), &Patch::Apply(&crd)).await.unwrap();
        wait_for(&crds, &name, Duration::from_secs(20), conditions::is_crd_established()).await.unwrap();
    }
}

/// Makes `ns` enforce (and warn about) the `restricted` Pod Security Standard.
async fn restrict(client: &Client, ns: &str) {
    let patch = serde_json::json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
    }}});
    Api::<Namespace>::all(client.clone()).patch(ns, &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
}

/// The LoadTest manifest of the example's ConfigMap.
fn loadtest_manifest(objects: &[serde_json::Value]) -> serde_json::Value {
    serde_yaml::from_str(find(objects, "ConfigMap")["data"]["loadtest.yaml"].as_str().unwrap()).unwrap()
}

/// `manifest` with a short, exact load and, if given, other thresholds; else the example's less
/// its latency limits (the machine's to meet, where these tests assert the verdict the target's
/// answers give).
fn short(manifest: &serde_json::Value, thresholds: Option<&[&str]>) -> String {
    let mut m = manifest.clone();
    m["spec"]["scenario"]["load"] = serde_json::json!({"executor": "constant-vus", "vus": 2, "iterations": ITERATIONS});
    match thresholds {
        Some(t) => m["spec"]["scenario"]["thresholds"] = serde_json::json!(t),
        None => {
            let t = m["spec"]["scenario"]["thresholds"].as_array_mut().expect("the example's thresholds");
            t.retain(|t| !t.as_str().is_some_and(|t| t.starts_with("latency")));
            assert!(!t.is_empty(), "the example keeps a threshold the target's answers decide");
        }
    }
    serde_yaml::to_string(&m).unwrap()
}

/// The Job Argo Rollouts' job provider creates for the analysis example's metric, with
/// `{{args.service-url}}` resolved.
fn analysis_job(objects: &[serde_json::Value], name: &str, service_url: &str) -> serde_json::Value {
    let job = &find(objects, "AnalysisTemplate")["spec"]["metrics"][0]["provider"]["job"];
    let spec = job["spec"].to_string().replace("{{args.service-url}}", service_url);
    serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": job["metadata"]["labels"]},
        "spec": serde_json::from_str::<serde_json::Value>(&spec).unwrap(),
    })
}

/// The `stampede` binary built beside this test (by `cargo test --workspace`, as the runner
/// pods' program).
fn stampede() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(|deps| deps.parent()).unwrap().join("stampede");
    assert!(bin.exists(), "{} is missing: cargo build -p stampede", bin.display());
    bin
}

/// `stampede launch ARGS` as cluster-admin, off the test's runtime (whose thread runs the
/// operator meanwhile).
async fn launch(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let kubeconfig = TestCluster::shared().kubeconfig().to_path_buf();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(stampede())
            .arg("launch")
            .args(&args)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// The name in `launch`'s first line, `loadtest.stampede.dev/NAME created`.
fn created_name(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().unwrap_or_default();
    first
        .strip_prefix("loadtest.stampede.dev/")
        .and_then(|rest| rest.strip_suffix(" created"))
        .unwrap_or_else(|| panic!("first line `{first}`:\n{}", text(out)))
        .to_string()
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path.to_string_lossy().into_owned()
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_gitops_examples_pass_a_server_side_dry_run_under_restricted_pod_security() {
    let cluster = TestCluster::shared();
    let client = cluster.client().await.unwrap();
    install_crds(&client).await;
    let ns = cluster.namespace(&client, "gitops-dry").await.unwrap();
    restrict(&client, &ns).await;
    let dry_apply = |stdin: &str| {
        kubectl(&["apply", "--dry-run=server", "--warnings-as-errors", "-n", &ns, "-f", "-"], Some(stdin))
    };
    let dry_create = |stdin: &str| {
        kubectl(&["create", "--dry-run=server", "--warnings-as-errors", "-n", &ns, "-f", "-"], Some(stdin))
    };

    let result = AssertUnwindSafe(async {
        for (path, prefix) in [(POSTSYNC, "checkout-postsync-"), (ANALYSIS, "checkout-analysis-")] {
            let file = std::fs::read_to_string(repo().join(path)).unwrap();
            let out = dry_apply(&file);
            assert!(out.status.success(), "{path}: {}", text(&out));
            let shown = text(&out);
            let objects = objects(path);
            for o in &objects {
                let line = format!("{} created (server dry run)", kubectl_name(o));
                assert!(shown.lines().any(|l| l == line), "{path}: `{line}` not in:\n{shown}");
            }
            assert_eq!(shown.lines().count(), objects.len(), "{path}: one line per object, no warning:\n{shown}");
            // The LoadTest that `stampede launch` creates from the ConfigMap.
            let loadtest = find(&objects, "ConfigMap")["data"]["loadtest.yaml"].as_str().unwrap();
            let out = dry_create(loadtest);
            assert!(out.status.success(), "{path} ConfigMap's loadtest.yaml: {}", text(&out));
            let shown = text(&out);
            assert!(
                shown.starts_with(&format!("loadtest.stampede.dev/{prefix}")) && shown.contains("(server dry run)"),
                "{shown}"
            );
        }
        // The analysis Job as the job provider makes it: the AnalysisTemplate's schema does not
        // run Pod Security admission, the Job does.
        let analysis = objects(ANALYSIS);
        let job = analysis_job(&analysis, "analysis-dry", "http://checkout-canary.shop.svc:8080");
        let out = dry_create(&job.to_string());
        assert!(out.status.success(), "analysis Job: {}", text(&out));
        assert_eq!(text(&out).trim(), "job.batch/analysis-dry created (server dry run)");

        // The checks bite. Pod Security: the hook Job allowed to escalate is refused.
        let mut lax = find(&objects(POSTSYNC), "Job").clone();
        lax["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = true.into();
        let out = dry_apply(&lax.to_string());
        assert!(!out.status.success(), "allowPrivilegeEscalation=true passed the restricted namespace");
        assert!(text(&out).contains("restricted") && text(&out).contains("allowPrivilegeEscalation"), "{}", text(&out));
        // Argo Rollouts' real schema: a misspelt field of the metric's Job is refused (a stand-in
        // CRD that takes any spec would accept it).
        let mut typo = find(&analysis, "AnalysisTemplate").clone();
        let job_spec = typo["spec"]["metrics"][0]["provider"]["job"]["spec"].as_object_mut().unwrap();
        let limit = job_spec.remove("backoffLimit").unwrap();
        job_spec.insert("backofLimit".into(), limit);
        let out = dry_apply(&typo.to_string());
        assert!(
            !out.status.success(),
            "the AnalysisTemplate CRD accepted spec.metrics[0].provider.job.spec.backofLimit"
        );
        assert!(text(&out).contains("backofLimit"), "{}", text(&out));
    })
    .catch_unwind()
    .await;

    let _ = Api::<Namespace>::all(client.clone()).delete(&ns, &DeleteParams::default()).await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_stampede_launch_exits_0_when_the_loadtest_passes_1_when_it_fails_and_3_on_timeout() {
    let env = setup("gitops-gate").await;
    let base_url = env.target.base_url();
    let manifest = loadtest_manifest(&objects(ANALYSIS));
    let dir = tempfile::tempdir().unwrap();
    let api: Api<LoadTest> = Api::namespaced(env.client.clone(), &env.ns);

    // Passes: exit 0, the verdict and the figures printed, and the LoadTest aimed at --base-url.
    let pass = write(dir.path(), "pass.yaml", &short(&manifest, None));
    let out = launch(&[&pass, "-n", &env.ns, "--base-url", &base_url, "--timeout", "3m"]).await;
    eprintln!("stampede launch, passing:\n{}", text(&out));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let name = created_name(&out);
    assert!(name.starts_with("checkout-analysis-"), "{name}");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(stdout.contains(&format!("\n{name}: Succeeded")), "{stdout}");
    assert!(stdout.contains("\nverdict: Passed\n"), "{stdout}");
    assert!(stdout.contains(&format!("\nsummary: {ITERATIONS} requests, ")), "{stdout}");
    assert!(!stdout.contains("threshold failed"), "{stdout}");
    let lt = api.get(&name).await.unwrap();
    assert_eq!(lt.spec.scenario.as_ref().unwrap()["baseUrl"], base_url.as_str(), "--base-url replaced the placeholder");
    let st = lt.status.unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    assert_eq!(st.summary.unwrap().requests, ITERATIONS);
    assert_eq!(env.target.stats().requests(), ITERATIONS, "the target counted every request of the run");

    // A threshold that a healthy target always fails: exit 1, the failed threshold printed.
    let fail = write(dir.path(), "fail.yaml", &short(&manifest, Some(&["errors.rate > 50%"])));
    let out = launch(&[&fail, "-n", &env.ns, "--base-url", &base_url, "--timeout", "3m"]).await;
    eprintln!("stampede launch, failing:\n{}", text(&out));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let failed = created_name(&out);
    assert_ne!(failed, name, "generateName: a new LoadTest per launch");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(stdout.contains(&format!("\n{failed}: Failed")), "{stdout}");
    assert!(stdout.contains("\nverdict: Failed (ThresholdsFailed"), "{stdout}");
    assert!(stdout.contains("\nthreshold failed: errors.rate > 50% (actual "), "{stdout}");
    let st = api.get(&failed).await.unwrap().status.unwrap();
    assert_eq!(st.phase, Phase::Failed);
    let passed = st.conditions.iter().find(|c| c.type_ == "Passed").unwrap();
    assert_eq!((passed.status.as_str(), passed.reason.as_str()), ("False", "ThresholdsFailed"));
    assert_eq!(st.summary.unwrap().requests, ITERATIONS);
    assert_eq!(env.target.stats().requests(), 2 * ITERATIONS);

    // No operator watches this namespace: nothing decides, and --timeout ends the wait.
    let idle = TestCluster::shared().namespace(&env.client, "gitops-idle").await.unwrap();
    let out = launch(&[&pass, "-n", &idle, "--base-url", &base_url, "--timeout", "2s"]).await;
    eprintln!("stampede launch, no operator:\n{}", text(&out));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let waiting = created_name(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("timeout: loadtest.stampede.dev/{waiting} did not finish within 2s (no status yet)")),
        "{stderr}"
    );
    let idle_api: Api<LoadTest> = Api::namespaced(env.client.clone(), &idle);
    assert!(idle_api.get(&waiting).await.unwrap().status.is_none(), "it goes on waiting for an operator");
    let _ = Api::<Namespace>::all(env.client.clone()).delete(&idle, &DeleteParams::default()).await;
    finish(env).await;
}

/// Waits for Job `name` to finish; whether it completed (else it failed).
async fn job_outcome(jobs: &Api<Job>, name: &str) -> bool {
    let finished = |j: Option<&Job>| {
        j.and_then(|j| j.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True"))
    };
    let job = wait_for(jobs, name, Duration::from_secs(180), finished).await.unwrap();
    let conditions = job.status.unwrap().conditions.unwrap();
    conditions.iter().any(|c| c.type_ == "Complete" && c.status == "True")
}

/// The output of the `launch` container of Job `job`'s one pod.
async fn launch_log(client: &Client, ns: &str, job: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"))).await.unwrap();
    assert_eq!(list.items.len(), 1, "backoffLimit 0: one pod");
    TestCluster::shared().read_container_log(ns, &list.items[0].name_any(), "launch").unwrap()
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_the_analysis_job_completes_when_the_load_test_passes_and_fails_when_it_fails() {
    let env = setup("gitops-job").await;
    restrict(&env.client, &env.ns).await;
    let base_url = env.target.base_url();
    let objects = objects(ANALYSIS);
    let manifest = loadtest_manifest(&objects);
    // The example's ServiceAccount, Role and RoleBinding as they are; its ConfigMap with the short load.
    for kind in ["ServiceAccount", "Role", "RoleBinding"] {
        let out = kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(&find(&objects, kind).to_string()));
        assert!(out.status.success(), "{kind}: {}", text(&out));
    }
    let config_map = |loadtest: String| {
        let mut cm = find(&objects, "ConfigMap").clone();
        cm["data"]["loadtest.yaml"] = loadtest.into();
        let out = kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(&cm.to_string()));
        assert!(out.status.success(), "ConfigMap: {}", text(&out));
    };
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), &env.ns);
    let lts: Api<LoadTest> = Api::namespaced(env.client.clone(), &env.ns);

    config_map(short(&manifest, None));
    let job: Job = serde_json::from_value(analysis_job(&objects, "analysis-pass", &base_url)).unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let completed = job_outcome(&jobs, "analysis-pass").await;
    let log = launch_log(&env.client, &env.ns, "analysis-pass").await;
    eprintln!("analysis Job, passing:\n{log}");
    assert!(completed, "the analysis Job failed:\n{log}");
    assert!(log.contains("\nverdict: Passed\n"), "{log}");

    config_map(short(&manifest, Some(&["errors.rate > 50%"])));
    let job: Job = serde_json::from_value(analysis_job(&objects, "analysis-fail", &base_url)).unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let completed = job_outcome(&jobs, "analysis-fail").await;
    let log = launch_log(&env.client, &env.ns, "analysis-fail").await;
    eprintln!("analysis Job, failing:\n{log}");
    assert!(!completed, "the analysis Job completed although the load test failed:\n{log}");
    assert!(log.contains("\nverdict: Failed (ThresholdsFailed"), "{log}");

    // Each Job created its own LoadTest, in the Job's namespace, with the Role's rights alone.
    let mut made: Vec<(bool, Phase)> = lts
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|lt| {
            let by_launch = lt.managed_fields().iter().any(|f| f.manager.as_deref() == Some("stampede-launch"));
            (by_launch, lt.status.map(|s| s.phase).unwrap_or_default())
        })
        .collect();
    made.sort_by_key(|(_, phase)| format!("{phase:?}"));
    assert_eq!(made, [(true, Phase::Failed), (true, Phase::Succeeded)]);
    assert_eq!(env.target.stats().requests(), 2 * ITERATIONS);
    finish(env).await;
}
