//! The HTML report in a real browser: headless Chromium (Debian's `chromium`; `make unit`
//! installs it when missing) opens a report served from loopback. Nothing but the page itself
//! is requested, the browser logs no console message, and after rendering every chart holds a
//! line with points. Without Chromium the test fails and says how to get it: never a skip.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Serves `page` at `/` (and 404 elsewhere) on 127.0.0.1, recording every request line.
fn serve(page: String) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            // A speculative connection that never sends a request is not a request.
            if reader.read_line(&mut first).is_err() || first.trim().is_empty() {
                continue;
            }
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            log.lock().unwrap().push(first.trim().to_string());
            let (status, body) =
                if first.starts_with("GET / ") { ("200 OK", page.as_str()) } else { ("404 Not Found", "") };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

#[test]
fn chromium_renders_every_chart_of_the_html_report_without_requests_or_console_messages() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: `make unit` installs Debian's chromium (or: apt-get install chromium)"
    );
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.yaml");
    std::fs::write(
        &scenario,
        "name: browser\nbaseUrl: builtin\nload: {executor: constant-arrival-rate, rate: 100, duration: 2s, \
         preAllocatedVUs: 2, maxVUs: 4}\nundeliveredLoad: warn\nscenarios:\n  - name: s\n    steps:\n      \
         - {name: ok, request: {url: \"{{baseUrl}}/get\"}, check: {status: 200}}\n      \
         - {name: broken, request: {url: \"{{baseUrl}}/status/503\"}, check: {status: 200}}\n",
    )
    .unwrap();
    let html = dir.path().join("r.html");
    let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", scenario.to_str().unwrap(), "--quiet", "--html", html.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let (port, seen) = serve(std::fs::read_to_string(&html).unwrap());

    let profile = dir.path().join("profile");
    let out = Command::new("timeout")
        .arg("120")
        .arg(CHROMIUM)
        .args(crate::cdp::HEADLESS)
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "chromium failed:\n{log}");

    // Nothing but the page was requested (no favicon, font, script or style sheet).
    assert_eq!(*seen.lock().unwrap(), ["GET / HTTP/1.1"], "requests the page made");
    // No console message: the page has no script, and nothing failed to load.
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages:\n{}", console.join("\n"));
    // The rendered document: every chart, each with points.
    let figures: Vec<&str> = dom.split("<figure class=\"chart").skip(1).collect();
    assert_eq!(
        figures.len(),
        9,
        "throughput, latency, p99 by step, errors, VUs, arrival rate, dropped, lag, distribution"
    );
    for figure in figures {
        let figure = &figure[..figure.find("</figure>").unwrap()];
        let title = figure.split("aria-label=\"").nth(1).and_then(|t| t.split('"').next()).unwrap_or("?");
        assert!(!figure.starts_with(" empty"), "chart {title} is empty");
        let points: Vec<usize> = figure
            .split("data-points=\"")
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].parse().unwrap())
            .collect();
        assert!(!points.is_empty() && points.iter().all(|&n| n > 0), "chart {title}: {points:?}");
        assert!(figure.contains("points=\"") && figure.contains(','), "chart {title} draws no line");
    }
}
