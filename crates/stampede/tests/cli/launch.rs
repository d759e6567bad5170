//! `stampede launch` without a cluster: bad input exits 2 with a message that names the file and
//! the field, before any request; an API server that cannot be reached or refuses the LoadTest
//! exits 2 with its reason. The API server here is a one-request fake on 127.0.0.1 that also
//! shows what `launch` sent. (The gate itself, exit 0 and 1 with a real operator, and 3 on
//! timeout, is tested end to end in `crates/stampede-operator/tests/e2e/gitops.rs`.)

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const LOADTEST: &str = "\
apiVersion: stampede.dev/v1alpha1
kind: LoadTest
metadata:
  generateName: smoke-
spec:
  runners: 1
  scenario:
    name: smoke
    baseUrl: http://my-service.default.svc:8080
    load: {executor: constant-vus, vus: 1, iterations: 10}
    scenarios:
      - name: s
        steps:
          - name: home
            request: {url: '{{baseUrl}}/'}
";

/// Runs `stampede launch ARGS` with `stdin` as its input and `kubeconfig` as $KUBECONFIG (no
/// in-cluster configuration either way).
fn launch(args: &[&str], stdin: &str, kubeconfig: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("launch")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("stampede runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A kubeconfig for a plain-HTTP API server on 127.0.0.1:`port`, default namespace `ctx-ns`.
fn kubeconfig(dir: &Path, port: u16) -> PathBuf {
    write(
        dir,
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u, namespace: ctx-ns}}}}]\ncurrent-context: c\n"
        ),
    )
}

