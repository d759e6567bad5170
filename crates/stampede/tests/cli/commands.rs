//! The `stampede` binary as a user runs it: exit codes, the summary table, the JSON report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;

pub(crate) fn stampede(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stampede")).args(args).current_dir(repo_root()).output().expect("stampede runs")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The cells of the table row whose first cell is `name`.
/// What a run's exit code must be whatever the machine's speed: every verdict that is not a
/// latency limit passes (errors, checks, counts: the target's to keep, not the machine's), and
/// the code follows all the verdicts the report keeps (0 when all passed, 1 when one failed, a
/// busy machine missing a latency limit included).
pub(crate) fn assert_the_exit_code_follows_the_verdicts(run: &Output, report: &Value, context: &str) {
    let verdicts = report["thresholds"].as_array().unwrap_or_else(|| panic!("{context}: no verdicts: {report}"));
    let latency = |v: &&Value| v["threshold"].as_str().unwrap().starts_with("latency");
    assert!(verdicts.iter().filter(|v| !latency(v)).all(|v| v["passed"] == true), "{context}: {verdicts:?}");
    let passed = verdicts.iter().all(|v| v["passed"] == true);
    assert_eq!(run.status.code(), Some(if passed { 0 } else { 1 }), "{context}: {}", text(&run.stderr));
}

pub(crate) fn table_row(stdout: &str, name: &str) -> Vec<String> {
    stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no `{name}` row in:\n{stdout}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Asserts the table row shows exactly the JSON summary's figures.
fn assert_row_matches(row: &[String], summary: &Value) {
    let lat = &summary["latencyMs"];
    let f3 = |v: &Value| format!("{:.3}", v.as_f64().unwrap());
    assert_eq!(row[1], summary["requests"].to_string(), "samples");
    for (i, key) in ["mean", "min", "max", "p50", "p75", "p90", "p95", "p99", "p99.9"].iter().enumerate() {
        assert_eq!(row[2 + i], f3(&lat[key]), "{key}");
    }
    assert_eq!(row[11], format!("{:.1}", summary["rps"].as_f64().unwrap()), "req/s");
    assert_eq!(row[12], summary["errors"].to_string(), "errors");
    assert_eq!(row[13], format!("{:.2}", summary["errorRate"].as_f64().unwrap() * 100.0), "error %");
}

#[test]
fn quickstart_runs_clean_and_its_json_matches_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let run = stampede(&["run", "examples/quickstart.yaml", "--out", out.to_str().unwrap()]);
    let stdout = text(&run.stdout);
    let stderr = text(&run.stderr);
    assert!(run.status.success(), "exit {:?}\n{stdout}\n{stderr}", run.status.code());
    // Progress lines came while it ran.
    assert!(stderr.lines().filter(|l| l.contains("req/s") && l.contains("p99")).count() >= 3, "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["schemaVersion"], 1);
    let total = &report["total"];
    assert_eq!(total["errors"], 0, "{stdout}");
    assert!(total["requests"].as_u64().unwrap() > 0, "{stdout}");
    assert_row_matches(&table_row(&stdout, "TOTAL"), total);
    for step in report["steps"].as_array().unwrap() {
        assert_row_matches(&table_row(&stdout, step["step"].as_str().unwrap()), step);
    }
    // The run facts above the table.
    let run_facts = &report["run"];
    // A constant-VUs run has every VU running at once: the peak is the whole pool.
    assert_eq!(run_facts["generator"]["peakVus"], run_facts["vusMax"]);
    assert!(stdout.contains(&format!("VUs {} (of {})", run_facts["generator"]["peakVus"], run_facts["vusMax"])));
    assert!(stdout.contains(&format!("threads {}", run_facts["threads"])));
    assert!(run_facts["generator"]["cpuPercent"].as_f64().unwrap() > 0.0);
    assert!(run_facts["generator"]["peakRssBytes"].as_u64().unwrap() > 1_000_000);
    let duration = run_facts["durationSeconds"].as_f64().unwrap();
    // Its 10 s, then the requests in flight end (each within the 5 s timeout; the upper bound
    // only catches a run that does not stop).
    assert!((10.0..40.0).contains(&duration), "ran {duration}s");
}

pub(crate) fn write_scenario(dir: &Path, yaml: &str) -> PathBuf {
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn a_closed_port_shows_connect_errors_in_table_and_json() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        &format!(
            "name: refused\nbaseUrl: http://127.0.0.1:{port}\nload: {{executor: constant-vus, vus: 2, iterations: 50}}\n\
             scenarios:\n  - name: s\n    steps:\n      - {{name: home, request: {{url: \"{{{{baseUrl}}}}/\"}}}}\n"
        ),
    );
    let out = dir.path().join("r.json");
    let run = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["total"]["errorsByKind"]["connect"], 50);
    assert_eq!(report["total"]["errors"], 50);
    let row = table_row(&stdout, "TOTAL");
    assert_eq!((row[1].as_str(), row[12].as_str(), row[13].as_str()), ("50", "50", "100.00"));
    assert!(stdout.contains("errors by kind: connect 50"), "{stdout}");
    assert!(stdout.contains("refused"), "the first failure's message is shown: {stdout}");
}

/// A server that answers GETs `200` with keep-alive and refuses uploads as nginx does with a
/// body over its limit: `413` with `connection: close` once it has read the head, then closes
/// without reading the body. Counts the connections it accepted and the request heads it read.
fn refusing_uploads() -> (u16, Arc<AtomicU32>, Arc<AtomicU32>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicU32::new(0));
    let requests = Arc::new(AtomicU32::new(0));
    let (conns, reqs) = (connections.clone(), requests.clone());
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            conns.fetch_add(1, Ordering::Relaxed);
            let reqs = reqs.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head: Vec<u8> = buf.drain(..end + 4).collect();
                    reqs.fetch_add(1, Ordering::Relaxed);
                    if !head.starts_with(b"GET ") {
                        let _ = s.write_all(
                            b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        );
                        return; // closed with the body unread: a reset
                    }
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
                }
            });
        }
    });
    (port, connections, requests)
}

#[test]
fn an_upload_refused_before_its_body_is_read_is_reported_as_413_and_sent_once() {
    let (port, connections, requests) = refusing_uploads();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.bin"), vec![b'x'; 8 << 20]).unwrap();
    let file = write_scenario(
        dir.path(),
        &format!(
            "name: upload\nbaseUrl: http://127.0.0.1:{port}\nload: {{executor: constant-vus, vus: 1, iterations: 1}}\n\
             scenarios:\n  - name: s\n    steps:\n      - {{name: home, request: {{url: \"{{{{baseUrl}}}}/\"}}}}\n\
             \x20     - name: upload\n        request:\n          method: POST\n          url: \"{{{{baseUrl}}}}/upload\"\n\
             \x20         multipart: [{{name: file, file: big.bin}}]\n"
        ),
    );
    let out = dir.path().join("r.json");
    let run = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let step = |name: &str| report["steps"].as_array().unwrap().iter().find(|s| s["step"] == name).unwrap().clone();
    assert_eq!(step("home")["statusCodes"], serde_json::json!({"200": 1}), "{report}");
    let upload = step("upload");
    assert_eq!(upload["statusCodes"], serde_json::json!({"413": 1}), "{upload}");
    // The answer is the step's: its default status check fails on it, and no reset is counted.
    assert_eq!(upload["errorsByKind"], serde_json::json!({"check": 1}), "{upload}");
    assert_eq!(report["total"]["errorsByKind"], serde_json::json!({"check": 1}), "{report}");
    assert_eq!(
        (connections.load(Ordering::Relaxed), requests.load(Ordering::Relaxed)),
        (1, 2),
        "the upload went once, on the GET's keep-alive connection"
    );
    assert_eq!(run.status.code(), Some(0), "no threshold: {}", text(&run.stderr));
}

#[test]
fn invalid_input_exits_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file =
        write_scenario(dir.path(), "name: x\nload: {executor: constant-vus, vus: 1, duration: 1s}\nscenarios: []\n");
    for cmd in ["run", "validate"] {
        let run = stampede(&[cmd, file.to_str().unwrap()]);
        assert_eq!(run.status.code(), Some(2), "{cmd}");
        let stderr = text(&run.stderr);
        assert!(stderr.contains("scenario.yaml") && stderr.contains("at least one scenario"), "{stderr}");
    }
    let missing = stampede(&["run", "no/such/file.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("no/such/file.yaml: cannot read the file"));
}

#[test]
fn validate_accepts_the_examples() {
    let run = stampede(&["validate", "examples/quickstart.yaml"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(text(&run.stdout).contains("ok"));
}

#[test]
fn an_unwritable_report_path_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        "name: x\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 1, iterations: 3}\n\
         scenarios:\n  - name: s\n    steps:\n      - {name: a, request: {url: \"{{baseUrl}}/\"}}\n",
    );
    let out = dir.path().join("missing-dir/r.json");
    let run = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(3), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains("cannot write the report"));
}

#[test]
fn overrides_turn_a_ramp_into_a_fixed_iteration_count() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        "name: x\nbaseUrl: builtin\nload: {executor: ramping-vus, stages: [{duration: 1h, target: 50}]}\n\
         scenarios:\n  - name: s\n    steps:\n      - {name: a, request: {url: \"{{baseUrl}}/get\"}}\n",
    );
    let out = dir.path().join("r.json");
    let run = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--quiet",
        "--vus",
        "4",
        "--iterations",
        "120",
        "--threads",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["total"]["requests"], 120);
    assert_eq!(report["run"]["vusMax"], 4);
    assert_eq!(report["run"]["executor"], "constant-vus");
    assert_eq!(report["run"]["threads"], 1);
}

