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

pub(crate) fn repo_root() -> PathBuf {
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
