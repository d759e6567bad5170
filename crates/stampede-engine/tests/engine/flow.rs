//! The user-flow example (seed 003's 5 requests) and the scenario language around it, checked
//! at the server: a recording proxy in front of the built-in target keeps every byte the VUs
//! send. Every run is bounded in time.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use stampede_engine::CompileOptions;
use stampede_engine::Report;
use stampede_engine::RunOptions;
use stampede_target::TargetServer;

pub(crate) fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// What each client connection sent, in connection order.
pub(crate) type Recorded = Arc<Mutex<Vec<Arc<Mutex<Vec<u8>>>>>>;

/// A TCP relay to `upstream` that records what each client connection sent.
pub(crate) fn recording_proxy(upstream: SocketAddr) -> (SocketAddr, Recorded) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let conns: Recorded = Arc::default();
    let all = conns.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut server) = TcpStream::connect(upstream) else { return };
            let log: Arc<Mutex<Vec<u8>>> = Arc::default();
            all.lock().unwrap().push(log.clone());
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buf = [0u8; 16 * 1024];
                loop {
                    match client.read(&mut buf) {
                        Ok(0) | Err(_) => {
                            let _ = server.shutdown(std::net::Shutdown::Write);
                            return;
                        }
                        Ok(n) => {
                            log.lock().unwrap().extend_from_slice(&buf[..n]);
                            if server.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s2, &mut c2);
                let _ = c2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (addr, conns)
}

/// One request as the server got it.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
}

/// Splits a connection's bytes into requests (content-length framing: what Stampede sends).
pub(crate) fn requests(mut bytes: &[u8]) -> Vec<Seen> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        let Ok(httparse::Status::Complete(len)) = req.parse(bytes) else { break };
        let headers: BTreeMap<String, String> = req
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
            .collect();
        let body_len: usize = headers.get("content-length").map_or(0, |v| v.parse().unwrap());
        if bytes.len() < len + body_len {
            break; // cut off by the end of the run
        }
        out.push(Seen {
            method: req.method.unwrap().to_string(),
            target: req.path.unwrap().to_string(),
            headers,
            body: bytes[len..len + body_len].to_vec(),
        });
        bytes = &bytes[len + body_len..];
    }
    out
}

fn form(body: &[u8]) -> BTreeMap<String, String> {
    form_urlencoded::parse(body).into_owned().collect()
}

