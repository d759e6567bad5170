//! gRPC and WebSocket steps as a user runs them: against `stampede target --http2` in its own
//! process, every figure of the report equals what the target counted; errors come out under
//! their gRPC status names, a refused upgrade under its HTTP status; malformed input exits 2
//! naming the file, line, column and field.

use std::io::{Read, Write};
use std::path::Path;

use serde_json::Value;

use super::commands::{assert_the_exit_code_follows_the_verdicts, stampede, table_row, text, write_scenario};
use super::target_commands::{start_https_target, start_target};

/// The target's `/stats`, read over a plain HTTP/1.1 connection.
fn target_stats(port: u16) -> Value {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /stats HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let body = answer.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(body).unwrap()
}

/// The report's summary of `step`.
fn step<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["steps"].as_array().unwrap().iter().find(|s| s["step"] == name).unwrap_or_else(|| panic!("no step {name}"))
}

/// A step's requests and errors.
fn figures(report: &Value, name: &str) -> (u64, u64) {
    let s = step(report, name);
    (s["requests"].as_u64().unwrap(), s["errors"].as_u64().unwrap())
}

/// A step's messages sent and received.
fn messages(report: &Value, name: &str) -> (u64, u64) {
    let m = &step(report, name)["messages"];
    (m["sent"].as_u64().unwrap_or(0), m["received"].as_u64().unwrap_or(0))
}

fn run_report(file: &Path, dir: &Path) -> (std::process::Output, Value) {
    let out = dir.join("report.json");
    let html = dir.join("report.html");
    let run =
        stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    let report = serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_default()).unwrap_or(Value::Null);
    (run, report)
}

/// The built-in target's service with one more method, which the target does not implement.
fn proto_with_a_missing_method(dir: &Path) {
    let proto = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/target.proto"))
        .unwrap()
        .replace("service Target {", "service Target {\n  rpc Missing(EchoRequest) returns (EchoReply);");
    std::fs::write(dir.join("target.proto"), proto).unwrap();
}

