//! The GitOps gate examples as files, without a cluster: `gitops/argocd/postsync-loadtest.yaml`
//! and `gitops/argo-rollouts/analysistemplate.yaml` hold exactly the objects they should, their
//! Roles grant nothing but create/get/list/watch on LoadTests, their Jobs run `stampede launch`
//! on the mounted LoadTest once under the restricted Pod Security settings, and the LoadTest each
//! ConfigMap carries is valid for the operator and aims at the placeholder host. (The API
//! server's view of them, and the gate run for real, are `tests/e2e/gitops.rs`.)

use std::path::PathBuf;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use serde::Deserialize as _;
use stampede_api::LoadTest;

const POSTSYNC: &str = "gitops/argocd/postsync-loadtest.yaml";
const ANALYSIS: &str = "gitops/argo-rollouts/analysistemplate.yaml";
const PLACEHOLDER: &str = "http://my-service.default.svc:8080";
const IMAGE: &str = "ghcr.io/stampede-dev/stampede:0.1.0";

fn objects(path: &str) -> Vec<serde_json::Value> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_json::Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn one<T: serde::de::DeserializeOwned>(objects: &[serde_json::Value], kind: &str) -> T {
    let found: Vec<_> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    serde_json::from_value(found[0].clone()).unwrap()
}

/// Checks the ServiceAccount, Role, RoleBinding and ConfigMap shared by both examples; returns
/// the account's name and the LoadTest in the ConfigMap.
fn check_rbac_and_loadtest(path: &str, objects: &[serde_json::Value], prefix: &str) -> (String, String, LoadTest) {
    let account = objects.iter().find(|o| o["kind"] == "ServiceAccount").unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let role: Role = one(objects, "Role");
    let rules = serde_json::to_value(role.rules.unwrap()).unwrap();
    assert_eq!(
        rules,
        serde_json::json!([{"apiGroups": ["stampede.dev"], "resources": ["loadtests"],
            "verbs": ["create", "get", "list", "watch"]}]),
        "{path}: the Role grants exactly what `stampede launch` needs"
    );
    let binding: RoleBinding = one(objects, "RoleBinding");
    assert_eq!(
        (binding.role_ref.kind.as_str(), binding.role_ref.name.as_str()),
        ("Role", role.metadata.name.as_deref().unwrap())
    );
    let subjects = binding.subjects.unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!((subjects[0].kind.as_str(), subjects[0].name.as_str()), ("ServiceAccount", account.as_str()));
    for o in objects {
        assert!(o["metadata"].get("namespace").is_none(), "{path}: the destination namespace is the user's: {o}");
    }
    let cm: ConfigMap = one(objects, "ConfigMap");
    let text = cm.data.unwrap().remove("loadtest.yaml").expect("key loadtest.yaml");
    let raw: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!((raw["apiVersion"].as_str(), raw["kind"].as_str()), (Some("stampede.dev/v1alpha1"), Some("LoadTest")));
    let lt: LoadTest = serde_yaml::from_str(&text).unwrap();
    assert_eq!(lt.metadata.name, None, "{path}: a fixed name would refuse the second launch");
    assert_eq!(lt.metadata.generate_name.as_deref(), Some(prefix));
    assert!(lt.metadata.namespace.is_none(), "{path}: the LoadTest goes to the Job's namespace");
    let scenario = lt.spec.scenario.clone().expect("an inline scenario");
    assert_eq!(scenario["baseUrl"], PLACEHOLDER, "{path}: a placeholder, never a real address");
    let yaml = serde_yaml::to_string(&scenario).unwrap();
    let plan = stampede_operator::validation::validate(&lt, &yaml, "loadtest.yaml");
    assert!(plan.is_ok(), "{path}: the operator would refuse the scenario: {:?}", plan.err());
    (account, cm.metadata.name.unwrap(), lt)
}

/// Checks the pod of a gate Job: the account, one attempt, the restricted Pod Security settings,
/// the image, `args` after `stampede`, and the ConfigMap mounted at /etc/stampede.
fn check_gate_job(path: &str, spec: &JobSpec, account: &str, config_map: &str, args: &[&str]) {
    assert_eq!(spec.backoff_limit, Some(0), "{path}: one attempt");
    let pod: &PodSpec = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some(account));
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let psc = pod.security_context.as_ref().unwrap();
    assert_eq!((psc.run_as_non_root, psc.run_as_user), (Some(true), Some(65532)));
    assert_eq!(psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()), Some("RuntimeDefault"));
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some(IMAGE));
    assert_eq!(c.command.as_deref(), Some(&["stampede".to_string()][..]));
    assert_eq!(c.args.clone().unwrap(), args);
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.capabilities.as_ref().and_then(|c| c.drop.clone()), Some(vec!["ALL".to_string()]));
    let mount = &c.volume_mounts.as_ref().unwrap()[0];
    assert_eq!(mount.mount_path, "/etc/stampede");
    let volume = pod.volumes.as_ref().unwrap().iter().find(|v| v.name == mount.name).unwrap();
    assert_eq!(volume.config_map.as_ref().map(|c| c.name.as_str()), Some(config_map));
}

#[test]
fn the_argocd_postsync_example_is_a_hook_job_that_launches_its_loadtest_once() {
    let objects = objects(POSTSYNC);
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Job"]);
    let (account, config_map, _) = check_rbac_and_loadtest(POSTSYNC, &objects, "checkout-postsync-");
    let job: Job = one(&objects, "Job");
    let annotations = job.metadata.annotations.unwrap();
    assert_eq!(annotations.get("argocd.argoproj.io/hook").map(String::as_str), Some("PostSync"));
    assert_eq!(
        annotations.get("argocd.argoproj.io/hook-delete-policy").map(String::as_str),
        Some("BeforeHookCreation")
    );
    check_gate_job(
        POSTSYNC,
        &job.spec.unwrap(),
        &account,
        &config_map,
        &["launch", "/etc/stampede/loadtest.yaml", "--timeout", "20m"],
    );
}

#[test]
fn the_argo_rollouts_example_is_a_job_metric_that_fails_the_analysis_on_a_failed_launch() {
    let objects = objects(ANALYSIS);
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "AnalysisTemplate"]);
    let (account, config_map, _) = check_rbac_and_loadtest(ANALYSIS, &objects, "checkout-analysis-");
    let template = objects.iter().find(|o| o["kind"] == "AnalysisTemplate").unwrap();
    assert_eq!(template["apiVersion"], "argoproj.io/v1alpha1");
    assert_eq!(template["spec"]["args"], serde_json::json!([{"name": "service-url"}]));
    let metrics = template["spec"]["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 1);
    assert_eq!(metrics[0]["failureLimit"], 0, "one failed Job fails the analysis");
    let spec: JobSpec = serde_json::from_value(metrics[0]["provider"]["job"]["spec"].clone()).unwrap();
    check_gate_job(
        ANALYSIS,
        &spec,
        &account,
        &config_map,
        &["launch", "/etc/stampede/loadtest.yaml", "--base-url", "{{args.service-url}}", "--timeout", "15m"],
    );
}