/// The bytes of multipart part `name`.
fn part<'a>(body: &'a [u8], boundary: &str, name: &str) -> Option<&'a [u8]> {
    let delimiter = format!("--{boundary}");
    let text_marker = format!("name=\"{name}\"");
    let mut rest = body;
    while let Some(start) = find(rest, delimiter.as_bytes()) {
        rest = &rest[start + delimiter.len()..];
        let head_end = find(rest, b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&rest[..head_end]);
        let content = &rest[head_end + 4..];
        let end = find(content, format!("\r\n{delimiter}").as_bytes())?;
        if head.contains(&text_marker) {
            return Some(&content[..end]);
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Runs the example `name` with `vus` VUs for `iterations` iterations in all (not its duration:
/// how many fit in a time is the machine's).
fn run_example(name: &str, base_url: String, vus: u32, iterations: u64) -> Report {
    let path = examples().join(name);
    let mut file = stampede_engine::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let load = file.load.as_mut().unwrap();
    load.vus = Some(vus);
    load.duration = None;
    load.iterations = Some(iterations);
    let opts = CompileOptions { base_url: Some(base_url), base_dir: Some(examples()), ..CompileOptions::default() };
    let prepared = stampede_engine::prepare(&file, &path, opts).unwrap_or_else(|e| panic!("{e}"));
    stampede_engine::execute(prepared, &RunOptions { threads: 2, ..RunOptions::default() }, &mut |_| {}).unwrap()
}

#[test]
fn the_user_flow_carries_extracted_values_and_uploads_files_intact() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, conns) = recording_proxy(target.addr());
    let report = run_example("user-flow.yaml", format!("http://{proxy}"), 4, 40);
    target.stop();

    // All checks pass, nothing failed.
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    assert!(report.checks.len() >= 10, "{:?}", report.checks);
    for c in &report.checks {
        assert!(c.fails == 0 && c.passes > 0, "{c:?}");
    }
    // Every threshold but the latency limit, which is the machine's to meet.
    let judged_by_the_target = report.thresholds.iter().filter(|v| !v.threshold.starts_with("latency"));
    assert!(
        judged_by_the_target.clone().count() == 2 && judged_by_the_target.clone().all(|v| v.passed),
        "{:?}",
        report.thresholds
    );

    let upload = std::fs::read(examples().join("data/upload.json")).unwrap();
    let (mut pairs, mut uploads, mut posts) = (0, 0, 0);
    for conn in conns.lock().unwrap().iter() {
        let seen = requests(&conn.lock().unwrap());
        for w in seen.windows(2) {
            // Step 1's echoed `args.row` was extracted and sent back in step 2's form.
            if w[0].method == "GET" && w[0].target.starts_with("/get?row=") && w[1].method == "POST" {
                let row = w[0].target.trim_start_matches("/get?row=");
                let f = form(&w[1].body);
                assert_eq!(f["key24"], row, "step 2 carries the value extracted in step 1");
                assert_eq!(w[1].headers["authorization"], "bearer jwt", "the extracted header value");
                pairs += 1;
            }
        }
        for r in &seen {
            let ct = r.headers.get("content-type").cloned().unwrap_or_default();
            if let Some(boundary) = ct.strip_prefix("multipart/form-data; boundary=")
                && let Some(file) = part(&r.body, boundary, "file")
            {
                assert_eq!(file, upload.as_slice(), "the uploaded file's bytes arrive intact");
                uploads += 1;
            }
            posts += usize::from(r.method == "POST");
        }
    }
    assert_eq!((pairs, uploads, posts), (40, 40, 4 * 40), "an extraction pair, an upload and four POSTs per iteration");
}

pub(crate) fn run_yaml(yaml: &str, base_url: &str) -> Report {
    let path = Path::new("inline.yaml");
    let file = stampede_engine::parse_str(yaml, path).unwrap_or_else(|e| panic!("{e}"));
    let opts = CompileOptions { base_url: Some(base_url.to_string()), ..CompileOptions::default() };
    let prepared = stampede_engine::prepare(&file, path, opts).unwrap_or_else(|e| panic!("{e}"));
    stampede_engine::execute(prepared, &RunOptions { threads: 1, ..RunOptions::default() }, &mut |_| {}).unwrap()
}

fn step<'a>(report: &'a Report, name: &str) -> &'a stampede_model::report::StepSummary {
    report.steps.iter().find(|s| s.step.as_deref() == Some(name)).unwrap()
}

#[test]
fn cookies_go_back_to_the_server_unless_the_jar_is_off_and_redirects_are_followed() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let flow = |http: &str| {
        format!(
            r#"
name: jar
load: {{executor: constant-vus, vus: 2, iterations: 10}}
http: {http}
scenarios:
  - name: s
    steps:
      # Sets the cookie and redirects to /cookies (302), which echoes the cookies it got.
      - name: login
        request: {{url: "{{{{baseUrl}}}}/cookies/set?session=abc123"}}
        check: {{status: 200, json: {{cookies.session: {{equals: abc123}}}}}}
      - name: again
        request: {{url: "{{{{baseUrl}}}}/cookies"}}
        check: {{json: {{cookies.session: {{exists: true}}}}}}
      - name: chain
        request: {{url: "{{{{baseUrl}}}}/redirect/3"}}
        check: {{status: 200, json: {{url: {{contains: /get}}}}}}
      - name: keep-post
        request:
          method: POST
          url: "{{{{baseUrl}}}}/redirect-to?url=/post&status_code=307"
          json: {{kept: yes}}
        check: {{status: 200, json: {{json.kept: {{equals: "yes"}}}}}}
"#
        )
    };
    let on = run_yaml(&flow("{}"), &target.base_url());
    for c in &on.checks {
        assert!(c.fails == 0 && c.passes == 10, "{c:?}");
    }
    assert_eq!(on.total.requests, 40, "a followed chain counts as one request of its step");

    // No jar: the redirected request carries no cookie; no redirects: the 302 is the answer.
    let off = run_yaml(&flow("{cookies: false, redirects: 0}"), &target.base_url());
    let fails = |name: &str| {
        off.checks.iter().filter(|c| c.step == name && c.name.contains("cookies.session")).map(|c| c.fails).sum::<u64>()
    };
    assert_eq!(fails("login"), 10, "{:?}", off.checks);
    assert_eq!(fails("again"), 10);
    assert_eq!(step(&off, "chain").status_codes.get("302"), Some(&10));
    assert_eq!(step(&off, "keep-post").status_codes.get("307"), Some(&10));
    target.stop();
}

