//! `stampede-operator`: reconciles LoadTests. Serves `/healthz`, `/readyz` and `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use kube::Api;
use kube::api::ListParams;
use stampede_api::{LoadTest, LoadTestSchedule};
use stampede_operator::api_count::CountLayer;
use stampede_operator::controller::{self, Metrics};
use stampede_operator::leader;

#[derive(Parser)]
#[command(name = "stampede-operator", version, about = "Runs LoadTests on Kubernetes")]
struct Args {
    /// Address for /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080", env = "STAMPEDE_HTTP_ADDR")]
    http_addr: SocketAddr,
    /// Address for the dashboard API (`/api/loadtests…`), off when not given. Every request acts
    /// as the user whose bearer token it carries (see `stampede_operator::dashboard`).
    #[arg(long, env = "STAMPEDE_DASHBOARD_ADDR")]
    dashboard_addr: Option<SocketAddr>,
    /// Watch only these namespaces, comma-separated (default: all).
    #[arg(long, env = "STAMPEDE_WATCH_NAMESPACE", value_delimiter = ',')]
    namespace: Vec<String>,
    /// Runner image for LoadTests that name none.
    #[arg(long, env = "STAMPEDE_RUNNER_IMAGE", default_value = stampede_api::DEFAULT_IMAGE)]
    runner_image: String,
    /// Elect a leader among replicas with a Lease in this namespace (the operator's own).
    #[arg(long, env = "STAMPEDE_LEADER_ELECTION_NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// This replica's identity for leader election (default: $POD_NAME or the host name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let args = Args::parse();
    let config = kube::Config::infer().await.context("cannot find the Kubernetes API's configuration")?;
    let metrics = Arc::new(Metrics::default());
    let count = CountLayer(metrics.api_requests.clone());
    let client = kube::client::ClientBuilder::try_from(config.clone())
        .context("cannot reach the Kubernetes API")?
        .with_layer(&count)
        .build();
    let namespaces: Vec<String> =
        args.namespace.iter().map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect();
    // Listing LoadTests (where this operator may) tells whether the CRD is installed, without
    // the cluster-wide read of CRDs that namespaced RBAC does not grant.
    let probe_api: Api<LoadTest> = match namespaces.first() {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    if let Err(kube::Error::Api(e)) = probe_api.list(&ListParams::default().limit(1)).await
        && e.code == 404
    {
        anyhow::bail!(
            "the LoadTest CRD (loadtests.stampede.dev) is not installed: run `stampede crd | kubectl apply -f -` \
             or `kubectl apply -f crds/loadtest.yaml`, or install the Helm chart with crds.enabled=true"
        );
    }
    // LoadTestSchedules need their own CRD; an operator installed before it existed still runs
    // LoadTests, and says once why schedules are off.
    let schedule_api: Api<LoadTestSchedule> = match namespaces.first() {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let schedules = match schedule_api.list(&ListParams::default().limit(1)).await {
        Err(kube::Error::Api(e)) if e.code == 404 => {
            tracing::warn!(
                "the LoadTestSchedule CRD (loadtestschedules.stampede.dev) is not installed: schedules are off; \
                 install crds/loadtestschedule.yaml (or `stampede crd`) and restart the operator"
            );
            false
        }
        _ => true,
    };
    let listener = tokio::net::TcpListener::bind(args.http_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.http_addr))?;
    tracing::info!("serving /healthz, /readyz and /metrics on {}", listener.local_addr()?);
    let served = metrics.clone();
    tokio::spawn(stampede_serve::serve_http(
        listener,
        move |path: &str| stampede_operator::metrics::http_response(path, &served),
        std::future::pending(),
    ));
    if let Some(addr) = args.dashboard_addr {
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        tracing::info!("serving the dashboard API on {}", listener.local_addr()?);
        let known = metrics.clone();
        let api =
            stampede_operator::dashboard::DashboardApi::new(config.clone(), client.clone(), move || known.namespaces());
        tokio::spawn(stampede_operator::dashboard::serve(listener, api, std::future::pending()));
    }
    let scope = if namespaces.is_empty() { "all namespaces".to_string() } else { namespaces.join(", ") };
    let mut options =
        controller::Options { namespaces, runner_image: args.runner_image.clone(), schedules, ..Default::default() };
    if let Some(lease_ns) = &args.leader_election_namespace {
        let me = args.identity.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/etc/hostname").unwrap_or_else(|_| "stampede-operator".into()).trim().to_string()
        });
        let timing = leader::Timing::default();
        // Every write checks that this replica still leads — in the shell before it acts, and
        // in the controllers' client when a request is made and again in its connection's task
        // as it writes the bytes (`leader::fenced_client`) — so that one frozen past its
        // renew deadline writes nothing when it wakes. The Lease itself is renewed through
        // `client`, which is not fenced.
        let fence = leader::Fence::until(tokio::time::Instant::now());
        let mut leadership =
            leader::lead_fencing(client.clone(), lease_ns, "stampede-operator", &me, timing, fence.clone()).await?;
        options.fence = fence.clone();
        let client = leader::fenced_client(config, fence, count).context("cannot reach the Kubernetes API")?;
        metrics.leader.set(1);
        tracing::info!("leading; watching LoadTests in {scope}");
        tokio::select! {
            biased;
            lost = &mut leadership => anyhow::bail!("{lost}; exiting so that a new leader takes over"),
            () = controller::run(client, metrics, options) => {}
        }
        // The controllers have stopped (a shutdown signal): the next replica need not wait for
        // the lease to expire.
        match leadership.release().await {
            Ok(true) => tracing::info!("released the lease"),
            Ok(false) => {}
            Err(e) => tracing::warn!("cannot release the lease: {e}"),
        }
    } else {
        metrics.leader.set(1);
        tracing::info!("watching LoadTests in {scope}");
        controller::run(client, metrics, options).await;
    }
    tracing::info!("stopped");
    Ok(())
}