#[test]
fn grpc_calls_of_every_kind_count_exactly_what_the_target_served() {
    let dir = tempfile::tempdir().unwrap();
    proto_with_a_missing_method(dir.path());
    let (_target, port) = start_target(&["--http2"]);
    let file = write_scenario(
        dir.path(),
        &format!(
            r#"
name: grpc
baseUrl: http://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 4, iterations: 40}}
grpc: {{protoFiles: [target.proto]}}
scenarios:
  - name: s
    steps:
      - name: echo
        grpc: {{method: stampede.target.v1.Target/Echo, message: {{text: "vu {{{{ vu.id }}}}"}}, metadata: {{x-trace: "{{{{ uuid() }}}}"}}}}
        check: {{status: OK, json: {{$.text: {{equals: "vu {{{{ vu.id }}}}"}}}}}}
        extract: {{seq: {{json: $.seq}}}}
      - name: count
        grpc: {{method: stampede.target.v1.Target/Count, message: {{count: 3, intervalMs: 1}}}}
        check: {{json: {{"$[2].index": {{equals: 2}}}}}}
      - name: sum
        grpc: {{method: stampede.target.v1.Target/Sum, messages: [{{value: 1}}, {{value: 2}}, {{value: "{{{{ int(seq) }}}}"}}]}}
        check: {{json: {{$.count: {{equals: 3}}}}}}
        extract: {{total: {{json: $.sum}}}}
      - name: total
        if: int(total) == int(seq) + 3
        grpc: {{method: stampede.target.v1.Target/Chat, messages: [{{text: a}}, {{text: "{{{{ total }}}}"}}]}}
        check: {{json: {{"$[1].text": {{equals: "{{{{ total }}}}"}}, "$[1].seq": {{equals: 2}}}}}}
      - name: missing
        grpc: {{method: stampede.target.v1.Target/Missing, message: {{text: x}}}}
      - name: slow
        grpc: {{method: stampede.target.v1.Target/Echo, message: {{text: x, delayMs: 2000}}, deadline: 100ms}}
      - name: not found
        grpc: {{method: stampede.target.v1.Target/Echo, message: {{text: x, status: 5}}}}
      - name: not found accepted
        grpc: {{method: stampede.target.v1.Target/Echo, message: {{text: x, status: 5}}}}
        check: {{status: [OK, NOT_FOUND]}}
thresholds:
  - "errors{{kind:UNIMPLEMENTED}}.count == 40"
  - "errors{{step:slow, kind:DEADLINE_EXCEEDED}}.rate == 100%"
  - "errors{{kind:UNAVAILABLE}}.count == 0"
  - "errors{{step:echo}}.rate == 0%"
"#
        ),
    );
    let (run, report) = run_report(&file, dir.path());
    let stdout = text(&run.stdout);
    // The thresholds judge each kind of error on its own, and all hold.
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    let verdicts = report["thresholds"].as_array().unwrap();
    assert_eq!(verdicts.len(), 4);
    assert!(verdicts.iter().all(|v| v["passed"] == true), "{verdicts:?}");
    let stats = target_stats(port);
    let grpc = &stats["grpc"];
    // Calls: what each step sent, as the target counted them.
    assert_eq!(figures(&report, "echo"), (40, 0), "{stdout}");
    assert_eq!(figures(&report, "count"), (40, 0), "{stdout}");
    assert_eq!(figures(&report, "sum"), (40, 0), "{stdout}");
    assert_eq!(figures(&report, "total"), (40, 0), "every iteration's sum was its echo's seq + 3: {stdout}");
    assert_eq!(grpc["calls"]["Echo"], 40 * 4, "echo, slow, not found twice");
    assert_eq!((grpc["calls"]["Count"].as_u64(), grpc["calls"]["Sum"].as_u64()), (Some(40), Some(40)));
    assert_eq!(grpc["calls"]["Chat"], 40);
    // Messages each way: the report's sent = the target's received, and the other way round.
    assert_eq!(messages(&report, "echo"), (40, 40));
    assert_eq!(messages(&report, "count"), (40, 120), "three ticks per call");
    assert_eq!(messages(&report, "sum"), (120, 40));
    assert_eq!(messages(&report, "total"), (80, 80));
    let steps = report["steps"].as_array().unwrap();
    let sent: u64 = steps.iter().map(|s| s["messages"]["sent"].as_u64().unwrap_or(0)).sum();
    let received: u64 = steps.iter().map(|s| s["messages"]["received"].as_u64().unwrap_or(0)).sum();
    // A call to a method the server does not have is answered before its message is read.
    assert_eq!(messages(&report, "missing"), (40, 0));
    assert_eq!(grpc["messagesReceived"].as_u64(), Some(sent - 40), "{grpc}");
    assert_eq!(grpc["messagesSent"].as_u64(), Some(received), "{grpc}");
    // Statuses: errors by their gRPC names, as the target ended the calls.
    assert_eq!(step(&report, "missing")["errorsByKind"]["UNIMPLEMENTED"], 40);
    assert_eq!(step(&report, "slow")["errorsByKind"]["DEADLINE_EXCEEDED"], 40);
    assert_eq!(step(&report, "not found")["errorsByKind"]["NOT_FOUND"], 40);
    assert_eq!(figures(&report, "not found accepted"), (40, 0), "an accepted status is no error");
    assert_eq!(grpc["statuses"]["UNIMPLEMENTED"], 40);
    assert_eq!(grpc["statuses"]["DEADLINE_EXCEEDED"], 40);
    assert_eq!(grpc["statuses"]["NOT_FOUND"], 80);
    assert_eq!(grpc["statuses"]["OK"], 40 * 4, "echo, count, sum, total");
    assert_eq!(
        report["total"]["errorsByKind"],
        serde_json::json!({"DEADLINE_EXCEEDED": 40, "NOT_FOUND": 40, "UNIMPLEMENTED": 40})
    );
    // The report's statuses are the target's, by name; no HTTP/2 200 stands in for them.
    assert_eq!(
        report["total"]["grpcStatuses"],
        serde_json::json!({"OK": 160, "NOT_FOUND": 80, "UNIMPLEMENTED": 40, "DEADLINE_EXCEEDED": 40})
    );
    assert_eq!(report["total"]["statusCodes"], serde_json::json!({}));
    assert!(
        stdout.contains("gRPC statuses: OK ×160, DEADLINE_EXCEEDED ×40, NOT_FOUND ×80, UNIMPLEMENTED ×40"),
        "{stdout}"
    );
    // The table and the HTML report say the same.
    assert!(stdout.contains("errors by kind: DEADLINE_EXCEEDED 40, NOT_FOUND 40, UNIMPLEMENTED 40"), "{stdout}");
    assert!(
        stdout.contains("gRPC status UNIMPLEMENTED: unknown method /stampede.target.v1.Target/Missing"),
        "{stdout}"
    );
    assert_eq!(table_row(&stdout, "echo")[1], "40");
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("DEADLINE_EXCEEDED") && html.contains("UNIMPLEMENTED"));
}