#[test]
fn header_and_cookie_extractors_feed_later_steps() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let report = run_yaml(
        r#"
name: extract
load: {executor: constant-vus, vus: 1, iterations: 5}
http: {cookies: false}
scenarios:
  - name: s
    steps:
      - name: headers
        request: {url: "{{baseUrl}}/response-headers?x-token=t-42"}
        extract: {token: {header: X-Token}}
        check: {headers: {x-token: {equals: t-42}}}
      - name: cookie
        request: {url: "{{baseUrl}}/cookies/set?sid=s-7", redirects: 0}
        extract: {sid: {cookie: sid}}
        check: {status: 302}
      - name: use
        request: {url: "{{baseUrl}}/get", headers: {x-token: "{{token}}", x-sid: "{{sid}}"}}
        check: {json: {headers.X-Token: {equals: t-42}, headers.X-Sid: {equals: s-7}}}
"#,
        &target.base_url(),
    );
    target.stop();
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    assert!(report.checks.iter().all(|c| c.passes == 5 && c.fails == 0), "{:?}", report.checks);
}

#[test]
fn on_error_skips_the_iteration_or_aborts_the_run_and_failures_keep_samples() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let flow = |on_error: &str| {
        format!(
            r#"
name: on-error
load: {{executor: constant-vus, vus: 2, duration: 5s}}
scenarios:
  - name: s
    steps:
      - name: broken
        request: {{url: "{{{{baseUrl}}}}/status/503", headers: {{x-marker: sample-me}}}}
        check: {{status: 200}}
        onError: {on_error}
      - name: after
        request: {{url: "{{{{baseUrl}}}}/get"}}
"#
        )
    };
    let skipped = run_yaml(&flow("next-iteration").replace("duration: 5s", "iterations: 20"), &target.base_url());
    assert_eq!(step(&skipped, "broken").requests, 20);
    assert_eq!(step(&skipped, "after").requests, 0, "the rest of each iteration is skipped");
    let sample = skipped.error_samples.iter().find(|e| e.step == "broken").unwrap();
    assert!(sample.message.contains("check `status is 200` failed: got status 503"), "{sample:?}");
    assert!(sample.request.starts_with("GET /status/503 HTTP/1.1") && sample.request.contains("x-marker: sample-me"));
    assert!(sample.response.as_deref().unwrap().starts_with("HTTP 503"), "{sample:?}");

    let aborted = run_yaml(&flow("abort-run"), &target.base_url());
    let why = aborted.run.aborted.as_deref().unwrap();
    assert!(why.contains("step `broken` of scenario `s` failed"), "{why}");
    // The run stopped at the first failure: each VU failed at most once, none went on.
    assert!(step(&aborted, "broken").requests <= 2, "each VU failed at most once before the stop");
    assert_eq!(step(&aborted, "after").requests, 0);
    target.stop();
}

