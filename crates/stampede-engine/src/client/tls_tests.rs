//! TLS and HTTP/2 on loopback, against the built-in target serving a certificate from a
//! throw-away CA made with rcgen. Every test talks to 127.0.0.1 only and is bounded in
//! requests and time.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use stampede_model::ErrorKind;

use crate::client::exchange::Headers;
use crate::client::settings::Transport;
use crate::client::transport::{self, VuConn, WorkerTransport};
use crate::client::url::HttpUrl;
use crate::compile::files::Files;
use crate::compile::http::compile_transport;
use stampede_model::scenario::HttpDefaults;
use stampede_target::{TargetOptions, TargetServer};
use tempfile::TempDir;

/// A CA, a server certificate it issued for `localhost` and 127.0.0.1, and the CA's PEM file.
struct Pki {
    dir: TempDir,
    ca_file: PathBuf,
    cert_pem: String,
    key_pem: String,
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "Stampede test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "localhost");
    let cert = params.signed_by(&key, &ca).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    Pki { dir, ca_file, cert_pem: cert.pem(), key_pem: key.serialize_pem() }
}

/// The built-in target over TLS; `h2` offers HTTP/2 in ALPN besides HTTP/1.1.
fn tls_target(pki: &Pki, h2: bool) -> TargetServer {
    let config = stampede_target::server_config(&pki.cert_pem, &pki.key_pem, h2).unwrap();
    let options = TargetOptions { tls: Some(Arc::new(config)), http2: h2, ..Default::default() };
    TargetServer::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1, options).unwrap()
}

fn transport_plan(yaml: &str, dir: &Path) -> Arc<Transport> {
    let http: HttpDefaults = serde_yaml::from_str(yaml).unwrap();
    let mut problems = crate::error::Problems::default();
    let plan = compile_transport(&http, Files::new(dir, None), &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    Arc::new(Transport::new(Arc::new(plan)))
}

fn get(url: &str) -> (HttpUrl, Vec<u8>) {
    let target = HttpUrl::parse(url).unwrap();
    let bytes = format!("GET {} HTTP/1.1\r\nhost: {}\r\n\r\n", target.path_and_query, target.authority).into_bytes();
    (target, bytes)
}

/// Runs `f` on a current-thread runtime inside a `LocalSet`, as a worker does.
fn on_worker<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tokio::task::LocalSet::new()
        .block_on(&rt, async { tokio::time::timeout(Duration::from_secs(20), f).await.unwrap() })
}

struct Client {
    wt: WorkerTransport,
    vu: VuConn,
    headers: Headers,
    body: Vec<u8>,
}

impl Client {
    fn new(plan: Arc<Transport>) -> Client {
        Client {
            wt: WorkerTransport::new(plan, 0, 1),
            vu: VuConn::default(),
            headers: Headers::default(),
            body: vec![],
        }
    }

    async fn get(&mut self, url: &str) -> Result<u16, (ErrorKind, String)> {
        let (target, bytes) = get(url);
        transport::exchange(
            &mut self.vu,
            &self.wt,
            &target,
            &bytes,
            false,
            Some(&mut self.body),
            &mut self.headers,
            Duration::from_secs(5),
        )
        .await
        .map(|info| info.status)
        .map_err(|e| (e.kind, e.message))
    }
}

#[test]
fn https_over_http1_works_with_the_ca_file_and_keeps_the_connection() {
    let pki = pki();
    let server = tls_target(&pki, false);
    let url = format!("{}/get", server.base_url());
    assert!(url.starts_with("https://127.0.0.1:"));
    let plan = transport_plan(&format!("tls: {{caFile: {}}}", pki.ca_file.display()), pki.dir.path());
    let opened = on_worker(async {
        let mut c = Client::new(plan);
        for _ in 0..5 {
            assert_eq!(c.get(&url).await, Ok(200));
        }
        let opened: Vec<_> = c.vu.take_opened().collect();
        assert!(String::from_utf8_lossy(&c.body).contains("\"url\""));
        opened
    });
    assert_eq!(opened.len(), 1, "one connection for five requests");
    assert!(opened[0].tls_us.is_some() && opened[0].dns_us.is_none());
    let stats = server.stats();
    assert_eq!((stats.requests(), stats.http2_requests(), stats.connections(), stats.tls_sessions()), (5, 0, 1, 1));
    server.stop();
}

