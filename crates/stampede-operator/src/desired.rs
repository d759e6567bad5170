//! Desired state, computed without I/O: the objects a LoadTest needs.
//!
//! Every object carries an owner reference to the LoadTest (so deleting it deletes them)
//! and the labels `stampede.dev/loadtest` and `app.kubernetes.io/managed-by`.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMap, ConfigMapProjection, Container, ContainerPort, EnvVar, EnvVarSource, KeyToPath,
    ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec, PodTemplateSpec,
    ProjectedVolumeSource, SeccompProfile, Secret, SecretKeySelector, SecurityContext, ServiceAccount, Volume,
    VolumeMount, VolumeProjection,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;
use stampede_api::{
    DATA_MOUNT, LoadTest, METRICS_PORT, RESULT_KEY, RUN_LABEL, SCENARIO_KEY, SETUP_VALUES_KEY, env, names, run_id,
};
use stampede_core::Once;

/// Label naming the LoadTest an object belongs to.
pub const LOADTEST_LABEL: &str = "stampede.dev/loadtest";
/// Label naming what a pod does.
pub const ROLE_LABEL: &str = "stampede.dev/role";

/// Everything a LoadTest needs, in creation order.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The scenario ConfigMap: the resolved scenario under [`SCENARIO_KEY`], immutable.
    pub scenario: ConfigMap,
    /// One empty result ConfigMap per runner, in index order, for each runner's report.
    pub results: Vec<ConfigMap>,
    /// The ServiceAccount the runner pods run as.
    pub account: ServiceAccount,
    /// What runner pods may do: read their LoadTest and scenario, patch their result ConfigMaps
    /// (and, with `setup` or `teardown`, those pods' report ConfigMap and setup Secret).
    pub role: Role,
    /// Grants `role` to `account`.
    pub binding: RoleBinding,
    /// The runners' Indexed Job: one pod per runner, all running at once.
    pub job: Job,
    /// With `setup` or `teardown`: the ConfigMap their pods report to.
    pub once_reports: Option<ConfigMap>,
    /// With `setup`: the Secret its pod writes its values to, which the runners read.
    pub setup_secret: Option<Secret>,
}

/// Which once-run step lists a run's scenario has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnceSteps {
    /// The scenario has `setup` steps (run once before the load, by a pod of their own).
    pub setup: bool,
    /// The scenario has `teardown` steps (run once after the load, by a pod of their own).
    pub teardown: bool,
}

impl OnceSteps {
    fn any(self) -> bool {
        self.setup || self.teardown
    }
}

fn owner(lt: &LoadTest) -> OwnerReference {
    OwnerReference {
        api_version: LoadTest::api_version(&()).into_owned(),
        kind: LoadTest::kind(&()).into_owned(),
        name: lt.metadata.name.clone().unwrap_or_default(),
        uid: lt.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn labels(lt_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LOADTEST_LABEL.to_string(), names::label_value(lt_name)),
        ("app.kubernetes.io/name".to_string(), "stampede".to_string()),
        ("app.kubernetes.io/managed-by".to_string(), stampede_api::MANAGER.to_string()),
    ])
}

fn meta(lt: &LoadTest, name: String) -> ObjectMeta {
    let lt_name = lt.metadata.name.clone().unwrap_or_default();
    ObjectMeta {
        name: Some(name),
        namespace: lt.metadata.namespace.clone(),
        labels: Some(labels(&lt_name)),
        owner_references: Some(vec![owner(lt)]),
        ..ObjectMeta::default()
    }
}

/// The ConfigMap holding `lt`'s merged report (`report_json`): owned by the LoadTest, so it lives
/// as long as the LoadTest, whatever the cleanup policy deletes.
pub fn report_config_map(lt: &LoadTest, report_json: &str) -> ConfigMap {
    let name = lt.metadata.name.clone().unwrap_or_default();
    ConfigMap {
        metadata: meta(lt, names::report_config_map(&name)),
        data: Some(BTreeMap::from([(stampede_api::REPORT_KEY.to_string(), report_json.to_string())])),
        ..ConfigMap::default()
    }
}

/// The metadata of a child of run `run` of `lt`: also labelled [`RUN_LABEL`].
fn run_meta(lt: &LoadTest, name: String, run: u32) -> ObjectMeta {
    let mut m = meta(lt, name);
    m.labels.get_or_insert_with(BTreeMap::new).insert(RUN_LABEL.into(), run.to_string());
    m
}

