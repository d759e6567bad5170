//! Runs against real servers on loopback: the built-in target and small raw TCP servers.
//! Every run here is bounded in iterations or time.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use stampede_engine::{CompileOptions, Plan, compile};
use stampede_engine::{RunOptions, Tick};
use stampede_model::ErrorKind;
use stampede_target::TargetServer;

fn plan(yaml: &str, base_url: &str) -> Arc<Plan> {
    let file = stampede_engine::parse_str(yaml, Path::new("test.yaml")).unwrap();
    let opts = CompileOptions { base_url: Some(base_url.to_string()), ..CompileOptions::default() };
    Arc::new(compile(&file, &opts).unwrap_or_else(|p| panic!("{p:?}")))
}

fn target() -> TargetServer {
    TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap()
}

fn opts(threads: usize) -> RunOptions {
    RunOptions { threads, ..RunOptions::default() }
}

fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn an_iteration_bounded_run_sends_exactly_the_expected_requests() {
    let server = target();
    let plan = plan(
        r#"
name: exact
load: {executor: constant-vus, vus: 7, iterations: 333}
scenarios:
  - name: flow
    steps:
      - {name: page, request: {url: "{{baseUrl}}/"}}
      - {name: echo, request: {url: "{{baseUrl}}/get", query: {n: "1"}}}
      - {name: post, request: {method: POST, url: "{{baseUrl}}/post", json: {a: 1}}}
"#,
        &server.base_url(),
    );
    let outcome = stampede_engine::run(plan, &opts(2), &mut |_| {}).unwrap();
    let served = server.stats().requests();
    server.stop();
    assert_eq!(served, 999, "the server counted {served} requests");
    assert_eq!(outcome.metrics.iterations.iter().sum::<u64>(), 333);
    let sent: u64 = outcome.metrics.steps.iter().map(|s| s.requests).sum();
    assert_eq!(sent, 999);
    assert_eq!(outcome.metrics.steps.iter().map(|s| s.error_total()).sum::<u64>(), 0);
    assert_eq!(outcome.threads, 2);
}

#[test]
fn ramping_vus_follow_the_stages() {
    let server = target();
    let plan = plan(
        r#"
name: ramp
load:
  executor: ramping-vus
  startVus: 0
  stages:
    - {duration: 2s, target: 8}
    - {duration: 1500ms, target: 8}
    - {duration: 1500ms, target: 2}
  gracefulRampDown: 1s
scenarios:
  - name: s
    steps:
      - {name: a, request: {url: "{{baseUrl}}/"}, think: 20ms}
"#,
        &server.base_url(),
    );
    let stages = [(Duration::from_secs(2), 8), (Duration::from_millis(1500), 8), (Duration::from_millis(1500), 2)];
    let mut samples: Vec<(Duration, u32)> = Vec::new();
    let run_opts = RunOptions { tick: Duration::from_millis(250), ..opts(2) };
    let outcome =
        stampede_engine::run(plan, &run_opts, &mut |t: &Tick| samples.push((t.elapsed, t.active_vus))).unwrap();
    server.stop();
    // The shape of the ramp, from the order of the samples (not their timing, which a busy
    // machine stretches): up through the middle values to 8, never above, then down through
    // the middle values again; and the run lasts at least its stages.
    let counts: Vec<u32> = samples.iter().map(|s| s.1).collect();
    let top = stages.iter().map(|s| s.1).max().unwrap();
    assert_eq!(counts.iter().copied().max(), Some(top), "{samples:?}");
    let first_top = counts.iter().position(|&a| a == top).unwrap();
    let last_top = counts.iter().rposition(|&a| a == top).unwrap();
    assert!(counts[..first_top].windows(2).all(|w| w[0] <= w[1]), "rising: {samples:?}");
    assert!(counts[last_top..].windows(2).all(|w| w[0] >= w[1]), "falling: {samples:?}");
    assert!(counts[..first_top].iter().any(|&a| a > 0 && a < top), "the ramp up passes the middle: {samples:?}");
    assert!(counts[last_top..].iter().any(|&a| a > 2 && a < top), "the ramp down passes the middle: {samples:?}");
    assert!(outcome.duration >= Duration::from_secs(5), "took {:?}", outcome.duration);
}