#[test]
fn websocket_sessions_count_exactly_what_the_target_saw_and_name_what_went_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let (_target, port) = start_target(&[]);
    let file = write_scenario(
        dir.path(),
        &format!(
            r#"
name: ws
baseUrl: http://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 3, iterations: 30}}
scenarios:
  - name: s
    steps:
      - name: echo
        ws:
          url: "ws://127.0.0.1:{port}/ws/echo"
          subprotocols: [chat]
          actions:
            - send: "hi {{{{ vu.id }}}}"
            - receive: {{equals: "hi {{{{ vu.id }}}}"}}
            - sendJson: {{id: "{{{{ uuid() }}}}", n: 2}}
            - sendBinary: AAEC
            - receive: {{json: {{$.n: {{equals: 2}}}}}}
            - receive: {{matches: "^\\x00\\x01\\x02$"}}
        extract: {{bin: {{regex: "(.+)"}}}}
      - name: open
        ws:
          url: "{{{{baseUrl}}}}/ws/echo"
          keepOpen: true
          actions: [{{send: one}}, {{receive: {{equals: one}}}}]
      - name: same socket
        ws:
          url: "{{{{baseUrl}}}}/ws/echo"
          closeCode: 4000
          actions: [{{send: two}}, {{receive: {{equals: two}}}}]
      - name: refused
        ws: {{url: "{{{{baseUrl}}}}/ws/echo?refuse=403"}}
      - name: closed
        ws:
          url: "{{{{baseUrl}}}}/ws/echo?close=4001"
          actions: [{{send: x}}, {{receive: {{equals: x}}}}]
"#
        ),
    );
    let (run, report) = run_report(&file, dir.path());
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    let ws = &target_stats(port)["websocket"];
    assert_eq!(figures(&report, "echo"), (30, 0), "{stdout}");
    assert_eq!(figures(&report, "open"), (30, 0), "{stdout}");
    assert_eq!(figures(&report, "same socket"), (30, 0), "{stdout}");
    // One upgrade for `open` and `same socket` together: the socket was kept.
    assert_eq!(ws["upgrades"], 30 * 3, "{ws}");
    assert_eq!(ws["refused"], 30);
    assert_eq!(step(&report, "refused")["errorsByKind"]["upgrade"], 30);
    assert_eq!(step(&report, "refused")["statusCodes"]["403"], 30);
    assert_eq!(step(&report, "closed")["errorsByKind"]["close"], 30);
    assert!(stdout.contains("the server closed the socket (code 4001: asked to close)"), "{stdout}");
    assert!(stdout.contains("step `refused`: the server refused the upgrade: HTTP 403"), "{stdout}");
    // Messages: the report's sent = the target's received; every echo came back.
    let steps = report["steps"].as_array().unwrap();
    let sent: u64 = steps.iter().map(|s| s["messages"]["sent"].as_u64().unwrap_or(0)).sum();
    let received: u64 = steps.iter().map(|s| s["messages"]["received"].as_u64().unwrap_or(0)).sum();
    assert_eq!(sent, 30 * (3 + 1 + 1 + 1), "the failed sessions' sends count too");
    assert_eq!(ws["messagesReceived"].as_u64(), Some(sent), "{ws}");
    assert_eq!(ws["messagesSent"].as_u64(), Some(received), "{ws}");
    assert_eq!(received, 30 * 5);
    // Each send to its matching message is timed, within its session's time.
    let echo = step(&report, "echo");
    let rt_max = echo["roundTripMs"]["max"].as_f64().unwrap();
    assert!(rt_max > 0.0 && rt_max <= echo["latencyMs"]["max"].as_f64().unwrap(), "{echo}");
    assert!(stdout.contains("  echo: sent 90, received 90 ("), "{stdout}");
    assert!(step(&report, "refused")["roundTripMs"].is_null());
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("<h2>Messages</h2>") && html.contains("<td>s / echo</td><td class=\"num\">90</td>"),
        "the Messages table"
    );
    // Closes: normal for `echo`, 4000 for the kept socket's last step.
    assert_eq!(ws["closes"]["1000"], 30, "{ws}");
    assert_eq!(ws["closes"]["4000"], 30, "{ws}");
    // The report tallies the code each session ended with, apart from HTTP statuses: the
    // one it closed with, or the server's; a kept socket's step did not end its session.
    assert_eq!(step(&report, "echo")["wsCloseCodes"], serde_json::json!({"1000": 30}));
    assert!(step(&report, "open")["wsCloseCodes"].is_null());
    assert_eq!(step(&report, "same socket")["wsCloseCodes"], serde_json::json!({"4000": 30}));
    assert_eq!(step(&report, "closed")["wsCloseCodes"], serde_json::json!({"4001": 30}));
    assert_eq!(step(&report, "echo")["statusCodes"], serde_json::json!({"101": 30}), "the upgrade's own status");
    assert!(stdout.contains("WebSocket close codes: 1000 ×30, 4000 ×30, 4001 ×30"), "{stdout}");
    assert!(html.contains("<th>WebSocket close codes</th>"), "the HTML report's Statuses");
    // Every socket was closed (the target's side of the last close may still be under way).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while target_stats(port)["websocket"]["open"] != 0 {
        assert!(std::time::Instant::now() < deadline, "sockets left open: {}", target_stats(port));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// #33: a connection that never opened sent nothing. Against a closed loopback port, HTTP/1.1