#[test]
fn an_abort_on_fail_threshold_stops_the_run_early() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let started = std::time::Instant::now();
    let report = run_yaml(
        r#"
name: abort
load: {executor: constant-vus, vus: 2, duration: 20s}
scenarios:
  - name: s
    steps:
      - {name: flaky, request: {url: "{{baseUrl}}/status/500"}}
thresholds:
  - {threshold: "errors.rate < 1%", abortOnFail: true, delayAbortEval: 1s}
  - "latency.p99 < 10s"
"#,
        &target.base_url(),
    );
    target.stop();
    // Stopped before its planned 20 s, and not before delayAbortEval (a busy machine only
    // lengthens a run, so neither bound depends on its speed).
    assert!(report.run.duration_seconds < 20.0, "ran {} s", report.run.duration_seconds);
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "not before delayAbortEval");
    let why = report.run.aborted.as_deref().unwrap();
    assert!(why.contains("threshold `errors.rate < 1%` failed"), "{why}");
    assert!(!report.thresholds[0].passed && report.thresholds[1].passed);
}

#[test]
fn scenarios_with_their_own_load_run_side_by_side() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let report = run_yaml(
        r#"
name: mixed
load: {executor: constant-vus, vus: 2, iterations: 40}
scenarios:
  - name: browse
    weight: 3
    steps: [{name: home, request: {url: "{{baseUrl}}/get"}}]
  - name: search
    weight: 1
    steps: [{name: find, request: {url: "{{baseUrl}}/get?q=x"}}]
  - name: checkout
    load: {executor: constant-vus, vus: 3, iterations: 30}
    steps: [{name: pay, request: {method: POST, url: "{{baseUrl}}/post", json: {a: 1}}}]
  - name: background
    load:
      executor: ramping-vus
      stages: [{duration: 1s, target: 2}, {duration: 1s, target: 2}]
    steps: [{name: poll, request: {url: "{{baseUrl}}/delay/20"}, think: 50ms}]
"#,
        &target.base_url(),
    );
    target.stop();
    let iterations: BTreeMap<&str, u64> = report.scenarios.iter().map(|s| (s.name.as_str(), s.iterations)).collect();
    // The shared load's 40 iterations are split by weight between browse and search.
    assert_eq!(iterations["browse"] + iterations["search"], 40, "{iterations:?}");
    assert!(iterations["browse"] > iterations["search"], "{iterations:?}");
    // checkout runs exactly its own 30 iterations, alongside.
    assert_eq!(iterations["checkout"], 30, "{iterations:?}");
    // background ramps for its 2 s beside them.
    assert!(iterations["background"] >= 1, "{iterations:?}");
    assert_eq!(report.run.vus_max, 2 + 3 + 2);
    assert_eq!(report.run.executor, "constant-vus + constant-vus + ramping-vus");
    assert_eq!(report.total.errors, 0);
}

/// Every request a VU sends is written by one writer: a followed redirect carries the same
/// default `user-agent` and `accept` as the first request, and a 307 keeps the method, the
/// body and its headers while a 303 turns into a GET without them.
#[test]
fn redirected_requests_carry_the_same_default_headers_as_the_first() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, conns) = recording_proxy(target.addr());
    let yaml = r#"
name: redirects
load: {executor: constant-vus, vus: 1, iterations: 2}
scenarios:
  - name: s
    steps:
      - name: see-other
        request: {method: POST, url: "{{baseUrl}}/redirect-to?url=/get&status_code=303", json: {a: 1}}
      - name: temporary
        request: {method: POST, url: "{{baseUrl}}/redirect-to?url=/post&status_code=307", json: {a: 1}}
