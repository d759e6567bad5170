//! The node agent: a kubelet stand-in for the local control plane.
//!
//! It registers a Node that reports Ready, renews the node's Lease, and for every pod the
//! scheduler binds to it runs each container's command as a local process (in its own process
//! group) with the pod's environment resolved. Each pod gets a kubeconfig holding a real
//! ServiceAccount token from the TokenRequest API, bound to the pod, so RBAC applies to pod
//! processes as in a cluster. Pod phase, container states and exit codes are written to the pod's
//! status subresource, so the real Job controller sees real exit codes. Deleting a pod stops its
//! processes (SIGTERM to the group, SIGKILL after the grace period) and finishes the deletion.
//!
//! Not a kubelet: no images, volumes, probes, resource limits, logs API or exec. A container's
//! stdout and stderr go to `<work-dir>/pods/<namespace>/<pod>/<container>.log`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Node, Pod, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::env::{self, LOCAL_IP, Referenced};
use crate::error::{Error, IoContext, Result};
use crate::images::ImageTable;
use crate::volumes::{self, VolumeContent};

/// The field manager of everything the agent writes.
pub const FIELD_MANAGER: &str = "stampede-node-agent";
/// How often the node's Lease is renewed (the kubelet's default).
const LEASE_RENEW: Duration = Duration::from_secs(10);
/// How often the Node's Ready condition gets a fresh heartbeat.
const STATUS_HEARTBEAT: Duration = Duration::from_secs(30);
/// Upper bound on a deleted pod's grace period, so tests never wait half a minute.
const MAX_GRACE: Duration = Duration::from_secs(10);

/// What the agent needs to know besides a client.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The Node to register and whose pods to run.
    pub node_name: String,
    /// Which images exist on this "node" and what they run.
    pub images: ImageTable,
    /// Per-pod folders (kubeconfig, logs, pid files) go under `<work_dir>/pods`.
    pub work_dir: PathBuf,
    /// API server URL written into pod kubeconfigs.
    pub api_server: String,
    /// Base64 PEM of the CA that signed the API server's certificate, for pod kubeconfigs.
    pub ca_data: String,
    /// `PATH` of pod processes (pods do not inherit the agent's environment).
    pub path: String,
    /// Lifetime requested for pod ServiceAccount tokens.
    pub token_seconds: i64,
    /// The node's pod capacity (the kubelet's `maxPods`; 110 by default): the scheduler binds no
    /// more pods than this at once.
    pub max_pods: u32,
}

impl AgentConfig {
    fn api_port(&self) -> String {
        self.api_server.rsplit(':').next().unwrap_or("443").trim_end_matches('/').to_string()
    }
}

/// Why a pod's processes are being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    /// The pod has a deletion timestamp: stop, report, then finish the deletion.
    Deleted,
    /// The pod object is gone.
    Gone,
    /// The agent itself is shutting down.
    Shutdown,
}

#[derive(Debug, Clone, Copy)]
struct Stop {
    reason: StopReason,
    grace: Duration,
}

struct PodHandle {
    stop: watch::Sender<Option<Stop>>,
    task: JoinHandle<()>,
}

/// The node agent. Build with [`Agent::new`] and drive with [`Agent::run`].
pub struct Agent {
    client: Client,
    cfg: Arc<AgentConfig>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("node", &self.cfg.node_name).finish()
    }
}

impl Agent {
    /// An agent for the node `cfg` describes, calling the API server through `client`; nothing
    /// runs until [`Agent::run`].
    pub fn new(client: Client, cfg: AgentConfig) -> Self {
        Self { client, cfg: Arc::new(cfg) }
    }

    /// Registers the node, then runs its pods until `shutdown` resolves; on shutdown every pod
    /// process group is stopped before this returns.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
        register_node(&self.client, &self.cfg.node_name, self.cfg.max_pods).await?;
        let heartbeat = tokio::spawn(heartbeat(self.client.clone(), self.cfg.node_name.clone(), self.cfg.max_pods));
        info!(node = %self.cfg.node_name, "node registered; watching its pods");

