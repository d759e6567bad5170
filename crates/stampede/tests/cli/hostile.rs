//! Careless and hostile input, as a user's `stampede` meets it: a file over a budget is refused
//! by `validate` with its line and the budget's name; a run whose loop awaits nothing stops at
//! the first Ctrl-C with its partial report; and no secret — an environment value, a setup
//! value, a credential header, a cookie — reaches any output of a run whose checks fail.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::commands::{stampede, text};

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.to_string_lossy().into_owned()
}

/// The exponential variables of 743 bytes that once took 6 GB, and an expression of 5,000
/// terms: `stampede validate` exits 2 naming the file, the line and the budget.
#[test]
fn validate_refuses_files_over_their_budgets_naming_file_line_and_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut bomb = String::from(
        "name: bomb\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 1, iterations: 1}\nvars:\n  a: \"abcdefg\"\n",
    );
    for w in ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].windows(2) {
        bomb.push_str(&format!("  {}: \"{}\"\n", w[1], format!("{{{{{}}}}}", w[0]).repeat(10)));
    }
    bomb.push_str(
        "scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {url: \"{{baseUrl}}/get?x={{j}}\"}\n",
    );
    let path = write(dir.path(), "bomb.yaml", &bomb);
    let out = stampede(&["validate", &path]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{path}:12:")) && err.contains("vars.h"), "file, line and field: {err}");
    assert!(err.contains("`template.bytes` budget of 16 MiB"), "{err}");

    let long = format!(
        "name: long\nbaseUrl: builtin\nload: {{executor: constant-vus, vus: 1, iterations: 1}}\nscenarios:\n  - name: s\n    steps:\n      \
         - name: get\n        request: {{url: \"{{{{baseUrl}}}}/get?x={{{{ 1{} }}}}\"}}\n",
        " + 1".repeat(4999)
    );
    let path = write(dir.path(), "long.yaml", &long);
    let out = stampede(&["validate", &path]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{path}:8:")) && err.contains("`expression.bytes` budget of 4,096"), "{err}");
}

/// `repeat: {while: "true"}` around a step whose `if` never holds, for a minute: the first
/// Ctrl-C (SIGINT) stops it, and the partial report is written.
#[test]
fn a_run_spinning_in_a_skipped_loop_stops_at_the_first_ctrl_c_with_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "spin.yaml",
        "name: spin\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 2, duration: 60s}\nscenarios:\n  - name: s\n    \
         steps:\n      - name: first\n        request: {url: \"{{baseUrl}}/get\"}\n      \
         - repeat: {while: \"true\", max: 1000000}\n        steps:\n          \
         - name: never\n            if: \"false\"\n            request: {url: \"{{baseUrl}}/get\"}\n",
    );
    let out = dir.path().join("partial.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", &scenario, "--progress-every", "1", "--out", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first progress line: the run is under way (and spinning).
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let started = Instant::now();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("req/s") && started.elapsed() < Duration::from_secs(50) {
        let n = stderr.read(&mut buf).unwrap();
        assert!(n > 0, "stderr closed before any progress: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let interrupted = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(interrupted.elapsed() < Duration::from_secs(45), "one Ctrl-C did not stop the run");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert_ne!(status.code(), Some(130), "stopped by the first Ctrl-C, not by a second: {rest}");
    assert!(rest.contains("stopping: partial results follow"), "{rest}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let first = report["steps"].as_array().unwrap().iter().find(|s| s["step"] == "first").unwrap();
    assert!(first["requests"].as_u64().unwrap() >= 2, "{first}");
    assert_eq!(report["run"]["interrupted"], true, "{}", report["run"]);
}

const TOKEN: &str = "s3cr3t-env-token-4711";
const SESSION: &str = "sess-setup-9f8e7d6c5b";
const COOKIE: &str = "cookie-val-31337";

/// A run with a secret in the environment (a bearer token, a query key, a body), a value from
/// setup in a header, and a cookie set by the answer, whose checks all fail so that error
/// samples are taken: no output holds any of them, and the samples show where they were hidden.
#[test]
fn no_secret_reaches_any_output_of_a_failing_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "secrets.yaml",
        &format!(
            r#"name: secrets
baseUrl: builtin
load: {{executor: constant-vus, vus: 1, iterations: 2}}
setup:
  - name: login
    request: {{url: "{{{{baseUrl}}}}/anything?session={SESSION}"}}
    extract:
      session: {{json: args.session}}
scenarios:
  - name: s
    steps:
      - name: with token
        request:
          method: POST
          url: "{{{{baseUrl}}}}/anything?api_key={{{{env.STAMPEDE_TEST_TOKEN}}}}&page=1"
          headers:
            authorization: "Bearer {{{{env.STAMPEDE_TEST_TOKEN}}}}"
            x-trace: "{{{{setup.session}}}}"
          body: "token={{{{env.STAMPEDE_TEST_TOKEN}}}}"
        check: {{status: 201}}
      - name: cookie
        request: {{url: "{{{{baseUrl}}}}/response-headers?set-cookie=sid%3D{COOKIE}"}}
        check: {{status: 201}}
"#
        ),
    );
    let file = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (json, html, junit, summary) = (file("r.json"), file("r.html"), file("r.xml"), file("r.md"));
    let out = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", &scenario, "--out", &json, "--html", &html, "--junit", &junit, "--summary", &summary])
        .env("STAMPEDE_TEST_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["total"]["errors"], 4, "every check failed: {}", report["total"]);
    let samples = report["errorSamples"].as_array().unwrap();
    assert_eq!(samples.len(), 2, "one sample per failing step: {samples:#?}");
    let all =
        |field: &str| samples.iter().map(|s| s[field].as_str().unwrap_or_default().to_string()).collect::<String>();
    let (requests, responses) = (all("request"), all("response"));
    for mark in ["api_key=[redacted]", "authorization: [redacted]", "x-trace: [redacted setup.session]"] {
        assert!(requests.contains(mark), "{mark} in {requests}");
    }
    assert!(requests.contains("token=[redacted env.STAMPEDE_TEST_TOKEN]"), "the body: {requests}");
    assert!(responses.contains("set-cookie: [redacted]"), "{responses}");
    for (name, content) in [
        ("the JSON report", std::fs::read_to_string(&json).unwrap()),
        ("the HTML report", std::fs::read_to_string(&html).unwrap()),
        ("the JUnit XML", std::fs::read_to_string(&junit).unwrap()),
        ("the Markdown summary", std::fs::read_to_string(&summary).unwrap()),
        ("stdout", text(&out.stdout)),
        ("stderr", text(&out.stderr)),
    ] {
        for secret in [TOKEN, SESSION, COOKIE] {
            assert!(!content.contains(secret), "{name} holds {secret}");
        }
    }
}