#[test]
fn a_closed_port_gives_connect_errors_not_a_crash() {
    let port = closed_port();
    let plan = plan(
        r#"
name: refused
load: {executor: constant-vus, vus: 3, iterations: 30}
scenarios:
  - name: s
    steps:
      - {name: a, request: {url: "{{baseUrl}}/"}}
"#,
        &format!("http://127.0.0.1:{port}"),
    );
    let outcome = stampede_engine::run(plan, &opts(1), &mut |_| {}).unwrap();
    let s = &outcome.metrics.steps[0];
    assert_eq!(s.requests, 30);
    assert_eq!(s.errors[ErrorKind::Connect.index()], 30);
    assert_eq!(s.latency.len(), 0);
    assert!(outcome.error_samples.iter().any(|e| e.kind == ErrorKind::Connect && e.message.contains("refused")));
}

#[test]
fn slow_answers_time_out_and_the_run_still_ends_on_time() {
    let server = target();
    let plan = plan(
        r#"
name: slow
load: {executor: constant-vus, vus: 4, duration: 2s, gracefulStop: 5s}
http: {timeout: 500ms}
scenarios:
  - name: s
    steps:
      - {name: slow, request: {url: "{{baseUrl}}/delay/2000"}}
"#,
        &server.base_url(),
    );
    let outcome = stampede_engine::run(plan, &opts(2), &mut |_| {}).unwrap();
    server.stop();
    let s = &outcome.metrics.steps[0];
    // Every request timed out, none was answered; each VU sent at least one and at most one
    // per timeout of the run (4 VUs × 2 s / 0.5 s, plus the one in flight at the end).
    assert_eq!(s.errors[ErrorKind::Timeout.index()], s.requests);
    assert_eq!(s.latency.len(), 0);
    assert!((4..=20).contains(&s.requests), "{} requests", s.requests);
}

/// A VU keeps one timer for its requests' timeouts: a later deadline set for an earlier request
/// must not delay a shorter one, and a timer set for an earlier request that fires during a
/// later one must be set again, not time that one out early or never.
#[test]
fn each_request_times_out_at_its_own_deadline_whatever_the_requests_before_it() {
    let server = target();
    // 2 s: the `fast` answers are well within it even on a busy machine, and no `slow` one is.
    for (name, first_timeout) in [("longer", "1h"), ("same", "2s")] {
        let plan = plan(
            &format!(
                r#"
name: {name}
load: {{executor: constant-vus, vus: 1, iterations: 3}}
http: {{timeout: 2s}}
scenarios:
  - name: s
    steps:
      - {{name: fast, request: {{url: "{{{{baseUrl}}}}/get", timeout: {first_timeout}}}}}
      - {{name: slow, request: {{url: "{{{{baseUrl}}}}/delay/5000"}}}}
"#
            ),
            &server.base_url(),
        );
        let outcome = stampede_engine::run(plan, &opts(1), &mut |_| {}).unwrap();
        let [fast, slow] = &outcome.metrics.steps[..] else { panic!() };
        // The answers of `slow` take 5 s: each of its 3 requests timed out after 2 s, none
        // was answered, and every `fast` one was.
        assert_eq!((fast.requests, fast.error_total(), fast.latency.len()), (3, 0, 3), "{name}");
        assert_eq!((slow.requests, slow.errors[ErrorKind::Timeout.index()], slow.latency.len()), (3, 3, 0), "{name}");
        assert!(outcome.error_samples.iter().any(|e| e.message.contains("within 2s")), "{name}");
    }
    server.stop();
}

#[test]
fn a_run_past_its_duration_cuts_off_iterations_after_the_graceful_stop() {
    let server = target();
    let plan = plan(
        r#"
name: grace
load: {executor: constant-vus, vus: 2, duration: 500ms, gracefulStop: 300ms}
http: {timeout: 10s}
scenarios:
  - name: s
    steps:
      - {name: slow, request: {url: "{{baseUrl}}/delay/5000"}}
"#,
        &server.base_url(),
    );
    let outcome = stampede_engine::run(plan, &opts(1), &mut |_| {}).unwrap();
    server.stop();
    // The answers take 5 s; had the run waited for them, both iterations would have completed.
    assert_eq!(outcome.metrics.iterations[0], 0, "cut-off iterations do not count as completed");
}