"#;
    let report = run_yaml(yaml, &format!("http://{proxy}"));
    target.stop();
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    let seen: Vec<Seen> = conns.lock().unwrap().iter().flat_map(|c| requests(&c.lock().unwrap())).collect();
    // Per iteration: POST, its 303 as GET /get, POST, its 307 as POST /post.
    assert_eq!(seen.len(), 8, "{seen:#?}");
    let agent = format!("stampede/{}", env!("CARGO_PKG_VERSION"));
    for r in &seen {
        assert_eq!(r.headers.get("user-agent"), Some(&agent), "{r:#?}");
        assert_eq!(r.headers.get("accept").map(String::as_str), Some("*/*"), "{r:#?}");
    }
    let gets: Vec<&Seen> = seen.iter().filter(|r| r.target == "/get").collect();
    assert_eq!(gets.len(), 2);
    for r in gets {
        assert_eq!(r.method, "GET");
        assert!(r.body.is_empty() && !r.headers.contains_key("content-type"), "{r:#?}");
    }
    let posts: Vec<&Seen> = seen.iter().filter(|r| r.target == "/post").collect();
    assert_eq!(posts.len(), 2);
    for r in posts {
        assert_eq!(r.method, "POST");
        assert_eq!(r.body, br#"{"a":1}"#);
        assert_eq!(r.headers.get("content-type").map(String::as_str), Some("application/json"), "{r:#?}");
    }
}

/// #23: template holes take expressions — generated values fresh at each use, the VU's own
/// variables, functions over extracted values — and a JSON value that is one expression keeps
/// its type. Checked by what the target echoed back.
#[test]
fn expressions_generate_values_per_use_and_json_bodies_keep_their_types() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let report = run_yaml(
        r#"
name: generated
load: {executor: constant-vus, vus: 2, iterations: 20}
scenarios:
  - name: s
    steps:
      - name: order
        request:
          method: POST
          url: "{{baseUrl}}/post?vu={{ vu.id }}&runner={{ runner.index }}-of-{{ runner.count }}"
          json: {qty: "{{ randomInt(1, 3) }}", id: "{{ uuid() }}", paid: "{{ vu.id > 0 }}", tags: "{{ ['a', 'b'] }}"}
        check:
          status: 200
          json:
            json.qty: {matches: "^[123]$"}
            json.paid: {equals: "true"}
            json.tags: {equals: '["a","b"]'}
            json.id: {matches: "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"}
            args.vu: {matches: "^[12]$"}
            args.runner: {equals: "0-of-1"}
        extract: {orderId: {json: json.id}}
      - name: confirm
        request: {url: "{{baseUrl}}/get?order={{ orderId }}&sig={{ sha256(orderId) }}&n={{ size(orderId) }}"}
        check: {json: {args.order: {matches: "^[0-9a-f-]{36}$"}, args.sig: {matches: "^[0-9a-f]{64}$"}, args.n: {equals: "36"}}}
"#,
        &target.base_url(),
    );
    target.stop();
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    assert_eq!(report.total.requests, 40);
    assert!(report.checks.iter().all(|c| c.passes == 20 && c.fails == 0), "{:?}", report.checks);
}

/// #23: a seed makes generated values repeat: the same seed, the same requests; another seed,
/// others. Seen in the requests the run kept as error samples (every check fails on purpose).
#[test]
fn a_fixed_seed_repeats_the_generated_values_and_another_changes_them() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let step = |n: u32| {
        format!(
            "      - name: p{n}\n        request: {{url: \"{{{{baseUrl}}}}/get?n={{{{ randomInt(1, 1000000) }}}}&id={{{{ uuid() }}}}\
             &u={{{{ uniqueId() }}}}&it={{{{ vu.iteration }}}}\"}}\n        check: {{status: 599}}\n"
        )
    };
    let yaml = format!(
        "name: seeded\nseed: 11\nload: {{executor: constant-vus, vus: 1, iterations: 1}}\nscenarios:\n  - name: s\n    steps:\n{}",
        (1..=4).map(step).collect::<String>()
    );
    let yaml = yaml.as_str();
    let sent = |seed: Option<u64>| -> Vec<String> {
        let path = Path::new("seeded.yaml");
        let file = stampede_engine::parse_str(yaml, path).unwrap();
        let opts = CompileOptions { base_url: Some(target.base_url()), seed, ..CompileOptions::default() };
        let prepared = stampede_engine::prepare(&file, path, opts).unwrap();
        let report =
            stampede_engine::execute(prepared, &RunOptions { threads: 1, ..RunOptions::default() }, &mut |_| {})
                .unwrap();
        assert_eq!(report.total.errors, 4, "every check fails");
        report.error_samples.iter().map(|s| s.request.lines().next().unwrap_or_default().to_string()).collect()
    };
    let (file_seed, again, other) = (sent(None), sent(Some(11)), sent(Some(12)));
    target.stop();
    assert_eq!(file_seed.len(), 4, "{file_seed:?}");
    assert_eq!(file_seed, again, "the file's seed and the same seed given");
    assert!(file_seed.iter().zip(&other).all(|(a, b)| a != b), "{file_seed:?}\n{other:?}");
    // Fresh at each use, one uniqueId after another.
    let distinct: std::collections::BTreeSet<&String> = file_seed.iter().collect();
    assert_eq!(distinct.len(), 4);
    for (i, line) in file_seed.iter().enumerate() {
        assert!(line.contains(&format!("&u=0-1-{}&it=0 ", i + 1)), "{line}");
    }
}