#[test]
fn failed_thresholds_exit_1_and_show_their_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let base = "name: t\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 2, iterations: 40}\n\
         scenarios:\n  - name: s\n    steps:\n      - {name: ok, request: {url: \"{{baseUrl}}/\"}}\n      \
         - {name: broken, request: {url: \"{{baseUrl}}/status/500\"}}\n";
    let passing = write_scenario(
        dir.path(),
        &format!("{base}thresholds:\n  - \"latency{{step:ok}}.p99 < 5s\"\n  - \"errors{{step:ok}}.rate == 0%\"\n"),
    );
    let out = dir.path().join("r.json");
    let run = stampede(&["run", passing.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0), "{}{}", text(&run.stdout), text(&run.stderr));
    assert!(text(&run.stdout).contains("thresholds: 2 passed, 0 failed"), "{}", text(&run.stdout));

    let failing =
        write_scenario(dir.path(), &format!("{base}thresholds:\n  - \"errors.rate < 1%\"\n  - \"latency.p99 < 5s\"\n"));
    let run = stampede(&["run", failing.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("✗ errors.rate < 1%  (actual 50.000%)"), "{stdout}");
    assert!(stdout.contains("✓ latency.p99 < 5s"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["thresholds"][0]["passed"], false);
    assert_eq!(report["thresholds"][0]["actual"], 50.0);
    assert_eq!(report["thresholds"][1]["passed"], true);
    // #24: the table has the p95 thresholds use, and a threshold that could not be judged says
    // why on its ✗ line (it was only in the JSON).
    assert_row_matches(&table_row(&stdout, "TOTAL"), &report["total"]);
    let unjudged = write_scenario(dir.path(), &format!("{base}thresholds:\n  - \"latency.p95 < baseline * 1.10\"\n"));
    let run = stampede(&["run", unjudged.to_str().unwrap(), "--quiet"]);
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}{}", text(&run.stderr));
    let line = |start: &str| stdout.lines().find(|l| l.trim_start().starts_with(start)).unwrap_or_default().to_string();
    assert!(line("✗ latency.p95 < baseline * 1.10").ends_with(": no baseline run was given"), "{stdout}");
}

/// The threshold examples as users run them: every threshold of the passing one that a busy
/// machine cannot miss holds (its latency limits are the machine's to meet: 1 s and 500 ms),
/// and the exit code follows its verdicts; the failing one misses a latency limit no machine
/// meets (p99 under 20 ms for `/delay/50`) while its other threshold holds (exit 1). The
/// table's ✓/✗ lines and the JSON verdicts agree.
#[test]
fn threshold_examples_exit_0_and_1_with_verdicts_in_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    // (threshold, its verdict where known whatever the machine, else Err(the latency limit in ms))
    let passing: &[(&str, Result<bool, f64>)] = &[
        ("latency{step:slow}.p99 < 1s", Err(1000.0)),
        ("latency{step:home}.p99 < 500ms", Err(500.0)),
        ("errors.rate < 1%", Ok(true)),
        ("checks.rate > 99%", Ok(true)),
        ("requests.count >= 20", Ok(true)),
    ];
    let failing: &[(&str, Result<bool, f64>)] =
        &[("latency{step:slow}.p99 < 20ms", Ok(false)), ("errors.rate < 1%", Ok(true))];
    // The passing one with a fixed count (10 iterations × 2 steps), so that its count holds
    // however few a busy machine would fit in its 2 s.
    for (example, verdicts, iterations) in
        [("examples/thresholds-pass.yaml", passing, Some("10")), ("examples/thresholds-fail.yaml", failing, None)]
    {
        let out = dir.path().join("report.json");
        let mut args = vec!["run", example, "--quiet", "--out", out.to_str().unwrap()];
        args.extend(iterations.map(|n| ["--iterations", n]).into_iter().flatten());
        let run = stampede(&args);
        let stdout = text(&run.stdout);
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_the_exit_code_follows_the_verdicts(&run, &report, example);
        let json = report["thresholds"].as_array().unwrap();
        assert_eq!(json.len(), verdicts.len(), "{example}: {json:?}");
        for ((expression, known), verdict) in verdicts.iter().zip(json) {
            assert_eq!(verdict["threshold"], *expression, "{example}");
            let passed = verdict["passed"].as_bool().unwrap();
            match known {
                Ok(known) => assert_eq!(passed, *known, "{example}: {verdict}"),
                // A latency limit's verdict is what its figure says.
                Err(limit) => assert_eq!(passed, verdict["actual"].as_f64().unwrap() < *limit, "{verdict}"),
            }
            let mark = if passed { "✓" } else { "✗" };
            let line = format!("{mark} {expression}  (actual {})", verdict["actualText"].as_str().unwrap());
            assert!(stdout.lines().any(|l| l.trim() == line), "{example}: no `{line}` line in\n{stdout}");
        }
        let failed = json.iter().filter(|v| v["passed"] == false).count();
        let summary = format!("thresholds: {} passed, {failed} failed", verdicts.len() - failed);
        assert!(stdout.contains(&summary), "{example}: no `{summary}` in\n{stdout}");
        assert_eq!(report["total"]["errors"], 0, "{example}: {stdout}");
        if iterations.is_some() {
            assert_eq!(report["total"]["requests"], 20, "{example}");
        }
    }
    // The failing verdict reports what was measured: no answer from /delay/50 is under 50 ms.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap()).unwrap();
    assert!(report["thresholds"][0]["actual"].as_f64().unwrap() >= 50.0, "{}", report["thresholds"][0]);
}

/// `stampede runner` outside a pod: a missing variable is invalid input (2); without a cluster
/// to talk to, the runner cannot run (3). Neither panics.
#[test]
fn runner_exit_codes_without_its_environment_or_a_cluster() {
    let runner = |vars: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stampede"));
        cmd.arg("runner").env_clear().envs(vars.iter().copied());
        cmd.output().expect("stampede runs")
    };
    let out = runner(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("STAMPEDE_LOADTEST is not set"), "{}", text(&out.stderr));

    let vars = [
        ("STAMPEDE_LOADTEST", "lt"),
        ("STAMPEDE_NAMESPACE", "ns"),
        ("STAMPEDE_RUNNERS", "2"),
        ("JOB_COMPLETION_INDEX", "2"),
    ];
    let out = runner(&vars);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("JOB_COMPLETION_INDEX=2 is not below STAMPEDE_RUNNERS=2"));

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-kubeconfig");
    let mut vars = vars.to_vec();
    vars[3] = ("JOB_COMPLETION_INDEX", "1");
    vars.push(("KUBECONFIG", missing.to_str().unwrap()));
    let out = runner(&vars);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("Kubernetes client"), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("panicked"));
}

#[test]
fn a_duration_override_keeps_an_arrival_rate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("open.json");
    let run =
        stampede(&["run", "examples/open-model.yaml", "--duration", "1s", "--quiet", "--out", out.to_str().unwrap()]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", text(&run.stderr)));
    assert_eq!(report["run"]["executor"], "constant-arrival-rate");
    // 1,000 iterations per second for the overridden 1 s, each started on schedule or dropped.
    let iterations = report["run"]["iterations"].as_u64().unwrap();
    let dropped = report["run"]["schedule"]["droppedIterations"].as_u64().unwrap();
    // Its latency threshold is the machine's to meet, and so is the load (a busy machine drops
    // iterations; more than 1 % of them fails the run, `undeliveredLoad: fail` by default).
    let passed = report["thresholds"].as_array().unwrap().iter().all(|v| v["passed"] == true);
    let delivered = dropped * 100 <= 1000;
    assert_eq!(run.status.code(), Some(if passed && delivered { 0 } else { 1 }), "{}", text(&run.stderr));
    if !delivered {
        assert!(text(&run.stderr).contains("the load asked for was not delivered"), "{}", text(&run.stderr));
    }
    assert_eq!(iterations + dropped, 1000, "{iterations} + {dropped} dropped");
    let schedule = &report["run"]["schedule"];
    assert_eq!((schedule["scheduledIterations"].as_u64(), schedule["targetRate"].as_f64()), (Some(1000), Some(1000.0)));
    assert_eq!(schedule["achievedRate"].as_f64(), Some(iterations as f64));
    // The table says the same above the steps.
    let line =
        format!("schedule: {:.1} iterations/s achieved of 1000.0/s · {dropped} of 1000 dropped", iterations as f64);
    assert!(text(&run.stdout).contains(&line), "`{line}` in {}", text(&run.stdout));
}

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