/// A raw HTTP/1.1 server that, on every connection, answers `per_conn` requests, then reads
/// one more request whole and closes the connection without answering it, as a server that
/// drops keep-alive connections under overload does (and without `connection: close`
/// before). It records every request's line (`POST /b`) as it reads it, and counts the
/// requests it answered.
fn dropping_server(per_conn: usize) -> (u16, Arc<std::sync::Mutex<Vec<String>>>, Arc<AtomicU64>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let answered = Arc::new(AtomicU64::new(0));
    let (log, counter) = (seen.clone(), answered.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (log, counter) = (log.clone(), counter.clone());
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                for n in 0..=per_conn {
                    // The request line, the headers (for content-length) and the body.
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = h.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    log.lock().unwrap().push(line.split_whitespace().take(2).collect::<Vec<_>>().join(" "));
                    if n == per_conn {
                        return; // closes the connection, the request read and unanswered
                    }
                    counter.fetch_add(1, Ordering::Relaxed);
                    if writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, seen, answered)
}

#[test]
fn a_post_the_server_drops_unanswered_reaches_it_once_and_is_an_error() {
    // The GET is answered; the POST, on the same (reused) connection, is read whole and the
    // connection closed: it may have been acted on, so it must not be sent again.
    let (port, seen, answered) = dropping_server(1);
    let plan = plan(
        r#"
name: dropped-post
load: {executor: constant-vus, vus: 1, iterations: 1}
scenarios:
  - name: s
    steps:
      - {name: first, request: {url: "{{baseUrl}}/a"}}
      - {name: post, request: {method: POST, url: "{{baseUrl}}/b", json: {a: 1}}}
"#,
        &format!("http://127.0.0.1:{port}"),
    );
    let outcome = stampede_engine::run(plan, &opts(1), &mut |_| {}).unwrap();
    assert_eq!(*seen.lock().unwrap(), ["GET /a", "POST /b"], "the POST reached the server once");
    assert_eq!(answered.load(Ordering::Relaxed), 1);
    let (first, post) = (&outcome.metrics.steps[0], &outcome.metrics.steps[1]);
    assert_eq!((first.requests, first.error_total()), (1, 0));
    assert_eq!((post.requests, post.error_total()), (1, 1), "errors: {:?}", outcome.error_samples);
    assert_eq!(post.errors[ErrorKind::Reset.index()], 1);
}

#[test]
fn a_vu_reconnects_after_the_server_drops_its_connection_and_counts_the_lost_request() {
    let (port, seen, answered) = dropping_server(3);
    let plan = plan(
        r#"
name: reconnect
load: {executor: constant-vus, vus: 2, iterations: 40}
scenarios:
  - name: s
    steps:
      - {name: a, request: {url: "{{baseUrl}}/"}}
"#,
        &format!("http://127.0.0.1:{port}"),
    );
    let outcome = stampede_engine::run(plan, &opts(1), &mut |_| {}).unwrap();
    let s = &outcome.metrics.steps[0];
    let answered = answered.load(Ordering::Relaxed);
    assert_eq!(s.requests, 40);
    // Every request reached the server once: answered, or read and dropped, which is an error.
    assert_eq!(seen.lock().unwrap().len(), 40, "no request was sent twice");
    assert_eq!(s.error_total(), 40 - answered, "errors: {:?} {:?}", s.errors, outcome.error_samples);
    assert_eq!(s.errors[ErrorKind::Reset.index()], 40 - answered);
    // Each connection carries 3 answers and a dropped request, and the VUs reconnect after it.
    assert!(answered >= 30, "answered {answered}");
}

#[test]
fn a_builtin_scenario_runs_end_to_end_and_reports_consistent_totals() {
    let yaml = r#"
name: builtin
baseUrl: builtin
load: {executor: constant-vus, vus: 3, iterations: 60}
scenarios:
  - name: a
    weight: 3
    steps:
      - {name: page, request: {url: "{{baseUrl}}/"}, check: {status: 200}}
  - name: b
    steps:
      - {name: missing, request: {url: "{{baseUrl}}/status/404"}, check: {status: 404}}
      - {name: wrong, request: {url: "{{baseUrl}}/status/503"}}
"#;
    let file = stampede_engine::parse_str(yaml, Path::new("builtin.yaml")).unwrap();
    let prepared = stampede_engine::prepare(&file, Path::new("builtin.yaml"), CompileOptions::default()).unwrap();
    assert!(prepared.target.is_some());
    let report = stampede_engine::execute(prepared, &opts(2), &mut |_| {}).unwrap();
    assert_eq!(report.run.iterations, 60);
    let a = report.scenarios.iter().find(|s| s.name == "a").unwrap().iterations;
    let b = report.scenarios.iter().find(|s| s.name == "b").unwrap().iterations;
    assert_eq!(a + b, 60);
    assert!(a > b, "weights 3:1 gave {a}:{b}");
    // 503 fails the default check (status < 400); 404 passes its explicit check.
    let wrong = report.steps.iter().find(|s| s.step.as_deref() == Some("wrong")).unwrap();
    assert_eq!(wrong.errors, b);
    assert_eq!(wrong.errors_by_kind.get("check"), Some(&b));
    assert_eq!(wrong.status_codes.get("503"), Some(&b));
    let missing = report.steps.iter().find(|s| s.step.as_deref() == Some("missing")).unwrap();
    assert_eq!(missing.errors, 0);
    assert_eq!(report.total.requests, a + 2 * b);
    assert_eq!(report.total.errors, b);
    assert!(report.run.builtin_target);
    assert!(report.run.generator.peak_rss_bytes > 0);
}

/// A raw HTTP/1.1 server that answers `200 ok` and records every request target.
fn recording_server() -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let addr = crate::common::raw_http_server(move |target| log.lock().unwrap().push(target.to_string()));
    (addr.port(), seen)
}