        let pods: Api<Pod> = Api::all(self.client.clone());
        let selector = format!("spec.nodeName={}", self.cfg.node_name);
        let events = watcher(pods, watcher::Config::default().fields(&selector)).default_backoff();
        tokio::pin!(events);
        tokio::pin!(shutdown);
        let mut handles: HashMap<String, PodHandle> = HashMap::new();
        let mut finalizing: HashSet<String> = HashSet::new();
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                event = events.next() => match event {
                    Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => {
                        self.observe(pod, &mut handles, &mut finalizing);
                    }
                    Some(Ok(watcher::Event::Delete(pod))) => {
                        let uid = pod.uid().unwrap_or_default();
                        finalizing.remove(&uid);
                        if let Some(h) = handles.remove(&uid) {
                            let _ = h.stop.send(Some(Stop { reason: StopReason::Gone, grace: Duration::ZERO }));
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => warn!(error = %e, "pod watch failed; retrying"),
                    None => break,
                },
            }
        }
        info!(pods = handles.len(), "shutting down: stopping pod processes");
        let stop = Stop { reason: StopReason::Shutdown, grace: Duration::from_secs(2) };
        for h in handles.values() {
            let _ = h.stop.send(Some(stop));
        }
        for (_, h) in handles {
            let _ = tokio::time::timeout(Duration::from_secs(10), h.task).await;
        }
        heartbeat.abort();
        Ok(())
    }

    fn observe(&self, pod: Pod, handles: &mut HashMap<String, PodHandle>, finalizing: &mut HashSet<String>) {
        let Some(uid) = pod.uid() else { return };
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            let grace = pod
                .metadata
                .deletion_grace_period_seconds
                .map_or(MAX_GRACE, |s| Duration::from_secs(s.max(0) as u64).min(MAX_GRACE));
            match handles.get(&uid) {
                Some(h) if !h.task.is_finished() => {
                    let _ = h.stop.send(Some(Stop { reason: StopReason::Deleted, grace }));
                }
                _ => {
                    // Nothing runs: finish the deletion as the kubelet does, once.
                    if finalizing.insert(uid.clone()) {
                        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
                        tokio::spawn(async move { finish_deletion(&api, &pod).await });
                    }
                }
            }
            return;
        }
        if phase == "Succeeded" || phase == "Failed" || handles.contains_key(&uid) {
            return;
        }
        let (stop, stop_rx) = watch::channel(None);
        let runner = PodRunner::new(self.client.clone(), self.cfg.clone(), &pod);
        info!(pod = %runner.key, "starting pod");
        let task = tokio::spawn(runner.run(pod, stop_rx));
        handles.insert(uid, PodHandle { stop, task });
    }
}

fn now() -> Time {
    Time(Timestamp::now())
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

async fn register_node(client: &Client, name: &str, max_pods: u32) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
                "stampede.dev/node-agent": "true",
            },
        },
    });
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    nodes.patch(name, &pp, &Patch::Apply(&node)).await?;
    nodes.patch_status(name, &PatchParams::default(), &Patch::Merge(node_status(max_pods))).await?;
    Ok(())
}