/// `--html` writes one self-contained file: no script, nothing fetched (no `src`, no `href`, no
/// `url(`), every chart draws one point per interval of the JSON report's timeline, the tables
/// hold the JSON's figures, and `stampede report run.json -o x.html` gives the same bytes.
#[test]
fn the_html_report_is_self_contained_and_its_charts_hold_every_interval() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "name: html <report>\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 2, duration: 3s}\n\
         scenarios:\n  - name: s\n    steps:\n      - {name: ok, request: {url: \"{{baseUrl}}/get\"}, check: {status: 200}, think: 5ms}\n      \
         - {name: broken, request: {url: \"{{baseUrl}}/status/500\"}, check: {status: 200}}\n\
         thresholds:\n  - \"errors{step:ok}.rate == 0%\"\n",
    );
    let (json, html) = run_with_reports(&scenario);
    let page = std::fs::read_to_string(&html).unwrap();
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();

    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    for fetching in ["<script", "src=", "url(", "@import"] {
        assert!(!page.contains(fetching), "the page would load something: {fetching}");
    }
    assert_eq!(page.matches("href=").count(), 1, "only the empty favicon");
    assert!(page.contains("<link rel=\"icon\" href=\"data:,\">"));
    // The scenario's name is escaped, not markup.
    assert!(page.contains("html &lt;report&gt;") && !page.contains("html <report>"));
    let intervals = report["timeline"].as_array().unwrap().len();
    assert!(intervals >= 2, "a 3 s run has several intervals: {intervals}");
    let charts = page.matches("<figure class=\"chart\">").count();
    assert_eq!(charts, 6, "throughput, latency, p99 by step, errors, VUs, distribution");
    assert!(!page.contains("chart empty"), "an empty chart");
    let series = chart_series(&page);
    let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["requests/s", "p50", "p90", "p99", "max", "s / broken", "s / ok", "all", "check", "VUs", "latency"]
    );
    for (name, points) in &series {
        if name.starts_with("s / ") {
            // A step's line has a point where the step had requests: every interval but,
            // perhaps, the last (the run's end may cut it to a few microseconds).
            let with_requests = report["timeline"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| {
                    p["steps"]
                        .as_array()
                        .is_some_and(|s| s.iter().any(|s| format!("s / {}", s["step"].as_str().unwrap()) == *name))
                })
                .count();
            assert_eq!(*points, with_requests, "series {name}");
            assert!(with_requests + 1 >= intervals, "series {name}: {with_requests} of {intervals}");
            continue;
        }
        let expected = if name == "latency" { 7 } else { intervals };
        assert_eq!(*points, expected, "series {name}: one point per interval (the distribution: 7 percentiles)");
    }
    // The tables show the JSON's figures.
    let total = &report["total"];
    assert!(page.contains(&format!("<td class=\"num\">{}</td>", total["requests"])), "total requests");
    assert!(page.contains("s / broken"), "per-step rows");
    assert!(page.contains("status is 200"), "the checks table");
    assert!(page.contains("Passed: 1 of 1 thresholds"), "the verdict");
    assert!(page.contains("Error samples"), "the broken step's samples");

    let again = dir.path().join("again.html");
    let out = stampede(&["report", json.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), page, "the same page from the JSON report");
    let bad = stampede(&["report", scenario.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2), "a file that is not a report is invalid input");
    assert!(text(&bad.stderr).contains("is not a Stampede JSON report"), "{}", text(&bad.stderr));
}

/// `stampede run FILE --out r.json --html r.html` (beside the file), which must exit 0.
fn run_with_reports(scenario: &Path) -> (PathBuf, PathBuf) {
    let (json, html) = (scenario.with_file_name("r.json"), scenario.with_file_name("r.html"));
    let run = stampede(&[
        "run",
        scenario.to_str().unwrap(),
        "--quiet",
        "--out",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(0), "{}{}", text(&run.stdout), text(&run.stderr));
    (json, html)
}

/// Every chart series of an HTML report: (name, points drawn).
fn chart_series(page: &str) -> Vec<(String, usize)> {
    let attr = |tag: &str, name: &str| {
        let start = tag.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        tag[start..start + tag[start..].find('"').unwrap()].to_string()
    };
    page.split("<polyline ")
        .skip(1)
        .map(|tag| (attr(tag, "data-series"), attr(tag, "data-points").parse().unwrap()))
        .collect()
}

/// An open model's HTML report adds the schedule's charts; the dropped iterations it draws per
/// interval add up to the report's total exactly.
#[test]
fn an_open_models_html_report_charts_due_started_dropped_and_lag() {
    let dir = tempfile::tempdir().unwrap();
    // One VU at most, 100 ms per iteration, 50 due per second: most are dropped.
    let scenario = write_scenario(
        dir.path(),
        "name: open\nbaseUrl: builtin\nundeliveredLoad: warn\nload: {executor: constant-arrival-rate, rate: 50, \
         duration: 2s, preAllocatedVUs: 1, maxVUs: 1}\nscenarios:\n  - name: s\n    steps:\n      \
         - {name: slow, request: {url: \"{{baseUrl}}/delay/100\"}}\n",
    );
    let (json, html) = run_with_reports(&scenario);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let timeline = report["timeline"].as_array().unwrap();
    let dropped: u64 = timeline.iter().map(|p| p["dropped"].as_u64().unwrap_or(0)).sum();
    let total = report["run"]["schedule"]["droppedIterations"].as_u64().unwrap();
    assert!(total > 0, "one VU cannot keep 50/s of 100 ms iterations");
    assert_eq!(dropped, total, "the timeline's dropped iterations add up to the total");
    let page = std::fs::read_to_string(&html).unwrap();
    for title in ["Arrival rate", "Waiting and dropped iterations", "Schedule lag"] {
        assert!(page.contains(&format!("aria-label=\"{title}\"")), "no {title} chart");
    }
    let series = chart_series(&page);
    for name in ["due", "started", "dropped"] {
        let (_, points) = series.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name} series"));
        assert_eq!(*points, timeline.len(), "{name}");
    }
    assert!(!page.contains("chart empty"));
}

