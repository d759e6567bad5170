//! WebSocket steps against servers not written here: Python's `websockets` and Node's `ws`
//! (installed by `tests/ws/peers.sh`), each driven by a small program of ours (tests/ws/peer.py,
//! peer.js) that records what it saw: handshake keys, messages (size, SHA-256, frames), pongs,
//! and the code and reason of the client's Close. Each test runs `stampede run` against both
//! and asserts both sides: the report's figures and error kinds, the server's records.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::commands::{stampede, text, write_scenario};

#[derive(Clone, Copy, Debug)]
enum Lib {
    Python,
    Node,
}

const LIBS: [Lib; 2] = [Lib::Python, Lib::Node];

/// The folder `tests/ws/peers.sh` installed the libraries into (once per test process).
fn installed() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let built = Command::new("bash").arg(repo().join("tests/ws/peers.sh")).output().unwrap();
        assert!(built.status.success(), "tests/ws/peers.sh: {}", text(&built.stderr));
        PathBuf::from(text(&built.stdout).trim())
    })
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One of the peer programs on a free loopback port, recording into its own file; killed when
/// dropped.
struct Peer {
    lib: Lib,
    child: Child,
    port: u16,
    records: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    fn start(lib: Lib) -> Peer {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("records.jsonl");
        let lib_dir = installed();
        let mut command = match lib {
            Lib::Python => {
                let mut c = Command::new("python3");
                c.arg(repo().join("tests/ws/peer.py")).env("PYTHONPATH", lib_dir.join("python"));
                c
            }
            Lib::Node => {
                let mut c = Command::new("node");
                c.arg(repo().join("tests/ws/peer.js")).env("NODE_PATH", lib_dir.join("node/node_modules"));
                c
            }
        };
        let mut child = command.arg(&records).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        let port = port.unwrap_or_else(|| panic!("{lib:?} peer did not say where it listens: {line:?}"));
        Peer { lib, child, port, records, _dir: dir }
    }

    /// Everything recorded so far.
    fn records(&self) -> Vec<Value> {
        let all = std::fs::read_to_string(&self.records).unwrap_or_default();
        all.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// The records once `n` connections have ended (a dropped connection's end may come after
    /// the run's); at most 20 s.
    fn after_closes(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let records = self.records();
            let closes = records.iter().filter(|r| r["event"] == "close").count();
            if closes >= n {
                assert_eq!(closes, n, "{:?}: more connections than expected: {records:#?}", self.lib);
                return records;
            }
            assert!(Instant::now() < deadline, "{:?}: {closes} of {n} closes: {records:#?}", self.lib);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A scenario against this peer: `load`, and `steps` (YAML, indented for `steps:`).
    fn scenario(&self, dir: &Path, load: &str, vars: &str, steps: &str) -> PathBuf {
        let yaml = format!(
            "name: peers\nbaseUrl: http://127.0.0.1:{port}\nload: {load}\n{vars}scenarios:\n  - name: s\n    steps:\n{steps}",
            port = self.port
        );
        write_scenario(dir, &yaml)
    }
}

/// `stampede run` with a JSON report; its output and the report.
fn run(file: &Path, extra: &[&str]) -> (std::process::Output, Value) {
    let out = file.with_file_name("report.json");
    let mut args = vec!["run", file.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let run = stampede(&args);
    let report = serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_default()).unwrap_or(Value::Null);
    assert!(report.is_object(), "no report: {}{}", text(&run.stdout), text(&run.stderr));
    (run, report)
}

fn step<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["steps"].as_array().unwrap().iter().find(|s| s["step"] == name).unwrap_or_else(|| panic!("no step {name}"))
}

/// A step's requests, errors and errors by kind.
fn outcome(report: &Value, name: &str) -> (u64, u64, BTreeMap<String, u64>) {
    let s = step(report, name);
    let kinds =
        s["errorsByKind"].as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect());
    (s["requests"].as_u64().unwrap(), s["errors"].as_u64().unwrap(), kinds.unwrap_or_default())
}

fn kinds(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The records of the connections whose path starts with `path`, by event.
fn of_path<'a>(records: &'a [Value], path: &str, event: &str) -> Vec<&'a Value> {
    let conns: BTreeSet<u64> = records
        .iter()
        .filter(|r| r["event"] == "open" && r["path"].as_str().unwrap().starts_with(path))
        .map(|r| r["conn"].as_u64().unwrap())
        .collect();
    records.iter().filter(|r| r["event"] == event && conns.contains(&r["conn"].as_u64().unwrap())).collect()
}