fn node_status(max_pods: u32) -> Value {
    let t = to_json(&now());
    let cond = |ty: &str, status: &str, reason: &str, message: &str| {
        json!({"type": ty, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": t, "lastTransitionTime": t})
    };
    let resources = json!({"cpu": "16", "memory": "64Gi", "pods": max_pods.to_string(), "ephemeral-storage": "100Gi"});
    json!({
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                cond("Ready", "True", "KubeletReady", "stampede node agent is ready"),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "no memory pressure"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "no PID pressure"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": LOCAL_IP},
                {"type": "Hostname", "address": "localhost"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                "architecture": std::env::consts::ARCH,
                "operatingSystem": "linux",
                "osImage": "local processes",
                "kernelVersion": "",
                "containerRuntimeVersion": "stampede-node-agent://0.1",
                "kubeletVersion": "v1.34.4",
                "kubeProxyVersion": "",
                "machineID": "", "systemUUID": "", "bootID": "",
            },
        }
    })
}

/// Renews the node Lease every 10 s and the Ready heartbeat every 30 s, forever.
async fn heartbeat(client: Client, node: String, max_pods: u32) {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut last_status = tokio::time::Instant::now();
    loop {
        let node_uid = match nodes.get(&node).await {
            Ok(n) => n.uid(),
            Err(e) => {
                warn!(error = %e, "cannot read own Node");
                None
            }
        };
        let mut lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": node},
            "spec": {
                "holderIdentity": node,
                "leaseDurationSeconds": 40,
                "renewTime": to_json(&MicroTime(Timestamp::now())),
            }
        });
        if let Some(uid) = node_uid {
            lease["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]);
        }
        if let Err(e) = leases.patch(&node, &pp, &Patch::Apply(&lease)).await {
            warn!(error = %e, "node lease renewal failed");
        }
        if last_status.elapsed() >= STATUS_HEARTBEAT {
            last_status = tokio::time::Instant::now();
            if let Err(e) =
                nodes.patch_status(&node, &PatchParams::default(), &Patch::Merge(node_status(max_pods))).await
            {
                warn!(error = %e, "node status heartbeat failed");
            }
        }
        tokio::time::sleep(LEASE_RENEW).await;
    }
}

/// The kubelet's last step for a deleted pod whose containers are stopped: delete it with a zero
/// grace period (finalizers, such as the Job controller's, still hold the object until removed).
async fn finish_deletion(api: &Api<Pod>, pod: &Pod) {
    let name = pod.name_any();
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions { uid: pod.uid(), resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &dp).await {
        Ok(_) => debug!(pod = %name, "deletion finished"),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => warn!(pod = %name, error = %e, "could not finish pod deletion"),
    }
}

/// A container's state as the pod status shows it.
#[derive(Debug, Clone)]
enum State {
    Waiting { reason: String, message: String },
    Running { started: Time },
    Terminated { code: i32, reason: String, message: String, started: Time, finished: Time },
}

impl State {
    fn to_json(&self) -> Value {
        match self {
            State::Waiting { reason, message } => json!({"waiting": {"reason": reason, "message": message}}),
            State::Running { started } => json!({"running": {"startedAt": to_json(started)}}),
            State::Terminated { code, reason, message, started, finished } => json!({"terminated": {
                "exitCode": code, "reason": reason, "message": message,
                "startedAt": to_json(started), "finishedAt": to_json(finished),
            }}),
        }
    }
}

#[derive(Debug, Clone)]
struct ContainerStatus {
    name: String,
    image: String,
    state: State,
    last: Option<State>,
    restarts: i32,
    pid: Option<u32>,
}

impl ContainerStatus {
    fn new(c: &Container) -> Self {
        Self {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: State::Waiting { reason: "ContainerCreating".into(), message: String::new() },
            last: None,
            restarts: 0,
            pid: None,
        }
    }

    fn to_json(&self) -> Value {
        let running = matches!(self.state, State::Running { .. });
        let mut v = json!({
            "name": self.name,
            "image": self.image,
            "imageID": format!("stampede://{}", self.image),
            "state": self.state.to_json(),
            "lastState": self.last.as_ref().map_or(json!({}), State::to_json),
            "ready": running,
            "started": running,
            "restartCount": self.restarts,
        });
        if let Some(pid) = self.pid {
            v["containerID"] = json!(format!("stampede://{pid}"));
        }
        v
    }