/// `stampede compare` of two real runs: per step and in total, each figure as the two JSON
/// reports hold it, and the relative change between them.
#[test]
fn compare_prints_each_steps_change_from_the_base_run_to_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |delay: u32| {
        write_scenario(
            dir.path(),
            &format!(
                "name: cmp\nbaseUrl: builtin\nload: {{executor: constant-vus, vus: 2, iterations: 40}}\n\
                 scenarios:\n  - name: s\n    steps:\n      - {{name: slow, request: {{url: \"{{{{baseUrl}}}}/delay/{delay}\"}}}}\n"
            ),
        )
    };
    let (base, new) = (dir.path().join("base.json"), dir.path().join("new.json"));
    for (delay, out) in [(5, &base), (25, &new)] {
        let run = stampede(&["run", scenario(delay).to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
        assert!(run.status.success(), "{}", text(&run.stderr));
    }
    let out = stampede(&["compare", base.to_str().unwrap(), new.to_str().unwrap(), "--details"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let b: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let n: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    // The total's p50 row: both values as the reports hold them, and their relative change.
    let (p50_base, p50_new) =
        (b["total"]["latencyMs"]["p50"].as_f64().unwrap(), n["total"]["latencyMs"]["p50"].as_f64().unwrap());
    let total_block = &table[table.find("\ntotal").expect("a total block")..];
    let row = total_block.lines().find(|l| l.contains("p50 ms")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 4], format!("{p50_base:.3}"), "{row}");
    assert_eq!(cells[cells.len() - 3], format!("{p50_new:.3}"), "{row}");
    assert_eq!(
        cells[cells.len() - 2..].join(" "),
        format!("{:+.1} %", (p50_new - p50_base) / p50_base * 100.0),
        "{row}"
    );
    assert!(p50_new > p50_base, "25 ms against 5 ms of server delay");
    assert!(table.contains("s/slow"), "{table}");
    // The HTML report with the baseline beside the run: the changes, and its lines in the charts.
    let html = dir.path().join("new.html");
    let out = stampede(&[
        "report",
        new.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Compared with the baseline"), "no comparison section");
    assert!(page.contains(&format!("{:+.1} %", (p50_new - p50_base) / p50_base * 100.0)), "the total p50's change");
    let series = chart_series(&page);
    let base_points = b["timeline"].as_array().unwrap().len();
    for name in ["baseline requests/s", "baseline p99"] {
        let (_, points) = series.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name} line"));
        assert_eq!(*points, base_points, "{name}: the baseline's every interval");
    }
    let bad = stampede(&["compare", base.to_str().unwrap(), dir.path().join("missing.json").to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("missing.json"), "{}", text(&bad.stderr));
}

/// #24: `stampede compare` says first whether anything changed beyond run-to-run noise: a run
/// and the same run 3 % slower in every latency figure are within noise (exit 0 even under
/// `--fail-on p50:+10%`), and after the target is slowed from 50 to 150 ms the regression is
/// named first and `--fail-on p50:+10%` exits 1. The full table waits for `--details`. (Two
/// real runs of one scenario are within noise only as often as the machine is even-handed; a
/// busy one is not: the small change is made by hand. A slowdown of 20 ms hid in a busy
/// machine's p99 noise: the gap is wide, and judged at the median, which no tail bridges.)
#[test]
fn compare_gives_a_verdict_within_noise_for_the_same_scenario_and_names_a_slowdown() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |delay: u32| {
        write_scenario(
            dir.path(),
            &format!(
                "name: cmp\nbaseUrl: builtin\nload: {{executor: constant-vus, vus: 20, duration: 3s}}\n\
                 scenarios:\n  - name: s\n    steps:\n      - {{name: get, request: {{url: \"{{{{baseUrl}}}}/delay/{delay}\"}}}}\n"
            ),
        )
    };
    let runs: Vec<PathBuf> = ["a", "b", "slow"].iter().map(|n| dir.path().join(format!("{n}.json"))).collect();
    let run = stampede(&["run", scenario(50).to_str().unwrap(), "--quiet", "--out", runs[0].to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    // The same run, every latency figure of every row 3 % higher: inside any noise band.
    let mut same: Value = serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    let slower = |row: &mut Value| {
        for figure in row["latencyMs"].as_object_mut().unwrap().values_mut() {
            *figure = serde_json::json!(figure.as_f64().unwrap() * 1.03);
        }
    };
    slower(&mut same["total"]);
    same["steps"].as_array_mut().unwrap().iter_mut().for_each(slower);
    std::fs::write(&runs[1], serde_json::to_string(&same).unwrap()).unwrap();
    let run = stampede(&["run", scenario(150).to_str().unwrap(), "--quiet", "--out", runs[2].to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let compare = |base: &Path, new: &Path| {
        stampede(&[
            "compare",
            base.to_str().unwrap(),
            new.to_str().unwrap(),
            "--fail-on",
            "p99:+10%",
            "--fail-on",
            "p50:+10%",
        ])
    };
    let same = compare(&runs[0], &runs[1]);
    let verdict = text(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{verdict}{}", text(&same.stderr));
    let head = verdict.lines().nth(2).unwrap_or_default();
    assert!(head.starts_with("WITHIN NOISE"), "{verdict}");
    assert!(!verdict.contains("worse") && !verdict.contains("better"), "{verdict}");
    assert!(verdict.lines().count() <= 5, "short, the table behind --details:\n{verdict}");

    let slow = compare(&runs[0], &runs[2]);
    let verdict = text(&slow.stdout);
    assert_eq!(slow.status.code(), Some(1), "{verdict}{}", text(&slow.stderr));
    let lines: Vec<&str> = verdict.lines().collect();
    assert!(lines[2].starts_with("WORSE") || lines[2].starts_with("MIXED"), "{verdict}");
    assert!(lines[3].contains("worse") && lines[3].contains("total"), "the regression first:\n{verdict}");
    // The median is named; whether the tail is too depends on how busy the machine was (a
    // loaded one's p99 at 50 ms can pass 150 ms).
    assert!(verdict.contains(" p50 "), "{verdict}");
    assert!(text(&slow.stderr).contains("FAILED: --fail-on p50:+10%: total p50 +"), "{}", text(&slow.stderr));
    let bad = stampede(&["compare", runs[0].to_str().unwrap(), runs[1].to_str().unwrap(), "--fail-on", "p99:10%"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("with + (a rise) or - (a fall)"), "{}", text(&bad.stderr));
}

/// `stampede run --baseline base.json`: relative thresholds are judged against the earlier
/// run's report, and say base, new and ratio; without a baseline they fail, saying why.
#[test]
fn relative_thresholds_are_judged_against_the_baseline_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |thresholds: &str| {
        format!(
            "name: rel\nbaseUrl: builtin\nload: {{executor: constant-vus, vus: 2, iterations: 200}}\nscenarios:\n  \
             - name: s\n    steps:\n      - {{name: get, request: {{url: \"{{{{baseUrl}}}}/get\"}}}}\nthresholds: {thresholds}\n"
        )
    };
    let base_file = write_scenario(dir.path(), &scenario("[]"));
    let base = dir.path().join("base.json");
    let out = stampede(&["run", base_file.to_str().unwrap(), "--quiet", "--out", base.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let file = write_scenario(
        dir.path(),
        &scenario(
            r#"["requests.count >= baseline", "requests.count > baseline * 1.5", "latency.p99 < baseline * 1000"]"#,
        ),
    );
    let new = dir.path().join("new.json");
    let out = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--quiet",
        "--out",
        new.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "one relative threshold fails: {}", text(&out.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    let verdicts = report["thresholds"].as_array().unwrap();
    let passed: Vec<bool> = verdicts.iter().map(|v| v["passed"].as_bool().unwrap()).collect();
    assert_eq!(passed[..2], [true, false], "{verdicts:?}");
    // The latency ratio is the machine's (a stall in one run and not the other); its verdict is
    // what its ratio says.
    let ratio = verdicts[2]["ratio"].as_f64().unwrap();
    assert!(verdicts[2]["baseline"].as_f64().unwrap() > 0.0, "{verdicts:?}");
    assert_eq!(passed[2], ratio < 1000.0, "{verdicts:?}");
    assert_eq!((verdicts[1]["baseline"].as_f64(), verdicts[1]["ratio"].as_f64()), (Some(200.0), Some(1.0)));
    assert!(verdicts[1]["actualText"].as_str().unwrap().contains("baseline 200"), "{verdicts:?}");

    // No baseline given: the relative thresholds fail and say so; never a silent pass.
    let out = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", new.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    for v in report["thresholds"].as_array().unwrap() {
        assert!(!v["passed"].as_bool().unwrap() && v["message"].as_str().unwrap().contains("no baseline"), "{v}");
    }
    // A baseline that cannot be read stops before the run.
    let out = stampede(&["run", file.to_str().unwrap(), "--quiet", "--baseline", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is not a Stampede JSON report"), "{}", text(&out.stderr));
}

/// A JSON report's `trend` (earlier runs of the same test and this one) becomes the HTML
/// report's Trend section: latency and throughput by run, a point per run in each series; a
/// trend of one run has none.
#[test]
fn a_reports_trend_of_runs_is_charted_per_run_in_the_html_report() {
    let dir = tempfile::tempdir().unwrap();
    let run = |label: &str, verdict: &str, rps: f64, p99: f64| {
        serde_json::json!({"label": label, "startedAt": "2026-03-01T03:00:00Z", "verdict": verdict,
            "requests": (rps * 60.0) as u64, "rps": rps, "errorRate": 0.001,
            "p50Ms": p99 / 4.0, "p95Ms": p99 / 2.0, "p99Ms": p99})
    };
    let mut report = serde_json::json!({
        "schemaVersion": 1, "name": "checkout", "startedAt": "2026-03-03T03:00:00Z",
        "run": {"executor": "constant-vus", "durationSeconds": 60.0, "vusMax": 10, "threads": 2,
                "iterations": 0, "interrupted": false, "builtinTarget": false,
                "generator": {"cpuPercent": 0.0, "cpuSeconds": 0.0, "cpuMicrosPerRequest": 0.0, "peakRssBytes": 0}},
        "total": {"requests": 0, "responses": 0, "errors": 0, "errorRate": 0.0, "errorsByKind": {},
                  "statusCodes": {}, "latencyMs": {"mean": 0.0, "min": 0.0, "max": 0.0, "p50": 0.0, "p75": 0.0,
                  "p90": 0.0, "p95": 0.0, "p99": 0.0, "p99.9": 0.0}, "rps": 0.0, "bytesReceived": 0,
                  "bytesSent": 0, "receivedPerSec": 0.0, "sentPerSec": 0.0},
        "steps": [], "scenarios": [], "timeline": [], "checks": [], "errorSamples": [], "thresholds": [],
        "trend": [run("#1", "Passed", 490.0, 40.0), run("#2", "Failed", 310.0, 95.5), run("#3", "Passed", 502.0, 38.0)],
    });
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    std::fs::write(&json, report.to_string()).unwrap();
    let out = stampede(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let trend = &page[page.find("<h2>Trend</h2>").expect("a Trend section")..page.find("<h2>Over time</h2>").unwrap()];
    let series = chart_series(trend);
    assert_eq!(
        series,
        [("p50".to_string(), 3), ("p95".into(), 3), ("p99".into(), 3), ("requests/s".into(), 3)],
        "a point per run"
    );
    assert_eq!(trend.matches("<title>#2: Failed</title>").count(), 2, "the failed run marked in both charts");

    report["trend"].as_array_mut().unwrap().truncate(1);
    std::fs::write(&json, report.to_string()).unwrap();
    let out = stampede(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!std::fs::read_to_string(&html).unwrap().contains("Trend"), "one run is no trend");
}

/// `stampede history` names what it reads as kubectl does; anything else is invalid input,
/// refused before any cluster is asked.
#[test]
fn history_refuses_an_object_it_cannot_read_runs_of() {
    for (args, says) in [
        (&["history", "job/checkout"][..], "expected loadtest/NAME (lt/NAME) or loadtestschedule/NAME (lts/NAME)"),
        (&["history", "lts/nightly", "--html", "x.html"][..], "--html writes a LoadTest's report"),
    ] {
        let out = stampede(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(says), "{args:?}: {}", text(&out.stderr));
    }
}

/// A JSON report of a capacity search becomes the HTML report's Capacity section: the answer,
/// what limited it, the curve (a point per plateau in every series, the failed plateau in red,
/// a line at the capacity) and a row per plateau.
#[test]
fn a_reports_capacity_search_is_answered_and_charted_in_the_html_report() {
    let dir = tempfile::tempdir().unwrap();
    let latency = |p99: f64| {
        serde_json::json!({"mean": p99 / 4.0, "min": 1.0, "max": p99 * 2.0, "p50": p99 / 4.0, "p75": p99 / 3.0,
            "p90": p99 / 2.0, "p95": p99 / 1.5, "p99": p99, "p99.9": p99 * 1.5})
    };
    let plateau = |rate: f64, refine: bool, p99: f64| {
        let passed = p99 < 50.0;
        serde_json::json!({"rate": rate, "achievedRate": rate, "refine": refine, "seconds": 3.0,
            "requests": (rate * 3.0) as u64, "errors": 0, "errorRate": 0.0, "latencyMs": latency(p99),
            "droppedIterations": 0, "lagP99Ms": 0.3, "passed": passed,
            "thresholds": [{"threshold": "latency.p99 < 50ms", "passed": passed, "actual": p99,
                            "actualText": format!("{p99:.1}ms")}]})
    };
    let report = serde_json::json!({
        "schemaVersion": 1, "name": "capacity", "startedAt": "2026-03-03T03:00:00Z",
        "run": {"executor": "capacity", "durationSeconds": 20.0, "vusMax": 400, "threads": 2,
                "iterations": 9000, "interrupted": false, "builtinTarget": true,
                "generator": {"cpuPercent": 0.0, "cpuSeconds": 0.0, "cpuMicrosPerRequest": 0.0, "peakRssBytes": 0}},
        "total": {"requests": 9000, "responses": 9000, "errors": 0, "errorRate": 0.0, "errorsByKind": {},
                  "statusCodes": {}, "latencyMs": latency(30.0), "rps": 450.0, "bytesReceived": 0,
                  "bytesSent": 0, "receivedPerSec": 0.0, "sentPerSec": 0.0},
        "steps": [], "scenarios": [], "timeline": [], "checks": [], "errorSamples": [], "thresholds": [],
        "capacity": {"capacity": 750.0, "lowerBound": false, "limit": "service",
            "limitedBy": "latency.p99 < 50ms failed at 900.0/s (140.0ms)", "stopped": "refined to 750.0/s",
            "p99Ms": 44.0, "errorRate": 0.0,
            "plateaus": [plateau(300.0, false, 9.0), plateau(600.0, false, 20.0), plateau(900.0, false, 140.0),
                         plateau(750.0, true, 44.0), plateau(825.0, true, 80.0)]},
    });
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    std::fs::write(&json, report.to_string()).unwrap();
    let out = stampede(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let start = page.find("<h2>Capacity</h2>").expect("a Capacity section");
    let cap = &page[start..start + page[start..].find("</section>").unwrap()];
    assert!(cap.contains(">750.0 iterations/s</p>"), "{cap}");
    assert!(cap.contains("limited by: latency.p99 &lt; 50ms failed at 900.0/s (140.0ms)"), "{cap}");
    assert!(cap.contains("stopped: refined to 750.0/s"), "{cap}");
    let series = chart_series(cap);
    let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["p50", "p90", "p99", "errors", "target", "achieved"]);
    assert!(series.iter().all(|(_, points)| *points == 5), "a point per plateau: {series:?}");
    assert_eq!(cap.matches("<line class=\"capacity-marker\"").count(), 3, "the capacity in each chart");
    assert_eq!(cap.matches("<circle class=\"failed\"").count(), 6, "900/s failed: a red dot per series");
    assert_eq!(cap.matches("<circle class=\"refine failed\"").count(), 6, "825/s failed while refining");
    assert_eq!(cap.matches("<circle class=\"refine\"").count(), 6, "750/s passed while refining");
    assert_eq!(cap.matches("FAIL: latency.p99 &lt; 50ms").count(), 2, "{cap}");
    assert_eq!(cap.matches("<td class=\"passed\">pass</td>").count(), 3, "{cap}");
    assert!(page.find("<h2>Capacity</h2>").unwrap() < page.find("<h2>Over time</h2>").unwrap());
}

/// #22: an open model whose generator did not deliver the asked load is not a pass, whatever
/// its thresholds say (they judged a lighter load): exit code 1, saying why. It used to exit 0.
/// `undeliveredLoad: warn` judges by the thresholds alone and only warns.
#[test]
fn an_open_model_that_did_not_deliver_its_load_does_not_pass() {
    let dir = tempfile::tempdir().unwrap();
    // One VU, 100 ms per iteration, 50 due per second: at most 10/s can start.
    let yaml = |extra: &str| {
        format!(
            "name: undelivered\nbaseUrl: builtin\n{extra}load: {{executor: constant-arrival-rate, rate: 50, \
             duration: 1s, preAllocatedVUs: 1, maxVUs: 1, maxWaiting: 0}}\nscenarios:\n  - name: s\n    steps:\n      \
             - {{name: slow, request: {{url: \"{{{{baseUrl}}}}/delay/100\"}}}}\nthresholds: [\"errors.rate < 1%\"]\n"
        )
    };
    let out = dir.path().join("r.json");
    let scenario = write_scenario(dir.path(), &yaml(""));
    let run = stampede(&["run", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(report["thresholds"].as_array().unwrap().iter().all(|v| v["passed"] == true), "the thresholds passed");
    let dropped = report["run"]["schedule"]["droppedIterations"].as_u64().unwrap();
    assert!(dropped >= 40, "one VU starts at most ~10 of the 50: {dropped} dropped");
    let line = format!("the load asked for was not delivered ({dropped} of 50 scheduled iterations were dropped");
    assert!(stderr.contains(&line), "{stderr}");

    let scenario = write_scenario(dir.path(), &yaml("undeliveredLoad: warn\n"));
    let run = stampede(&["run", scenario.to_str().unwrap(), "--quiet"]);
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: the load asked for was not delivered"), "{stderr}");
}

/// A stand-in for the API server, for `stampede runner` alone: its result ConfigMap does not
/// exist yet (404), the scenario read never answers (an API server that hangs), and patches of
/// its result are kept. Serves each connection on a thread of its own.
struct HangingApi {
    port: u16,
    patches: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    scenario_asked: std::sync::mpsc::Receiver<()>,
}

fn hanging_api() -> HangingApi {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let patches = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (asked_tx, scenario_asked) = std::sync::mpsc::channel();
    let kept = patches.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (kept, asked_tx) = (kept.clone(), asked_tx.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut out = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0usize;
                    loop {
                        let mut header = String::new();
                        reader.read_line(&mut header).unwrap();
                        if header.trim().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = header.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let (method, path) = {
                        let mut parts = line.split_whitespace();
                        (parts.next().unwrap_or_default().to_string(), parts.next().unwrap_or_default().to_string())
                    };
                    let path = path.split('?').next().unwrap_or_default();
                    let (status, answer) = match (method.as_str(), path) {
                        ("GET", "/api/v1/namespaces/ns/configmaps/lt-scenario") => {
                            let _ = asked_tx.send(());
                            // Never answered: the runner is stuck in its start-up.
                            std::thread::sleep(Duration::from_secs(120));
                            return;
                        }
                        ("PATCH", "/api/v1/namespaces/ns/configmaps/lt-result-0") => {
                            kept.lock().unwrap().push(serde_json::from_slice(&body).unwrap());
                            (
                                "200 OK",
                                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "lt-result-0", "namespace": "ns"}}),
                            )
                        }
                        _ => (
                            "404 Not Found",
                            serde_json::json!({"apiVersion": "v1", "kind": "Status",
                            "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
                        ),
                    };
                    let text = answer.to_string();
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        text.len()
                    );
                    if out.write_all(head.as_bytes()).and_then(|()| out.write_all(text.as_bytes())).is_err() {
                        return;
                    }
                }
            });
        }
    });
    HangingApi { port, patches, scenario_asked }
}

/// #22: SIGTERM during the runner's start-up (here its scenario read hangs) is a Failed report
/// saying so and exit 143. The handler used to be installed only after the start-up, so the
/// signal's default action killed the runner without a report.
#[test]
fn a_sigterm_during_the_runners_start_up_is_a_failed_report_and_exit_143() {
    let api = hanging_api();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"http://127.0.0.1:{}\"}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u, namespace: ns}}}}]\n\
             current-context: x\n",
            api.port
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("runner")
        .env_clear()
        .envs([
            ("STAMPEDE_LOADTEST", "lt"),
            ("STAMPEDE_NAMESPACE", "ns"),
            ("STAMPEDE_RUNNERS", "1"),
            ("JOB_COMPLETION_INDEX", "0"),
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let asked = api.scenario_asked.recv_timeout(Duration::from_secs(60));
    if asked.is_err() {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!("the runner never read its scenario:\n{}", text(&out.stderr));
    }
    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the runner did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = {
        let mut s = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut s).unwrap();
        s
    };
    assert_eq!(status.code(), Some(143), "{status:?}\n{stderr}");
    let patches = api.patches.lock().unwrap();
    let last = patches.last().unwrap_or_else(|| panic!("no report was written:\n{stderr}"));
    let report: Value = serde_json::from_str(last["data"]["result.json"].as_str().unwrap()).unwrap();
    assert_eq!(report["state"], "failed", "{report}");
    let message = report["message"].as_str().unwrap();
    assert!(message.contains("SIGTERM") && message.contains("loading its share"), "{message}");
}

/// #23: the shop example in one command: clean, its group in the table and the JSON; a
/// failing setup is a failed test (exit 1) that says which step failed and sends no load.
#[test]
fn the_shop_example_runs_clean_and_a_failing_setup_fails_the_test_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shop.json");
    let run = stampede(&["run", "examples/shop.yaml", "--iterations", "40", "--quiet", "--out", out.to_str().unwrap()]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", text(&run.stderr)));
    assert_the_exit_code_follows_the_verdicts(&run, &report, "shop");
    assert_eq!(report["total"]["errors"], 0, "{}", report["errorSamples"]);
    assert_eq!(report["groups"][0]["step"], "checkout");
    assert_eq!(report["groups"][0]["requests"], 40);
    let rows: Vec<(String, u64)> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                format!("{}/{}", s["scenario"].as_str().unwrap(), s["step"].as_str().unwrap()),
                s["requests"].as_u64().unwrap(),
            )
        })
        .collect();
    let row = |name: &str| rows.iter().find(|(n, _)| n == name).map(|r| r.1);
    assert_eq!(
        (row("setup/create coupon"), row("shopper/checkout"), row("shopper/order"), row("teardown/clean up")),
        (Some(1), Some(40), Some(40), Some(1))
    );
    assert!(text(&run.stdout).contains("group checkout"), "{}", text(&run.stdout));

    let broken = dir.path().join("broken-setup.yaml");
    let yaml = std::fs::read_to_string(repo_root().join("examples/shop.yaml"))
        .unwrap()
        .replace("/shop/admin/setup", "/shop/admin/no-such-setup");
    std::fs::write(&broken, yaml).unwrap();
    let run = stampede(&["run", broken.to_str().unwrap(), "--iterations", "40", "--quiet"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    let err = text(&run.stderr);
    assert!(err.contains("setup failed, so no load was sent") && err.contains("step `create coupon`"), "{err}");
}

/// Runs `stampede` with `stdin` as its standard input.
fn stampede_with_input(args: &[&str], stdin: &str) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .current_dir(repo_root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("stampede runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// #24: one URL without a file, with the flags people know from oha and hey; the scenario it
/// prints (`--print-scenario`) is the one it runs, run from standard input with the same figures,
/// and `--print-loadtest` is a LoadTest the operator accepts.
#[test]
fn a_url_runs_without_a_file_like_the_scenario_it_prints() {
    let target = stampede_target::TargetServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap();
    let url = format!("{}/anything", target.base_url());
    let dir = tempfile::tempdir().unwrap();
    let (quick_json, file_json) = (dir.path().join("quick.json"), dir.path().join("file.json"));
    let flags = ["-c", "5", "-n", "300", "-m", "PUT", "-H", "X-Test: 1", "-d", "{\"a\":1}"];
    let run = |extra: &[&str]| {
        let mut args = vec!["run", url.as_str()];
        args.extend(flags);
        args.extend(extra);
        stampede(&args)
    };
    let quick = run(&["--quiet", "--out", quick_json.to_str().unwrap()]);
    assert!(quick.status.success(), "{}{}", text(&quick.stdout), text(&quick.stderr));
    assert_eq!(target.stats().requests(), 300, "-n 300 requests");

    // The scenario it prints is exactly what a person would write for it.
    let printed = run(&["--print-scenario"]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let yaml = text(&printed.stdout);
    let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&yaml).unwrap();
    let by_hand: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&format!(
        "name: {}\nload: {{executor: constant-vus, vus: 5, iterations: 300}}\nscenarios:\n  - name: url\n    steps:\n      \
         - name: PUT /anything\n        request: {{method: PUT, url: '{url}', headers: {{X-Test: '1'}}, body: '{{\"a\":1}}'}}\n",
        target.base_url().trim_start_matches("http://")
    ))
    .unwrap();
    assert_eq!(file, by_hand, "{yaml}");
    assert!(!yaml.contains("\nhttp:") && !yaml.contains("weight"), "defaults are left out:\n{yaml}");
    assert!(yaml.starts_with("name: "), "in the order of the file's fields:\n{yaml}");
    // Run from standard input: the same requests, the same report rows.
    let piped = stampede_with_input(&["run", "-", "--quiet", "--out", file_json.to_str().unwrap()], &yaml);
    assert!(piped.status.success(), "{}{}", text(&piped.stdout), text(&piped.stderr));
    assert_eq!(target.stats().requests(), 600);
    let read = |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (a, b) = (read(&quick_json), read(&file_json));
    for r in [&a, &b] {
        assert_eq!((r["total"]["requests"].as_u64(), r["total"]["errors"].as_u64()), (Some(300), Some(0)));
        assert_eq!(r["steps"][0]["step"], "PUT /anything");
        assert_eq!(r["total"]["statusCodes"]["200"], 300, "{r}");
    }
    assert_eq!(a["name"], b["name"]);
    assert_eq!(a["run"]["executor"], b["run"]["executor"]);

    // -q: an open model at that rate; every scheduled iteration is a request or a drop.
    // -q 2000 -z 5s: an open model at that rate, the load a file would say; every scheduled
    // iteration is a request or a drop (a busy machine may not deliver it all: exit 1 then, and
    // saying so).
    let printed = stampede(&["run", &url, "-q", "2000", "-z", "5s", "--print-scenario"]);
    let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&text(&printed.stdout)).unwrap();
    let by_hand: stampede_model::scenario::LoadSpec = serde_yaml::from_str(
        "{executor: constant-arrival-rate, rate: 2000, timeUnit: 1s, duration: 5s, preAllocatedVUs: 50, maxVUs: 50}",
    )
    .unwrap();
    assert_eq!(file.load.as_ref(), Some(&by_hand));
    let open = stampede(&["run", &url, "-q", "2000", "-z", "5s", "--quiet", "--out", quick_json.to_str().unwrap()]);
    let delivered = open.status.success();
    assert!(
        delivered || (open.status.code() == Some(1) && text(&open.stderr).contains("was not delivered")),
        "{}{}",
        text(&open.stdout),
        text(&open.stderr)
    );
    let r = read(&quick_json);
    let schedule = &r["run"]["schedule"];
    assert_eq!(
        (schedule["targetRate"].as_f64(), schedule["scheduledIterations"].as_u64()),
        (Some(2000.0), Some(10_000))
    );
    let sent = r["total"]["requests"].as_u64().unwrap();
    assert_eq!(sent + schedule["droppedIterations"].as_u64().unwrap(), 10_000);
    assert_eq!(target.stats().requests(), 600 + sent);
    assert_eq!(r["total"]["errors"], 0);
    // -c 50 -z 5s: a closed model for that long.
    let timed = stampede(&["run", &url, "-c", "50", "-z", "5s", "--quiet", "--threshold", "errors.rate == 0%"]);
    assert!(timed.status.success(), "{}{}", text(&timed.stdout), text(&timed.stderr));
    assert!(text(&timed.stdout).contains("errors.rate == 0%"), "the threshold is judged:\n{}", text(&timed.stdout));

    // A LoadTest the operator accepts, warned about its loopback URL.
    let lt = stampede(&["run", &url, "-c", "5", "-z", "30s", "--print-loadtest"]);
    let lt_yaml = text(&lt.stdout);
    assert!(lt_yaml.starts_with("# In a pod, 127.0.0.1"), "{lt_yaml}");
    let lt: stampede_api::LoadTest = serde_yaml::from_str(&lt_yaml).unwrap();
    let mut lt = lt;
    lt.metadata.namespace = Some("perf".into());
    let scenario = serde_yaml::to_string(lt.spec.scenario.as_ref().unwrap()).unwrap();
    stampede_operator::validation::validate(&lt, &scenario, "printed").expect("the operator accepts it");

    // Mistakes are exit 2, named.
    for (args, says) in [
        (vec!["run", url.as_str(), "-H", "nocolon"], "-H `nocolon`: expected `Name: value`"),
        (vec!["run", "examples/quickstart.yaml", "-d", "x"], "-d describes the request of a URL run"),
        (vec!["run", "ftp://127.0.0.1/"], "only http:// and https://"),
        (vec!["run", url.as_str(), "--threshold", "latency.p99 <"], "`latency.p99 <`: the limit is missing"),
    ] {
        let out = stampede(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(says), "{args:?}: {}", text(&out.stderr));
    }
    target.stop();
}

/// The JUnit schema `tests/deps.sh` caches (Jenkins' xUnit plugin's, as pytest's source ships it).
pub(crate) fn junit_xsd() -> PathBuf {
    let cache = std::env::var_os("STAMPEDE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/stampede"));
    let xsd = cache.join("junit-xsd/pytest-8.3.4/junit-10.xsd");
    assert!(xsd.exists(), "{} is missing: run `bash tests/deps.sh` (make unit does)", xsd.display());
    xsd
}

/// #24: CI outputs. `--junit` is valid against the JUnit schema Jenkins and GitLab read (checked
/// with xmllint), each threshold and check a test case, failed ones with their reason;
/// `--summary` is Markdown that GitHub's own renderer (cmark-gfm) turns into the tables and the
/// verdict a step summary shows, appended to what the file already holds.
#[test]
fn junit_and_markdown_summary_say_what_passed_and_what_failed_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "name: gate\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 2, iterations: 40}\n\
         scenarios:\n  - name: s\n    steps:\n      - {name: ok, request: {url: \"{{baseUrl}}/\"}, check: {status: 200}}\n      \
         - {name: broken, request: {url: \"{{baseUrl}}/status/500\"}, check: {status: 200}}\n\
         thresholds:\n  - \"latency{step:ok}.p99 < 5s\"\n  - \"errors.rate < 1%\"\n  - \"latency.p95 < baseline * 1.10\"\n",
    );
    let (junit, summary) = (dir.path().join("junit.xml"), dir.path().join("summary.md"));
    std::fs::write(&summary, "## An earlier step's summary\n\n").unwrap();
    let run = stampede(&[
        "run",
        scenario.to_str().unwrap(),
        "--quiet",
        "--junit",
        junit.to_str().unwrap(),
        "--summary",
        summary.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(1), "{}{}", text(&run.stdout), text(&run.stderr));

    let valid = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(junit_xsd())
        .arg(&junit)
        .output()
        .expect("xmllint (libxml2-utils: bash tests/deps.sh)");
    assert!(valid.status.success(), "{}\n{}", text(&valid.stderr), std::fs::read_to_string(&junit).unwrap());
    let xml = std::fs::read_to_string(&junit).unwrap();
    // 3 thresholds + 2 checks + the run; the error rate, the baseline-relative one and the
    // broken step's check failed.
    assert!(xml.contains("<testsuites name=\"gate\" tests=\"6\" failures=\"3\""), "{xml}");
    assert!(xml.contains("name=\"latency{step:ok}.p99 &lt; 5s\" time=\"0\"/>"), "{xml}");
    assert!(xml.contains("<failure type=\"failed\" message=\"actual 50.000%\">"), "{xml}");
    assert!(xml.contains(": not judged: no baseline run was given\">"), "{xml}");
    assert!(xml.contains("name=\"s/broken: status is 200\"") && xml.contains("40 of 40 failed"), "{xml}");

    let markdown = std::fs::read_to_string(&summary).unwrap();
    assert!(markdown.starts_with("## An earlier step's summary"), "appended:\n{markdown}");
    let rendered =
        Command::new("cmark-gfm").args(["-e", "table"]).arg(&summary).output().expect("cmark-gfm (bash tests/deps.sh)");
    let html = text(&rendered.stdout);
    assert!(html.contains("<h3>Stampede: gate</h3>"), "{html}");
    assert!(html.contains("❌ <strong>Failed</strong>: 2 of 3 thresholds"), "{html}");
    assert_eq!(html.matches("<table>").count(), 2, "the steps and the thresholds:\n{html}");
    assert!(html.contains("<td>broken</td>") && html.contains("<td><strong>total</strong></td>"), "{html}");
    assert!(html.contains("<code>errors.rate &lt; 1%</code>"), "{html}");
    assert!(html.contains("<td>not judged: no baseline run was given</td>"), "{html}");
    assert!(html.contains("<li>s/broken: status is 200 — 40 of 40 failed</li>"), "{html}");
}

/// #24: `stampede import curl` of command lines as a browser copies them: a scenario that
/// validates, with each request a step, its secrets as `{{env.NAME}}` (never the recorded
/// values), and what it could not convert listed; run against the built-in target with those
/// variables set, every request answered.
#[test]
fn curl_commands_import_to_a_scenario_that_runs_clean() {
    let target = stampede_target::TargetServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap();
    let port = target.base_url().rsplit(':').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::read_to_string(repo_root().join("crates/stampede/tests/cli/fixtures/curl/shop.sh")).unwrap();
    let input = dir.path().join("shop.sh");
    std::fs::write(&input, fixture.replace("PORT", &port)).unwrap();
    let scenario = dir.path().join("shop.yaml");
    let import = stampede(&["import", "curl", input.to_str().unwrap(), "-o", scenario.to_str().unwrap()]);
    let stderr = text(&import.stderr);
    assert!(import.status.success(), "{stderr}");
    assert!(stderr.contains("option `--retry` is not converted"), "listed, not dropped: {stderr}");
    for var in ["HOST_127_0_0_1_AUTHORIZATION", "HOST_127_0_0_1_X_API_KEY", "HOST_127_0_0_1_PASSWORD"] {
        assert!(stderr.contains(&format!("note: set {var}")), "{stderr}");
    }
    let yaml = std::fs::read_to_string(&scenario).unwrap();
    assert!(!yaml.contains("recorded"), "no recorded secret in the file:\n{yaml}");
    assert!(yaml.contains("# from curl command 1: POST http://127.0.0.1:"), "{yaml}");
    assert!(yaml.contains("anné"), "ANSI-C quoting read as bash does:\n{yaml}");
    assert!(yaml.contains("{{env.HOST_127_0_0_1_PASSWORD}}"), "the body's password from the environment:\n{yaml}");

    let out = dir.path().join("r.json");
    let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .env("HOST_127_0_0_1_AUTHORIZATION", "from-env")
        .env("HOST_127_0_0_1_X_API_KEY", "k-env")
        .env("HOST_127_0_0_1_PASSWORD", "from-env")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", text(&run.stdout), text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!((report["total"]["requests"].as_u64(), report["total"]["errors"].as_u64()), (Some(4), Some(0)));
    let steps: Vec<&str> = report["steps"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["POST /shop/login", "GET /shop/products", "GET /shop/products/3", "PUT /put"]);
    assert_eq!(target.stats().requests(), 4);
    assert_eq!(target.stats().shop().counts().logins, 1);
    target.stop();

    // Nothing usable, or broken shell text: exit 2 naming the input.
    for (text_in, says) in
        [("echo hello\n", "no curl command with an http(s) URL"), ("curl 'http://x/\n", "quote is not closed")]
    {
        let bad = dir.path().join("bad.sh");
        std::fs::write(&bad, text_in).unwrap();
        let out = stampede(&["import", "curl", bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains(says) && text(&out.stderr).contains("bad.sh"), "{}", text(&out.stderr));
    }
}

/// #24: `stampede import postman` of a v2.1 collection (folders, collection variables, bearer
/// auth from a variable, a JSON and a form body, a disabled header, a test script): every request
/// a step in order, secrets from the environment, the script listed as not converted; run against
/// the built-in target, 0 errors.
#[test]
fn a_postman_collection_imports_to_a_scenario_that_runs_clean() {
    let target = stampede_target::TargetServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap();
    let port = target.base_url().rsplit(':').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::read_to_string(
        repo_root().join("crates/stampede/tests/cli/fixtures/postman/shop.postman_collection.json"),
    )
    .unwrap();
    let input = dir.path().join("shop.postman_collection.json");
    std::fs::write(&input, fixture.replace("PORT", &port)).unwrap();
    let scenario = dir.path().join("shop.yaml");
    let import = stampede(&["import", "postman", input.to_str().unwrap(), "-o", scenario.to_str().unwrap()]);
    let stderr = text(&import.stderr);
    assert!(import.status.success(), "{stderr}");
    assert!(stderr.contains("`Account / Log in`: its test script (2 line(s)) is not converted"), "{stderr}");
    for var in ["SHOP_TOKEN", "HOST_127_0_0_1_PASSWORD"] {
        assert!(stderr.contains(&format!("note: set {var}")), "{stderr}");
    }
    let yaml = std::fs::read_to_string(&scenario).unwrap();
    assert!(!yaml.contains("recorded"), "no recorded secret in the file:\n{yaml}");
    assert!(!yaml.contains("X-Debug"), "a disabled header stays out:\n{yaml}");
    let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&yaml).unwrap();
    let steps: Vec<&str> = file.scenarios[0].steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        steps,
        ["Account / Log in", "Catalogue / List products", "Catalogue / One product", "Catalogue / Search (form)"]
    );
    let login = file.scenarios[0].steps[0].request.as_ref().unwrap();
    assert!(!login.headers.contains_key("Authorization"), "the request's noauth wins over the collection's bearer");
    let list = file.scenarios[0].steps[1].request.as_ref().unwrap();
    assert_eq!(list.headers["Authorization"], "Bearer {{shopToken}}");
    assert_eq!(file.vars.len(), 2, "productId and shopToken: {:?}", file.vars);

    let out = dir.path().join("r.json");
    let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .env("SHOP_TOKEN", "t-from-env")
        .env("HOST_127_0_0_1_PASSWORD", "from-env")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", text(&run.stdout), text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!((report["total"]["requests"].as_u64(), report["total"]["errors"].as_u64()), (Some(4), Some(0)));
    assert_eq!((target.stats().requests(), target.stats().shop().counts().logins), (4, 1));
    target.stop();
}

/// #32: every importer turns each credential it meets — headers, query keys, JSON and form body
/// fields, a URL's user-info, curl's `-u`, `--oauth2-bearer` and `-b`, variables — into
/// `{{env.NAME}}`, one variable per host and credential: no recorded value (all `s3cr3t-…` in
/// the fixtures) in the scenario, its comments, stderr or the LoadTest `--print-loadtest`
/// writes, whose `spec.env` takes every variable from a Secret by reference. stderr names the
/// variables; the scenario validates with them set, and the LoadTest as the operator validates it.
#[test]
fn imported_credentials_become_one_environment_variable_per_host_and_never_keep_their_values() {
    let fixtures = repo_root().join("crates/stampede/tests/cli/fixtures/secrets");
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "har",
            "secrets.har",
            &[
                "# recorded 2026-01-01T00:00:01Z: POST https://api.example.com/login?api_key={{env.API_EXAMPLE_COM_API_KEY}}&lang=en → 200",
                "url: https://api.example.com/login?api_key={{env.API_EXAMPLE_COM_API_KEY}}&lang=en",
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                "Authorization: Bearer {{env.OTHER_HOST_AUTHORIZATION}}",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                r#""password":"{{env.API_EXAMPLE_COM_PASSWORD}}""#,
                r#""session_id":"{{env.API_EXAMPLE_COM_SESSION_ID}}""#,
                "url: https://other.host/data?access_token={{env.OTHER_HOST_ACCESS_TOKEN}}",
                "# recorded 2026-01-01T00:00:03Z: POST https://api.example.com/form → 204",
                "Authorization: Basic {{env.API_EXAMPLE_COM_AUTHORIZATION_2}}",
                "body: q=kettle&client_secret={{env.API_EXAMPLE_COM_CLIENT_SECRET}}",
            ],
        ),
        (
            "jmx",
            "secrets.jmx",
            &[
                "url: https://api.example.com/login?api_key={{env.API_EXAMPLE_COM_API_KEY}}",
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                "Authorization: Bearer {{env.OTHER_HOST_AUTHORIZATION}}",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                "X-Api-Key: '{{env.OTHER_HOST_X_API_KEY}}'",
                // The body keeps its layout; the credential's value is replaced where it stands.
                r#""password": "{{env.API_EXAMPLE_COM_PASSWORD}}""#,
                "token: '{{env.OTHER_HOST_TOKEN}}'",
                "adminPassword: '{{env.ADMIN_PASSWORD}}'",
            ],
        ),
        (
            "curl",
            "secrets.sh",
            &[
                "# from curl command 1: POST https://api.example.com/v1/login?api_key={{env.API_EXAMPLE_COM_API_KEY}}&q=1",
                "Authorization: Basic {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                r#""password":"{{env.API_EXAMPLE_COM_PASSWORD}}""#,
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION_2}}",
                "Cookie: '{{env.API_EXAMPLE_COM_COOKIE}}'",
                "Authorization: Bearer {{env.OTHER_HOST_AUTHORIZATION}}",
                "Authorization: Basic {{env.OTHER_HOST_AUTHORIZATION_2}}",
                "url: https://other.host/y?token={{env.OTHER_HOST_TOKEN}}&page=2",
            ],
        ),
        (
            "postman",
            "secrets.postman_collection.json",
            &[
                "url: '{{baseUrl}}/items?api_key={{env.API_EXAMPLE_COM_API_KEY}}&sig={{env.API_EXAMPLE_COM_SIG}}&page=1'",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                "Authorization: Bearer {{env.OTHER_HOST_AUTHORIZATION}}",
                // The body keeps its layout; the credential's value is replaced where it stands.
                r#"{"user": "ann", "password": "{{env.OTHER_HOST_PASSWORD}}"}"#,
                "client_secret: '{{env.OTHER_HOST_CLIENT_SECRET}}'",
                "key: '{{env.OTHER_HOST_KEY}}'",
                "apiSecret: '{{env.API_SECRET}}'",
            ],
        ),
        (
            "openapi",
            "secrets.openapi.yaml",
            &[
                "api_key: '{{env.API_EXAMPLE_COM_API_KEY}}'",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                r#""password":"{{env.API_EXAMPLE_COM_PASSWORD}}""#,
                r#""session":{"token":"{{env.API_EXAMPLE_COM_TOKEN}}"}"#,
            ],
        ),
    ];
    for (format, fixture, wanted) in cases {
        let input = fixtures.join(fixture);
        assert!(std::fs::read_to_string(&input).unwrap().contains("s3cr3t-"), "{fixture} holds the secrets");
        let import = stampede(&["import", format, input.to_str().unwrap()]);
        let (yaml, stderr) = (text(&import.stdout), text(&import.stderr));
        assert!(import.status.success(), "{format}: {stderr}");
        assert!(
            !yaml.contains("s3cr3t") && !stderr.contains("s3cr3t"),
            "{format}: a recorded secret:\n{yaml}\n{stderr}"
        );
        for w in wanted {
            assert!(yaml.contains(w), "{format}: `{w}` in\n{yaml}");
        }
        // stderr names every variable the file reads (and nothing else), each a valid name.
        let notes: std::collections::BTreeSet<String> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("note: set ")?.split(' ').next().map(str::to_string))
            .collect();
        let used: std::collections::BTreeSet<String> = yaml
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .flat_map(|l| l.split("{{env.").skip(1).map(|r| r.split("}}").next().unwrap().to_string()))
            .collect();
        assert_eq!(notes, used, "{format}: {stderr}");
        assert!(
            used.iter().all(|v| v.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && !v.starts_with(|c: char| c.is_ascii_digit())),
            "{format}: {used:?}"
        );
        if format != "openapi" {
            assert!(
                used.contains("API_EXAMPLE_COM_AUTHORIZATION") && used.contains("OTHER_HOST_AUTHORIZATION"),
                "{format}: two hosts' bearers, two variables: {used:?}"
            );
        }
        if format == "curl" {
            assert!(stderr.contains("option `--proxy-user` is not converted"), "{stderr}");
            assert!(!stderr.contains("a second URL"), "--oauth2-bearer and --proxy-user take their values: {stderr}");
        }

        // It validates with its variables set (and only then: they are what it needs).
        let file = dir.path().join(format!("{format}.yaml"));
        std::fs::write(&file, &yaml).unwrap();
        let validate = |env: &[(&str, &str)]| {
            Command::new(env!("CARGO_BIN_EXE_stampede"))
                .args(["validate", file.to_str().unwrap()])
                .envs(env.iter().copied())
                .output()
                .unwrap()
        };
        let set: Vec<(&str, &str)> = used.iter().map(|v| (v.as_str(), "x")).collect();
        let valid = validate(&set);
        assert!(valid.status.success(), "{format}: {}", text(&valid.stderr));
        let unset = validate(&[]);
        assert_eq!(unset.status.code(), Some(2), "{format}: {}", text(&unset.stdout));
        assert!(text(&unset.stderr).contains("is not set"), "{format}: {}", text(&unset.stderr));

        // --print-loadtest: every variable from the Secret by reference, no value inline.
        let printed = stampede(&["import", format, input.to_str().unwrap(), "--print-loadtest"]);
        let lt_yaml = text(&printed.stdout);
        assert!(printed.status.success(), "{format}: {}", text(&printed.stderr));
        assert!(!lt_yaml.contains("s3cr3t"), "{format}:\n{lt_yaml}");
        let lt: stampede_api::LoadTest = serde_yaml::from_str(&lt_yaml).unwrap();
        let secret = format!("{}-secrets", lt.metadata.name.as_deref().unwrap());
        assert!(lt_yaml.contains(&format!("kubectl create secret generic {secret} ")), "{lt_yaml}");
        let from_secret: std::collections::BTreeSet<String> = lt
            .spec
            .env
            .iter()
            .map(|e| {
                assert_eq!(e.value, None, "{format}: {} inline", e.name);
                let r = e.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()).expect("a secretKeyRef");
                assert_eq!((r.name.as_str(), r.key.as_str()), (secret.as_str(), e.name.as_str()));
                e.name.clone()
            })
            .collect();
        assert_eq!(from_secret, used, "{format}");
        let scenario = serde_yaml::to_string(lt.spec.scenario.as_ref().unwrap()).unwrap();
        stampede_operator::validation::validate(&lt, &scenario, "printed")
            .unwrap_or_else(|e| panic!("{format}: the operator refuses it: {e:?}"));
    }
}