/// The codes and reasons the client closed the connections of `path` with, counted.
fn closes(records: &[Value], path: &str) -> BTreeMap<(u64, String), usize> {
    let mut out = BTreeMap::new();
    for r in of_path(records, path, "close") {
        *out.entry((r["code"].as_u64().unwrap(), r["reason"].as_str().unwrap().to_string())).or_default() += 1;
    }
    out
}

fn code(n: u64, reason: &str, count: usize) -> BTreeMap<(u64, String), usize> {
    BTreeMap::from([((n, reason.to_string()), count)])
}

#[test]
fn every_end_of_a_session_closes_with_its_code_and_a_servers_close_is_answered_with_its_own() {
    for lib in LIBS {
        let peer = Peer::start(lib);
        let dir = tempfile::tempdir().unwrap();
        let file = peer.scenario(
            dir.path(),
            "{executor: constant-vus, vus: 2, iterations: 8}",
            "",
            r#"      - name: server closes
        ws:
          url: "{{baseUrl}}/close?code=4001&reason=bye"
          actions: [{send: x}, {receive: {equals: x}}]
      - name: normal
        ws: {url: "{{baseUrl}}/echo?normal", actions: [{send: a}, {receive: {equals: a}}]}
      - name: coded
        ws: {url: "{{baseUrl}}/echo?coded", closeCode: 4000, actions: [{send: b}, {receive: {equals: b}}]}
      - name: close action
        ws:
          url: "{{baseUrl}}/echo?action"
          actions: [{send: c}, {receive: {equals: c}}, {close: {code: 4002, reason: done}}]
      - name: timeout
        ws: {url: "{{baseUrl}}/echo?timeout", actions: [{send: d}, {receive: {equals: never, timeout: 100ms}}]}
"#,
        );
        let (out, report) = run(&file, &[]);
        let stdout = text(&out.stdout);
        let records = peer.after_closes(8 * 5);
        assert_eq!(outcome(&report, "server closes"), (8, 8, kinds(&[("close", 8)])), "{lib:?} {stdout}");
        assert!(
            stdout.contains("the server closed the socket (code 4001: bye) while waiting for a message"),
            "{stdout}"
        );
        assert_eq!(outcome(&report, "normal"), (8, 0, kinds(&[])), "{lib:?} {stdout}");
        assert_eq!(outcome(&report, "coded"), (8, 0, kinds(&[])), "{lib:?} {stdout}");
        assert_eq!(outcome(&report, "close action"), (8, 0, kinds(&[])), "{lib:?} {stdout}");
        assert_eq!(outcome(&report, "timeout"), (8, 8, kinds(&[("timeout", 8)])), "{lib:?} {stdout}");
        // The server's side: its Close answered with its own code and reason (not a dropped
        // connection, 1006); each of the client's closes with the step's code.
        assert_eq!(closes(&records, "/close"), code(4001, "bye", 8), "{lib:?}");
        assert_eq!(closes(&records, "/echo?action"), code(4002, "done", 8), "{lib:?}");
        assert_eq!(closes(&records, "/echo?timeout"), code(1000, "timeout", 8), "{lib:?}");
        assert_eq!(closes(&records, "/echo?normal"), code(1000, "", 8), "{lib:?}");
        assert_eq!(closes(&records, "/echo?coded"), code(4000, "", 8), "{lib:?}");
    }
}

