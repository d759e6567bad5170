//! `stampede-node-agent`: registers a Node with the local control plane and runs the pods bound
//! to it as local processes. Started and stopped by `tests/cluster/up.sh` / `down.sh`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use stampede_testcluster::agent::{Agent, AgentConfig};
use stampede_testcluster::images::ImageTable;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Kubeconfig with rights to manage nodes, pods and ServiceAccount tokens.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// Name of the Node to register.
    #[arg(long, default_value = "stampede-node")]
    node_name: String,
    /// Folder for per-pod kubeconfigs, logs and pid files.
    #[arg(long)]
    work_dir: PathBuf,
    /// Image table entry, IMAGE=PROGRAM or IMAGE (repeatable); `*` admits any image.
    #[arg(long = "image", value_name = "IMAGE[=PROGRAM]")]
    images: Vec<String>,
    /// More image table entries, separated by commas or whitespace.
    #[arg(long, env = "STAMPEDE_AGENT_IMAGES", default_value = "")]
    extra_images: String,
    /// PATH given to pod processes (default: the agent's own PATH).
    #[arg(long)]
    pod_path: Option<String>,
    /// Lifetime of pod ServiceAccount tokens, in seconds.
    #[arg(long, default_value_t = 3600)]
    token_seconds: i64,
    /// The node's pod capacity, as the kubelet's `maxPods` (`make bench-scale` raises it).
    #[arg(long, env = "STAMPEDE_AGENT_MAX_PODS", default_value_t = 110)]
    max_pods: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();

    let mut images = ImageTable::parse(&args.extra_images)?;
    for entry in &args.images {
        images.add_entry(entry)?;
    }
    let kubeconfig =
        Kubeconfig::read_from(&args.kubeconfig).with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let Some(cluster) = kubeconfig.clusters.first().and_then(|c| c.cluster.clone()) else {
        bail!("{} names no cluster", args.kubeconfig.display());
    };
    let api_server = cluster.server.clone().context("the kubeconfig's cluster has no server")?;
    let ca_data = cluster
        .certificate_authority_data
        .clone()
        .context("the kubeconfig's cluster has no certificate-authority-data")?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    std::fs::create_dir_all(&args.work_dir).with_context(|| format!("creating {}", args.work_dir.display()))?;
    let work_dir = std::fs::canonicalize(&args.work_dir)?;

    let cfg = AgentConfig {
        node_name: args.node_name,
        images,
        work_dir,
        api_server,
        ca_data,
        path: args.pod_path.unwrap_or_else(|| std::env::var("PATH").unwrap_or_default()),
        token_seconds: args.token_seconds,
        max_pods: args.max_pods,
    };
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    Agent::new(client, cfg).run(shutdown).await?;
    Ok(())
}
