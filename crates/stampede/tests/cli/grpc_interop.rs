//! The gRPC interoperability test cases (grpc's `doc/interop-test-descriptions.md`, which every
//! gRPC client library passes), each written as a Stampede scenario and run by `stampede run`
//! against grpc-go's interop server (`tests/grpc/interop.sh`), a few calls each. Every case is
//! asserted from both sides: Stampede's JSON report (calls, messages, gRPC statuses by name,
//! checks) and what the server itself counted (`GET /stats` of our wrapper: grpc-go's own
//! stats events per method: calls, messages and payload bytes each way, statuses, metadata).
//!
//! Not expressible: `cancel_after_begin` and `cancel_after_first_response`. A Stampede gRPC
//! call sends its messages as one request body and half-closes; it has no action that cancels
//! a call the client started (only its deadline ends one early, and that is
//! DEADLINE_EXCEEDED, not CANCELLED). For the same reason `ping_pong` sends its four requests
//! before reading the four answers, rather than one after each answer: the messages, sizes
//! and statuses are those of the case, the interleaving is not.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::commands::{stampede, text, write_scenario};

/// Calls per case.
const N: u64 = 4;

/// grpc-go's interop server with our stats (`-stats-addr`), on free loopback ports; killed
/// when dropped.
struct Server {
    child: std::process::Child,
    port: u16,
    stats_port: u16,
    protos: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server() -> Server {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let built = std::process::Command::new("bash").arg(root.join("tests/grpc/interop.sh")).output().unwrap();
    assert!(built.status.success(), "tests/grpc/interop.sh: {}", text(&built.stderr));
    let dir = PathBuf::from(text(&built.stdout).trim());
    let mut child = std::process::Command::new(dir.join("server"))
        .args(["-stats-addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap());
    let port_of = |line: &str| -> u16 {
        line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("address: {line}"))
    };
    let (mut first, mut second) = (String::new(), String::new());
    lines.read_line(&mut first).unwrap();
    lines.read_line(&mut second).unwrap();
    assert!(second.starts_with("stats "), "{second}");
    Server { child, port: port_of(&first), stats_port: port_of(&second), protos: dir.join("protos") }
}

impl Server {
    /// What the server counted, by `package.Service/Method`.
    fn stats(&self) -> Value {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.stats_port)).unwrap();
        s.write_all(b"GET /stats HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap()
    }

    /// The server's figures of `method` of the TestService.
    fn method(&self, method: &str) -> Value {
        self.stats()[format!("grpc.testing.TestService/{method}")].clone()
    }

    /// `method`'s figures once the server has ended `calls` calls (a call the client gave up
    /// on ends on the server's side a little later), within 10 s.
    fn method_when_ended(&self, method: &str, calls: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let m = self.method(method);
            let ended: u64 = m["statuses"].as_object().map_or(0, |s| s.values().filter_map(Value::as_u64).sum());
            if ended >= calls || Instant::now() > deadline {
                return m;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `steps` (YAML, indented as steps) `N` times with 2 VUs: the run, its JSON report,
    /// its stdout and its HTML report.
    fn run(&self, case: &str, steps: &str) -> (std::process::Output, Value, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let file = write_scenario(
            dir.path(),
            &format!(
                "name: {case}\nbaseUrl: http://127.0.0.1:{}\nload: {{executor: constant-vus, vus: 2, iterations: {N}}}\n\
                 grpc: {{protoFiles: [grpc/testing/test.proto], importPaths: [\"{}\"]}}\n\
                 scenarios:\n  - name: s\n    steps:\n{steps}",
                self.port,
                self.protos.display()
            ),
        );
        let (out, html) = (dir.path().join("report.json"), dir.path().join("report.html"));
        let run = stampede(&[
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ]);
        let report = serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_default()).unwrap_or(Value::Null);
        let stdout = text(&run.stdout);
        (run, report, stdout, std::fs::read_to_string(&html).unwrap_or_default())
    }
}

/// The report's summary of `name`.
fn step<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["steps"].as_array().unwrap().iter().find(|s| s["step"] == name).unwrap_or_else(|| panic!("no step {name}"))
}

/// A step's requests, errors, messages sent and received, gRPC statuses and HTTP statuses.
fn figures(report: &Value, name: &str) -> (u64, u64, u64, u64, Value, Value) {
    let s = step(report, name);
    (
        s["requests"].as_u64().unwrap(),
        s["errors"].as_u64().unwrap(),
        s["messages"]["sent"].as_u64().unwrap_or(0),
        s["messages"]["received"].as_u64().unwrap_or(0),
        s["grpcStatuses"].clone(),
        s["statusCodes"].clone(),
    )
}

/// Passes and failures of the named checks of `step`, all together.
fn checks(report: &Value, step: &str) -> (u64, u64) {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["step"] == step)
        .fold((0, 0), |(p, f), c| (p + c["passes"].as_u64().unwrap(), f + c["fails"].as_u64().unwrap()))
}