/// An HTTPS server that answers one request on each connection and then closes it, as a
/// server closing idle keep-alive connections does: with a TLS close_notify when `notify`, or
/// by dropping the TCP connection. Counts the requests it read.
async fn https_one_answer_per_connection(pki: &Pki, notify: bool) -> (String, Arc<AtomicU32>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = stampede_target::server_config(&pki.cert_pem, &pki.key_pem, false).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicU32::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let Ok(mut s) = acceptor.accept(tcp).await else { continue };
            let mut buf = [0u8; 4096];
            if s.read(&mut buf).await.unwrap_or(0) > 0 {
                count.fetch_add(1, Ordering::Relaxed);
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
                s.flush().await.unwrap();
                if notify {
                    let _ = s.shutdown().await;
                }
            }
        }
    });
    (format!("https://127.0.0.1:{port}/"), seen)
}

#[test]
fn an_https_connection_the_server_closed_while_idle_is_replaced_before_the_next_request() {
    let pki = pki();
    let plan = transport_plan(&format!("tls: {{caFile: {}}}", pki.ca_file.display()), pki.dir.path());
    for notify in [true, false] {
        on_worker(async {
            let (url, seen) = https_one_answer_per_connection(&pki, notify).await;
            let mut c = Client::new(plan.clone());
            assert_eq!(c.get(&url).await, Ok(200));
            // The server closed the connection after its answer; the reactor has seen it.
            c.vu.readable().await;
            assert_eq!(c.get(&url).await, Ok(200), "close_notify: {notify}");
            assert_eq!(seen.load(Ordering::Relaxed), 2, "each request reached the server once");
            assert_eq!(c.vu.take_opened().count(), 2, "the second request went on a new connection");
        });
    }
}

#[test]
fn http2_over_tls_is_agreed_by_alpn() {
    let pki = pki();
    let server = tls_target(&pki, true);
    let url = format!("{}/get", server.base_url());
    for version in ["'2'", "auto"] {
        let plan = transport_plan(
            &format!("{{version: {version}, tls: {{caFile: {}}}}}", pki.ca_file.display()),
            pki.dir.path(),
        );
        on_worker(async {
            let mut c = Client::new(plan);
            for _ in 0..3 {
                assert_eq!(c.get(&url).await, Ok(200));
            }
            // The echo shows the authority as the Host header.
            assert!(String::from_utf8_lossy(&c.body).contains("\"Host\": \"127.0.0.1:"));
        });
    }
    let stats = server.stats();
    assert_eq!(stats.http2_requests(), 6, "every request came over HTTP/2");
    assert_eq!(stats.connections(), 2, "one connection per client");
    server.stop();
}

#[test]
fn auto_falls_back_to_http1_when_the_server_offers_only_http1() {
    let pki = pki();
    let server = tls_target(&pki, false);
    let url = format!("{}/get", server.base_url());
    let plan =
        transport_plan(&format!("{{version: auto, tls: {{caFile: {}}}}}", pki.ca_file.display()), pki.dir.path());
    on_worker(async {
        let mut c = Client::new(plan);
        for _ in 0..3 {
            assert_eq!(c.get(&url).await, Ok(200));
        }
        assert_eq!(c.vu.take_opened().count(), 1, "the probing connection is kept for HTTP/1.1");
        assert!(c.wt.h2.is_http1(&HttpUrl::parse(&url).unwrap()));
    });
    assert_eq!((server.stats().requests(), server.stats().http2_requests()), (3, 0));
    server.stop();
}

#[test]
fn h2c_with_prior_knowledge() {
    let options = TargetOptions { tls: None, http2: true, ..Default::default() };
    let server = TargetServer::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1, options).unwrap();
    let url = format!("{}/get", server.base_url());
    let plan = transport_plan("version: '2'", Path::new("."));
    on_worker(async {
        let mut c = Client::new(plan);
        for _ in 0..4 {
            assert_eq!(c.get(&url).await, Ok(200));
        }
    });
    assert_eq!((server.stats().requests(), server.stats().http2_requests()), (4, 4));
    server.stop();
}