/// A GET of `path` from `addr` with HTTP/1.1 (`Connection: close`): the body.
fn http_body(addr: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// #24: `stampede import openapi`: the built-in target's own description (served by it) imports
/// to a scenario that runs against it with 0 errors, one request per operation; the Swagger
/// Petstore 3 description (a fixture) imports to one that validates; a broken `$ref` is a
/// warning naming it.
#[test]
fn openapi_descriptions_import_to_scenarios_that_validate_and_run_clean() {
    let target = stampede_target::TargetServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap();
    let addr = target.base_url().trim_start_matches("http://").to_string();
    let dir = tempfile::tempdir().unwrap();
    let described = dir.path().join("target.openapi.yaml");
    let text_in = http_body(&addr, "/openapi.yaml");
    assert!(text_in.contains(&format!("url: http://{addr}")), "the server's own address");
    std::fs::write(&described, &text_in).unwrap();
    let operations = |doc: &str| -> usize {
        let v: serde_yaml::Value = serde_yaml::from_str(doc).unwrap();
        v["paths"].as_mapping().unwrap().values().map(|p| p.as_mapping().unwrap().len()).sum()
    };
    let scenario = dir.path().join("target.yaml");
    let import = stampede(&["import", "openapi", described.to_str().unwrap(), "-o", scenario.to_str().unwrap()]);
    assert!(import.status.success(), "{}", text(&import.stderr));
    let out = dir.path().join("r.json");
    assert!(text(&import.stderr).contains("note: set HOST_127_0_0_1_PASSWORD"), "the login's password example");
    let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .env("HOST_127_0_0_1_PASSWORD", "pw")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", text(&run.stdout), text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let n = operations(&text_in) as u64;
    assert_eq!((report["total"]["requests"].as_u64(), report["total"]["errors"].as_u64()), (Some(n), Some(0)));
    assert_eq!(target.stats().requests(), n + 1, "one request per operation, and the description's");
    assert_eq!(target.stats().shop().counts().logins, 1);
    target.stop();

    // The Petstore: every operation a step; it validates with its secrets' variables set.
    let petstore = repo_root().join("crates/stampede/tests/cli/fixtures/openapi/petstore3.yaml");
    let pet_yaml = dir.path().join("petstore.yaml");
    let import = stampede(&["import", "openapi", petstore.to_str().unwrap(), "-o", pet_yaml.to_str().unwrap()]);
    let stderr = text(&import.stderr);
    assert!(import.status.success(), "{stderr}");
    let vars = ["PETSTORE3_SWAGGER_IO_AUTHORIZATION", "PETSTORE3_SWAGGER_IO_API_KEY", "PETSTORE3_SWAGGER_IO_PASSWORD"];
    for var in vars {
        assert!(stderr.contains(&format!("note: set {var} ")), "{stderr}");
    }
    let file: stampede_model::scenario::ScenarioFile =
        serde_yaml::from_str(&std::fs::read_to_string(&pet_yaml).unwrap()).unwrap();
    let fixture = std::fs::read_to_string(&petstore).unwrap();
    assert_eq!(file.scenarios[0].steps.len(), operations(&fixture));
    assert_eq!(file.base_url.as_deref(), Some("https://petstore3.swagger.io/api/v3"));
    let add_pet = file.scenarios[0].steps.iter().find(|s| s.name == "addPet").unwrap().request.as_ref().unwrap();
    assert_eq!(add_pet.json.as_ref().unwrap()["name"], "doggie", "the schema's example");
    let valid = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["validate", pet_yaml.to_str().unwrap()])
        .envs(vars.map(|v| (v, "x")))
        .output()
        .unwrap();
    assert!(valid.status.success(), "{}", text(&valid.stderr));

    // A broken `$ref`: a warning naming it, the rest imported.
    let broken = dir.path().join("broken.yaml");
    let broken_doc = "openapi: 3.0.3\ninfo: {title: b, version: '1'}\nservers: [{url: 'http://127.0.0.1:9'}]\npaths:\n  /a:\n    post:\n      requestBody: {content: {application/json: {schema: {$ref: '#/components/schemas/Gone'}}}}\n      responses: {'204': {description: ok}}\n  /b:\n    get:\n      responses: {'200': {description: ok}}\n";
    std::fs::write(&broken, broken_doc).unwrap();
    let import = stampede(&["import", "openapi", broken.to_str().unwrap()]);
    assert!(import.status.success(), "{}", text(&import.stderr));
    assert!(
        text(&import.stderr).contains("`$ref: #/components/schemas/Gone` leads nowhere"),
        "{}",
        text(&import.stderr)
    );
    assert_eq!(text(&import.stdout).matches("      - name: ").count(), 2);
    // Not a description at all: exit 2 naming the file.
    std::fs::write(&broken, "swagger: '1.2'\n").unwrap();
    let import = stampede(&["import", "openapi", broken.to_str().unwrap()]);
    assert_eq!(import.status.code(), Some(2));
    assert!(
        text(&import.stderr).contains("broken.yaml: `swagger: 1.2` is not Swagger 2.0"),
        "{}",
        text(&import.stderr)
    );
}