#[test]
fn a_server_that_breaks_the_protocol_or_drops_the_connection_gets_the_rfc_close_code() {
    for lib in LIBS {
        let peer = Peer::start(lib);
        let dir = tempfile::tempdir().unwrap();
        let over = 64 * 1024 * 1024 + 1;
        let file = peer.scenario(
            dir.path(),
            "{executor: constant-vus, vus: 1, iterations: 2}",
            "",
            &format!(
                r#"      - name: continuation
        ws: {{url: "{{{{baseUrl}}}}/bad?frame=continuation", actions: [{{send: x}}, {{receive: {{equals: y}}}}]}}
      - name: utf8
        ws: {{url: "{{{{baseUrl}}}}/bad?frame=utf8", actions: [{{send: x}}, {{receive: {{equals: y}}}}]}}
      - name: rsv
        ws: {{url: "{{{{baseUrl}}}}/bad?frame=rsv", actions: [{{send: x}}, {{receive: {{equals: y}}}}]}}
      - name: too big
        ws: {{url: "{{{{baseUrl}}}}/big?size={over}", timeout: 60s, actions: [{{send: x}}, {{receive: {{equals: y, timeout: 60s}}}}]}}
      - name: dropped
        ws: {{url: "{{{{baseUrl}}}}/drop", actions: [{{send: x}}, {{receive: {{equals: y}}}}]}}
"#
            ),
        );
        let (out, report) = run(&file, &[]);
        let stdout = text(&out.stdout);
        let records = peer.after_closes(2 * 5);
        for name in ["continuation", "utf8", "rsv", "too big"] {
            assert_eq!(outcome(&report, name), (2, 2, kinds(&[("protocol", 2)])), "{lib:?} {name}: {stdout}");
        }
        // A TCP connection that ends without a Close is a close, 1006 (RFC 6455 §7.1.5).
        assert_eq!(outcome(&report, "dropped"), (2, 2, kinds(&[("close", 2)])), "{lib:?} {stdout}");
        assert!(
            stdout.contains("the server ended the connection without a Close frame (code 1006")
                && stdout.contains("while waiting for a message"),
            "{stdout}"
        );
        assert!(stdout.contains(&format!("WebSocket: a message of {over} bytes while waiting for a message: over the `ws.message` budget of 64 MiB")), "{stdout}");
        assert!(stdout.contains("WebSocket: a text message that is not UTF-8"), "{stdout}");
        // The server's records: the client's Close codes, as RFC 6455 §7.4.1 names them.
        assert_eq!(closes(&records, "/bad?frame=continuation"), code(1002, "protocol error", 2), "{lib:?}");
        assert_eq!(closes(&records, "/bad?frame=rsv"), code(1002, "protocol error", 2), "{lib:?}");
        assert_eq!(closes(&records, "/bad?frame=utf8"), code(1007, "invalid UTF-8", 2), "{lib:?}");
        assert_eq!(closes(&records, "/big"), code(1009, "message too big", 2), "{lib:?}");
        assert_eq!(closes(&records, "/drop"), code(1006, "", 2), "{lib:?}: no Close either way");
        let sent: Vec<u64> = of_path(&records, "/big", "sent").iter().map(|r| r["size"].as_u64().unwrap()).collect();
        assert_eq!(sent, [over, over], "{lib:?}");
    }
}

#[test]
fn every_connection_has_a_fresh_key_across_runs_of_one_seed_and_a_wrong_accept_is_refused() {
    for lib in LIBS {
        let peer = Peer::start(lib);
        let dir = tempfile::tempdir().unwrap();
        let file = peer.scenario(
            dir.path(),
            "{executor: constant-vus, vus: 2, iterations: 6}",
            "",
            r#"      - name: echo
        ws: {url: "{{baseUrl}}/echo", actions: [{send: k}, {receive: {equals: k}}]}
      - name: bad accept
        ws: {url: "{{baseUrl}}/badaccept", actions: [{send: k}]}
"#,
        );
        for _ in 0..2 {
            let (out, report) = run(&file, &["--seed", "7"]);
            let stdout = text(&out.stdout);
            assert_eq!(outcome(&report, "echo"), (6, 0, kinds(&[])), "{lib:?} {stdout}");
            assert_eq!(outcome(&report, "bad accept"), (6, 6, kinds(&[("protocol", 6)])), "{lib:?} {stdout}");
            assert!(stdout.contains("the handshake answer's sec-websocket-accept does not match the key"), "{stdout}");
        }
        let records = peer.after_closes(2 * 12);
        let keys: Vec<&str> =
            records.iter().filter(|r| r["event"] == "open").map(|r| r["key"].as_str().unwrap()).collect();
        assert_eq!(keys.len(), 24, "{lib:?}");
        assert_eq!(keys.iter().collect::<BTreeSet<_>>().len(), 24, "{lib:?}: a key repeated: {keys:?}");
        // Each key is 16 bytes in base64 (RFC 6455 §4.1).
        assert!(keys.iter().all(|k| k.len() == 24 && k.ends_with("==")), "{keys:?}");
        // Nothing but the handshake went over a connection whose accept was wrong.
        assert!(of_path(&records, "/badaccept", "message").is_empty(), "{lib:?}");
        assert_eq!(closes(&records, "/badaccept"), code(1006, "", 12), "{lib:?}");
    }
}