#[test]
fn http2_streams_share_the_configured_connections() {
    let pki = pki();
    let server = tls_target(&pki, true);
    let url = format!("{}/delay/20", server.base_url());
    let plan = transport_plan(
        &format!("{{version: '2', connections: 2, maxStreams: 4, tls: {{caFile: {}}}}}", pki.ca_file.display()),
        pki.dir.path(),
    );
    let wt = Rc::new(WorkerTransport::new(plan, 0, 1));
    on_worker(async {
        let mut tasks = Vec::new();
        for _ in 0..12 {
            let wt = wt.clone();
            let url = url.clone();
            tasks.push(tokio::task::spawn_local(async move {
                let mut vu = VuConn::default();
                let (target, bytes) = get(&url);
                let mut headers = Headers::default();
                let mut ok = 0;
                for _ in 0..3 {
                    let r = transport::exchange(
                        &mut vu,
                        &wt,
                        &target,
                        &bytes,
                        false,
                        None,
                        &mut headers,
                        Duration::from_secs(5),
                    )
                    .await;
                    ok += u32::from(r.is_ok_and(|i| i.status == 200));
                }
                ok
            }));
        }
        let mut ok = 0;
        for t in tasks {
            ok += t.await.unwrap();
        }
        assert_eq!(ok, 36);
    });
    let stats = server.stats();
    assert_eq!((stats.http2_requests(), stats.connections()), (36, 2));
    server.stop();
}

#[test]
fn tls_failures_are_classified() {
    let pki = pki();
    let server = tls_target(&pki, true);
    let url = format!("{}/get", server.base_url());
    let cases = [
        ("{}".to_string(), "unknown CA"),
        (format!("{{caFile: {}, serverName: wrong.example}}", pki.ca_file.display()), "hostname mismatch"),
    ];
    for version in ["'1.1'", "'2'", "auto"] {
        for (tls, expected) in &cases {
            let plan = transport_plan(&format!("{{version: {version}, tls: {tls}}}"), pki.dir.path());
            let (kind, message) = on_worker(async { Client::new(plan).get(&url).await.unwrap_err() });
            assert_eq!(kind, ErrorKind::Tls, "{version} {tls}: {message}");
            assert!(message.contains(expected), "{version} {tls}: {message}");
        }
        // The right name through SNI, and `insecure`, are accepted.
        for tls in [format!("{{caFile: {}, serverName: localhost}}", pki.ca_file.display()), "{insecure: true}".into()]
        {
            let plan = transport_plan(&format!("{{version: {version}, tls: {tls}}}"), pki.dir.path());
            assert_eq!(on_worker(async { Client::new(plan).get(&url).await }), Ok(200), "{version} {tls}");
        }
    }
    server.stop();
}

#[test]
fn tls_settings_are_checked_when_compiled() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    let http: HttpDefaults = serde_yaml::from_str(
        "{version: '1.1', connections: 2, maxRequestsPerConnection: 0, tls: {caFile: empty.pem, clientCert: missing.pem, serverName: 'not a name'}}",
    )
    .unwrap();
    let mut problems = crate::error::Problems::default();
    compile_transport(&http, Files::new(dir.path(), None), &mut problems);
    let text: Vec<String> = problems.into_vec().iter().map(ToString::to_string).collect();
    let has = |s: &str| text.iter().any(|p| p.contains(s));
    assert!(has("http.connections: applies to HTTP/2"), "{text:?}");
    assert!(has("http.maxRequestsPerConnection: must be at least 1"), "{text:?}");
    assert!(has("http.tls.caFile") && has("holds no PEM certificate"), "{text:?}");
    assert!(has("http.tls.clientKey: `clientCert` needs `clientKey`"), "{text:?}");
    assert!(has("http.tls.serverName"), "{text:?}");
}

// ---- Whole runs: the executor, phases and the report -------------------------------------

use stampede_model::report::{GeneratorFacts, Report};

use crate::compile::plan::{CompileOptions, Plan};
use crate::output::report;
use crate::run::executor::{self, RunOptions, RunOutcome};
use crate::stats::phases::LatencyPhase;

fn run_plan(yaml: &str, base_url: &str, threads: usize) -> (Arc<Plan>, RunOutcome) {
    let file = crate::compile::parse::parse_str(yaml, Path::new("test.yaml")).unwrap();
    let opts = CompileOptions { base_url: Some(base_url.to_string()), ..CompileOptions::default() };
    let plan = Arc::new(crate::compile::plan::compile(&file, &opts).unwrap_or_else(|p| panic!("{p:?}")));
    let outcome = executor::run(plan.clone(), &RunOptions { threads, ..RunOptions::default() }, &mut |_| {}).unwrap();
    (plan, outcome)
}