#[test]
fn unique_data_rows_are_each_used_once_across_vus_and_the_run_stops_when_they_run_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("email,city\n");
    for i in 0..250 {
        csv.push_str(&format!("user{i}@example.test,\"City, {i}\"\n"));
    }
    std::fs::write(dir.path().join("users.csv"), csv).unwrap();
    let (port, seen) = recording_server();
    let yaml = format!(
        r#"
name: data
baseUrl: http://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 4, duration: 30s}}
data:
  users: {{csv: users.csv, mode: unique}}
scenarios:
  - name: s
    steps:
      - {{name: a, request: {{url: "{{{{baseUrl}}}}/u", query: {{email: "{{{{users.email}}}}", city: "{{{{users.city}}}}"}}}}}}
"#
    );
    let path = dir.path().join("scenario.yaml");
    std::fs::write(&path, &yaml).unwrap();
    let file = stampede_engine::parse_str(&yaml, &path).unwrap();
    let prepared = stampede_engine::prepare(&file, &path, CompileOptions::default()).unwrap();
    let report = stampede_engine::execute(prepared, &opts(2), &mut |_| {}).unwrap();
    assert!(report.run.duration_seconds < 30.0, "the run ended when the rows ran out, before its 30 s");
    assert_eq!(report.total.requests, 250);
    let mut targets = seen.lock().unwrap().clone();
    assert_eq!(targets.len(), 250);
    targets.sort();
    targets.dedup();
    assert_eq!(targets.len(), 250, "no row was used twice");
    assert!(
        targets.contains(&"/u?email=user7%40example.test&city=City%2C+7".to_string())
            || targets.contains(&"/u?city=City%2C+7&email=user7%40example.test".to_string()),
        "{:?}",
        &targets[..3]
    );
}