    fn exit_code(&self) -> Option<i32> {
        match self.state {
            State::Terminated { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// What a container needs to start: resolved before anything runs.
#[derive(Debug, Clone)]
struct Prepared {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
}

/// An update from a container task to its pod task.
#[derive(Debug)]
enum Update {
    Started { idx: usize, pid: u32 },
    Exited { idx: usize, code: i32, reason: String, message: String },
}

/// Runs one pod: prepares it, runs init containers one by one, then the containers together,
/// and publishes the pod status at every change.
struct PodRunner {
    client: Client,
    cfg: Arc<AgentConfig>,
    api: Api<Pod>,
    key: String,
    dir: PathBuf,
    init: Vec<ContainerStatus>,
    main: Vec<ContainerStatus>,
    conditions: BTreeMap<&'static str, (bool, Time)>,
    start_time: Time,
}

impl PodRunner {
    fn new(client: Client, cfg: Arc<AgentConfig>, pod: &Pod) -> Self {
        let ns = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let spec = pod.spec.clone().unwrap_or_default();
        let dir = cfg.work_dir.join("pods").join(&ns).join(&name);
        Self {
            api: Api::namespaced(client.clone(), &ns),
            client,
            cfg,
            key: format!("{ns}/{name}"),
            dir,
            init: spec.init_containers.iter().flatten().map(ContainerStatus::new).collect(),
            main: spec.containers.iter().map(ContainerStatus::new).collect(),
            conditions: BTreeMap::new(),
            start_time: now(),
        }
    }

    async fn run(mut self, pod: Pod, mut stop: watch::Receiver<Option<Stop>>) {
        let spec = pod.spec.clone().unwrap_or_default();
        let policy = spec.restart_policy.clone().unwrap_or_else(|| "Always".into());

        // Resolve everything first; retry (as the kubelet does) until it works or the pod goes.
        let mut backoff = Duration::from_secs(1);
        let (init, main) = loop {
            match self.prepare(&pod).await {
                Ok(p) => break p,
                Err(e) => {
                    let reason = match &e {
                        Error::ImageNotFound(_) => "ErrImagePull",
                        Error::Kube(_) | Error::Io { .. } => "ContainerCreating",
                        _ => "CreateContainerConfigError",
                    };
                    warn!(pod = %self.key, error = %e, "pod cannot start yet");
                    for c in self.init.iter_mut().chain(self.main.iter_mut()) {
                        c.state = State::Waiting { reason: reason.into(), message: e.to_string() };
                    }
                    self.publish("Pending").await;
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => {
                            let s = *stop.borrow();
                            self.finish(&pod, s, "Pending").await;
                            return;
                        }
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        };
        self.publish("Pending").await;

        // Init containers: in order, each must succeed (restarting under OnFailure/Always).
        let (tx, mut rx) = mpsc::unbounded_channel();
        for (idx, prepared) in init.into_iter().enumerate() {
            let restart = policy != "Never";
            let task = tokio::spawn(run_container(
                self.dir.clone(),
                self.init[idx].name.clone(),
                prepared,
                idx,
                if restart { "OnFailure" } else { "Never" }.to_string(),
                stop.clone(),
                tx.clone(),
            ));
            self.drain_until_done(&mut rx, task, true).await;
            let ok = self.init[idx].exit_code() == Some(0);
            if !ok || stop.borrow().is_some() {
                let s = *stop.borrow();
                for c in &mut self.main {
                    c.state = State::Waiting { reason: "PodInitializing".into(), message: String::new() };
                }
                self.finish(&pod, s, "Failed").await;
                return;
            }
        }

        let tasks: Vec<_> = main
            .into_iter()
            .enumerate()
            .map(|(idx, prepared)| {
                tokio::spawn(run_container(
                    self.dir.clone(),
                    self.main[idx].name.clone(),
                    prepared,
                    idx,
                    policy.clone(),
                    stop.clone(),
                    tx.clone(),
                ))
            })
            .collect();
        drop(tx);
        let all = async move {
            for t in tasks {
                let _ = t.await;
            }
        };
        self.drain_until_done(&mut rx, tokio::spawn(all), false).await;

        let failed = self.main.iter().any(|c| c.exit_code() != Some(0));
        let s = *stop.borrow();
        self.finish(&pod, s, if failed { "Failed" } else { "Succeeded" }).await;
    }

    /// Applies container updates and publishes status until `task` is done.
    async fn drain_until_done(&mut self, rx: &mut mpsc::UnboundedReceiver<Update>, task: JoinHandle<()>, init: bool) {
        tokio::pin!(task);
        let mut done = false;
        loop {
            let update = if done {
                match rx.try_recv() {
                    Ok(u) => u,
                    Err(_) => return,
                }
            } else {
                tokio::select! {
                    Some(u) = rx.recv() => u,
                    _ = &mut task => { done = true; continue; }
                }
            };
            let list = if init { &mut self.init } else { &mut self.main };
            match update {
                Update::Started { idx, pid } => {
                    let c = &mut list[idx];
                    if let State::Terminated { .. } = c.state {
                        c.last = Some(c.state.clone());
                        c.restarts += 1;
                    }
                    c.state = State::Running { started: now() };
                    c.pid = Some(pid);
                    info!(pod = %self.key, container = %c.name, pid, "container started");
                }
                Update::Exited { idx, code, reason, message } => {
                    let c = &mut list[idx];
                    let started = match &c.state {
                        State::Running { started } => started.clone(),
                        _ => now(),
                    };
                    info!(pod = %self.key, container = %c.name, code, %reason, "container exited");
                    c.state = State::Terminated { code, reason, message, started, finished: now() };
                }
            }
            self.publish("Running").await;
        }
    }

    /// Publishes the final status, and finishes a deletion when the pod is being deleted.
    async fn finish(&mut self, pod: &Pod, stop: Option<Stop>, phase: &str) {
        match stop.map(|s| s.reason) {
            Some(StopReason::Gone) => {}
            Some(StopReason::Shutdown) => {}
            Some(StopReason::Deleted) => {
                let phase = if phase == "Pending" { "Failed" } else { phase };
                self.publish(phase).await;
                finish_deletion(&self.api, pod).await;
            }
            None => self.publish(phase).await,
        }
        info!(pod = %self.key, phase, "pod finished");
    }

    async fn prepare(&self, pod: &Pod) -> Result<(Vec<Prepared>, Vec<Prepared>)> {
        let spec = pod.spec.clone().unwrap_or_default();
        let ns = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        tokio::fs::create_dir_all(&self.dir).await.context(|| format!("creating {}", self.dir.display()))?;

        let inits = spec.init_containers.clone().unwrap_or_default();
        let mut refs = env::references(inits.iter().chain(spec.containers.iter()));
        let volume_refs = volumes::references(pod);
        refs.config_maps.extend(volume_refs.config_maps);
        refs.secrets.extend(volume_refs.secrets);
        let mut referenced = Referenced::default();
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), &ns);
        for cm in &refs.config_maps {
            if let Some(obj) = cms.get_opt(cm).await? {
                referenced.config_maps.insert(cm.clone(), obj.data.unwrap_or_default());
            }
        }
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &ns);
        for s in &refs.secrets {
            if let Some(obj) = secrets.get_opt(s).await? {
                let data = obj.data.unwrap_or_default().into_iter();
                let decoded = data.map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()));
                let mut all: BTreeMap<String, String> = decoded.collect();
                all.extend(obj.string_data.unwrap_or_default());
                referenced.secrets.insert(s.clone(), all);
            }
        }

        let port = self.cfg.api_port();
        let mut base: Vec<(String, String)> = vec![
            ("PATH".into(), self.cfg.path.clone()),
            ("HOME".into(), self.dir.to_string_lossy().into_owned()),
            ("HOSTNAME".into(), spec.hostname.clone().unwrap_or_else(|| name.clone())),
            ("KUBERNETES_SERVICE_HOST".into(), LOCAL_IP.into()),
            ("KUBERNETES_SERVICE_PORT".into(), port.clone()),
            ("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.clone()),
            ("KUBERNETES_PORT".into(), format!("tcp://{LOCAL_IP}:{port}")),
        ];
        let automount = spec.automount_service_account_token != Some(false);
        let projects_token = spec.volumes.iter().flatten().any(|v| {
            v.projected.iter().flat_map(|p| p.sources.iter().flatten()).any(|s| s.service_account_token.is_some())
        });
        let mut token = None;
        if automount || projects_token {
            let (kubeconfig, t) = self.write_kubeconfig(pod).await?;
            if automount {
                base.push(("KUBECONFIG".into(), kubeconfig.to_string_lossy().into_owned()));
            }
            token = Some(t);
        }
        let vols = volumes::contents(pod, &referenced, token.as_deref())?;
        let volumes_root = self.dir.join("volumes");
        write_volumes(&volumes_root, &vols)?;

        let prepare = |c: &Container| -> Result<Prepared> {
            let mounts = volumes::mount_table(c, &vols, &volumes_root)?;
            let mut env = env::resolve(pod, c, &base, &referenced)?;
            for (_, value) in &mut env {
                *value = volumes::rewrite(value, &mounts);
            }
            let argv = self.cfg.images.argv(c, &env)?.iter().map(|a| volumes::rewrite(a, &mounts)).collect();
            let cwd = c
                .working_dir
                .as_ref()
                .map(|d| PathBuf::from(volumes::rewrite(d, &mounts)))
                .filter(|d| d.is_dir())
                .unwrap_or_else(|| self.dir.clone());
            Ok(Prepared { argv, env, cwd })
        };
        let init = inits.iter().map(prepare).collect::<Result<Vec<_>>>()?;
        let main = spec.containers.iter().map(prepare).collect::<Result<Vec<_>>>()?;
        Ok((init, main))
    }

    /// Requests a token for the pod's ServiceAccount, bound to the pod, and writes a kubeconfig
    /// that uses it.
    async fn write_kubeconfig(&self, pod: &Pod) -> Result<(PathBuf, String)> {
        let spec = pod.spec.as_ref();
        let ns = pod.namespace().unwrap_or_default();
        let sa = spec.and_then(|s| s.service_account_name.clone()).unwrap_or_else(|| "default".into());
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &ns);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(self.cfg.token_seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.uid(),
                }),
            },
            ..TokenRequest::default()
        };
        let token = sas.create_token_request(&sa, &PostParams::default(), &request).await?;
        let token = token.status.map(|s| s.token).unwrap_or_default();
        let config = token_kubeconfig(&self.cfg.api_server, &self.cfg.ca_data, &ns, &sa, &token);
        let path = self.dir.join("kubeconfig");
        write_private(&path, serde_json::to_string_pretty(&config).unwrap_or_default().as_bytes())?;
        Ok((path, token))
    }

    fn set_condition(&mut self, ty: &'static str, value: bool) {
        match self.conditions.get(ty) {
            Some((old, _)) if *old == value => {}
            _ => {
                self.conditions.insert(ty, (value, now()));
            }
        }
    }

    async fn publish(&mut self, phase: &str) {
        let init_done = self.init.iter().all(|c| c.exit_code() == Some(0));
        let all_running = self.main.iter().all(|c| matches!(c.state, State::Running { .. }));
        let sandbox = phase == "Running" || phase == "Pending" && init_done;
        self.set_condition("PodReadyToStartContainers", sandbox || phase == "Running");
        self.set_condition("Initialized", init_done);
        self.set_condition("ContainersReady", all_running && phase == "Running");
        self.set_condition("Ready", all_running && phase == "Running");
        let conditions: Vec<Value> = self
            .conditions
            .iter()
            .map(|(ty, (v, t))| {
                json!({"type": ty, "status": if *v { "True" } else { "False" }, "lastTransitionTime": to_json(t)})
            })
            .collect();
        let mut status = json!({
            "phase": phase,
            "conditions": conditions,
            "hostIP": LOCAL_IP,
            "hostIPs": [{"ip": LOCAL_IP}],
            "podIP": LOCAL_IP,
            "podIPs": [{"ip": LOCAL_IP}],
            "startTime": to_json(&self.start_time),
            "containerStatuses": self.main.iter().map(ContainerStatus::to_json).collect::<Vec<_>>(),
        });
        if !self.init.is_empty() {
            status["initContainerStatuses"] = json!(self.init.iter().map(ContainerStatus::to_json).collect::<Vec<_>>());
        }
        let name = self.key.rsplit('/').next().unwrap_or_default().to_string();
        let patch = json!({ "status": status });
        if let Err(e) = self.api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            warn!(pod = %self.key, error = %e, "pod status update failed");
        }
    }
}