/// Asserts exit code 2 and that stderr holds every one of `needles`.
fn assert_exit_2(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "stdout: {}\nstderr: {err}", String::from_utf8_lossy(&out.stdout));
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`: {err}");
    }
    assert!(out.stdout.is_empty(), "nothing was created, so nothing is printed on stdout");
}

#[test]
fn bad_input_exits_2_naming_the_file_and_the_problem_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    // No API server at all: each case must fail on the input alone.
    let kc = dir.path().join("no-kubeconfig");
    let path = |name: &str, text: &str| write(dir.path(), name, text).to_str().unwrap().to_string();

    let missing = dir.path().join("missing.yaml");
    assert_exit_2(&launch(&[missing.to_str().unwrap()], "", &kc), &["cannot read", "missing.yaml"]);

    let deployment = path("deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n");
    assert_exit_2(
        &launch(&[&deployment], "", &kc),
        &["deploy.yaml is not a LoadTest", "apiVersion apps/v1, kind Deployment"],
    );

    let wrong_type = path("wrong-type.yaml", &LOADTEST.replace("runners: 1", "runners: two"));
    assert_exit_2(
        &launch(&[&wrong_type], "", &kc),
        &["wrong-type.yaml is not a valid LoadTest", "spec.runners: invalid type: string \"two\"", "line 6"],
    );

    let unnamed = path("unnamed.yaml", &LOADTEST.replace("  generateName: smoke-\n", "  labels: {a: b}\n"));
    assert_exit_2(&launch(&[&unnamed], "", &kc), &["unnamed.yaml: set metadata.name, or metadata.generateName"]);

    let two = path("two.yaml", &format!("{LOADTEST}---\n{LOADTEST}"));
    assert_exit_2(&launch(&[&two], "", &kc), &["two.yaml holds 2 YAML documents"]);

    let broken = path("broken.yaml", "apiVersion: [\n");
    assert_exit_2(&launch(&[&broken], "", &kc), &["broken.yaml is not valid YAML", "line 2"]);

    assert_exit_2(&launch(&["-"], "", &kc), &["stdin is empty"]);

    let from_config_map = LOADTEST.split("  scenario:").next().unwrap().to_string()
        + "  scenarioFrom: {name: smoke, key: scenario.yaml}\n";
    assert_exit_2(
        &launch(&["-", "--base-url", "http://127.0.0.1:8080"], &from_config_map, &kc),
        &["--base-url replaces spec.scenario.baseUrl, but stdin has no inline spec.scenario", "spec.scenarioFrom"],
    );
    assert_exit_2(&launch(&["-", "--base-url", "ftp://x"], LOADTEST, &kc), &["--base-url", "unsupported scheme"]);
    assert_exit_2(&launch(&["-", "--timeout", "20"], LOADTEST, &kc), &["--timeout", "unit"]);

    // A valid manifest gets as far as the configuration: none here.
    assert_exit_2(&launch(&["-"], LOADTEST, &kc), &["no usable kubeconfig", "no-kubeconfig"]);
}

#[test]
fn the_help_documents_the_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_stampede")).args(["launch", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for line in [
        "  0  the LoadTest finished and passed",
        "  1  it finished and did not pass",
        "  2  bad input or an API error",
        "  3  it did not finish within --timeout",
    ] {
        assert!(help.contains(line), "{help}");
    }
}

#[test]
fn an_api_server_that_cannot_be_reached_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    // A port that was free a moment ago: nothing listens on it.
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port();
    let out = launch(&["-"], LOADTEST, &kubeconfig(dir.path(), port));
    assert_exit_2(&out, &["cannot create LoadTest ctx-ns/smoke-* from stdin", "Connection refused"]);
}

/// A fake API server that answers one request with `status` and `body`; joins to the request it
/// got (head and body).
fn fake_api_server(status: &'static str, body: String) -> (u16, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = conn.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed before sending its request");
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                    .map_or(0, |v| v.parse::<usize>().unwrap());
                if request.len() >= end + 4 + length {
                    break;
                }
            }
        }
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(response.as_bytes()).unwrap();
        String::from_utf8(request).unwrap()
    });
    (port, handle)
}

fn request_body(request: &str) -> serde_json::Value {
    serde_json::from_str(request.split_once("\r\n\r\n").unwrap().1).unwrap()
}

#[test]
fn a_refused_create_exits_2_with_the_api_servers_reason() {
    let dir = tempfile::tempdir().unwrap();
    let status = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "loadtests.stampede.dev \"smoke\" already exists", "reason": "AlreadyExists", "code": 409});
    let (port, server) = fake_api_server("409 Conflict", status.to_string());
    let named = LOADTEST.replace("generateName: smoke-", "name: smoke");
    let out = launch(&["-", "-n", "shop"], &named, &kubeconfig(dir.path(), port));
    let request = server.join().unwrap();
    assert_exit_2(
        &out,
        &[
            "cannot create LoadTest shop/smoke from stdin",
            "loadtests.stampede.dev \"smoke\" already exists (AlreadyExists, HTTP 409)",
            "use metadata.generateName",
        ],
    );
    // -n wins over the kubeconfig's namespace, in the path and in the object.
    assert!(request.starts_with("POST /apis/stampede.dev/v1alpha1/namespaces/shop/loadtests?"), "{request}");
    assert_eq!(request_body(&request)["metadata"]["namespace"], "shop");
}

#[test]
fn no_wait_creates_with_strict_field_validation_and_the_base_url_and_prints_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut created: serde_json::Value = serde_yaml::from_str(LOADTEST).unwrap();
    created["metadata"]["name"] = "smoke-x7k2p".into();
    created["metadata"]["namespace"] = "ctx-ns".into();
    let (port, server) = fake_api_server("201 Created", created.to_string());
    // An unknown field travels to the API server (which refuses it under strict validation).
    let manifest = LOADTEST.replace("  runners: 1\n", "  runners: 1\n  runnerz: 2\n");
    let out =
        launch(&["-", "--no-wait", "--base-url", "http://127.0.0.1:9999"], &manifest, &kubeconfig(dir.path(), port));
    let request = server.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "loadtest.stampede.dev/smoke-x7k2p created\n");
    let first = request.lines().next().unwrap();
    assert!(first.starts_with("POST /apis/stampede.dev/v1alpha1/namespaces/ctx-ns/loadtests?"), "{first}");
    assert!(first.contains("fieldManager=stampede-launch") && first.contains("fieldValidation=Strict"), "{first}");
    let body = request_body(&request);
    assert_eq!(body["metadata"]["generateName"], "smoke-");
    assert_eq!(
        body["metadata"]["namespace"], "ctx-ns",
        "the kubeconfig's namespace when neither -n nor the manifest says"
    );
    assert_eq!(body["spec"]["scenario"]["baseUrl"], "http://127.0.0.1:9999");
    assert_eq!(body["spec"]["runnerz"], 2);
    assert_eq!(body["spec"]["scenario"]["scenarios"][0]["steps"][0]["request"]["url"], "{{baseUrl}}/");
}