#[test]
fn values_extracted_from_one_response_feed_the_next_requests_of_the_same_vu() {
    let (port, seen) = recording_server();
    let server = target();
    // Step 1 and 2 go to the built-in target (JSON echo); step 3 to the recording server, so
    // the test sees exactly what was sent after two extractions.
    let yaml = format!(
        r#"
name: flow
load: {{executor: constant-vus, vus: 3, iterations: 30}}
scenarios:
  - name: s
    steps:
      - name: who
        request: {{url: "{}/get?user={{{{vu_marker}}}}", headers: {{authorization: "bearer jwt"}}}}
        extract:
          auth: {{json: "headers.Authorization"}}
          code: {{status: true}}
      - name: post
        request: {{method: POST, url: "{}/post", json: {{test: "{{{{auth}}}}"}}}}
        extract:
          echoed: {{json: "$.json.test"}}
          host: {{regex: '"Host": "([^"]+)"'}}
      - name: use
        request: {{url: "http://127.0.0.1:{port}/use", query: {{v: "{{{{echoed}}}}", code: "{{{{code}}}}", host: "{{{{host}}}}"}}}}
      - name: missing
        request: {{url: "{}/get"}}
        extract:
          nope: {{json: "$.no.such.field"}}
vars: {{vu_marker: x}}
"#,
        server.base_url(),
        server.base_url(),
        server.base_url()
    );
    let file = stampede_engine::parse_str(&yaml, Path::new("flow.yaml")).unwrap();
    let plan = compile(&file, &CompileOptions::default()).unwrap_or_else(|p| panic!("{p:?}"));
    let outcome = stampede_engine::run(Arc::new(plan), &opts(2), &mut |_| {}).unwrap();
    server.stop();
    let targets = seen.lock().unwrap().clone();
    assert_eq!(targets.len(), 30);
    let host = format!("127.0.0.1%3A{}", server_port_of(&yaml));
    for t in &targets {
        assert_eq!(t, &format!("/use?code=200&host={host}&v=bearer+jwt"), "what the third step sent");
    }
    let missing = &outcome.metrics.steps[3];
    assert_eq!(missing.errors[ErrorKind::Extract.index()], 30);
    assert!(outcome.error_samples.iter().any(|e| e.kind == ErrorKind::Extract && e.message.contains("no.such.field")));
    let ok: u64 = outcome.metrics.steps[..3].iter().map(|s| s.error_total()).sum();
    assert_eq!(ok, 0);
}

/// The built-in target's port, as written into the test scenario.
fn server_port_of(yaml: &str) -> String {
    let start = yaml.find("http://127.0.0.1:").unwrap() + "http://127.0.0.1:".len();
    yaml[start..].chars().take_while(char::is_ascii_digit).collect()
}

/// #32: runner `r` of 4, seed 7: the random data rows its VUs draw, in order (one VU each).
fn rows_of_runner(runner: u32, dir: &Path) -> Vec<String> {
    let (port, seen) = recording_server();
    let yaml = format!(
        r#"
name: fleet
baseUrl: http://127.0.0.1:{port}
load: {{executor: constant-vus, vus: 1, iterations: 12}}
data:
  users: {{csv: users.csv, mode: random}}
scenarios:
  - name: s
    steps:
      - {{name: a, request: {{url: "{{{{baseUrl}}}}/{{{{ vu.id }}}}/{{{{ users.name }}}}"}}}}
"#
    );
    let path = dir.join("fleet.yaml");
    std::fs::write(&path, &yaml).unwrap();
    let file = stampede_engine::parse_str(&yaml, &path).unwrap();
    let opts_of = CompileOptions {
        base_dir: Some(dir.to_path_buf()),
        seed: Some(7),
        runner: Some((runner, 4)),
        ..CompileOptions::default()
    };
    let plan = compile(&file, &opts_of).unwrap_or_else(|p| panic!("{p:?}"));
    stampede_engine::run(Arc::new(plan), &opts(1), &mut |_| {}).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 12);
    // Runner r's one VU is VU r + 1 of the test.
    assert!(seen.iter().all(|t| t.starts_with(&format!("/{}/", runner + 1))), "{seen:?}");
    seen
}

#[test]
fn each_runners_vus_draw_their_own_rows_and_a_seed_repeats_them_on_every_runner() {
    let dir = tempfile::tempdir().unwrap();
    let csv: String = std::iter::once("name\n".to_string()).chain((0..50).map(|i| format!("row{i}\n"))).collect();
    std::fs::write(dir.path().join("users.csv"), csv).unwrap();
    let rows: Vec<Vec<String>> = (0..4).map(|r| rows_of_runner(r, dir.path())).collect();
    let picked =
        |seen: &[String]| -> Vec<String> { seen.iter().map(|t| t.rsplit('/').next().unwrap().to_string()).collect() };
    for a in 0..4 {
        for b in a + 1..4 {
            assert_ne!(picked(&rows[a]), picked(&rows[b]), "runners {a} and {b} drew the same rows");
        }
    }
    assert_eq!(rows_of_runner(2, dir.path()), rows[2], "the same seed, the same runner: the same rows");
}