/// Whether `child` belongs to run `run` of `lt` (this LoadTest object, by UID, and this run).
/// Anything else of the same name is left by a deleted LoadTest or an earlier run, and is
/// replaced before the run starts.
pub fn is_of_run(child: &ObjectMeta, lt: &LoadTest, run: u32) -> bool {
    let uid = lt.metadata.uid.as_deref().unwrap_or_default();
    let owned = child.owner_references.iter().flatten().any(|o| o.uid == uid);
    let labelled = child.labels.as_ref().and_then(|l| l.get(RUN_LABEL)).is_some_and(|r| *r == run.to_string());
    owned && labelled
}

/// What run `run` of `lt` (with `once`'s step lists) replaces of the objects an earlier run or a
/// deleted LoadTest of the same name left, by name (see `controller::replace_previous_run`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replaced {
    /// The Jobs whose pods must be gone (if not of this run) before this run's start: the
    /// runners', and the setup's and teardown's when this run has either (an earlier run's are
    /// otherwise harmless: nothing of this run uses their names).
    pub jobs: Vec<String>,
    /// The Secret of the run before's setup values, deleted whatever this run's steps: a run
    /// without a `setup` must not leave the values of the run it replaces. Each run has its own,
    /// named after it; the operator deletes it by name and never reads a Secret.
    pub setup_secret: Option<String>,
}

/// The objects run `run` of `lt` replaces (see [`Replaced`]).
pub fn replaced(lt: &LoadTest, run: u32, once: OnceSteps) -> Replaced {
    let name = lt.metadata.name.clone().unwrap_or_default();
    let mut jobs = vec![names::job(&name)];
    if once.any() {
        jobs.extend([names::once_job(&name, "setup"), names::once_job(&name, "teardown")]);
    }
    let uid = lt.metadata.uid.as_deref().unwrap_or_default();
    let setup_secret = (run > 1).then(|| names::setup_secret(&name, &run_id(uid, run - 1)));
    Replaced { jobs, setup_secret }
}

/// The objects for run `run` of `lt`, whose scenario resolved to `scenario_yaml` (with `once`'s
/// step lists); runners use `default_image` unless the LoadTest names one.
pub fn desired(lt: &LoadTest, run: u32, scenario_yaml: &str, default_image: &str, once: OnceSteps) -> Desired {
    let name = lt.metadata.name.clone().unwrap_or_default();
    let namespace = lt.metadata.namespace.clone().unwrap_or_default();
    let uid = lt.metadata.uid.as_deref().unwrap_or_default();
    let runners = lt.spec.runners.max(1);
    let scenario = ConfigMap {
        metadata: run_meta(lt, names::scenario_config_map(&name), run),
        data: Some(BTreeMap::from([(SCENARIO_KEY.to_string(), scenario_yaml.to_string())])),
        immutable: Some(true),
        ..ConfigMap::default()
    };
    let results = (0..runners as u32)
        .map(|i| ConfigMap { metadata: run_meta(lt, names::result_config_map(&name, i), run), ..ConfigMap::default() })
        .collect::<Vec<_>>();
    let account_name = names::runner_account(&name);
    let account = ServiceAccount { metadata: meta(lt, account_name.clone()), ..ServiceAccount::default() };
    let result_names: Vec<String> = (0..runners as u32).map(|i| names::result_config_map(&name, i)).collect();
    // The setup and teardown pods report to their ConfigMap; setup's values go to the Secret.
    let once_rules = [
        once.any().then(|| PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            resource_names: Some(vec![names::once_config_map(&name)]),
            verbs: vec!["get".into(), "patch".into()],
            ..PolicyRule::default()
        }),
        once.setup.then(|| PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".into()]),
            resource_names: Some(vec![names::setup_secret(&name, &run_id(uid, run))]),
            verbs: vec!["patch".into()],
            ..PolicyRule::default()
        }),
    ];
    let role = Role {
        metadata: meta(lt, account_name.clone()),
        rules: Some(
            vec![
                PolicyRule {
                    api_groups: Some(vec!["stampede.dev".into()]),
                    resources: Some(vec!["loadtests".into()]),
                    resource_names: Some(vec![name.clone()]),
                    verbs: vec!["get".into(), "watch".into()],
                    ..PolicyRule::default()
                },
                PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["configmaps".into()]),
                    resource_names: Some(vec![names::scenario_config_map(&name)]),
                    verbs: vec!["get".into()],
                    ..PolicyRule::default()
                },
                PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["configmaps".into()]),
                    resource_names: Some(result_names),
                    verbs: vec!["get".into(), "patch".into()],
                    ..PolicyRule::default()
                },
            ]
            .into_iter()
            .chain(once_rules.into_iter().flatten())
            .collect(),
        ),
    };
    let binding = RoleBinding {
        metadata: meta(lt, account_name.clone()),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: account_name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account_name.clone(),
            namespace: Some(namespace),
            ..Subject::default()
        }]),
    };
    let job = job(lt, run, Pods::Runners, default_image, once);
    let once_reports = once
        .any()
        .then(|| ConfigMap { metadata: run_meta(lt, names::once_config_map(&name), run), ..ConfigMap::default() });
    let setup_secret = once.setup.then(|| Secret {
        metadata: run_meta(lt, names::setup_secret(&name, &run_id(uid, run)), run),
        type_: Some("Opaque".into()),
        ..Secret::default()
    });
    Desired { scenario, results, account, role, binding, job, once_reports, setup_secret }
}