/// requests, HTTP/2 requests and gRPC calls are each an error of kind `connect`, exactly one
/// per request, and their steps sent 0 bytes and no message.
#[test]
fn refused_connects_send_no_bytes_over_http1_http2_and_grpc() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/target.proto"),
        dir.path().join("target.proto"),
    )
    .unwrap();
    for (version, steps) in [("1.1", ["http1", "grpc"].as_slice()), ("2", ["http2"].as_slice())] {
        let file = write_scenario(
            dir.path(),
            &format!(
                r#"
name: refused
baseUrl: http://127.0.0.1:{closed}
load: {{executor: constant-vus, vus: 2, iterations: 10}}
http: {{version: "{version}"}}
grpc: {{protoFiles: [target.proto]}}
scenarios:
  - name: s
    steps:
      - name: http{h}
        request: {{method: POST, url: "{{{{baseUrl}}}}/upload", body: "twelve bytes"}}
      - name: grpc
        if: "{grpc}"
        grpc: {{method: stampede.target.v1.Target/Echo, message: {{text: hello}}}}
"#,
                h = if version == "2" { "2" } else { "1" },
                grpc = steps.contains(&"grpc"),
            ),
        );
        let (run, report) = run_report(&file, dir.path());
        let stdout = text(&run.stdout);
        assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
        for name in steps {
            let s = step(&report, name);
            assert_eq!(figures(&report, name), (10, 10), "{name}: {stdout}");
            assert_eq!(s["errorsByKind"], serde_json::json!({"connect": 10}), "{name}: {stdout}");
            assert_eq!(s["bytesSent"], 0, "{name}: a refused connect sent nothing");
            assert_eq!(messages(&report, name), (0, 0), "{name}");
            assert!(s["grpcStatuses"].is_null(), "{name}: no call got a status");
        }
        assert_eq!(report["total"]["bytesSent"], 0);
    }
}

/// #33: reflection that cannot reach the server says so of the user's own file and field,
/// with `baseUrl`'s templates expanded, and names no step the user did not write.
#[test]
fn a_failed_reflection_names_the_users_file_and_the_expanded_base_url() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        "name: reflection\nbaseUrl: \"http://127.0.0.1:{{env.GRPC_PORT}}\"\n\
         load: {executor: constant-vus, vus: 1, iterations: 1}\ngrpc: {reflect: true}\n\
         scenarios:\n  - name: s\n    steps:\n      - {name: unary, grpc: {method: grpc.testing.TestService/EmptyCall}}\n",
    );
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", file.to_str().unwrap()])
        .env("GRPC_PORT", closed.to_string())
        .output()
        .unwrap();
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{err}");
    let wanted = format!(
        "{}: grpc.reflect: asking http://127.0.0.1:{closed} for its gRPC services by reflection: connect to 127.0.0.1:{closed}",
        file.display()
    );
    assert!(err.contains(&wanted), "{err}");
    assert!(!err.contains("{{") && !err.contains("step `"), "{err}");
}

/// The problem lines `stampede validate` prints for `yaml` (next to a proto `proto`).
fn problems(yaml: &str, proto: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("svc.proto"), proto).unwrap();
    let file = write_scenario(dir.path(), yaml);
    let run = stampede(&["validate", file.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2), "{}{}", text(&run.stdout), text(&run.stderr));
    text(&run.stderr)
}

const PROTO: &str = "syntax = \"proto3\";\npackage p;\nservice S {\n  rpc Get(Req) returns (Req);\n}\nmessage Req {\n  string name = 1;\n  Inner inner = 2;\n}\nmessage Inner {\n  int32 n = 1;\n}\n";

