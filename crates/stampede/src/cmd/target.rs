//! `stampede target`: the built-in target server on its own.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use stampede_model::Dur;

use crate::Failure;

#[derive(Args)]
pub(crate) struct TargetArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Speak HTTP/2 as well as HTTP/1.1: by prior knowledge over cleartext (h2c), or when a
    /// client picks `h2` in the TLS handshake.
    #[arg(long)]
    http2: bool,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Every request but /stats takes this long (e.g. 10ms) before its route answers. Alone
    /// it is a pure delay with no limit on concurrency.
    #[arg(long, value_name = "DURATION", value_parser = super::run::parse_dur)]
    service_time: Option<Dur>,
    /// At most N requests in their service time at once; the rest wait in a FIFO queue. The
    /// target's capacity is then N / service time requests per second (8 × 10ms → 800/s):
    /// beyond it latency grows. Needs --service-time.
    #[arg(long, value_name = "N", value_parser = parse_concurrency, requires = "service_time")]
    concurrency: Option<usize>,
    /// Answer 503 at once when N requests already wait for --concurrency (errors grow instead
    /// of latency). Default: the queue is unbounded.
    #[arg(long, value_name = "N", requires = "concurrency")]
    queue_limit: Option<usize>,
}

/// `--concurrency`: at least 1.
pub(crate) fn parse_concurrency(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1: it is how many requests are in service at once".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}: write a whole number of requests, e.g. 8")),
    }
}

/// What `stampede target` says of its capacity at start, when it has a service time:
/// `capacity: 800 requests/s (8 concurrent × 10ms)`.
pub(crate) fn capacity_line(options: &stampede_target::TargetOptions) -> Option<String> {
    let service_time = Dur(options.service_time.filter(|t| !t.is_zero())?);
    let (Some(rate), Some(n)) = (options.capacity(), options.concurrency) else {
        return Some(format!("service time: {service_time} per request, no concurrency limit"));
    };
    let rate = (rate * 10.0).round() / 10.0;
    let rate = if rate.fract() == 0.0 { format!("{rate:.0}") } else { format!("{rate:.1}") };
    let queue = match options.queue_limit {
        Some(limit) => format!(", 503 when {limit} wait"),
        None => String::new(),
    };
    Some(format!("capacity: {rate} requests/s ({n} concurrent × {service_time}){queue}"))
}

/// `stampede target`: serves until Ctrl-C, then prints what it served.
pub(crate) fn target(args: TargetArgs) -> Result<ExitCode, Failure> {
    let addr = SocketAddr::new(args.host, args.port);
    let mut options = stampede_target::TargetOptions {
        tls: None,
        http2: args.http2,
        service_time: args.service_time.map(|d| d.0),
        concurrency: args.concurrency,
        queue_limit: args.queue_limit,
    };
    options.check().map_err(|e| Failure::Invalid(anyhow::anyhow!("{e}")))?;
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let read = |p: &PathBuf| {
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display())).map_err(Failure::Invalid)
        };
        let config = stampede_target::server_config(&read(cert)?, &read(key)?, args.http2).map_err(|e| {
            Failure::Invalid(anyhow::anyhow!("--tls-cert {} / --tls-key {}: {e}", cert.display(), key.display()))
        })?;
        options.tls = Some(Arc::new(config));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime")
        .map_err(Failure::CouldNotRun)?;
    let scheme = if options.tls.is_some() { "https" } else { "http" };
    let protocols = if args.http2 { "HTTP/1.1 and HTTP/2" } else { "HTTP/1.1" };
    let capacity = capacity_line(&options);
    // Bound first: "listening" is said only of an address that is listened on (the one bound,
    // with the port picked for --port 0).
    let bound = stampede_target::TargetServer::bind(addr, options)
        .with_context(|| format!("cannot listen on {addr}"))
        .map_err(Failure::CouldNotRun)?;
    eprintln!("stampede target listening on {scheme}://{}, {protocols} (Ctrl-C to stop)", bound.addr());
    if let Some(line) = capacity {
        eprintln!("{line}");
    }
    rt.block_on(bound.serve_until(async {
        let _ = tokio::signal::ctrl_c().await;
    }));
    Ok(ExitCode::SUCCESS)
}