/// #23: a variable's scope decides how long one value is kept: a fresh one at each use, one
/// per iteration (sent in two steps), one per VU, one for the whole test. Seen in what each
/// VU's connection sent.
#[test]
fn variables_keep_one_value_per_use_iteration_vu_or_test() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, recorded) = recording_proxy(target.addr());
    let report = run_yaml(
        r#"
name: scoped
load: {executor: constant-vus, vus: 2, iterations: 6}
vars:
  fresh: "{{ uuid() }}"
  order: {value: "o-{{ uuid() }}", scope: iteration}
  mine: {value: "{{ randomString(16) }}", scope: vu}
  run: {value: "{{ uuid() }}", scope: test}
scenarios:
  - name: s
    steps:
      - name: a
        request: {url: "{{baseUrl}}/get?fresh={{fresh}}&again={{fresh}}&order={{order}}&mine={{mine}}&run={{run}}"}
      - name: b
        request: {url: "{{baseUrl}}/get?order={{ order }}&mine={{ mine }}"}
"#,
        &format!("http://{proxy}"),
    );
    target.stop();
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    let query = |target: &str| -> BTreeMap<String, String> {
        form_urlencoded::parse(target.split_once('?').unwrap().1.as_bytes()).into_owned().collect()
    };
    let mut fresh = std::collections::BTreeSet::new();
    let (mut orders, mut mine, mut runs) =
        (Vec::new(), std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    let mut seen = 0;
    for conn in recorded.lock().unwrap().iter() {
        let sent = requests(&conn.lock().unwrap());
        let vu_values: std::collections::BTreeSet<String> =
            sent.iter().map(|r| query(&r.target)["mine"].clone()).collect();
        assert_eq!(vu_values.len(), 1, "one value per VU (connection): {vu_values:?}");
        mine.extend(vu_values);
        for pair in sent.chunks(2) {
            let (a, b) = (query(&pair[0].target), query(&pair[1].target));
            assert_ne!(a["fresh"], a["again"], "fresh at each use");
            assert!(fresh.insert(a["fresh"].clone()) && fresh.insert(a["again"].clone()));
            assert_eq!(a["order"], b["order"], "one value per iteration, in both steps");
            orders.push(a["order"].clone());
            runs.insert(a["run"].clone());
            seen += 1;
        }
    }
    assert_eq!(seen, 6, "six iterations");
    let distinct: std::collections::BTreeSet<&String> = orders.iter().collect();
    assert_eq!(distinct.len(), 6, "each iteration its own: {orders:?}");
    assert_eq!(mine.len(), 2, "each VU its own");
    assert_eq!(runs.len(), 1, "one for the test: {runs:?}");
}