#[test]
fn malformed_grpc_and_websocket_steps_exit_2_naming_file_line_column_and_field() {
    let head = "name: x\nbaseUrl: http://127.0.0.1:1\nload: {executor: constant-vus, vus: 1, iterations: 1}\ngrpc: {protoFiles: [svc.proto]}\nscenarios:\n  - name: s\n    steps:\n";
    // A .proto that does not compile: its own file, line and column.
    let broken = PROTO.replace("string name = 1;", "string name = ;");
    let err = problems(&format!("{head}      - name: a\n        grpc: {{method: p.S/Get}}\n"), &broken);
    assert!(err.contains("svc.proto:7:"), "{err}");
    assert!(err.contains("scenario.yaml:4:") && err.contains("grpc.protoFiles[0]"), "{err}");
    // An unknown service, an unknown method.
    let err = problems(&format!("{head}      - name: a\n        grpc: {{method: p.T/Get}}\n"), PROTO);
    assert!(
        err.contains("scenario.yaml:9:") && err.contains("grpc.method") && err.contains("no service `p.T`"),
        "{err}"
    );
    assert!(err.contains("the services known: p.S"), "{err}");
    let err = problems(&format!("{head}      - name: a\n        grpc: {{method: p.S/Put}}\n"), PROTO);
    assert!(err.contains("has no method `Put` (it has: Get)"), "{err}");
    // A message field that does not exist, nested too: its path, line and column.
    let yaml = format!(
        "{head}      - name: a\n        grpc:\n          method: p.S/Get\n          message:\n            name: x\n            inner:\n              m: 1\n"
    );
    let err = problems(&yaml, PROTO);
    assert!(err.contains("scenario.yaml:14:15") && err.contains("grpc.message.inner.m"), "{err}");
    assert!(err.contains("p.Inner has no field `m` (its fields: n)"), "{err}");
    // A value of the wrong type in a message that never varies.
    let err = problems(
        &format!("{head}      - name: a\n        grpc: {{method: p.S/Get, message: {{inner: {{n: lots}}}}}}\n"),
        PROTO,
    );
    assert!(err.contains("grpc.message") && err.contains("does not fit p.Req"), "{err}");
    // A ws step without a URL.
    let err = problems(&format!("{head}      - name: w\n        ws: {{actions: [{{send: x}}]}}\n"), PROTO);
    assert!(err.contains("scenario.yaml:9:") && err.contains("ws.url") && err.contains("needs a `url`"), "{err}");
}

/// grpc-go's interop server (built and cached by `tests/grpc/interop.sh`), on a free loopback
/// port; killed when dropped. With the folder of its `.proto` files.
struct Interop(std::process::Child, u16, std::path::PathBuf);

impl Drop for Interop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn interop_server() -> Interop {
    interop_server_with(&[])
}

fn interop_server_with(args: &[&str]) -> Interop {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let built = std::process::Command::new("bash").arg(root.join("tests/grpc/interop.sh")).output().unwrap();
    assert!(built.status.success(), "tests/grpc/interop.sh: {}", text(&built.stderr));
    let dir = std::path::PathBuf::from(text(&built.stdout).trim());
    let mut child = std::process::Command::new(dir.join("server"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("address: {line}"));
    Interop(child, port, dir.join("protos"))
}

#[test]
fn grpc_steps_talk_to_grpc_gos_own_server_built_from_the_module_proxy() {
    let server = interop_server();
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        &format!(
            r#"
name: interop
baseUrl: http://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 2, iterations: 20}}
grpc: {{protoFiles: [grpc/testing/test.proto], importPaths: ["{protos}"]}}
scenarios:
  - name: s
    steps:
      - name: unary
        grpc:
          method: grpc.testing.TestService/UnaryCall
          message: {{responseSize: 4, payload: {{body: "{{{{ base64('vu-' + string(vu.id)) }}}}"}}, fillUsername: false}}
        check: {{status: OK, json: {{$.payload.body: {{equals: AAAAAA==}}}}}}
      - name: server stream
        grpc:
          method: grpc.testing.TestService/StreamingOutputCall
          message: {{responseParameters: [{{size: 1}}, {{size: 2}}, {{size: 3}}]}}
        check: {{json: {{"$[2].payload.body": {{equals: AAAA}}}}}}
      - name: client stream
        grpc:
          method: grpc.testing.TestService/StreamingInputCall
          messages: [{{payload: {{body: AAA=}}}}, {{payload: {{body: AAAAAA==}}}}]
        check: {{json: {{$.aggregatedPayloadSize: {{equals: 6}}}}}}
      - name: duplex
        grpc:
          method: grpc.testing.TestService/FullDuplexCall
          messages: [{{responseParameters: [{{size: 1}}]}}, {{responseParameters: [{{size: 2}}, {{size: 2}}]}}]
      - name: unimplemented
        grpc: {{method: grpc.testing.TestService/UnimplementedCall}}
      - name: status
        grpc:
          method: grpc.testing.TestService/UnaryCall
          message: {{responseStatus: {{code: 9, message: "not now"}}}}
      - name: deadline
        grpc:
          method: grpc.testing.TestService/StreamingOutputCall
          message: {{responseParameters: [{{size: 1, intervalUs: 2000000}}]}}
          deadline: 200ms
"#,
            port = server.1,
            protos = server.2.display()
        ),
    );
    let (run, report) = run_report(&file, dir.path());
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    for name in ["unary", "server stream", "client stream", "duplex"] {
        assert_eq!(figures(&report, name), (20, 0), "{name}: {stdout}");
    }
    assert_eq!(messages(&report, "unary"), (20, 20));
    assert_eq!(messages(&report, "server stream"), (20, 60), "one answer per response parameter");
    assert_eq!(messages(&report, "client stream"), (40, 20));
    assert_eq!(messages(&report, "duplex"), (40, 60));
    assert_eq!(step(&report, "unimplemented")["errorsByKind"]["UNIMPLEMENTED"], 20, "{stdout}");
    assert_eq!(step(&report, "status")["errorsByKind"]["FAILED_PRECONDITION"], 20, "{stdout}");
    assert!(stdout.contains("gRPC status FAILED_PRECONDITION: not now"), "grpc-message is shown: {stdout}");
    assert_eq!(step(&report, "deadline")["errorsByKind"]["DEADLINE_EXCEEDED"], 20, "{stdout}");
}

