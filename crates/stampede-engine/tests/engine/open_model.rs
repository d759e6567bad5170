//! The open workload model: iterations start on schedule whatever the response times, and
//! latency counts from the scheduled start (no coordinated omission). Servers on loopback;
//! every run is bounded in time.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stampede_engine::CompileOptions;
use stampede_engine::Report;
use stampede_engine::RunOptions;
use stampede_target::TargetServer;

fn run_yaml(yaml: &str, base_url: &str, threads: usize) -> Report {
    run_yaml_exported(yaml, base_url, threads).0
}

/// [`run_yaml`], with what a Prometheus scraping the run last saw (`/metrics`).
fn run_yaml_exported(yaml: &str, base_url: &str, threads: usize) -> (Report, String) {
    let path = Path::new("open.yaml");
    let file = stampede_engine::parse_str(yaml, path).unwrap_or_else(|e| panic!("{e}"));
    let opts = CompileOptions { base_url: Some(base_url.to_string()), ..CompileOptions::default() };
    let prepared = stampede_engine::prepare(&file, path, opts).unwrap_or_else(|e| panic!("{e}"));
    let exporter = stampede_engine::Exporter::new(&prepared.plan, Vec::new());
    let opts = RunOptions { threads, totals: true, ..RunOptions::default() };
    let report = stampede_engine::execute(prepared, &opts, &mut |t| exporter.observe(t)).unwrap();
    (report, exporter.render())
}

#[test]
fn five_thousand_iterations_a_second_for_ten_seconds_are_kept_and_counted_at_the_server() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let stats = target.stats();
    let report = run_yaml(
        r#"
name: rate
load: {executor: constant-arrival-rate, rate: 5000, timeUnit: 1s, duration: 10s, preAllocatedVUs: 50, maxVUs: 3000}
scenarios:
  - name: s
    steps: [{name: get, request: {url: "{{baseUrl}}/get"}}]
"#,
        &target.base_url(),
        2,
    );
    let served = stats.requests();
    target.stop();
    let schedule = report.run.schedule.as_ref().unwrap();
    println!(
        "server counted {served}; report: {} requests, achieved {}/s of {}/s, dropped {}, lag p99 {} ms, saturated: {:?}",
        report.total.requests,
        schedule.achieved_rate,
        schedule.target_rate,
        schedule.dropped_iterations,
        schedule.lag_ms.p99,
        report.run.saturated
    );
    assert_eq!(schedule.scheduled_iterations, 50_000);
    assert_eq!(schedule.target_rate, 5000.0);
    // Every due iteration completed, was dropped, or started and was cut off at the hard stop
    // (only on a machine so starved that answers took longer than gracefulStop), counted exactly.
    let (dropped, interrupted) = (schedule.dropped_iterations, schedule.interrupted_iterations);
    let completed = report.run.iterations;
    assert_eq!(
        completed + dropped + interrupted,
        50_000,
        "completed {completed}, dropped {dropped}, cut off {interrupted}"
    );
    assert_eq!(report.total.requests, completed, "one request per iteration");
    if report.run.saturated.is_none() {
        // A generator that kept up (VUs enough, 3,000, to absorb a stall of a loaded machine):
        // nothing cut off, no error, and the report counts exactly what the server counted.
        assert_eq!((interrupted, report.total.errors), (0, 0));
        assert_eq!(report.total.requests, served, "the report counts what the server counted");
    } else {
        // Starved: a request may have failed before it reached the server, or reached it and
        // been cut off before its answer was read.
        assert!(served + report.total.errors >= completed && served <= completed + interrupted, "served {served}");
    }
    // How close to 5,000/s a run gets depends on the machine (a busy one drops iterations):
    // that is measured by the benchmarks (bench/open.sh), not asserted here.
    assert_eq!(schedule.achieved_rate, completed as f64 / 10.0);
    assert_eq!(report.run.executor, "constant-arrival-rate");
}

