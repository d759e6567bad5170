//! Load changed while a run goes on (the dashboard's controls), and the dashboard's server:
//! real runs against the built-in target on loopback, bounded in time. Changes are made from
//! the tick callback, in ticks rather than seconds, and each run lasts until the callback has
//! seen what the test waits for (then it interrupts the run; at most 2 minutes): nothing here
//! depends on how fast the machine is.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use stampede_core::output::live::LiveChange;
use stampede_engine::{CompileOptions, Dashboard, DashboardServer, LiveControl, Plan, RunOptions, compile};
use stampede_model::report::LoadChange;
use stampede_target::TargetServer;

fn plan(load: &str, base_url: &str) -> Arc<Plan> {
    let yaml = format!(
        "name: live\nload: {load}\nscenarios:\n  - name: s\n    steps:\n      - {{name: a, request: {{url: \"{{{{baseUrl}}}}/\"}}, think: 20ms}}\n"
    );
    let file = stampede_engine::parse_str(&yaml, Path::new("live.yaml")).unwrap();
    let opts = CompileOptions { base_url: Some(base_url.to_string()), ..CompileOptions::default() };
    Arc::new(compile(&file, &opts).unwrap_or_else(|p| panic!("{p:?}")))
}

fn target() -> TargetServer {
    TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap()
}

fn opts(control: &Arc<LiveControl>) -> RunOptions {
    RunOptions { threads: 2, tick: Duration::from_millis(100), control: control.clone(), ..RunOptions::default() }
}

