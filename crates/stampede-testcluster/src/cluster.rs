//! [`TestCluster`]: the handle integration tests use to reach the local control plane that
//! `tests/cluster/up.sh` started (`make cluster-up`, or `make e2e` which starts and stops it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{Condition, await_condition};
use kube::{Api, Client, Config, Resource};
use serde::de::DeserializeOwned;

use crate::error::{Error, IoContext, Result};

/// Environment variable naming the cluster's state folder (default: `tests/cluster/.run/dev` in the
/// workspace).
pub const CLUSTER_DIR_ENV: &str = "STAMPEDE_CLUSTER_DIR";

/// The running local control plane, as recorded in `<state>/cluster.env` by `up.sh`.
#[derive(Debug, Clone)]
pub struct TestCluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    api_server: String,
    node_name: String,
    agent_dir: PathBuf,
    /// Everything `cluster.env` says (e.g. `NODE_KIND`, and for a real node `STAMPEDE_IMAGE`).
    vars: BTreeMap<String, String>,
}

impl TestCluster {
    /// The running cluster. Panics with instructions when it is not running: cluster tests are
    /// `#[ignore]`d and run by `make e2e`, which starts it.
    pub fn shared() -> &'static TestCluster {
        match Self::try_shared() {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    /// The running cluster, or why there is none.
    pub fn try_shared() -> Result<&'static TestCluster> {
        static SHARED: OnceLock<TestCluster> = OnceLock::new();
        if let Some(c) = SHARED.get() {
            return Ok(c);
        }
        let c = Self::open(&default_dir())?;
        Ok(SHARED.get_or_init(|| c))
    }

    /// Opens the cluster recorded in `dir`.
    pub fn open(dir: &Path) -> Result<TestCluster> {
        let env_file = dir.join("cluster.env");
        let text = std::fs::read_to_string(&env_file)
            .map_err(|e| Error::ClusterNotRunning(format!("cannot read {}: {e}", env_file.display())))?;
        let vars = parse_env(&text);
        let get = |k: &str| {
            vars.get(k).cloned().ok_or_else(|| Error::ClusterNotRunning(format!("{} lacks {k}", env_file.display())))
        };
        let apiserver_pid: u32 = get("APISERVER_PID")?.parse().unwrap_or(0);
        if !Path::new(&format!("/proc/{apiserver_pid}")).exists() {
            return Err(Error::ClusterNotRunning(format!("kube-apiserver (pid {apiserver_pid}) is not running")));
        }
        Ok(TestCluster {
            dir: dir.to_path_buf(),
            kubeconfig: PathBuf::from(get("KUBECONFIG")?),
            kubectl: PathBuf::from(get("KUBECTL")?),
            api_server: get("API_SERVER")?,
            node_name: get("NODE_NAME")?,
            agent_dir: PathBuf::from(get("AGENT_DIR")?),
            vars,
        })
    }