/// A server that answers `/` at once, except that during one window, counted from the first
/// request it gets, every answer waits for the window's end (a stop-the-world pause).
fn freezing_server(freeze_from: Duration, freeze_for: Duration) -> (SocketAddr, Arc<AtomicU64>) {
    let served = Arc::new(AtomicU64::new(0));
    let count = served.clone();
    let first = std::sync::OnceLock::new();
    let addr = crate::common::raw_http_server(move |_| {
        let now = first.get_or_init(Instant::now).elapsed();
        if now >= freeze_from && now < freeze_from + freeze_for {
            std::thread::sleep(freeze_from + freeze_for - now);
        }
        count.fetch_add(1, Ordering::Relaxed);
    });
    (addr, served)
}

#[test]
fn a_server_pause_shows_in_the_open_models_latency_but_hides_in_the_closed_model() {
    let rate: f64 = 200.0;
    let seconds = 10.0;
    let freeze = Duration::from_secs(1);
    let freeze_at = Duration::from_secs(4);
    // Open model: 200 iterations/s for 10 s; the server pauses every answer for 1 s, once,
    // starting 4 s in.
    let (addr, served) = freezing_server(freeze_at, freeze);
    let open = run_yaml(
        r#"
name: open
load: {executor: constant-arrival-rate, rate: 200, duration: 10s, preAllocatedVUs: 20, maxVUs: 400, maxWait: 60s}
scenarios:
  - name: s
    steps: [{name: get, request: {url: "{{baseUrl}}/"}}]
"#,
        &format!("http://{addr}"),
        1,
    );
    assert_eq!(open.total.errors, 0);
    assert_eq!(served.load(Ordering::Relaxed), open.total.requests);
    // What the schedule implies: the iterations due during the pause (rate·1 s of them, one
    // every 1/rate s, the first within 1/rate s of its start) all wait for its end: the j-th
    // (from 1) at least 1 s − j/rate. The p99 of n samples is the value of rank ⌈0.99·n⌉, the
    // (n − ⌈0.99·n⌉ + 1)-th slowest, here the 21st of 2,000: it waited ≥ 1 s − 21/rate.
    let n = rate * seconds;
    let from_top = n - (0.99 * n).ceil() + 1.0;
    let expect_p99 = freeze.as_secs_f64() - from_top / rate;
    let expect_max = freeze.as_secs_f64() - 1.0 / rate;
    let p99 = open.total.latency_ms.p99 / 1000.0;
    let max = open.total.latency_ms.max / 1000.0;
    println!(
        "open: p99 {p99:.3} s (schedule implies ≥ {expect_p99:.3}), max {max:.3} s (≥ {expect_max:.3}), requests {}",
        open.total.requests
    );
    assert!(p99 >= expect_p99, "open-model p99 {p99} hides the pause (expected ≥ {expect_p99})");
    assert!(max >= expect_max, "the first paused iteration waited the whole second: {max}");
    // Dropped and lag agree with a pause that 400 VUs absorb: the ~200 iterations due during
    // it each got a VU on time, so none was dropped and none started late.
    let schedule = open.run.schedule.as_ref().unwrap();
    println!(
        "open: dropped {}, lag p99 {:.3} ms, max {:.3} ms, achieved {}/s",
        schedule.dropped_iterations, schedule.lag_ms.p99, schedule.lag_ms.max, schedule.achieved_rate
    );
    assert_eq!(schedule.dropped_iterations, 0);
    assert_eq!(open.total.requests, 2000, "every due iteration ran");
    // Service time (from the actual send) is not above the latency from the scheduled start.
    let service = open.total.service_ms.as_ref().unwrap();
    assert!(service.p50 <= open.total.latency_ms.p50 + 0.001);

    // Closed model, same pause: 4 VUs (5 ms think time, so about as many requests as the
    // open run's order of magnitude, without busying a core) each wait once, so the slow
    // samples are a handful and the p99 stays low although users would have waited as long.
    let (addr, _) = freezing_server(freeze_at, freeze);
    let closed = run_yaml(
        r#"
name: closed
load: {executor: constant-vus, vus: 4, duration: 10s}
scenarios:
  - name: s
    steps: [{name: get, request: {url: "{{baseUrl}}/"}, think: 5ms}]
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
    // Each VU waits through the pause once: at most 4 slow samples, fewer than 1 % of them
    // when there are over 400, so the p99 is not one of them.
    assert!(closed.total.requests > 400, "{} requests", closed.total.requests);
    assert!(closed_p99 < expect_p99, "closed p99 {closed_p99}");
    assert!(closed.run.schedule.is_none());

    // Too few VUs for the pause: iterations are dropped and counted.
    let (addr, _) = freezing_server(Duration::from_millis(1500), freeze);
    let starved = run_yaml(
        r#"
name: starved
load: {executor: constant-arrival-rate, rate: 200, duration: 3s, preAllocatedVUs: 5, maxVUs: 10, maxWaiting: 0}
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
    // (a busy machine only drops more).
    assert!(s.dropped_iterations >= 150, "dropped {}", s.dropped_iterations);
    assert_eq!(starved.total.requests + s.dropped_iterations, 600, "every due iteration ran or was dropped");
    assert_eq!(s.achieved_rate, stampede_model::report::round3(starved.total.requests as f64 / 3.0));
}

/// Runs `load` (one GET per iteration, one thread) against a fresh target whose every answer
/// takes `service` (an async delay; no limit on concurrency). The report, printed, and the
/// requests the target counted.
fn against_slow_target(service: Duration, load: &str) -> (Report, u64) {
    let (report, served, _) = against_slow_target_with_metrics(service, load);
    (report, served)
}

/// [`against_slow_target`], with what a Prometheus scraping the run last saw (`/metrics`).
fn against_slow_target_with_metrics(service: Duration, load: &str) -> (Report, u64, String) {
    let options = stampede_target::TargetOptions { service_time: Some(service), ..Default::default() };
    let target = TargetServer::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1, options).unwrap();
    let stats = target.stats();
    let yaml = format!(
        "name: slow\nload: {load}\nscenarios:\n  - name: s\n    steps: [{{name: get, request: {{url: \"{{{{baseUrl}}}}/get\"}}}}]\n"
    );
    let (report, metrics) = run_yaml_exported(&yaml, &target.base_url(), 1);
    let served = stats.requests();
    target.stop();
    println!("{}", stampede_engine::render_table(&report));
    (report, served, metrics)
}

/// The value of one series (`name` or `name{labels}`) in a Prometheus exposition.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Within the relative precision of the report's histograms (3 significant digits).
fn at_least(value_ms: f64, floor_ms: f64) -> bool {
    value_ms >= floor_ms * (1.0 - 2e-3)
}

#[test]
fn iterations_due_while_every_vu_is_busy_wait_for_one_and_their_latency_counts_the_wait() {
    // 2 VUs, each answer 50 ms: the VUs serve at most 40/s; 100/s are due for 2 s. Every
    // iteration that finds both busy waits for the next free one (maxWait 60 s: none gives
    // up), so all 200 run, the later ones seconds after their schedule.
    let service = Duration::from_millis(50);
    let (report, served) = against_slow_target(
        service,
        "{executor: constant-arrival-rate, rate: 100, duration: 2s, preAllocatedVUs: 2, maxVUs: 2, maxWaiting: 1000, maxWait: 60s}",
    );
    let s = report.run.schedule.as_ref().unwrap();
    // Every due iteration ran: the ones that found a free VU and the ones that waited.
    assert_eq!(s.scheduled_iterations, 200);
    assert_eq!((served, report.total.requests, report.run.iterations), (200, 200, 200));
    assert_eq!(s.dropped_iterations, 0);
    assert!(s.dropped_by_reason.is_empty(), "{:?}", s.dropped_by_reason);
    assert!(s.hint.is_none());
    // The first two found the pre-allocated VUs free; how many of the others waited depends on
    // the machine (after a stall a VU may come free with nothing waiting), but some did.
    assert!(s.waited_iterations > 0 && s.waited_iterations <= 198, "waited {}", s.waited_iterations);
    let timeline_waited: u64 = report.timeline.iter().filter_map(|p| p.waited).sum();
    assert_eq!(timeline_waited, s.waited_iterations, "the timeline counts each wait once");
    // Latency counts from the scheduled start: the longest wait plus a whole service time is in
    // the slowest latency, and no latency is below the service time.
    let wait = s.wait_ms.as_ref().expect("wait summary");
    let service_ms = service.as_secs_f64() * 1000.0;
    assert!(
        at_least(report.total.latency_ms.max, wait.max + service_ms),
        "max {} < wait {} + {service_ms}",
        report.total.latency_ms.max,
        wait.max
    );
    assert!(at_least(report.total.latency_ms.min, service_ms), "min {}", report.total.latency_ms.min);
    // The VUs serve at most 40/s while 100/s come due: the waits grow to seconds.
    assert!(wait.max > service_ms, "wait max {}", wait.max);
    assert_eq!(report.total.errors, 0);
}

#[test]
fn a_full_wait_queue_or_a_wait_too_long_drops_iterations_and_says_why() {
    let service = Duration::from_millis(50);
    // One VU, at most 5 waiting: of 50 due in 0.5 s, the VU holds 1 and 5 wait; the rest that
    // come due while 5 wait are dropped as `queueFull`.
    let (full, served, metrics) = against_slow_target_with_metrics(
        service,
        "{executor: constant-arrival-rate, rate: 100, duration: 500ms, preAllocatedVUs: 1, maxVUs: 1, maxWaiting: 5, maxWait: 60s}",
    );
    let s = full.run.schedule.as_ref().unwrap();
    assert_eq!(s.scheduled_iterations, 50);
    assert_eq!(served, full.total.requests);
    assert_eq!(full.total.requests + s.dropped_iterations, 50, "every due iteration ran or was dropped");
    assert!(s.dropped_iterations > 0);
    assert_eq!(s.dropped_by_reason.get("queueFull"), Some(&s.dropped_iterations), "{:?}", s.dropped_by_reason);
    assert!(s.waited_iterations > 0 && s.waited_iterations < full.total.requests, "the first never waits");
    let hint = s.hint.as_deref().expect("a hint");
    assert!(hint.contains("pool was exhausted") && hint.contains("maxVUs"), "{hint}");
    assert!(stampede_engine::render_table(&full).contains("HINT: the VU pool was exhausted"));
    // Prometheus sees the same: drops by reason, the waits and how long they were.
    let dropped = s.dropped_iterations as f64;
    assert_eq!(metric(&metrics, r#"stampede_dropped_iterations_total{scenario="default"}"#), dropped);
    assert_eq!(metric(&metrics, r#"stampede_dropped_iterations_by_reason_total{reason="queueFull"}"#), dropped);
    assert_eq!(metric(&metrics, r#"stampede_dropped_iterations_by_reason_total{reason="waitedTooLong"}"#), 0.0);
    let waited = s.waited_iterations as f64;
    assert_eq!(metric(&metrics, "stampede_waited_iterations_total"), waited);
    assert_eq!(metric(&metrics, "stampede_queue_wait_seconds_count"), waited);
    assert_eq!(metric(&metrics, r#"stampede_queue_wait_seconds_bucket{le="+Inf"}"#), waited);

    // maxWait 120 ms: an iteration that waited longer is dropped as `waitedTooLong`; each that
    // ran waited at most that.
    let (expired, served) = against_slow_target(
        service,
        "{executor: constant-arrival-rate, rate: 100, duration: 500ms, preAllocatedVUs: 1, maxVUs: 1, maxWait: 120ms}",
    );
    let s = expired.run.schedule.as_ref().unwrap();
    assert_eq!(served, expired.total.requests);
    assert_eq!(expired.total.requests + s.dropped_iterations, 50);
    assert!(s.dropped_iterations > 0);
    assert_eq!(s.dropped_by_reason.get("waitedTooLong"), Some(&s.dropped_iterations), "{:?}", s.dropped_by_reason);
    let wait = s.wait_ms.as_ref().expect("some waited");
    assert!(wait.max <= 120.0 * 1.002, "a started iteration waited {} ms > maxWait", wait.max);
    let timeline_dropped: u64 = expired.timeline.iter().filter_map(|p| p.dropped).sum();
    assert_eq!(timeline_dropped, s.dropped_iterations);
}

#[test]
fn iterations_still_waiting_when_the_group_stops_are_dropped_as_run_ended() {
    // One VU, answers of 300 ms, gracefulStop 100 ms: at the hard stop (0.3 s + 0.1 s) the
    // iterations still waiting never ran; they count as `runEnded` (or `waitedTooLong`: never
    // here, maxWait is 60 s).
    let (report, served) = against_slow_target(
        Duration::from_millis(300),
        "{executor: constant-arrival-rate, rate: 20, duration: 300ms, preAllocatedVUs: 1, maxVUs: 1, maxWait: 60s, gracefulStop: 100ms}",
    );
    let s = report.run.schedule.as_ref().unwrap();
    assert_eq!(s.scheduled_iterations, 6);
    // Due at 0, 50, …, 250 ms. The VU runs the first until 300 ms, then takes the second, which
    // is still in flight at the hard stop (400 ms) and abandoned: it started, so it is not
    // dropped. The other 4 were waiting. (A machine stalled past 400 ms leaves 5 waiting.)
    println!("served {served}, requests {}", report.total.requests);
    assert!(matches!(s.dropped_iterations, 4 | 5), "dropped {}", s.dropped_iterations);
    assert_eq!(s.dropped_by_reason.get("runEnded"), Some(&s.dropped_iterations), "{:?}", s.dropped_by_reason);
    assert!(report.total.requests <= 1 && report.total.requests + s.dropped_iterations <= 5);
    // The one cut off in flight is counted apart: every due iteration is in exactly one count.
    assert_eq!(report.run.iterations + s.dropped_iterations + s.interrupted_iterations, 6, "{s:?}");
    assert!(s.interrupted_iterations >= 1, "the second iteration was in flight at the hard stop: {s:?}");
    let table = stampede_engine::render_table(&report);
    assert!(table.contains(&format!("interrupted: {} iterations started", s.interrupted_iterations)), "{table}");
}

/// #24: an open model's service time is every step's, not only the first's (the total's
/// service time exceeded its latency before), and its VUs count as active only while they run
/// an iteration (the peak said `maxVUs` before, however few were busy).
#[test]
fn every_steps_service_time_is_kept_and_only_busy_vus_are_active() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let report = run_yaml(
        r#"
name: steps
load: {executor: constant-arrival-rate, rate: 2, timeUnit: 1s, duration: 2s, preAllocatedVUs: 50, maxVUs: 50}
scenarios:
  - name: s
    steps:
      - {name: slow, request: {url: "{{baseUrl}}/delay/40"}}
      - {name: a, request: {url: "{{baseUrl}}/get"}}
      - {name: b, request: {url: "{{baseUrl}}/get"}}
      - {name: c, request: {url: "{{baseUrl}}/get"}}
"#,
        &target.base_url(),
        2,
    );
    target.stop();
    let scheduled = report.run.schedule.as_ref().unwrap().scheduled_iterations;
    assert_eq!(scheduled, 4);
    assert_eq!(report.total.requests, 16, "{:?}", report.run.schedule);
    for step in &report.steps {
        let service = step.service_ms.as_ref().unwrap_or_else(|| panic!("{:?} has no service time", step.step));
        // Each request's service time is at most its latency: so are their means and medians.
        assert!(
            service.mean <= step.latency_ms.mean && service.p50 <= step.latency_ms.p50,
            "{:?}: {service:?} vs {:?}",
            step.step,
            step.latency_ms
        );
    }
    let total = report.total.service_ms.as_ref().unwrap();
    assert!(
        total.mean <= report.total.latency_ms.mean,
        "service {} ms vs latency {} ms: the total's service time is every step's",
        total.mean,
        report.total.latency_ms.mean
    );
    // At most 4 iterations ever ran: at most 4 VUs were busy at once, of the 50 in the pool.
    assert_eq!(report.run.vus_max, 50);
    let peak = report.run.generator.peak_vus;
    assert!((1..=scheduled as u32).contains(&peak), "peak {peak} VUs busy for {scheduled} iterations");
    assert!(report.timeline.iter().all(|p| p.active_vus <= scheduled as u32), "{:?}", report.timeline);
}
