//! The open workload model: iterations start on schedule whatever the response times, and
//! latency counts from the scheduled start (no coordinated omission). Servers on loopback;
//! every run is bounded in time.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stampede_engine::executor::RunOptions;
use stampede_engine::plan::CompileOptions;
use stampede_engine::report::Report;
use stampede_engine::target::TargetServer;
use stampede_engine::{parse, session};

mod common;

fn run_yaml(yaml: &str, base_url: &str, threads: usize) -> Report {
    let path = Path::new("open.yaml");
    let file = parse::parse_str(yaml, path).unwrap_or_else(|e| panic!("{e}"));
    let opts = CompileOptions { base_url: Some(base_url.to_string()), ..CompileOptions::default() };
    let prepared = session::prepare(&file, path, opts).unwrap_or_else(|e| panic!("{e}"));
    session::execute(prepared, &RunOptions { threads, ..RunOptions::default() }, &mut |_| {}).unwrap()
}

#[test]
fn a_constant_arrival_rate_is_kept_and_counted_at_the_server() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let stats = target.stats();
    let report = run_yaml(
        r#"
name: rate
load: {executor: constant-arrival-rate, rate: 2000, timeUnit: 1s, duration: 3s, preAllocatedVUs: 20, maxVUs: 2000}
scenarios:
  - name: s
    steps: [{name: get, request: {url: "{{baseUrl}}/get"}}]
"#,
        &target.base_url(),
        2,
    );
    let served = stats.requests();
    target.stop();
    let expected = 6000.0;
    println!(
        "server counted {served}, report {} requests at {:.1}/s, dropped {}, lag p99 {} ms",
        report.total.requests,
        report.total.rps,
        report.run.schedule.as_ref().unwrap().dropped_iterations,
        report.run.schedule.as_ref().unwrap().lag_ms.p99
    );
    // Every due iteration ran or was counted as dropped; enough VUs (2,000) that a stall of
    // the machine (a debug build on 2 shared cores) is absorbed rather than dropped.
    let dropped = report.run.schedule.as_ref().unwrap().dropped_iterations;
    assert_eq!(served + dropped, 6000, "ran {served}, dropped {dropped}");
    assert!((served as f64 - expected).abs() <= expected * 0.03, "server counted {served}");
    assert_eq!(report.total.requests, served);
    // The achieved rate over the scheduled 3 s.
    let achieved = report.total.requests as f64 / 3.0;
    assert!((achieved - 2000.0).abs() <= 2000.0 * 0.03, "achieved {achieved}/s");
    assert_eq!(report.run.executor, "constant-arrival-rate");
    assert_eq!(report.total.errors, 0);
}

/// A server that answers `/` at once, except that during one window every answer waits for
/// the window's end (a stop-the-world pause).
fn freezing_server(freeze_from: Duration, freeze_for: Duration) -> (SocketAddr, Arc<AtomicU64>, Instant) {
    let served = Arc::new(AtomicU64::new(0));
    let count = served.clone();
    let epoch = Instant::now();
    let addr = common::raw_http_server(move |_| {
        let now = epoch.elapsed();
        if now >= freeze_from && now < freeze_from + freeze_for {
            std::thread::sleep(freeze_from + freeze_for - now);
        }
        count.fetch_add(1, Ordering::Relaxed);
    });
    (addr, served, epoch)
}

