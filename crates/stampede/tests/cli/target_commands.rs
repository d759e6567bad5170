//! `stampede target`, the built-in target as a process of its own: HTTPS and HTTP/2 from PEM
//! files, the options and files it refuses, a taken port, port 0; and the helpers that start it
//! for the other tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::commands::{stampede, text, write_scenario};

/// `stampede target` as a separate process; killed when dropped.
pub(crate) struct TargetProcess(std::process::Child);

impl Drop for TargetProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn start_target(extra: &[&str]) -> (TargetProcess, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["target", "--port", &port.to_string()])
        .args(extra)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "stampede target did not listen on {port}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (TargetProcess(child), port)
}

/// `stampede target --http2` serving HTTPS with a self-signed certificate written into `dir`;
/// with the certificate's file (the CA a scenario trusts).
pub(crate) fn start_https_target(dir: &Path) -> (TargetProcess, u16, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_file, key_file) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let (target, port) =
        start_target(&["--http2", "--tls-cert", cert_file.to_str().unwrap(), "--tls-key", key_file.to_str().unwrap()]);
    (target, port, cert_file)
}

#[test]
fn the_target_command_serves_https_and_http2_from_given_pem_files() {
    let dir = tempfile::tempdir().unwrap();
    let (_target, port, cert_file) = start_https_target(dir.path());
    // 40 requests over HTTP/2 (ALPN h2), trusting the self-signed certificate as a CA; then
    // one more asks the target how many it served over HTTP/2 (itself included).
    let file = write_scenario(
        dir.path(),
        &format!(
            r#"
name: h2
baseUrl: https://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 4, iterations: 40}}
http: {{version: "2", tls: {{caFile: {}}}}}
scenarios:
  - name: s
    steps: [{{name: get, request: {{url: "{{{{baseUrl}}}}/get"}}, check: {{status: 200}}}}]
"#,
            cert_file.display()
        ),
    );
    let out = dir.path().join("h2.json");
    let run = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0), "{}{}", text(&run.stdout), text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!((report["total"]["requests"].as_u64(), report["total"]["errors"].as_u64()), (Some(40), Some(0)));
    let stats = dir.path().join("stats.yaml");
    std::fs::write(
        &stats,
        format!(
            r#"
name: stats
baseUrl: https://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 1, iterations: 1}}
http: {{version: "2", tls: {{caFile: {}}}}}
scenarios:
  - name: s
    steps: [{{name: stats, request: {{url: "{{{{baseUrl}}}}/stats"}}, check: {{json: {{http2Requests: {{equals: "41"}}, requests: {{equals: "41"}}}}}}}}]
"#,
            cert_file.display()
        ),
    )
    .unwrap();
    let run = stampede(&["run", stats.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["total"]["errors"], 0, "{}", text(&run.stdout));

    // Without the CA, the same run fails the TLS handshake: errors of kind tls.
    let untrusted =
        std::fs::read_to_string(&file).unwrap().replace(&format!("tls: {{caFile: {}}}", cert_file.display()), "");
    std::fs::write(&file, untrusted).unwrap();
    let run = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["total"]["errorsByKind"]["tls"], 40, "{}", text(&run.stdout));
}

#[test]
fn the_target_command_refuses_a_missing_key_file_by_name() {
    let out = stampede(&["target", "--port", "1", "--tls-cert", "nope.pem", "--tls-key", "nope.key"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("nope.pem"), "{}", text(&out.stderr));
    let out = stampede(&["target", "--port", "1", "--tls-cert", "nope.pem"]);
    assert_eq!(out.status.code(), Some(2), "--tls-cert needs --tls-key: {}", text(&out.stderr));
}

#[test]
fn the_target_command_refuses_capacity_options_it_cannot_serve() {
    let out = stampede(&["target", "--port", "1", "--service-time", "10ms", "--concurrency", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("must be at least 1"), "{}", text(&out.stderr));
    let out = stampede(&["target", "--port", "1", "--concurrency", "8"]);
    assert_eq!(out.status.code(), Some(2), "--concurrency needs --service-time: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--service-time"), "{}", text(&out.stderr));
    let out = stampede(&["target", "--port", "1", "--service-time", "0s", "--concurrency", "8"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("needs a service time above zero"), "{}", text(&out.stderr));
    let help = text(&stampede(&["target", "--help"]).stdout);
    assert!(help.contains("N / service time requests per second (8 × 10ms → 800/s)"), "{help}");
}

/// `stampede target` on a port already taken: it says it cannot listen there, naming the
/// address, exits 3 (could not run), and never says it is listening (it used to say so before
/// its bind failed).
#[test]
fn the_target_command_on_a_taken_port_fails_naming_the_address_and_never_says_listening() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["target", "--host", "127.0.0.1", "--port", &port])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: a target that did bind would serve until stopped.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(!stdout.contains("listening") && !stderr.contains("listening"), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("cannot listen on 127.0.0.1:{port}")), "{stderr}");
    drop(taken);
}

/// `stampede target --port 0` says the address it is bound to, with the port it was given, and
/// serves there.
#[test]
fn the_target_command_on_port_0_says_the_port_it_listens_on() {
    use std::io::{BufRead, Read, Write};
    let mut target = TargetProcess(
        Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["target", "--port", "0"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Kept open until the end: the target may write more.
    let mut stderr = std::io::BufReader::new(target.0.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let addr = first
        .strip_prefix("stampede target listening on http://")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("{first}"));
    let addr: std::net::SocketAddr = addr.parse().unwrap_or_else(|e| panic!("{e}: {first}"));
    assert_eq!(addr.ip().to_string(), "127.0.0.1", "{first}");
    assert_ne!(addr.port(), 0, "{first}");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    conn.write_all(b"GET /get HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = conn.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