#[test]
fn pings_are_answered_with_their_payload_and_unsolicited_pongs_are_ignored() {
    for lib in LIBS {
        let peer = Peer::start(lib);
        let dir = tempfile::tempdir().unwrap();
        let file = peer.scenario(
            dir.path(),
            "{executor: constant-vus, vus: 2, iterations: 6}",
            "",
            r#"      - name: ping
        ws:
          url: "{{baseUrl}}/ping?payload=beat-{{ vu.id }}"
          actions: [{send: p}, {receive: {equals: p}}, {send: q}, {receive: {equals: q}}]
      - name: pong
        ws: {url: "{{baseUrl}}/pong", actions: [{send: u}, {receive: {equals: u}}, {send: v}, {receive: {equals: v}}]}
"#,
        );
        let (out, report) = run(&file, &[]);
        let stdout = text(&out.stdout);
        let records = peer.after_closes(2 * 6);
        assert_eq!(outcome(&report, "ping"), (6, 0, kinds(&[])), "{lib:?} {stdout}");
        assert_eq!(outcome(&report, "pong"), (6, 0, kinds(&[])), "{lib:?} {stdout}");
        // The pongs are not messages: two each way per session.
        for name in ["ping", "pong"] {
            let m = &step(&report, name)["messages"];
            assert_eq!((m["sent"].as_u64(), m["received"].as_u64()), (Some(12), Some(12)), "{lib:?} {name}");
        }
        // Every ping (one per message) was answered with its own payload.
        let opens = of_path(&records, "/ping", "open");
        assert_eq!(opens.len(), 6);
        for open in opens {
            let payload = open["path"].as_str().unwrap().split_once("payload=").unwrap().1;
            let pongs: Vec<&str> = records
                .iter()
                .filter(|r| r["event"] == "pong" && r["conn"] == open["conn"])
                .map(|r| r["payload"].as_str().unwrap())
                .collect();
            assert_eq!(pongs, [payload, payload], "{lib:?}");
        }
        assert!(of_path(&records, "/pong", "pong").is_empty(), "{lib:?}: the client sent a pong unasked");
        assert_eq!(closes(&records, "/"), code(1000, "", 12), "{lib:?}");
    }
}

/// `n` letters, digits, `-` and `_`, varied (a shifted byte shows), from a fixed seed: text
/// that a double-quoted YAML string and a template hold as it is.
fn ascii(n: usize, seed: u64) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(ABC[(x % 64) as usize])
        })
        .collect()
}

fn sha256(data: &[u8], dir: &Path) -> String {
    let path = dir.join("content");
    std::fs::write(&path, data).unwrap();
    let out = Command::new("sha256sum").arg(&path).output().unwrap();
    text(&out.stdout).split_whitespace().next().unwrap().to_string()
}

fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() { char::from(ABC[(n >> (18 - 6 * i)) as usize & 63]) } else { '=' });
        }
    }
    out
}