#[test]
fn grpc_reflect_takes_the_services_from_the_servers_reflection_and_names_what_it_lacks() {
    let server = interop_server();
    let dir = tempfile::tempdir().unwrap();
    let scenario = |base: &str, method: &str, message: &str| {
        format!(
            r#"
name: reflection
baseUrl: {base}
load: {{executor: constant-vus, vus: 2, iterations: 10}}
grpc: {{reflect: true}}
scenarios:
  - name: s
    steps:
      - name: unary
        grpc:
          method: grpc.testing.TestService/{method}
          message: {message}
        check: {{json: {{$.payload.body: {{equals: AAAAAA==}}}}}}
        extract: {{size: {{json: $.payload.body}}}}
      - name: server stream
        grpc:
          method: grpc.testing.TestService/StreamingOutputCall
          message: {{responseParameters: [{{size: 1}}, {{size: 2}}]}}
        check: {{json: {{"$[1].payload.body": {{equals: AAA=}}}}}}
"#
        )
    };
    let base = format!("http://127.0.0.1:{}", server.1);
    // No .proto file: the server's reflection describes the service, its messages and imports.
    let file = write_scenario(dir.path(), &scenario(&base, "UnaryCall", "{responseSize: 4}"));
    let (run, report) = run_report(&file, dir.path());
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    assert_eq!(figures(&report, "unary"), (10, 0), "{stdout}");
    assert_eq!(figures(&report, "server stream"), (10, 0), "{stdout}");
    assert_eq!(messages(&report, "server stream"), (10, 20));
    assert!(stdout.contains("(10 passed, 0 failed)"), "{stdout}");
    // What only the server knows is checked when the run starts, at the step's field: exit 2.
    for (method, message, wanted) in [
        (
            "NoSuchCall",
            "{responseSize: 4}",
            "grpc.method: service `grpc.testing.TestService` has no method `NoSuchCall`",
        ),
        ("UnaryCall", "{responseSize: 4, colour: red}", "grpc.message.colour: grpc.testing.SimpleRequest has no field"),
    ] {
        let file = write_scenario(dir.path(), &scenario(&base, method, message));
        let run = stampede(&["run", file.to_str().unwrap()]);
        let err = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{err}");
        assert!(err.contains("scenario.yaml:") && err.contains(wanted), "{err}");
        // Validation alone cannot ask the server: the rest of the file is checked, and passes.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let file = write_scenario(dir.path(), &scenario(&format!("http://127.0.0.1:{closed}"), method, message));
        let validated = stampede(&["validate", file.to_str().unwrap()]);
        assert_eq!(validated.status.code(), Some(0), "{}", text(&validated.stderr));
    }
    // A server without reflection (grpc-go's, told not to offer it) or none at all: the run
    // cannot start, and says why.
    let bare = interop_server_with(&["-no-reflection"]);
    for (base, wanted) in [
        (format!("http://127.0.0.1:{}", bare.1), "offers no reflection service"),
        ("http://127.0.0.1:9".to_string(), "connect to 127.0.0.1:9"),
    ] {
        let file = write_scenario(dir.path(), &scenario(&base, "UnaryCall", "{responseSize: 4}"));
        let run = stampede(&["run", file.to_str().unwrap()]);
        let err = text(&run.stderr);
        assert_eq!(run.status.code(), Some(3), "{err}");
        assert!(
            err.contains(&format!("asking {base} for its gRPC services by reflection")) && err.contains(wanted),
            "{err}"
        );
    }
}