/// What a Job's pods do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pods {
    /// The Indexed Job of `spec.runners` runners.
    Runners,
    /// One pod running the scenario's `setup` or `teardown` once.
    Once(Once),
}

/// The name a once-run step list goes by in object names and labels.
pub fn once_name(which: Once) -> &'static str {
    match which {
        Once::Setup => "setup",
        Once::Teardown => "teardown",
    }
}

/// The Job that runs run `run`'s `setup` or `teardown` once: one pod, never retried (a retry
/// would run the steps twice), in the runners' image, environment and ServiceAccount.
pub fn once_job(lt: &LoadTest, run: u32, which: Once, default_image: &str, once: OnceSteps) -> Job {
    job(lt, run, Pods::Once(which), default_image, once)
}

/// The value of `STAMPEDE_SETUP_VALUES` for the runners and the teardown: the setup Secret's
/// values, or none (`{}`) when the scenario has no setup.
fn setup_values_env(name: &str, run: &str, once: OnceSteps) -> EnvVar {
    let mut var = EnvVar { name: env::SETUP_VALUES.into(), ..EnvVar::default() };
    if once.setup {
        var.value_from = Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: names::setup_secret(name, run),
                key: SETUP_VALUES_KEY.into(),
                // Required: a runner without it would run setup and teardown itself. A setup that
                // succeeded always writes it (`{}` when it extracted nothing).
                optional: None,
            }),
            ..EnvVarSource::default()
        });
    } else {
        var.value = Some("{}".into());
    }
    var
}

fn job(lt: &LoadTest, run: u32, pods: Pods, default_image: &str, once: OnceSteps) -> Job {
    let spec = &lt.spec;
    let name = lt.metadata.name.as_deref().unwrap_or_default();
    let account = names::runner_account(name);
    let runners = spec.runners.max(1);
    let (job_name, role, count) = match pods {
        Pods::Runners => (names::job(name), "runner", runners),
        Pods::Once(which) => (names::once_job(name, once_name(which)), once_name(which), 1),
    };
    // The user's labels first: ours win, so selectors keep working.
    let mut pod_labels = spec.pod_labels.clone();
    pod_labels.extend(labels(name));
    pod_labels.insert(ROLE_LABEL.into(), role.into());
    pod_labels.insert(RUN_LABEL.into(), run.to_string());
    let data_volume = data_volume(lt);
    let container = runner_container(lt, pods, default_image, runner_env(lt, run, pods, once), data_volume.is_some());
    let affinity = affinity(lt, pods);
    Job {
        metadata: run_meta(lt, job_name, run),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(count),
            parallelism: Some(count),
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: (!spec.pod_annotations.is_empty()).then(|| spec.pod_annotations.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    service_account_name: Some(account),
                    containers: vec![container],
                    volumes: data_volume.map(|v| vec![v]),
                    image_pull_secrets: (!spec.image_pull_secrets.is_empty()).then(|| spec.image_pull_secrets.clone()),
                    node_selector: (!spec.node_selector.is_empty()).then(|| spec.node_selector.clone()),
                    tolerations: (!spec.tolerations.is_empty()).then(|| spec.tolerations.clone()),
                    affinity,
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(65532),
                        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
                        ..PodSecurityContext::default()
                    }),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

/// The environment of a runner (or setup or teardown) pod: who it is and of which run, how
/// many runners there are, where the data files are, setup's values, then `spec.env`.
fn runner_env(lt: &LoadTest, run: u32, pods: Pods, once: OnceSteps) -> Vec<EnvVar> {
    let spec = &lt.spec;
    let name = lt.metadata.name.as_deref().unwrap_or_default();
    let runners = spec.runners.max(1);
    let uid = lt.metadata.uid.as_deref().unwrap_or_default();
    let mut env_vars = vec![
        EnvVar { name: env::LOADTEST.into(), value: Some(name.to_string()), ..EnvVar::default() },
        EnvVar { name: env::RUN.into(), value: Some(run_id(uid, run)), ..EnvVar::default() },
        EnvVar {
            name: env::NAMESPACE.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: "metadata.namespace".into(), ..Default::default() }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        },
        EnvVar { name: env::RUNNERS.into(), value: Some(runners.to_string()), ..EnvVar::default() },
    ];
    if !spec.data.is_empty() {
        env_vars.push(EnvVar { name: env::DATA_DIR.into(), value: Some(DATA_MOUNT.into()), ..EnvVar::default() });
    }
    match pods {
        Pods::Once(which) => {
            env_vars.push(EnvVar { name: env::ONCE.into(), value: Some(once_name(which).into()), ..EnvVar::default() });
            env_vars.push(EnvVar { name: env::METRICS_ADDR.into(), value: Some("off".into()), ..EnvVar::default() });
            if which == Once::Teardown {
                env_vars.push(setup_values_env(name, &run_id(uid, run), once));
            }
        }
        Pods::Runners if once.any() => env_vars.push(setup_values_env(name, &run_id(uid, run), once)),
        Pods::Runners => {}
    }
    env_vars.extend(spec.env.iter().cloned());
    env_vars
}