/// Writes each volume's files under `root/<volume>/`.
fn write_volumes(root: &Path, vols: &BTreeMap<String, VolumeContent>) -> Result<()> {
    for (name, content) in vols {
        let VolumeContent::Files(files) = content else { continue };
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).context(|| format!("creating {}", dir.display()))?;
        for f in files {
            let path = dir.join(&f.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).context(|| format!("creating {}", parent.display()))?;
            }
            if f.private {
                write_private(&path, &f.contents)?;
            } else {
                std::fs::write(&path, &f.contents).context(|| format!("writing {}", path.display()))?;
            }
        }
    }
    Ok(())
}

pub(crate) fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .context(|| format!("writing {}", path.display()))?;
    f.write_all(contents).context(|| format!("writing {}", path.display()))
}

/// A kubeconfig (as JSON, which kubeconfig readers accept) that authenticates with a
/// ServiceAccount `token` against `api_server`, trusting the base64 PEM CA `ca_data`, with
/// `namespace` as the default namespace.
pub fn token_kubeconfig(api_server: &str, ca_data: &str, namespace: &str, service_account: &str, token: &str) -> Value {
    let user = format!("system:serviceaccount:{namespace}:{service_account}");
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": api_server, "certificate-authority-data": ca_data}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "pod", "context": {"cluster": "local", "user": user, "namespace": namespace}}],
        "current-context": "pod",
    })
}