    /// A client with cluster-admin rights. Make one per test: a client belongs to the tokio
    /// runtime it was made on, and each `#[tokio::test]` has its own.
    pub async fn client(&self) -> Result<Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| Error::Kubeconfig { path: self.kubeconfig.clone(), source: Box::new(e) })?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Kubeconfig { path: self.kubeconfig.clone(), source: Box::new(e) })?;
        Ok(Client::try_from(config)?)
    }

    /// Runs `kubectl ARGS` as cluster-admin with `stdin` as its input; its output (panics when
    /// kubectl cannot be started: a test cannot go on without it).
    pub fn kubectl_run(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        use std::io::Write as _;
        use std::process::Stdio;
        let mut cmd = self.kubectl();
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", self.kubectl.display()));
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes()).expect("kubectl reads its input");
        }
        child.wait_with_output().expect("kubectl ends")
    }

    /// `kubectl` (built with the control plane) pointed at this cluster as cluster-admin.
    pub fn kubectl(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.kubectl);
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd
    }

    /// Creates a fresh namespace named `<prefix>-<random>` and returns its name.
    pub async fn namespace(&self, client: &Client, prefix: &str) -> Result<String> {
        let name = format!("{prefix}-{:06x}", fastrand::u32(..0xff_ffff));
        let ns = Namespace {
            metadata: kube::api::ObjectMeta { name: Some(name.clone()), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
        // What the controller-manager adds to every namespace and every pod needs (the
        // ServiceAccount `default`, the ConfigMap `kube-root-ca.crt` of the token volume): a pod
        // created before them is `CreateContainerConfigError` for a moment, as on a real node.
        use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        wait_for(&accounts, "default", Duration::from_secs(30), |o: Option<&ServiceAccount>| o.is_some()).await?;
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
        wait_for(&config_maps, "kube-root-ca.crt", Duration::from_secs(30), |o: Option<&ConfigMap>| o.is_some())
            .await?;
        Ok(name)
    }

    /// Where the node agent writes the output of a pod's container.
    pub fn container_log(&self, namespace: &str, pod: &str, container: &str) -> PathBuf {
        self.agent_dir.join("pods").join(namespace).join(pod).join(format!("{container}.log"))
    }

    /// Reads a container's output (empty if none yet).
    pub fn read_container_log(&self, namespace: &str, pod: &str, container: &str) -> Result<String> {
        let path = self.container_log(namespace, pod, container);
        match std::fs::read_to_string(&path) {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(e).context(|| format!("reading {}", path.display())),
        }
    }

    /// Requests a token (TokenRequest, 1 h) for ServiceAccount `service_account` in `namespace`
    /// and writes a kubeconfig that uses it to `path` (mode 0600), as the node agent does for a
    /// pod: a process started with `KUBECONFIG=path` is subject to that account's RBAC.
    pub async fn service_account_kubeconfig(
        &self,
        client: &Client,
        namespace: &str,
        service_account: &str,
        path: &Path,
    ) -> Result<PathBuf> {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let admin = Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| Error::Kubeconfig { path: self.kubeconfig.clone(), source: Box::new(e) })?;
        let ca_data =
            admin.clusters.iter().find_map(|c| c.cluster.as_ref()?.certificate_authority_data.clone()).ok_or_else(
                || Error::Config(format!("{} has no certificate-authority-data", self.kubeconfig.display())),
            )?;
        let request = TokenRequest {
            spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), bound_object_ref: None },
            ..TokenRequest::default()
        };
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        let token = sas.create_token_request(service_account, &PostParams::default(), &request).await?;
        let token = token.status.map(|s| s.token).unwrap_or_default();
        let config = crate::agent::token_kubeconfig(&self.api_server, &ca_data, namespace, service_account, &token);
        crate::agent::write_private(path, serde_json::to_string_pretty(&config).unwrap_or_default().as_bytes())?;
        Ok(path.to_path_buf())
    }

    /// The cluster-admin kubeconfig `up.sh` wrote (`<state>/kubeconfig`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's URL, `https://127.0.0.1:PORT`.
    pub fn api_server(&self) -> &str {
        &self.api_server
    }

    /// The name of the Node pods run on (the node agent's, or the real node's).
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// The cluster's state folder, which holds `cluster.env` (see [`CLUSTER_DIR_ENV`]).
    pub fn state_dir(&self) -> &Path {
        &self.dir
    }

    /// A value `up.sh` recorded in `cluster.env`.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    /// Whether the node is real (kubelet + containerd, `up.sh --node=real`) rather than the node agent.
    pub fn is_real_node(&self) -> bool {
        self.var("NODE_KIND") == Some("real")
    }
}

/// Waits up to `timeout` for object `name` to satisfy `cond`, and returns it.
pub async fn wait_for<K>(api: &Api<K>, name: &str, timeout: Duration, cond: impl Condition<K>) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    let what = format!("{} {name}", K::kind(&K::DynamicType::default()));
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(Some(obj))) => Ok(obj),
        Ok(Ok(None)) => Err(Error::Timeout { what: format!("{what} (it was deleted)"), secs: timeout.as_secs() }),
        Ok(Err(e)) => Err(Error::Config(format!("watching {what}: {e}"))),
        Err(_) => Err(Error::Timeout { what, secs: timeout.as_secs() }),
    }
}

/// Waits up to `timeout` until object `name` no longer exists.
pub async fn wait_deleted<K>(api: &Api<K>, name: &str, timeout: Duration) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    let what = format!("{} {name} to be deleted", K::kind(&K::DynamicType::default()));
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, |o: Option<&K>| o.is_none())).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Error::Config(format!("watching {what}: {e}"))),
        Err(_) => Err(Error::Timeout { what, secs: timeout.as_secs() }),
    }
}

fn default_dir() -> PathBuf {
    match std::env::var_os(CLUSTER_DIR_ENV) {
        Some(d) => PathBuf::from(d),
        None => crate::repo_root().join("tests/cluster/.run/dev"),
    }
}

/// `KEY=value` lines; blank lines and `#` comments ignored.
fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_state_folder_says_how_to_start_the_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let err = TestCluster::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("make cluster-up"), "{err}");
    }

    #[test]
    fn a_dead_apiserver_is_not_a_running_cluster() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cluster.env"),
            "# written by up.sh\nKUBECONFIG=/x/kubeconfig\nAPISERVER_PID=999999999\n",
        )
        .unwrap();
        let err = TestCluster::open(dir.path()).unwrap_err();
        assert!(matches!(err, Error::ClusterNotRunning(m) if m.contains("999999999")));
    }

    #[test]
    fn env_lines_parse_with_comments() {
        let vars = parse_env("# c\nA=1\n\n B = two words \n");
        assert_eq!(vars.get("A").map(String::as_str), Some("1"));
        assert_eq!(vars.get("B").map(String::as_str), Some("two words"));
    }
}