/// `spec.data`: every file in one read-only folder, named as the scenario refers to it.
fn data_volume(lt: &LoadTest) -> Option<Volume> {
    let spec = &lt.spec;
    (!spec.data.is_empty()).then(|| Volume {
        name: "data".into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(
                spec.data
                    .iter()
                    .map(|d| VolumeProjection {
                        config_map: Some(ConfigMapProjection {
                            name: d.config_map.name.clone(),
                            items: Some(vec![KeyToPath {
                                key: d.config_map.key.clone(),
                                path: d.name.clone(),
                                ..KeyToPath::default()
                            }]),
                            ..ConfigMapProjection::default()
                        }),
                        ..VolumeProjection::default()
                    })
                    .collect(),
            ),
            ..ProjectedVolumeSource::default()
        }),
        ..Volume::default()
    })
}

/// `spec.affinity`, with one runner per node when `spec.separate`.
fn affinity(lt: &LoadTest, pods: Pods) -> Option<Affinity> {
    let spec = &lt.spec;
    let name = lt.metadata.name.as_deref().unwrap_or_default();
    let mut affinity = spec.affinity.clone();
    if spec.separate && pods == Pods::Runners {
        // One runner per node: no two runners of this test on the same host.
        let term = PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(LOADTEST_LABEL.to_string(), names::label_value(name))])),
                ..LabelSelector::default()
            }),
            topology_key: "kubernetes.io/hostname".into(),
            ..PodAffinityTerm::default()
        };
        let a = affinity.get_or_insert_with(Affinity::default);
        let anti = a.pod_anti_affinity.get_or_insert_with(PodAntiAffinity::default);
        anti.required_during_scheduling_ignored_during_execution.get_or_insert_with(Vec::new).push(term);
    }
    affinity
}

/// The pod's one container: the image, `stampede runner`, the metrics port (runners), the
/// environment, the data folder, and a locked-down security context.
fn runner_container(lt: &LoadTest, pods: Pods, default_image: &str, env_vars: Vec<EnvVar>, data: bool) -> Container {
    let spec = &lt.spec;
    Container {
        name: "runner".into(),
        image: Some(spec.image.clone().unwrap_or_else(|| default_image.to_string())),
        image_pull_policy: spec.image_pull_policy.clone(),
        args: Some(vec!["runner".into()]),
        ports: (pods == Pods::Runners).then(|| {
            vec![ContainerPort {
                name: Some("metrics".into()),
                container_port: i32::from(METRICS_PORT),
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            }]
        }),
        env: Some(env_vars),
        env_from: (!spec.env_from.is_empty()).then(|| spec.env_from.clone()),
        volume_mounts: data.then(|| {
            vec![VolumeMount {
                name: "data".into(),
                mount_path: DATA_MOUNT.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            }]
        }),
        resources: spec.resources.clone(),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), ..Capabilities::default() }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

/// Whether a result ConfigMap holds a report.
pub fn has_report(cm: &ConfigMap) -> bool {
    cm.data.as_ref().is_some_and(|d| d.contains_key(RESULT_KEY))
}