/// The server's figure `field` of method figures `m`.
fn n(m: &Value, field: &str) -> u64 {
    m[field].as_u64().unwrap_or_else(|| panic!("{field} in {m}"))
}

/// `bytes` zero bytes in base64: a payload's `body` as protobuf's JSON mapping writes it.
fn zeros(bytes: usize) -> String {
    // Each 3 zero bytes are `AAAA`; 1 or 2 left over are `AA==` or `AAA=`.
    let tail = ["", "AA==", "AAA="][bytes % 3];
    "A".repeat(bytes / 3 * 4) + tail
}

/// A regex matching exactly the base64 of `bytes` zero bytes.
fn zeros_exactly(bytes: usize) -> String {
    let text = zeros(bytes);
    let padding = text.len() - text.trim_end_matches('=').len();
    format!("^A{{{}}}{}$", text.len() - padding, "=".repeat(padding))
}

fn assert_ran(run: &std::process::Output, stdout: &str) {
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
}

#[test]
fn empty_unary() {
    let server = server();
    let (run, report, stdout, html) = server.run(
        "empty_unary",
        "      - name: empty_unary\n        grpc: {method: grpc.testing.TestService/EmptyCall}\n        \
         check: {status: OK, body: {equals: \"{}\"}}\n",
    );
    assert_ran(&run, &stdout);
    // The call's answer is its gRPC status: its HTTP/2 200 is no status code of the report.
    assert_eq!(figures(&report, "empty_unary"), (N, 0, N, N, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!(report["total"]["grpcStatuses"], json!({"OK": N}));
    assert!(stdout.contains(&format!("gRPC statuses: OK ×{N}")), "{stdout}");
    assert!(!stdout.contains("HTTP status codes"), "{stdout}");
    assert!(html.contains("<h2>Statuses</h2>") && html.contains(&format!("OK ×{N}")), "the HTML report's Statuses");
    assert_eq!(checks(&report, "empty_unary"), (2 * N, 0), "the status and the body");
    let m = server.method("EmptyCall");
    assert_eq!((n(&m, "calls"), n(&m, "messagesReceived"), n(&m, "messagesSent")), (N, N, N), "{m}");
    assert_eq!(m["statuses"], json!({"OK": N}));
}

#[test]
fn large_unary() {
    let server = server();
    let steps = format!(
        "      - name: large_unary\n        grpc:\n          method: grpc.testing.TestService/UnaryCall\n          \
         message: {{responseSize: 271828, payload: {{body: \"{}\"}}}}\n        \
         check: {{status: OK, json: {{$.payload.body: {{matches: \"^A+==$\"}}}}}}\n        \
         extract: {{body: {{json: $.payload.body}}}}\n\
         \x20     - name: large_unary size\n        if: size(body) == {}\n        \
         grpc: {{method: grpc.testing.TestService/EmptyCall}}\n",
        zeros(314159),
        zeros(271828).len(),
    );
    let (run, report, stdout, _) = server.run("large_unary", &steps);
    assert_ran(&run, &stdout);
    assert_eq!(figures(&report, "large_unary"), (N, 0, N, N, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!(checks(&report, "large_unary"), (2 * N, 0), "the status, and zero bytes");
    // A regex of the exact size would be too large: the step after it runs only when the
    // answer's body held exactly 271828 bytes.
    assert_eq!(figures(&report, "large_unary size"), (N, 0, N, N, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!(n(&server.method("EmptyCall"), "calls"), N);
    let m = server.method("UnaryCall");
    assert_eq!((n(&m, "calls"), n(&m, "messagesReceived"), n(&m, "messagesSent")), (N, N, N), "{m}");
    assert_eq!((n(&m, "payloadBytesReceived"), n(&m, "payloadBytesSent")), (314159 * N, 271828 * N));
    assert_eq!(m["statuses"], json!({"OK": N}));
    // The requests' bytes, as Stampede counted them, hold every payload byte it sent.
    assert!(step(&report, "large_unary")["bytesSent"].as_u64().unwrap() > 314159 * N);
}

#[test]
fn client_streaming() {
    let server = server();
    let sizes = [27182, 8, 1828, 45904];
    let messages: Vec<String> = sizes.iter().map(|s| format!("{{payload: {{body: \"{}\"}}}}", zeros(*s))).collect();
    let steps = format!(
        "      - name: client_streaming\n        grpc:\n          method: grpc.testing.TestService/StreamingInputCall\n          \
         messages: [{}]\n        check: {{status: OK, json: {{$.aggregatedPayloadSize: {{equals: 74922}}}}}}\n",
        messages.join(", ")
    );
    let (run, report, stdout, _) = server.run("client_streaming", &steps);
    assert_ran(&run, &stdout);
    assert_eq!(figures(&report, "client_streaming"), (N, 0, 4 * N, N, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!(checks(&report, "client_streaming"), (2 * N, 0));
    let m = server.method("StreamingInputCall");
    assert_eq!((n(&m, "calls"), n(&m, "messagesReceived"), n(&m, "messagesSent")), (N, 4 * N, N), "{m}");
    assert_eq!(n(&m, "payloadBytesReceived"), 74922 * N);
    assert_eq!(m["statuses"], json!({"OK": N}));
}

/// Checks that answer `i` of a stream holds exactly `size` zero bytes.
fn answer_sizes(sizes: &[usize]) -> String {
    let checks: Vec<String> = sizes
        .iter()
        .enumerate()
        .map(|(i, size)| format!("\"$[{i}].payload.body\": {{matches: \"{}\"}}", zeros_exactly(*size)))
        .collect();
    checks.join(", ")
}

#[test]
fn server_streaming() {
    let server = server();
    let sizes = [31415, 9, 2653, 58979];
    let params: Vec<String> = sizes.iter().map(|s| format!("{{size: {s}}}")).collect();
    let steps = format!(
        "      - name: server_streaming\n        grpc:\n          method: grpc.testing.TestService/StreamingOutputCall\n          \
         message: {{responseParameters: [{}]}}\n        check: {{status: OK, json: {{{}}}}}\n",
        params.join(", "),
        answer_sizes(&sizes)
    );
    let (run, report, stdout, _) = server.run("server_streaming", &steps);
    assert_ran(&run, &stdout);
    assert_eq!(figures(&report, "server_streaming"), (N, 0, N, 4 * N, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!(checks(&report, "server_streaming"), (5 * N, 0), "the status and each answer's size");
    let m = server.method("StreamingOutputCall");
    assert_eq!((n(&m, "calls"), n(&m, "messagesReceived"), n(&m, "messagesSent")), (N, N, 4 * N), "{m}");
    assert_eq!(n(&m, "payloadBytesSent"), 93056 * N);
    assert_eq!(m["statuses"], json!({"OK": N}));
}

#[test]
fn ping_pong() {
    let server = server();
    let (requests, answers) = ([27182, 8, 1828, 45904], [31415, 9, 2653, 58979]);
    let messages: Vec<String> = requests
        .iter()
        .zip(answers)
        .map(|(r, a)| format!("{{responseParameters: [{{size: {a}}}], payload: {{body: \"{}\"}}}}", zeros(*r)))
        .collect();
    let steps = format!(
        "      - name: ping_pong\n        grpc:\n          method: grpc.testing.TestService/FullDuplexCall\n          \
         messages: [{}]\n        check: {{status: OK, json: {{{}}}}}\n",
        messages.join(", "),
        answer_sizes(&answers)
    );
    let (run, report, stdout, _) = server.run("ping_pong", &steps);
    assert_ran(&run, &stdout);
    assert_eq!(figures(&report, "ping_pong"), (N, 0, 4 * N, 4 * N, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!(checks(&report, "ping_pong"), (5 * N, 0));
    let m = server.method("FullDuplexCall");
    assert_eq!((n(&m, "calls"), n(&m, "messagesReceived"), n(&m, "messagesSent")), (N, 4 * N, 4 * N), "{m}");
    assert_eq!((n(&m, "payloadBytesReceived"), n(&m, "payloadBytesSent")), (74922 * N, 93056 * N));
    assert_eq!(m["statuses"], json!({"OK": N}));
}

#[test]
fn empty_stream() {
    let server = server();
    let (run, report, stdout, _) = server.run(
        "empty_stream",
        "      - name: empty_stream\n        grpc: {method: grpc.testing.TestService/FullDuplexCall, messages: []}\n        \
         check: {status: OK, body: {equals: \"[]\"}}\n\
         \x20     - name: empty client stream\n        \
         grpc: {method: grpc.testing.TestService/StreamingInputCall, messages: []}\n        \
         check: {status: OK, json: {$.aggregatedPayloadSize: {equals: 0}}}\n",
    );
    assert_ran(&run, &stdout);
    // No message either way: the calls opened and half-closed at once.
    assert_eq!(figures(&report, "empty_stream"), (N, 0, 0, 0, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!(figures(&report, "empty client stream"), (N, 0, 0, N, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!((checks(&report, "empty_stream"), checks(&report, "empty client stream")), ((2 * N, 0), (2 * N, 0)));
    // The server read no message: an empty list sends none, not one empty message.
    let m = server.method("FullDuplexCall");
    assert_eq!((n(&m, "calls"), n(&m, "messagesReceived"), n(&m, "messagesSent")), (N, 0, 0), "{m}");
    assert_eq!(m["statuses"], json!({"OK": N}));
    let m = server.method("StreamingInputCall");
    assert_eq!((n(&m, "calls"), n(&m, "messagesReceived"), n(&m, "messagesSent")), (N, 0, N), "{m}");
}

#[test]
fn timeout_on_sleeping_server() {
    let server = server();
    // The server sleeps a second before its answer; the call's deadline is 100 ms. The VU
    // then waits (keeping the connection) until the server ended the call on its side.
    let steps = format!(
        "      - name: timeout_on_sleeping_server\n        grpc:\n          method: grpc.testing.TestService/FullDuplexCall\n          \
         messages: [{{payload: {{body: \"{}\"}}, responseParameters: [{{size: 31415, intervalUs: 1000000}}]}}]\n          \
         deadline: 100ms\n        think: 1500ms\n",
        zeros(27182)
    );
    let (run, report, stdout, _) = server.run("timeout_on_sleeping_server", &steps);
    assert_ran(&run, &stdout);
    let s = step(&report, "timeout_on_sleeping_server");
    assert_eq!(s["errorsByKind"], json!({"DEADLINE_EXCEEDED": N}), "{stdout}");
    assert_eq!(s["grpcStatuses"], json!({"DEADLINE_EXCEEDED": N}), "{stdout}");
    assert_eq!((s["messages"]["sent"].as_u64(), s["messages"]["received"].as_u64()), (Some(N), Some(0)));
    assert!(stdout.contains(&format!("gRPC statuses: DEADLINE_EXCEEDED ×{N}")), "{stdout}");
    // The server saw every call, and ended each when its deadline passed or the client left.
    let m = server.method_when_ended("FullDuplexCall", N);
    assert_eq!((n(&m, "calls"), n(&m, "messagesReceived"), n(&m, "messagesSent")), (N, N, 0), "{m}");
    let ended = m["statuses"].as_object().unwrap();
    assert_eq!(ended.values().filter_map(Value::as_u64).sum::<u64>(), N, "{m}");
    assert!(ended.keys().all(|k| k == "DEADLINE_EXCEEDED" || k == "CANCELLED"), "{m}");
}

#[test]
fn status_code_and_message() {
    let server = server();
    let status = "responseStatus: {code: 2, message: \"test status message\"}";
    let steps = format!(
        "      - name: unary\n        grpc: {{method: grpc.testing.TestService/UnaryCall, message: {{{status}}}}}\n\
         \x20     - name: streaming\n        grpc: {{method: grpc.testing.TestService/FullDuplexCall, messages: [{{{status}}}]}}\n\
         \x20     - name: accepted\n        grpc: {{method: grpc.testing.TestService/UnaryCall, message: {{{status}}}}}\n        \
         check: {{status: UNKNOWN}}\n"
    );
    let (run, report, stdout, _) = server.run("status_code_and_message", &steps);
    assert_ran(&run, &stdout);
    for name in ["unary", "streaming"] {
        let s = step(&report, name);
        assert_eq!((s["errors"].as_u64(), &s["errorsByKind"]), (Some(N), &json!({"UNKNOWN": N})), "{name}: {stdout}");
        assert_eq!(s["grpcStatuses"], json!({"UNKNOWN": N}));
    }
    assert_eq!(figures(&report, "accepted"), (N, 0, N, 0, json!({"UNKNOWN": N}), json!({})), "accepted: no error");
    assert_eq!(report["total"]["grpcStatuses"], json!({"UNKNOWN": 3 * N}));
    assert!(stdout.contains("step `unary`: gRPC status UNKNOWN: test status message"), "{stdout}");
    assert!(stdout.contains("step `streaming`: gRPC status UNKNOWN: test status message"), "{stdout}");
    // A sample's answer shows the HTTP/2 status that carried the call, and its gRPC status.
    let sample = report["errorSamples"].as_array().unwrap().iter().find(|s| s["step"] == "unary").unwrap();
    let answer = sample["response"].as_str().unwrap();
    assert!(answer.starts_with("HTTP/2 200\n") && answer.contains("grpc-status: 2\n"), "{answer}");
    for (method, calls) in [("UnaryCall", 2 * N), ("FullDuplexCall", N)] {
        let m = server.method(method);
        assert_eq!(n(&m, "calls"), calls, "{m}");
        assert_eq!(m["statuses"], json!({"UNKNOWN": calls}));
        assert_eq!(m["statusMessages"], json!({"test status message": calls}));
    }
}

#[test]
fn special_status_message() {
    let server = server();
    let message = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n";
    // Sent as an expression's string (escapes are CEL's): a message's literal text with a
    // control character is not yet escaped when the message is read as JSON.
    let (run, report, stdout, _) = server.run(
        "special_status_message",
        "      - name: special\n        grpc:\n          method: grpc.testing.TestService/UnaryCall\n          \
         message: {responseStatus: {code: 2, message: '{{ ''\\t\\ntest with whitespace\\r\\nand Unicode BMP ☺ and non-BMP 😈\\t\\n'' }}'}}\n",
    );
    assert_ran(&run, &stdout);
    assert_eq!(step(&report, "special")["grpcStatuses"], json!({"UNKNOWN": N}), "{stdout}");
    // The server's grpc-message is percent-encoded: the report shows it decoded, exactly.
    let samples: Vec<&str> =
        report["errorSamples"].as_array().unwrap().iter().filter_map(|s| s["message"].as_str()).collect();
    let wanted = format!("step `special`: gRPC status UNKNOWN: {message}");
    assert!(!samples.is_empty() && samples.iter().all(|s| *s == wanted), "{samples:?}");
    assert!(stdout.contains(message), "{stdout}");
    let m = server.method("UnaryCall");
    assert_eq!(m["statusMessages"], json!({message: N}), "{m}");
}

#[test]
fn custom_metadata() {
    let server = server();
    let metadata = "metadata: {x-grpc-test-echo-initial: test_initial_metadata_value, \
                    x-grpc-test-echo-trailing-bin: q6ur}";
    let echoed = "headers: {x-grpc-test-echo-initial: {equals: test_initial_metadata_value}, \
                  x-grpc-test-echo-trailing-bin: {equals: q6ur}}";
    let steps = format!(
        "      - name: unary\n        grpc:\n          method: grpc.testing.TestService/UnaryCall\n          \
         message: {{responseSize: 314159, payload: {{body: \"{body}\"}}}}\n          {metadata}\n        \
         check: {{status: OK, {echoed}}}\n\
         \x20     - name: streaming\n        grpc:\n          method: grpc.testing.TestService/FullDuplexCall\n          \
         messages: [{{responseParameters: [{{size: 314159}}], payload: {{body: \"{body}\"}}}}]\n          {metadata}\n        \
         check: {{status: OK, {echoed}}}\n",
        body = zeros(271828)
    );
    let (run, report, stdout, _) = server.run("custom_metadata", &steps);
    assert_ran(&run, &stdout);
    assert_eq!(figures(&report, "unary"), (N, 0, N, N, json!({"OK": N}), json!({})), "{stdout}");
    assert_eq!(figures(&report, "streaming"), (N, 0, N, N, json!({"OK": N}), json!({})), "{stdout}");
    // Both echoes checked on every call: the initial metadata and the binary trailer.
    assert_eq!((checks(&report, "unary"), checks(&report, "streaming")), ((3 * N, 0), (3 * N, 0)));
    let sent = json!({"x-grpc-test-echo-initial": {"test_initial_metadata_value": N}, "x-grpc-test-echo-trailing-bin": {"q6ur": N}});
    for method in ["UnaryCall", "FullDuplexCall"] {
        let m = server.method(method);
        assert_eq!(n(&m, "calls"), N, "{m}");
        assert_eq!(m["metadataReceived"], sent, "{method}: what Stampede sent");
        assert_eq!(m["metadataSent"], sent, "{method}: what the server echoed");
        assert_eq!(n(&m, "payloadBytesSent"), 314159 * N);
    }
}

#[test]
fn unimplemented_method_and_service() {
    let server = server();
    let (run, report, stdout, _) = server.run(
        "unimplemented",
        "      - name: unimplemented_method\n        grpc: {method: grpc.testing.TestService/UnimplementedCall}\n\
         \x20     - name: unimplemented_service\n        grpc: {method: grpc.testing.UnimplementedService/UnimplementedCall}\n",
    );
    assert_ran(&run, &stdout);
    for name in ["unimplemented_method", "unimplemented_service"] {
        let s = step(&report, name);
        assert_eq!(s["errorsByKind"], json!({"UNIMPLEMENTED": N}), "{name}: {stdout}");
        assert_eq!(s["grpcStatuses"], json!({"UNIMPLEMENTED": N}));
    }
    assert!(stdout.contains(&format!("gRPC statuses: UNIMPLEMENTED ×{}", 2 * N)), "{stdout}");
    let m = server.method("UnimplementedCall");
    assert_eq!((n(&m, "calls"), &m["statuses"]), (N, &json!({"UNIMPLEMENTED": N})), "{m}");
    // grpc-go answers a service it does not have before any handler (and stats event) runs:
    // it saw the calls, and no message of them.
    let m = &server.stats()["grpc.testing.UnimplementedService/UnimplementedCall"];
    assert_eq!((n(m, "calls"), n(m, "messagesReceived")), (N, 0), "{m}");
}

/// #33: a run of 120 calls of which 80 ended NOT_FOUND says so, in the table, the JSON and
/// HTML reports, as the server counted them; the HTTP/2 200 that carried them is no status.
#[test]
fn grpc_statuses_are_tallied_by_name_as_the_server_ended_the_calls() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        &format!(
            "name: tally\nbaseUrl: http://127.0.0.1:{}\nload: {{executor: constant-vus, vus: 4, iterations: 120}}\n\
             grpc: {{protoFiles: [grpc/testing/test.proto], importPaths: [\"{}\"]}}\n\
             scenarios:\n  - name: s\n    steps:\n      - name: lookup\n        grpc:\n          \
             method: grpc.testing.TestService/UnaryCall\n          \
             message: {{responseStatus: {{code: \"{{{{ test.iteration % 3 == 0 ? 0 : 5 }}}}\"}}}}\n        \
             check: {{status: [OK, NOT_FOUND]}}\n",
            server.port,
            server.protos.display()
        ),
    );
    let (out, html) = (dir.path().join("report.json"), dir.path().join("report.html"));
    let run =
        stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    let stdout = text(&run.stdout);
    assert_ran(&run, &stdout);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(figures(&report, "lookup"), (120, 0, 120, 40, json!({"OK": 40, "NOT_FOUND": 80}), json!({})));
    assert_eq!(report["total"]["grpcStatuses"], json!({"OK": 40, "NOT_FOUND": 80}));
    assert_eq!(report["total"]["statusCodes"], json!({}));
    assert!(stdout.contains("gRPC statuses: OK ×40, NOT_FOUND ×80"), "{stdout}");
    assert!(!stdout.contains("status codes: 200"), "{stdout}");
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("<th>gRPC statuses</th>") && html.contains("OK ×40, NOT_FOUND ×80"), "HTML Statuses");
    assert!(!html.contains("<th>HTTP status codes</th>"), "no HTTP column without HTTP answers");
    assert_eq!(server.method("UnaryCall")["statuses"], json!({"OK": 40, "NOT_FOUND": 80}));
}