/// #23: an extractor with `all: true` keeps every match as a list — a JSON path with `*`, or a
/// regex — which expressions read as a list: `randomItem`, `size`, indexing.
#[test]
fn an_extractor_keeps_every_match_as_a_list_for_expressions() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let report = run_yaml(
        r#"
name: lists
seed: 3
load: {executor: constant-vus, vus: 1, iterations: 30}
scenarios:
  - name: s
    steps:
      - name: list
        request:
          method: POST
          url: "{{baseUrl}}/post"
          json: {products: [{id: 11}, {id: 12}, {id: 13}], note: "a-1 b-2 c-3"}
        extract:
          ids: {json: "json.products[*].id", all: true}
          first: {json: "json.products[0]"}
          letters: {regex: '([a-z])-\d', all: true}
          none: {json: "json.missing[*]", all: true}
      - name: pick
        request: {url: "{{baseUrl}}/get?id={{ randomItem(ids) }}&n={{ size(ids) }}&second={{ ids[1] }}&first={{ first.id }}&l={{ letters[2] }}&none={{ size(none) }}&ids={{ids}}"}
        check:
          json:
            args.id: {matches: "^1[123]$"}
            args.n: {equals: "3"}
            args.second: {equals: "12"}
            args.first: {equals: "11"}
            args.l: {equals: "c"}
            args.none: {equals: "0"}
            args.ids: {equals: "[11,12,13]"}
"#,
        &target.base_url(),
    );
    target.stop();
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    assert!(report.checks.iter().all(|c| c.passes == 30 && c.fails == 0), "{:?}", report.checks);
}

/// #23: `init` steps run once per VU, before its first iteration; what they extract lasts the
/// VU's life and every scenario sees it. Reported under scenario `init`.
#[test]
fn init_steps_run_once_per_vu_and_their_values_last_its_life() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, recorded) = recording_proxy(target.addr());
    let report = run_yaml(
        r#"
name: per-vu-login
load: {executor: constant-vus, vus: 3, iterations: 12}
init:
  - name: login
    request: {method: POST, url: "{{baseUrl}}/post", json: {user: "u{{ vu.id }}", token: "{{ uuid() }}"}}
    extract: {token: {json: json.token}}
scenarios:
  - name: browse
    steps:
      - name: list
        request: {url: "{{baseUrl}}/get", headers: {authorization: "Bearer {{token}}"}}
        check: {json: {headers.Authorization: {equals: "Bearer {{token}}"}}}
  - name: buy
    steps:
      - name: cart
        request: {method: POST, url: "{{baseUrl}}/post", json: {t: "{{token}}"}}
"#,
        &format!("http://{proxy}"),
    );
    target.stop();
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    let login = report.steps.iter().find(|s| s.step.as_deref() == Some("login")).expect("an init row");
    assert_eq!((login.scenario.as_deref(), login.requests), (Some("init"), 3), "one login per VU");
    assert_eq!(report.scenarios.iter().map(|s| s.iterations).sum::<u64>(), 12);
    let mut tokens = std::collections::BTreeSet::new();
    for conn in recorded.lock().unwrap().iter() {
        let sent = requests(&conn.lock().unwrap());
        let first: serde_json::Value = serde_json::from_slice(&sent[0].body).unwrap();
        let token = first["token"].as_str().unwrap().to_string();
        let is_login =
            |r: &Seen| serde_json::from_slice::<serde_json::Value>(&r.body).is_ok_and(|b| b.get("user").is_some());
        assert!(is_login(&sent[0]), "the VU logged in first");
        assert_eq!(sent.iter().filter(|r| is_login(r)).count(), 1, "and once");
        for r in &sent[1..] {
            let used =
                r.headers.get("authorization").map(|h| h.trim_start_matches("Bearer ").to_string()).or_else(|| {
                    serde_json::from_slice::<serde_json::Value>(&r.body)
                        .ok()
                        .and_then(|b| b["t"].as_str().map(String::from))
                });
            assert_eq!(used.as_deref(), Some(token.as_str()), "the VU's own token, all its life");
        }
        assert!(tokens.insert(token), "each VU its own token");
    }
    assert_eq!(tokens.len(), 3);
}