fn count(outcome: &RunOutcome, phase: LatencyPhase) -> u64 {
    outcome.metrics.steps.iter().map(|s| s.phases.get(phase).map_or(0, |p| p.count())).sum()
}

fn errors(outcome: &RunOutcome, kind: ErrorKind) -> u64 {
    outcome.metrics.steps.iter().map(|s| s.errors[kind.index()]).sum()
}

/// Every step's time to first byte stays within its total, percentile by percentile, and
/// is recorded for every answer.
fn assert_ttfb_within_total(report: &Report) {
    for s in report.steps.iter().chain([&report.total]) {
        let ttfb = s.phases_ms.ttfb.as_ref().expect("ttfb recorded");
        assert_eq!(ttfb.samples, s.responses);
        let (t, l) = (&ttfb.latency, &s.latency_ms);
        for (a, b) in [(t.min, l.min), (t.p50, l.p50), (t.p90, l.p90), (t.p99, l.p99), (t.p999, l.p999), (t.max, l.max)]
        {
            assert!(a <= b, "ttfb {a} ms > total {b} ms in {:?}", s.step);
        }
        assert!(t.mean <= l.mean + 0.001);
    }
}

fn report(plan: &Plan, outcome: &RunOutcome) -> Report {
    report::build_report(plan, outcome, false, GeneratorFacts::default(), Err(stampede_core::NO_BASELINE))
}

#[test]
fn runs_over_https_on_http1_and_http2_with_phases_per_new_connection() {
    let pki = pki();
    let server = tls_target(&pki, true);
    let mut served = 0;
    for (version, connections) in [("'1.1'", 4), ("'2'", 2), ("auto", 2)] {
        let yaml = format!(
            r#"
name: tls
load: {{executor: constant-vus, vus: 4, iterations: 40}}
http: {{version: {version}, tls: {{caFile: {}}}}}
scenarios:
  - name: s
    steps:
      - {{name: get, request: {{url: "{{{{baseUrl}}}}/get"}}}}
      - {{name: post, request: {{method: POST, url: "{{{{baseUrl}}}}/post", json: {{a: 1}}}}, check: {{json: {{json.a: {{exists: true}}}}}}}}
"#,
            pki.ca_file.display()
        );
        let before = (server.stats().connections(), server.stats().http2_requests());
        let (plan, outcome) = run_plan(&yaml, &server.base_url(), 2);
        let new_connections = server.stats().connections() - before.0;
        let h2 = server.stats().http2_requests() - before.1;
        served += 80;
        assert_eq!(server.stats().requests(), served, "{version}");
        assert_eq!(outcome.metrics.steps.iter().map(|s| s.error_total()).sum::<u64>(), 0, "{version}");
        // HTTP/1.1: one connection per VU; HTTP/2: one per worker thread, shared by its VUs.
        assert_eq!(new_connections, connections, "{version}");
        assert_eq!(h2, if version == "'1.1'" { 0 } else { 80 }, "{version}");
        assert_eq!(count(&outcome, LatencyPhase::Connect), connections, "{version}: connect once per new connection");
        assert_eq!(count(&outcome, LatencyPhase::Tls), connections, "{version}: TLS once per new connection");
        assert_eq!(count(&outcome, LatencyPhase::Dns), 0, "an IP address needs no lookup");
        assert_eq!(count(&outcome, LatencyPhase::Ttfb), 80);
        let report = report(&plan, &outcome);
        assert_ttfb_within_total(&report);
        let tls = report.total.phases_ms.tls.as_ref().unwrap();
        assert_eq!(tls.samples, connections);
        assert!(tls.latency.min > 0.0);
    }
    server.stop();
}

