//! Headless Chromium (Debian's `chromium`; `make unit` installs it) driven over the Chrome
//! DevTools protocol: a page is opened, its values read with `Runtime.evaluate`, its buttons
//! clicked, a screenshot taken. Every wait is bounded; none measures speed. Shared by the live
//! dashboard's tests (the CLI's, and the operator's on the real control plane).

#![allow(dead_code, reason = "each test target uses part of it")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
/// The longest any one wait takes before the test fails (a busy machine is slow, not wrong).
pub(crate) const WAIT: Duration = Duration::from_secs(120);

/// Headless Chromium as this machine runs it (as root, with no network but loopback): without
/// the background-networking flags it keeps trying Google's hosts. A fresh `--user-data-dir` goes
/// with each start.
pub(crate) const HEADLESS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
];

/// A process killed when dropped.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One Chrome DevTools session on a page.
pub(crate) struct Cdp {
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    next: u64,
    /// Console calls and uncaught exceptions the page reported.
    pub(crate) complaints: Vec<String>,
}

impl Cdp {
    /// Starts headless Chromium with a fresh profile in `dir` and attaches to its page.
    pub(crate) fn start(dir: &Path) -> (Killed, Cdp) {
        let profile = dir.join("profile");
        let child = Command::new(CHROMIUM)
            .args(HEADLESS)
            .args(["--window-size=1200,1600", "--remote-debugging-port=0"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts");
        let browser = Killed(child);
        // Chromium writes the port it listens on into the profile.
        let active = profile.join("DevToolsActivePort");
        let port = wait_for("Chromium's DevTools port", || {
            std::fs::read_to_string(&active).ok()?.lines().next()?.trim().parse::<u16>().ok()
        });
        let page = wait_for("Chromium's page target", || {
            let list: Value = serde_json::from_str(&http_get(port, "/json/list")?).ok()?;
            let page = list.as_array()?.iter().find(|t| t["type"] == "page")?;
            page["webSocketDebuggerUrl"].as_str().map(str::to_string)
        });
        let (ws, _) = tungstenite::connect(page.as_str()).expect("the DevTools WebSocket");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(WAIT)).unwrap();
        }
        let mut cdp = Cdp { ws, next: 1, complaints: Vec::new() };
        cdp.call("Runtime.enable", json!({}));
        cdp.call("Page.enable", json!({}));
        (browser, cdp)
    }

    /// Calls `method` and returns its result (events that come meanwhile are looked at).
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let text = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::Text(text.into())).expect("a DevTools call is sent");
        loop {
            let message = self.ws.read().expect("a DevTools answer");
            let Message::Text(text) = message else { continue };
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["id"] == id {
                assert!(value.get("error").is_none(), "{method}: {value}");
                return value["result"].clone();
            }
            match value["method"].as_str() {
                Some("Runtime.consoleAPICalled") => self.complaints.push(value["params"]["args"].to_string()),
                Some("Runtime.exceptionThrown") => {
                    self.complaints.push(value["params"]["exceptionDetails"].to_string())
                }
                _ => {}
            }
        }
    }

    /// The value of `expression` in the page.
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        let result = self.call("Runtime.evaluate", json!({"expression": expression, "returnByValue": true}));
        assert!(result.get("exceptionDetails").is_none(), "{expression}: {result}");
        result["result"]["value"].clone()
    }

    /// Waits until the value of `expression` in the page passes `done`; returns it.
    pub(crate) fn wait_until(&mut self, what: &str, expression: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let seen = self.eval(expression);
            if done(&seen) {
                return seen;
            }
            assert!(start.elapsed() < WAIT, "waited {WAIT:?} for {what}; the page shows {seen}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Calls `f` until it gives a value (at most [`WAIT`]).
pub(crate) fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < WAIT, "waited {WAIT:?} for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The body of `GET path` on 127.0.0.1:`port`, when it answers (by its Content-Length: the
/// DevTools server keeps the connection open).
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").ok()?;
    let mut reader = BufReader::new(s);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    String::from_utf8(body).ok()
}

/// Standard base64 (the screenshot).
pub(crate) fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = text.bytes().filter(|c| *c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, c)| n | u32::from(value(*c)) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// The operator page's step rows for `.status`'s `steps` (step, requests, errors, p50, p90, p99:
/// the percentiles ticked at first), numbers written as the page writes them (its own `fmt`).
pub(crate) fn status_step_rows(cdp: &mut Cdp, steps: &[stampede_api::StepResult]) -> Vec<Value> {
    steps
        .iter()
        .map(|s| {
            let mut f = |n: f64, d: u32| cdp.eval(&format!("fmt({n}, {d})")).as_str().unwrap().to_string();
            let l = &s.latency_ms;
            json!([
                format!("{} / {}", s.scenario, s.step),
                f(s.requests as f64, 0),
                f(s.errors as f64, 0),
                f(l.p50, 3),
                f(l.p90, 3),
                f(l.p99, 3)
            ])
        })
        .collect()
}

/// The operator's page at `url`: signs in with `token`, waits for `ns/name` in the list, and
/// opens it.
pub(crate) fn open_loadtest(cdp: &mut Cdp, url: &str, token: &str, ns: &str, name: &str) {
    cdp.call("Page.navigate", json!({"url": url}));
    cdp.wait_until("the sign-in form", "document.getElementById('token') !== null", |v| v == &json!(true));
    cdp.eval(&format!(
        "document.getElementById('token').value = {}; document.getElementById('login').requestSubmit(); 1",
        json!(token)
    ));
    let me = format!("{ns}/{name}");
    let listed = "Array.from(document.querySelectorAll('#loadtests tbody tr')).map((tr) => tr.children[0].textContent)";
    cdp.wait_until("the LoadTest in the list", listed, |l| {
        l.as_array().is_some_and(|l| l.iter().any(|r| r == &json!(me)))
    });
    cdp.eval(&format!("location.hash = '#/{ns}/{name}'; 1"));
}

impl Cdp {
    /// A screenshot of the whole page, written to `path`.
    pub(crate) fn screenshot(&mut self, path: &Path) {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true}));
        std::fs::write(path, base64_decode(shot["data"].as_str().unwrap())).unwrap();
        eprintln!("screenshot: {}", path.display());
    }
}