#[test]
fn a_server_pause_shows_in_the_open_models_latency_but_hides_in_the_closed_model() {
    let rate = 200.0;
    let seconds = 4.0;
    let freeze = Duration::from_secs(1);
    // Open model: 200 iterations/s for 4 s; the server pauses 1 s starting 1.5 s in.
    let (addr, served, epoch) = freezing_server(Duration::from_millis(1500), freeze);
    let started = epoch.elapsed();
    let open = run_yaml(
        r#"
name: open
load: {executor: constant-arrival-rate, rate: 200, duration: 4s, preAllocatedVUs: 20, maxVUs: 400}
scenarios:
  - name: s
    steps: [{name: get, request: {url: "{{baseUrl}}/"}}]
"#,
        &format!("http://{addr}"),
        1,
    );
    assert_eq!(open.total.errors, 0);
    assert_eq!(served.load(Ordering::Relaxed), open.total.requests);
    // What the schedule implies: iterations due during the pause (from 1.5 s, relative to
    // the run's start) wait for its end: ~rate·1 s of them, waiting uniformly 0…1 s. Among
    // rate·seconds samples, the slowest 1% (8 of 800) waited at least 1 s − 8/rate.
    let pause_start = Duration::from_millis(1500).saturating_sub(started);
    assert!(pause_start > Duration::from_millis(1000), "the run started late: {started:?}");
    let n = rate * seconds;
    let expect_p99 = freeze.as_secs_f64() - (n * 0.01) / rate;
    let p99 = open.total.latency_ms.p99 / 1000.0;
    let max = open.total.latency_ms.max / 1000.0;
    println!("open: p99 {p99:.3} s (≥ {expect_p99:.3} expected), max {max:.3} s, requests {}", open.total.requests);
    assert!(p99 >= expect_p99 * 0.9, "open-model p99 {p99} hides the pause (expected ≥ {expect_p99})");
    assert!(max >= freeze.as_secs_f64() * 0.95, "the first paused iteration waited the whole second: {max}");
    // The schedule was kept: about rate·seconds iterations, none dropped (400 VUs suffice).
    let schedule = open.run.schedule.as_ref().unwrap();
    assert_eq!(schedule.dropped_iterations, 0);
    assert!((open.total.requests as f64 - n).abs() <= n * 0.02, "{} requests", open.total.requests);
    // Service time (from the actual send) is lower than the latency from the scheduled start.
    let service = open.total.service_ms.as_ref().unwrap();
    assert!(service.p50 <= open.total.latency_ms.p50 + 0.001);

    // Closed model, same pause: 4 VUs each wait once, so the slow samples are a handful and
    // the p99 stays low although users would have waited as long.
    let (addr, _, _) = freezing_server(Duration::from_millis(1500), freeze);
    let closed = run_yaml(
        r#"
name: closed
load: {executor: constant-vus, vus: 4, duration: 4s}
scenarios:
  - name: s
    steps: [{name: get, request: {url: "{{baseUrl}}/"}}]
"#,
        &format!("http://{addr}"),
        1,
    );
    let closed_p99 = closed.total.latency_ms.p99 / 1000.0;
    println!(
        "closed: p99 {closed_p99:.3} s, max {:.3} s, requests {}",
        closed.total.latency_ms.max / 1000.0,
        closed.total.requests
    );
    assert!(closed_p99 < expect_p99 / 10.0, "closed p99 {closed_p99}");
    assert!(closed.run.schedule.is_none());

    // Too few VUs for the pause: iterations are dropped and counted, lag shows.
    let (addr, _, _) = freezing_server(Duration::from_millis(1500), freeze);
    let starved = run_yaml(
        r#"
name: starved
load: {executor: constant-arrival-rate, rate: 200, duration: 3s, preAllocatedVUs: 5, maxVUs: 10}
scenarios:
  - name: s
    steps: [{name: get, request: {url: "{{baseUrl}}/"}}]
"#,
        &format!("http://{addr}"),
        1,
    );
    let s = starved.run.schedule.as_ref().unwrap();
    // During the 1 s pause, 10 VUs hold 10 iterations; the other ~190 due then are dropped.
    println!("starved: dropped {}, requests {}", s.dropped_iterations, starved.total.requests);
    assert!(s.dropped_iterations >= 150, "dropped {}", s.dropped_iterations);
    assert_eq!(starved.total.requests + s.dropped_iterations, 600, "every due iteration ran or was dropped");
}