#[test]
fn tls_errors_are_reported_by_kind_and_insecure_accepts() {
    let pki = pki();
    let server = tls_target(&pki, true);
    let cases = [
        ("{}".to_string(), Some("unknown CA")),
        (format!("{{caFile: {}, serverName: other.example}}", pki.ca_file.display()), Some("hostname mismatch")),
        ("{insecure: true}".to_string(), None),
    ];
    for version in ["'1.1'", "'2'"] {
        for (tls, expected) in &cases {
            let yaml = format!(
                r#"
name: tls-errors
load: {{executor: constant-vus, vus: 2, iterations: 6}}
http: {{version: {version}, tls: {tls}}}
scenarios:
  - name: s
    steps: [{{name: get, request: {{url: "{{{{baseUrl}}}}/get"}}}}]
"#
            );
            let (plan, outcome) = run_plan(&yaml, &server.base_url(), 1);
            match expected {
                Some(expected) => {
                    assert_eq!(errors(&outcome, ErrorKind::Tls), 6, "{version} {tls}");
                    let report = report(&plan, &outcome);
                    assert_eq!(report.total.errors_by_kind.get("tls"), Some(&6));
                    let sample = &report.error_samples[0];
                    assert_eq!(sample.kind, ErrorKind::Tls);
                    assert!(sample.message.contains(expected), "{version} {tls}: {}", sample.message);
                    assert_eq!(count(&outcome, LatencyPhase::Tls), 0, "failed handshakes are not TLS samples");
                    assert_eq!(count(&outcome, LatencyPhase::Ttfb), 0);
                }
                None => assert_eq!(outcome.metrics.steps[0].error_total(), 0, "{version} {tls}"),
            }
        }
    }
    server.stop();
}

#[test]
fn connection_policies_decide_how_many_connections_open() {
    let server = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let cases = [
        // 3 VUs, 30 iterations of 2 requests.
        ("{}", 3),
        ("{connectionPolicy: per-iteration}", 30),
        ("{maxRequestsPerConnection: 1}", 60),
    ];
    for (http, expected) in cases {
        let yaml = format!(
            r#"
name: policy
load: {{executor: constant-vus, vus: 3, iterations: 30}}
http: {http}
scenarios:
  - name: s
    steps:
      - {{name: a, request: {{url: "{{{{baseUrl}}}}/"}}}}
      - {{name: b, request: {{url: "{{{{baseUrl}}}}/get"}}}}
"#
        );
        let before = server.stats().connections();
        let (_, outcome) = run_plan(&yaml, &server.base_url(), 1);
        let opened = server.stats().connections() - before;
        assert_eq!(outcome.metrics.steps.iter().map(|s| s.error_total()).sum::<u64>(), 0, "{http}");
        assert_eq!(opened, expected, "{http}");
        assert_eq!(count(&outcome, LatencyPhase::Connect), expected, "{http}: connect samples = new connections");
        assert_eq!(count(&outcome, LatencyPhase::Tls), 0, "{http}: no TLS on http");
    }
    server.stop();
}

/// Mutual TLS: a server that asks for a client certificate issued by the test CA.
#[test]
fn client_certificates_are_presented_when_configured() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "Stampede mTLS CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let issue = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names).unwrap().signed_by(&key, &ca).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = issue(vec!["127.0.0.1".into()]);
    let (client_cert, client_key) = issue(vec!["client.test".into()]);
    let dir = tempfile::tempdir().unwrap();
    for (name, pem) in [("ca.pem", ca.pem()), ("client.pem", client_cert), ("client-key.pem", client_key)] {
        std::fs::write(dir.path().join(name), pem).unwrap();
    }

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build().unwrap();
    let chain = CertificateDer::pem_slice_iter(server_cert.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, PrivateKeyDer::from_pem_slice(server_key.as_bytes()).unwrap())
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let options = TargetOptions { tls: Some(Arc::new(config)), http2: true, ..Default::default() };
    let server = TargetServer::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1, options).unwrap();
    let url = format!("{}/get", server.base_url());
    for version in ["'1.1'", "'2'"] {
        let with = format!(
            "{{version: {version}, tls: {{caFile: ca.pem, clientCert: client.pem, clientKey: client-key.pem}}}}"
        );
        assert_eq!(on_worker(async { Client::new(transport_plan(&with, dir.path())).get(&url).await }), Ok(200));
        let without = format!("{{version: {version}, tls: {{caFile: ca.pem}}}}");
        let (kind, message) =
            on_worker(async { Client::new(transport_plan(&without, dir.path())).get(&url).await.unwrap_err() });
        assert_eq!(kind, ErrorKind::Tls, "{version}: {message}");
        assert!(message.contains("TLS"), "{version}: {message}");
    }
    assert_eq!(server.stats().requests(), 2);
    server.stop();
}