#[test]
fn the_built_in_target_describes_its_service_by_reflection_and_counts_exactly() {
    let (_target, port) = start_target(&["--http2"]);
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        &format!(
            r#"
name: reflected target
baseUrl: http://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 3, iterations: 12}}
grpc: {{reflect: true}}
scenarios:
  - name: s
    steps:
      - name: echo
        grpc: {{method: stampede.target.v1.Target/Echo, message: {{text: "vu {{{{ vu.id }}}}"}}}}
        check: {{json: {{$.text: {{equals: "vu {{{{ vu.id }}}}"}}}}}}
      - name: chat
        grpc: {{method: stampede.target.v1.Target/Chat, messages: [{{text: a}}, {{text: b}}]}}
        check: {{json: {{"$[1].seq": {{equals: 2}}}}}}
"#
        ),
    );
    let (run, report) = run_report(&file, dir.path());
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    let grpc = target_stats(port)["grpc"].clone();
    // One reflection call (v1, answered), and apart from it exactly the load's calls.
    assert_eq!(grpc["reflection"], 1, "{grpc}");
    assert_eq!((figures(&report, "echo"), figures(&report, "chat")), ((12, 0), (12, 0)), "{stdout}");
    assert_eq!((grpc["calls"]["Echo"].as_u64(), grpc["calls"]["Chat"].as_u64()), (Some(12), Some(12)));
    assert_eq!(grpc["statuses"], serde_json::json!({"OK": 24}));
    let sent = messages(&report, "echo").0 + messages(&report, "chat").0;
    let received = messages(&report, "echo").1 + messages(&report, "chat").1;
    assert_eq!((sent, received), (36, 36));
    assert_eq!((grpc["messagesReceived"].as_u64(), grpc["messagesSent"].as_u64()), (Some(sent), Some(received)));
    assert!(stdout.contains("(12 passed, 0 failed)"), "{stdout}");
}

#[test]
fn an_open_model_schedules_grpc_calls_and_websocket_sessions_like_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (_target, port) = start_target(&["--http2"]);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/target.proto"),
        dir.path().join("target.proto"),
    )
    .unwrap();
    let file = write_scenario(
        dir.path(),
        &format!(
            r#"
name: open
baseUrl: http://127.0.0.1:{port}
load: {{executor: constant-arrival-rate, rate: 100, duration: 2s, preAllocatedVUs: 10, maxVUs: 50}}
undeliveredLoad: warn
grpc: {{protoFiles: [target.proto]}}
scenarios:
  - name: s
    steps:
      - name: call
        grpc: {{method: stampede.target.v1.Target/Count, message: {{count: 2}}}}
      - name: socket
        ws: {{url: "{{{{baseUrl}}}}/ws/echo", actions: [{{send: x}}, {{receive: {{equals: x}}}}]}}
"#
        ),
    );
    let (run, report) = run_report(&file, dir.path());
    assert_eq!(run.status.code(), Some(0), "{}{}", text(&run.stdout), text(&run.stderr));
    // 200 iterations due: each started on schedule or dropped; each started one made one call
    // and one session, which the target counted.
    let iterations = report["run"]["iterations"].as_u64().unwrap();
    let dropped = report["run"]["schedule"]["droppedIterations"].as_u64().unwrap();
    assert_eq!(iterations + dropped, 200, "{iterations} + {dropped} dropped");
    let stats = target_stats(port);
    assert_eq!(step(&report, "call")["requests"].as_u64(), Some(iterations));
    assert_eq!(stats["grpc"]["calls"]["Count"].as_u64(), Some(iterations));
    assert_eq!(stats["websocket"]["upgrades"].as_u64(), Some(iterations));
    assert_eq!(step(&report, "call")["messages"]["received"].as_u64(), Some(2 * iterations));
    // Open models keep every step's service time too.
    assert!(step(&report, "socket")["serviceMs"]["p50"].as_f64().is_some(), "{}", step(&report, "socket"));
}

#[test]
fn grpc_and_websocket_go_over_tls_with_the_scenarios_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (_target, port, cert_file) = start_https_target(dir.path());
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/target.proto"),
        dir.path().join("target.proto"),
    )
    .unwrap();
    let scenario = |ca: &str| {
        format!(
            r#"
name: tls
baseUrl: https://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 2, iterations: 10}}
http: {{tls: {{{ca}}}}}
grpc: {{protoFiles: [target.proto]}}
scenarios:
  - name: s
    steps:
      - name: call
        grpc: {{method: stampede.target.v1.Target/Echo, message: {{text: secure}}}}
        check: {{json: {{$.text: {{equals: secure}}}}}}
      - name: socket
        ws: {{url: "wss://127.0.0.1:{port}/ws/echo", actions: [{{send: x}}, {{receive: {{equals: x}}}}]}}
"#
        )
    };
    let file = write_scenario(dir.path(), &scenario(&format!("caFile: {}", cert_file.display())));
    let (run, report) = run_report(&file, dir.path());
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    assert_eq!(
        (report["total"]["requests"].as_u64(), report["total"]["errors"].as_u64()),
        (Some(20), Some(0)),
        "{stdout}"
    );
    // The target's counters, read over HTTPS by a scenario of one checked request.
    let stats = dir.path().join("stats.yaml");
    std::fs::write(
        &stats,
        format!(
            r#"
name: stats
baseUrl: https://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 1, iterations: 1}}
http: {{tls: {{caFile: {}}}}}
scenarios:
  - name: s
    steps:
      - name: stats
        request: {{url: "{{{{baseUrl}}}}/stats"}}
        check: {{json: {{grpc.calls.Echo: {{equals: 10}}, websocket.upgrades: {{equals: 10}}, grpc.statuses.OK: {{equals: 10}}}}}}
"#,
            cert_file.display()
        ),
    )
    .unwrap();
    let (_, counted) = run_report(&stats, dir.path());
    assert_eq!(counted["total"]["errors"], 0, "the target counted 10 calls and 10 upgrades: {}", counted["checks"]);
    // Without the CA, both fail their TLS handshake.
    let file = write_scenario(dir.path(), &scenario(""));
    let (_, report) = run_report(&file, dir.path());
    assert_eq!(report["total"]["errorsByKind"]["tls"], 20, "{}", report["total"]);
}

