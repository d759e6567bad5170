//! A target that writes down every request it serves: which runner sent it (from the query's
//! `r=`), when it came in and when it was answered, on one clock for every runner process. Each
//! request is answered after `/delay/N` milliseconds. A plain HTTP/1.1 server on 127.0.0.1, a
//! thread per connection, for the tests that look at a fleet's load from the target's side.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The most requests written down: a test's run is bounded well below it.
const MAX_RECORDED: usize = 200_000;

/// One request as the target saw it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Served {
    /// The `r=` of its query: the runner's index.
    pub(crate) runner: u32,
    /// When its request line was read, µs since the Unix epoch.
    pub(crate) start_us: i64,
    /// When its answer was about to be written, µs since the Unix epoch.
    pub(crate) end_us: i64,
}

pub(crate) struct Recorder {
    addr: SocketAddr,
    served: Arc<Mutex<Vec<Served>>>,
    stop: Arc<AtomicBool>,
}

fn now_us() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros()).unwrap()
}

impl Recorder {
    pub(crate) fn start() -> Recorder {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopped) = (served.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let log = log.clone();
                std::thread::spawn(move || serve(conn, &log));
            }
        });
        Recorder { addr, served, stop }
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests served so far.
    pub(crate) fn count(&self) -> usize {
        self.served.lock().unwrap().len()
    }

    /// Every request served so far, in the order they were answered.
    pub(crate) fn served(&self) -> Vec<Served> {
        self.served.lock().unwrap().clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Serves one kept-alive connection until the client closes it.
fn serve(conn: TcpStream, log: &Mutex<Vec<Served>>) {
    let mut out = conn.try_clone().unwrap();
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let start_us = now_us();
        // The headers, to the blank line (a GET has no body).
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" || header == "\n" {
                break;
            }
        }
        let target = line.split_whitespace().nth(1).unwrap_or("/");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let delay = path.strip_prefix("/delay/").and_then(|ms| ms.parse().ok()).unwrap_or(0);
        let runner = query.split('&').find_map(|kv| kv.strip_prefix("r=")?.parse().ok()).unwrap_or(u32::MAX);
        std::thread::sleep(Duration::from_millis(delay));
        let end_us = now_us();
        {
            let mut log = log.lock().unwrap();
            assert!(log.len() < MAX_RECORDED, "more requests than a test's run sends");
            log.push(Served { runner, start_us, end_us });
        }
        if out.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok").is_err() {
            return;
        }
    }
}

/// A runner's requests in flight over time: the most at once among those that came in before
/// `at_us`, and the first instant more than `limit` were in flight (if ever), and the most ever.
pub(crate) struct InFlight {
    pub(crate) most_before: u32,
    pub(crate) first_above_limit_us: Option<i64>,
    pub(crate) most: u32,
}

pub(crate) fn in_flight(served: &[Served], runner: u32, at_us: i64, limit: u32) -> InFlight {
    // (instant, +1 for a request coming in, -1 for one answered); at one instant, the answer first:
    // a VU sends its next request only after it has read the last answer.
    let mut edges: Vec<(i64, i32)> =
        served.iter().filter(|s| s.runner == runner).flat_map(|s| [(s.start_us, 1), (s.end_us, -1)]).collect();
    edges.sort_unstable();
    let (mut now, mut out) = (0i32, InFlight { most_before: 0, first_above_limit_us: None, most: 0 });
    for (t, d) in edges {
        now += d;
        let n = u32::try_from(now).unwrap();
        out.most = out.most.max(n);
        if t < at_us {
            out.most_before = out.most_before.max(n);
        }
        if n > limit && out.first_above_limit_us.is_none() {
            out.first_above_limit_us = Some(t);
        }
    }
    out
}