/// VUs raised from 2 to 6 mid-run: from the change on, the run holds 6 (the VUs above the plan
/// come from `maxVUs`), never more; before it, never more than 2. The change is in the outcome.
#[test]
fn a_live_change_of_vus_holds_from_then_on() {
    let server = target();
    let plan = plan("{executor: constant-vus, vus: 2, maxVUs: 6, duration: 2m}", &server.base_url());
    let control = Arc::new(LiveControl::default());
    let opts = opts(&control);
    let (mut before, mut after, mut changed_at) = (Vec::new(), Vec::new(), None);
    let outcome = stampede_engine::run(plan, &opts, &mut |tick| match changed_at {
        None => {
            before.push(tick.active_vus);
            if tick.index == 3 {
                control.apply(&LiveChange { vus: Some(6), ..LiveChange::default() });
                changed_at = Some(tick.index);
            }
        }
        Some(_) => {
            after.push(tick.active_vus);
            // Seen at 6 for five intervals in a row: enough.
            if after.len() >= 5 && after[after.len() - 5..].iter().all(|v| *v == 6) {
                opts.interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    })
    .unwrap();
    server.stop();
    assert_eq!(before.iter().max(), Some(&2), "before the change: {before:?}");
    assert!(after.contains(&6), "the run reached the 6 VUs asked for: {after:?}");
    assert!(after.iter().all(|v| *v <= 6), "never more than asked: {after:?}");
    let reached = after.iter().position(|v| *v == 6).unwrap();
    // Held until the run's end (the last tick may come as the VUs stop).
    let held = &after[reached..after.len().saturating_sub(1)];
    assert!(held.iter().all(|v| *v == 6), "held from then on: {after:?}");
    assert_eq!(outcome.load_changes.len(), 1);
    assert_eq!(outcome.load_changes[0].vus, Some(6));
    assert!(outcome.load_changes[0].t > 0.0);
    assert_eq!(outcome.max_active_vus, 6);
}

/// Paused, no iteration starts (once those in flight end, an interval has no request at all);
/// resumed, requests come again, with the same VUs.
#[test]
fn a_paused_run_starts_no_iteration_until_it_resumes() {
    let server = target();
    let plan = plan("{executor: constant-vus, vus: 3, duration: 2m}", &server.base_url());
    let control = Arc::new(LiveControl::default());
    let opts = opts(&control);
    let (mut paused_at, mut quiet_tick, mut resumed_at, mut after_resume) = (None, None, None, 0u64);
    let outcome = stampede_engine::run(plan, &opts, &mut |tick| {
        if tick.index == 3 {
            control.apply(&LiveChange { paused: Some(true), ..LiveChange::default() });
            paused_at = Some(tick.index);
        } else if paused_at.is_some() && resumed_at.is_none() && tick.stats.requests + tick.stats.iterations == 0 {
            // Wait for one whole interval without a request or an iteration's end, then resume.
            quiet_tick = Some(tick.index);
            assert_eq!(tick.active_vus, 3, "paused VUs stay (with their connections)");
            control.apply(&LiveChange { paused: Some(false), ..LiveChange::default() });
            resumed_at = Some(tick.index);
        } else if resumed_at.is_some() {
            after_resume += tick.stats.requests;
            if after_resume > 0 {
                opts.interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    })
    .unwrap();
    server.stop();
    assert!(quiet_tick.is_some(), "no interval went without a request while paused");
    assert!(after_resume > 0, "no request after the resume");
    let changes: Vec<Option<bool>> = outcome.load_changes.iter().map(|c: &LoadChange| c.paused).collect();
    assert_eq!(changes, [Some(true), Some(false)]);
    assert!(outcome.load_changes[0].t <= outcome.load_changes[1].t);
}

/// An open model's rate raised mid-run, paused, resumed at the new rate and paused again: every
/// iteration the schedule (with the changes at the instants they were taken) makes due was
/// started once, no more, and more than the plan's rate would have made due by then. The run is
/// paused last, so no iteration is due when the test interrupts it.
#[test]
fn an_open_models_live_rate_and_pauses_start_exactly_the_iterations_their_schedule_makes_due() {
    use stampede_core::compile::schedule::{Due, OpenSchedule};
    let server = target();
    let plan = plan(
        "{executor: constant-arrival-rate, rate: 20, duration: 2m, preAllocatedVUs: 40, maxVUs: 200}",
        &server.base_url(),
    );
    let control = Arc::new(LiveControl::default());
    let opts = opts(&control);
    let change = |rate: Option<u32>, paused: Option<bool>| LiveChange { rate, paused, ..LiveChange::default() };
    // What the test has done: 0 nothing, 1 raised, 2 paused, 3 resumed, 4 paused again.
    let (mut stage, mut quiet_while_paused) = (0, 0);
    let outcome = stampede_engine::run(plan.clone(), &opts, &mut |tick| {
        let busy = tick.stats.requests + tick.stats.iterations > 0;
        match stage {
            0 if tick.index == 2 => {
                control.apply(&change(Some(400), None));
                stage = 1;
            }
            // 400/s is 40 an interval; 20/s never makes more than a few due in one.
            1 | 3 if tick.stats.requests >= 20 => {
                control.apply(&change(None, Some(true)));
                stage += 1;
            }
            2 if !busy => {
                quiet_while_paused += 1;
                control.apply(&change(None, Some(false)));
                stage = 3;
            }
            4 if !busy => opts.interrupt.store(true, std::sync::atomic::Ordering::Relaxed),
            _ => {}
        }
    })
    .unwrap();
    server.stop();
    assert_eq!(quiet_while_paused, 1, "a whole interval without a request while paused");
    let taken: Vec<(Option<u32>, Option<bool>)> = outcome.load_changes.iter().map(|c| (c.rate, c.paused)).collect();
    assert_eq!(taken, [(Some(400), None), (None, Some(true)), (None, Some(false)), (None, Some(true))]);
    // Every iteration the schedule made due, up to the last pause, started once.
    let load = &plan.groups[0].load;
    let due = |changes: &[LoadChange]| {
        let s = OpenSchedule::new(load, changes);
        (0..).take_while(|k| matches!(s.due(*k), Due::At(_))).count() as u64
    };
    let m = &outcome.metrics;
    let started = m.schedule_lag.len() + m.dropped.iter().sum::<u64>();
    assert_eq!(started, due(&outcome.load_changes), "{:?}", outcome.load_changes);
    let without_the_rate = due(&outcome.load_changes[1..2]);
    assert!(started > without_the_rate, "400/s made more due than 20/s would have ({without_the_rate})");
    let report =
        stampede_engine::build_report(&plan, &outcome, false, Default::default(), Err(stampede_core::NO_BASELINE));
    assert_eq!(report.run.schedule.unwrap().scheduled_iterations, started, "the report counts them with the changes");
}

/// One request to the dashboard; returns the status code and the body.
fn request(addr: SocketAddr, method: &str, target: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// The dashboard's server before and after a run it did not see start: the page needs no token,
/// everything else does; a change is checked (refused with the reason, 409), too large a body
/// is refused (413), and the report is there only once the run has ended.
#[test]
fn the_dashboard_guards_its_routes_with_its_token_and_checks_changes() {
    let plan = plan("{executor: constant-vus, vus: 2, duration: 1s}", "http://127.0.0.1:1");
    let control = Arc::new(LiveControl::default());
    let board = Dashboard::new(plan, control.clone());
    let server = DashboardServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), board.clone()).unwrap();
    let addr = server.addr();
    let token = board.token().to_string();
    assert_eq!(token.len(), 32);
    assert!(server.url().ends_with(&format!("/?token={token}")));

    let (status, page) = request(addr, "GET", "/", "");
    assert_eq!(status, 200);
    assert!(page.contains("<title>Stampede live</title>"));
    assert!(
        !page.contains(" src=") && !page.contains("<link") && !page.contains("@import"),
        "the page fetches nothing"
    );
    for target in ["/events", "/report.html", "/events?token=nope"] {
        assert_eq!(request(addr, "GET", target, "").0, 403, "{target}");
    }
    assert_eq!(request(addr, "POST", "/control", r#"{"paused": true}"#).0, 403);
    assert!(!control.paused(), "a refused request changes nothing");

    let q = format!("?token={token}");
    assert_eq!(request(addr, "GET", &format!("/report.html{q}"), "").0, 404);
    let (status, body) = request(addr, "POST", &format!("/control{q}"), r#"{"vus": 3}"#);
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("maxVUs (2)"), "{body}");
    let (status, body) = request(addr, "POST", &format!("/control{q}"), r#"{"vus": -1}"#);
    assert_eq!((status, body.contains("at least 1")), (409, true), "{body}");
    let (status, body) = request(addr, "POST", &format!("/control{q}"), "{not json");
    assert_eq!((status, body.contains("not a change")), (400, true), "{body}");
    let big = format!(r#"{{"paused": true, "pad": "{}"}}"#, "x".repeat(5000));
    assert_eq!(request(addr, "POST", &format!("/control{q}"), &big).0, 413);
    let (status, body) = request(addr, "POST", &format!("/control{q}"), r#"{"paused": true}"#);
    assert_eq!(status, 200, "{body}");
    assert!(control.paused());
    assert_eq!(control.changes().len(), 1);

    let (status, events) = request_events(addr, &q);
    assert_eq!(status, 200);
    assert!(events.starts_with("event: snapshot\ndata: {"), "{events}");
    assert!(events.contains(r#""paused":true"#), "the snapshot says paused: {events}");

    // Pages that follow the run are counted (the one above has not seen a frame since it left,
    // so it still counts): one past the budget is answered 503.
    let open: Vec<TcpStream> = (1..stampede_engine::DASHBOARD_PAGES)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET /events{q} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            s
        })
        .collect();
    for s in &open {
        let mut first = [0u8; 12];
        let mut reader = s.try_clone().unwrap();
        reader.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        reader.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"HTTP/1.1 200", "every page up to the budget follows the run");
    }
    let (status, body) = request(addr, "GET", &format!("/events{q}"), "");
    assert_eq!((status, body.contains("too many pages")), (503, true), "{body}");
}

/// The first event of the stream (a snapshot), read until its blank line.
fn request_events(addr: SocketAddr, q: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(stream, "GET /events{q} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&text).contains("}\n\n") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended before its first event");
        text.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (_, body) = text.split_once("\r\n\r\n").unwrap();
    // Chunked: the first line is the chunk's size.
    let event = body.split_once("\r\n").map(|(_, e)| e.to_string()).unwrap_or_default();
    (status, event)
}