#[test]
fn fragmented_and_large_messages_arrive_whole_both_ways() {
    let small_text = ascii(1000, 1);
    let small_binary = ascii(999, 2);
    let mib = ascii(1 << 20, 3);
    let big = ascii(16 << 20, 4);
    for lib in LIBS {
        let peer = Peer::start(lib);
        let dir = tempfile::tempdir().unwrap();
        let vars = format!(
            "vars:\n  small: \"{small_text}\"\n  smallBinary: \"{small_binary}\"\n  smallB64: \"{}\"\n  mib: \"{mib}\"\n  mibB64: \"{}\"\n  big: \"{big}\"\n",
            base64(small_binary.as_bytes()),
            base64(mib.as_bytes()),
        );
        let file = peer.scenario(
            dir.path(),
            "{executor: constant-vus, vus: 1, iterations: 2}",
            &vars,
            r#"      - name: fragments
        ws:
          url: "{{baseUrl}}/echo?fragments=5"
          actions:
            - send: "{{ small }}"
            - receive: {equals: "{{ small }}"}
            - sendBinary: "{{ smallB64 }}"
            - receive: {equals: "{{ smallBinary }}"}
      - name: large
        ws:
          # In one frame each in the first iteration, in 16 in the second.
          url: "{{baseUrl}}/echo?fragments={{ vu.iteration == 0 ? 1 : 16 }}&large"
          timeout: 120s
          actions:
            - sendBinary: "{{ mibB64 }}"
            - receive: {equals: "{{ mib }}", timeout: 60s}
            - send: "{{ big }}"
            - receive: {equals: "{{ big }}", timeout: 60s}
"#,
        );
        let (out, report) = run(&file, &[]);
        let stdout = text(&out.stdout);
        let records = peer.after_closes(2 * 2);
        for name in ["fragments", "large"] {
            assert_eq!(outcome(&report, name), (2, 0, kinds(&[])), "{lib:?} {name}: {stdout}");
        }
        let m = &step(&report, "large")["messages"];
        assert_eq!((m["sent"].as_u64(), m["received"].as_u64()), (Some(4), Some(4)), "{lib:?}");
        // What the server received: each message whole, of its size and hash, in one frame
        // (`ws` hands over only whole messages: no frame count).
        let got = |path: &str| -> Vec<(String, u64, String, Option<u64>)> {
            of_path(&records, path, "message")
                .iter()
                .map(|r| {
                    let kind = r["kind"].as_str().unwrap().to_string();
                    (kind, r["size"].as_u64().unwrap(), r["sha256"].as_str().unwrap().to_string(), r["frames"].as_u64())
                })
                .collect()
        };
        let frames = match lib {
            Lib::Python => Some(1),
            Lib::Node => None,
        };
        let expect =
            |kind: &str, data: &str| (kind.to_string(), data.len() as u64, sha256(data.as_bytes(), dir.path()), frames);
        let small = [expect("text", &small_text), expect("binary", &small_binary)];
        assert_eq!(got("/echo?fragments=5"), [small.clone(), small].concat(), "{lib:?}");
        let large = [expect("binary", &mib), expect("text", &big)];
        assert_eq!(got("/echo?fragments=1&"), large, "{lib:?}");
        assert_eq!(got("/echo?fragments=16&"), large, "{lib:?}");
        // What the server sent back: the echoes, in the frames asked for.
        let sent = |path: &str| -> Vec<(u64, u64)> {
            of_path(&records, path, "sent")
                .iter()
                .map(|r| (r["size"].as_u64().unwrap(), r["frames"].as_u64().unwrap()))
                .collect()
        };
        assert_eq!(sent("/echo?fragments=5"), [(1000, 5), (999, 5), (1000, 5), (999, 5)], "{lib:?}");
        assert_eq!(sent("/echo?fragments=1&"), [(1 << 20, 1), (16 << 20, 1)], "{lib:?}");
        assert_eq!(sent("/echo?fragments=16&"), [(1 << 20, 16), (16 << 20, 16)], "{lib:?}");
    }
}

#[test]
fn a_kept_socket_counts_one_handshake_per_connection_however_many_steps_use_it() {
    for lib in LIBS {
        let peer = Peer::start(lib);
        let dir = tempfile::tempdir().unwrap();
        let file = peer.scenario(
            dir.path(),
            "{executor: constant-vus, vus: 2, iterations: 4}",
            "",
            r#"      - repeat: {count: 3}
        steps:
          - name: kept
            ws:
              url: "{{baseUrl}}/echo"
              keepOpen: true
              closeCode: 4005
              actions: [{send: "n{{ vu.id }}"}, {receive: {equals: "n{{ vu.id }}"}}]
      - name: last
        ws: {url: "{{baseUrl}}/echo", keepOpen: true, closeCode: 4006, actions: [{send: z}, {receive: {equals: z}}]}
"#,
        );
        let (out, report) = run(&file, &[]);
        let stdout = text(&out.stdout);
        let records = peer.after_closes(4);
        assert_eq!(outcome(&report, "kept"), (12, 0, kinds(&[])), "{lib:?} {stdout}");
        assert_eq!(outcome(&report, "last"), (4, 0, kinds(&[])), "{lib:?} {stdout}");
        // One handshake per iteration: the first pass's. Its status (101) is counted once, and
        // its connection once; the passes that reuse the socket have neither.
        let opens = records.iter().filter(|r| r["event"] == "open").count();
        assert_eq!(opens, 4, "{lib:?}");
        let kept = step(&report, "kept");
        assert_eq!(kept["statusCodes"], serde_json::json!({"101": 4}), "{lib:?} {kept}");
        assert_eq!(kept["phasesMs"]["connect"]["samples"], 4, "{lib:?} {kept}");
        assert!(step(&report, "last")["statusCodes"].as_object().is_none_or(|m| m.is_empty()), "{lib:?}");
        // Every message went over those 4 connections; each closed when its iteration ended,
        // with the code of the step that kept it last.
        assert_eq!(records.iter().filter(|r| r["event"] == "message").count(), 16, "{lib:?}");
        assert_eq!(closes(&records, "/echo"), code(4006, "", 4), "{lib:?}");
    }
}