/// gRPC runs as baselines: a threshold on one gRPC status is judged against the earlier run's
/// count of it, and `stampede compare` lays the gRPC steps side by side like HTTP ones.
#[test]
fn grpc_runs_are_baselines_and_compare_like_http_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        r#"
name: grpc-baseline
baseUrl: builtin
grpc: {reflect: true}
load: {executor: constant-vus, vus: 2, iterations: 40}
scenarios:
  - name: s
    steps:
      - {name: echo, grpc: {method: stampede.target.v1.Target/Echo, message: {text: hi}}}
      - {name: failing, grpc: {method: stampede.target.v1.Target/Echo, message: {text: hi, status: 14}}}
thresholds:
  - "errors{kind:UNAVAILABLE}.count <= baseline"
  - "errors{kind:UNAVAILABLE}.count < baseline"
  - "latency{step:echo}.p99 < baseline * 1000"
"#,
    );
    let (base, new) = (dir.path().join("base.json"), dir.path().join("new.json"));
    let first = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", base.to_str().unwrap()]);
    assert_eq!(first.status.code(), Some(1), "no baseline: the relative thresholds are not judged");
    let run = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--quiet",
        "--out",
        new.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(1), "one threshold fails: {}", text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    let verdicts = report["thresholds"].as_array().unwrap();
    let judged: Vec<(bool, Option<f64>)> =
        verdicts.iter().map(|v| (v["passed"].as_bool().unwrap(), v["baseline"].as_f64())).collect();
    assert_eq!(judged[..2], [(true, Some(40.0)), (false, Some(40.0))], "{verdicts:?}");
    // A latency against the baseline's is judged with the base figure (its outcome is the
    // machine's, not asserted).
    assert!(judged[2].1.is_some_and(|b| b > 0.0), "{verdicts:?}");
    let compared = stampede(&["compare", base.to_str().unwrap(), new.to_str().unwrap(), "--details"]);
    let table = text(&compared.stdout);
    assert_eq!(compared.status.code(), Some(0), "{table}{}", text(&compared.stderr));
    for step in ["s/echo", "s/failing"] {
        let rows: Vec<&str> = table.lines().skip_while(|l| !l.starts_with(step)).take(9).collect();
        let requests = rows.iter().find(|l| l.contains("requests")).unwrap_or_else(|| panic!("{step}: {table}"));
        assert_eq!(requests.split_whitespace().collect::<Vec<_>>()[1..4], ["40", "40", "+0.0"], "{table}");
        let errors = rows.iter().find(|l| l.contains("error %")).unwrap();
        let wanted = if step == "s/echo" { "0.000" } else { "100.000" };
        assert_eq!(errors.split_whitespace().collect::<Vec<_>>()[2..4], [wanted, wanted], "{table}");
    }
}

/// The README's one-command examples run clean against the built-in target (shortened to a
/// fixed number of iterations): no error, every check and every threshold but a latency limit
/// passed, every step ran.
#[test]
fn the_grpc_and_websocket_examples_run_clean_in_one_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    for (example, steps) in
        [("grpc", ["echo", "count", "sum", "chat"].as_slice()), ("websocket", &["echo", "join", "leave"])]
    {
        let file = root.join(format!("examples/{example}.yaml"));
        let out = dir.path().join(format!("{example}.json"));
        let run = stampede(&["run", file.to_str().unwrap(), "-n", "30", "--quiet", "--out", out.to_str().unwrap()]);
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{example}: {e}: {}", text(&run.stderr)));
        // A latency threshold is the machine's to pass (a busy one may not).
        assert_the_exit_code_follows_the_verdicts(&run, &report, example);
        for name in steps {
            assert_eq!(figures(&report, name), (30, 0), "{example}: {name}");
        }
        let checks = report["checks"].as_array().unwrap();
        assert!(!checks.is_empty() && checks.iter().all(|c| c["passes"] == 30 && c["fails"] == 0), "{checks:?}");
    }
}
