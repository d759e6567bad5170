//! The target's known capacity: a service time held with one of `concurrency` permits, a FIFO
//! queue behind them, and 503 at once past the queue limit. Plain HTTP/1.1 over std sockets.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use stampede_target::{TargetOptions, TargetOptionsError, TargetServer, TargetStats};

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Opens a connection and sends `GET path` on it (the server closes it after answering).
fn send(addr: SocketAddr, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: target\r\nConnection: close\r\n\r\n").unwrap();
    stream
}

/// Reads the whole response: its status code and body.
fn answer(mut stream: TcpStream) -> (u16, String) {
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{response}"));
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// Waits until the server's counters show `done` (a guard against hanging, not a timing check).
fn wait_until(stats: &TargetStats, what: &str, done: impl Fn(&TargetStats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(stats) {
        assert!(Instant::now() < deadline, "the target never had {what}: {stats:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn six_requests_at_once_share_two_permits_and_all_succeed() {
    let options =
        TargetOptions { service_time: Some(Duration::from_millis(100)), concurrency: Some(2), ..Default::default() };
    // Three threads, one semaphore: the limit holds for the whole server.
    let server = TargetServer::start_with(loopback(), 3, options).unwrap();
    let streams: Vec<_> = (0..6).map(|_| send(server.addr(), "/get")).collect();
    let statuses: Vec<u16> = streams.into_iter().map(|s| answer(s).0).collect();
    assert_eq!(statuses, vec![200; 6]);
    let stats = server.stats();
    assert_eq!(stats.max_in_service(), 2);
    assert_eq!((stats.requests(), stats.queue_full_rejections()), (6, 0));
    assert_eq!((stats.in_service(), stats.waiting()), (0, 0));
    server.stop();
}

#[test]
fn past_the_queue_limit_requests_get_503_at_once_and_stats_still_answers() {
    // A service time far longer than the test, so the first request is in service throughout.
    let options = TargetOptions {
        service_time: Some(Duration::from_secs(600)),
        concurrency: Some(1),
        queue_limit: Some(1),
        ..Default::default()
    };
    let server = TargetServer::start_with(loopback(), 2, options).unwrap();
    let stats = server.stats();
    let in_service = send(server.addr(), "/get");
    wait_until(&stats, "one request in service", |s| s.in_service() == 1);
    let queued = send(server.addr(), "/get");
    wait_until(&stats, "one request waiting", |s| s.waiting() == 1);
    // The permit is held and the queue is full: the next two are refused, not queued.
    let refused = [send(server.addr(), "/get"), send(server.addr(), "/anything")];
    for stream in refused {
        assert_eq!(answer(stream), (503, "queue full\n".to_string()));
    }
    // `/stats` takes no permit, so it answers while the target is saturated.
    let (status, body) = answer(send(server.addr(), "/stats"));
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (&v["inService"], &v["maxInService"], &v["waiting"], &v["queueFullRejections"], &v["requests"]),
        (&1.into(), &1.into(), &1.into(), &2.into(), &5.into())
    );
    assert_eq!((stats.max_in_service(), stats.queue_full_rejections()), (1, 2));
    server.stop();
    // Stopping ends the two held connections without an answer.
    drop((in_service, queued));
}

#[test]
fn service_time_alone_is_a_pure_delay_without_a_limit() {
    let options = TargetOptions { service_time: Some(Duration::from_secs(600)), ..Default::default() };
    assert_eq!((options.check(), options.capacity()), (Ok(()), None));
    let server = TargetServer::start_with(loopback(), 1, options).unwrap();
    let stats = server.stats();
    let streams: Vec<_> = (0..3).map(|_| send(server.addr(), "/get")).collect();
    // All three are in their service time together: nothing makes them wait for a permit.
    wait_until(&stats, "three requests in service", |s| s.in_service() == 3);
    assert_eq!((stats.waiting(), stats.max_in_service()), (0, 3));
    server.stop();
    drop(streams);
}

#[test]
fn capacity_is_concurrency_over_service_time_and_bad_options_are_refused() {
    let ten_ms = Some(Duration::from_millis(10));
    let options = TargetOptions { service_time: ten_ms, concurrency: Some(8), ..Default::default() };
    assert_eq!((options.check(), options.capacity()), (Ok(()), Some(800.0)));
    assert_eq!(TargetOptions::default().capacity(), None);

    let zero = TargetOptions { service_time: ten_ms, concurrency: Some(0), ..Default::default() };
    assert_eq!(zero.check(), Err(TargetOptionsError::ZeroConcurrency));
    let err = TargetServer::start_with(loopback(), 1, zero).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("concurrency must be at least 1"), "{err}");

    let no_time = TargetOptions { concurrency: Some(8), ..Default::default() };
    assert_eq!(no_time.check(), Err(TargetOptionsError::ConcurrencyWithoutServiceTime));
    let zero_time = TargetOptions { service_time: Some(Duration::ZERO), concurrency: Some(8), ..Default::default() };
    assert_eq!(zero_time.check(), Err(TargetOptionsError::ConcurrencyWithoutServiceTime));
    let no_limit = TargetOptions { service_time: ten_ms, queue_limit: Some(4), ..Default::default() };
    assert_eq!(no_limit.check(), Err(TargetOptionsError::QueueLimitWithoutConcurrency));
}