/// The start time of a process (field 22 of /proc/PID/stat), which tells a recorded PID from a
/// later process that reused it.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

/// Runs one container, restarting it as `policy` says, until it is done or the pod stops.
async fn run_container(
    dir: PathBuf,
    name: String,
    prepared: Prepared,
    idx: usize,
    policy: String,
    mut stop: watch::Receiver<Option<Stop>>,
    tx: mpsc::UnboundedSender<Update>,
) {
    let log_path = dir.join(format!("{name}.log"));
    let pid_path = dir.join(format!("{name}.pid"));
    let mut backoff = Duration::from_secs(1);
    loop {
        if stop.borrow().is_some() {
            return;
        }
        let (code, reason, message) = match spawn(&prepared, &log_path) {
            Err(e) => (128, "StartError".to_string(), e),
            Ok(mut child) => {
                let pid = child.id().unwrap_or_default();
                let _ = std::fs::write(&pid_path, format!("{pid} {}\n", process_start_time(pid).unwrap_or(0)));
                let _ = tx.send(Update::Started { idx, pid });
                let status = tokio::select! {
                    s = child.wait() => s,
                    _ = stop.changed() => {
                        let grace = stop.borrow().map_or(Duration::ZERO, |s| s.grace);
                        signal_group(pid, Signal::SIGTERM);
                        match tokio::time::timeout(grace, child.wait()).await {
                            Ok(s) => s,
                            Err(_) => {
                                signal_group(pid, Signal::SIGKILL);
                                child.wait().await
                            }
                        }
                    }
                };
                // Like a container runtime: when the main process ends, the rest of the group goes.
                signal_group(pid, Signal::SIGKILL);
                wait_group_gone(pid).await;
                let _ = std::fs::remove_file(&pid_path);
                let code = match status {
                    Ok(s) => exit_code(s),
                    Err(_) => 128,
                };
                let reason = if code == 0 { "Completed" } else { "Error" };
                (code, reason.to_string(), String::new())
            }
        };
        let _ = tx.send(Update::Exited { idx, code, reason, message });
        let restart = match policy.as_str() {
            "Always" => true,
            "OnFailure" => code != 0,
            _ => false,
        };
        if !restart || stop.borrow().is_some() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
}

fn spawn(prepared: &Prepared, log_path: &Path) -> std::result::Result<tokio::process::Child, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .map_err(|e| format!("opening {}: {e}", log_path.display()))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let (program, args) = prepared.argv.split_first().ok_or("empty command")?;
    tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(prepared.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&prepared.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("failed to start {program:?}: {e}"))
}

fn signal_group(pgid: u32, signal: Signal) {
    if let Ok(pgid) = i32::try_from(pgid)
        && pgid > 1
    {
        let _ = killpg(Pid::from_raw(pgid), signal);
    }
}

/// Waits (up to 2 s) until no process of group `pgid` is left.
async fn wait_group_gone(pgid: u32) {
    let Ok(pgid) = i32::try_from(pgid) else { return };
    for _ in 0..40 {
        if killpg(Pid::from_raw(pgid), None).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A process's exit status as a container exit code (128 + signal when killed).
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}
