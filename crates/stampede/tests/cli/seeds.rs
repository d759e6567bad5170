//! #32: randomness with a scope you can reason about. Each VU draws its data rows, scenario
//! picks, think times, generated values and WebSocket keys from a stream of the run's seed and
//! its `vu.id`; `setup` and `teardown` have their own. With `--seed` a run repeats exactly;
//! without it two runs differ; `uniqueId()` never repeats.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

use crate::commands::{stampede, text};

/// A raw HTTP/1.1 server on 127.0.0.1 (a thread per connection) keeping, for each request, its
/// target and its `Sec-WebSocket-Key` (`target key`, the key empty when none): it answers `200`
/// to plain requests and `400` to WebSocket upgrades (their key is what it is after).
fn recording_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let log = log.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut key = String::new();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = h.split_once(':')
                            && name.eq_ignore_ascii_case("sec-websocket-key")
                        {
                            key = value.trim().to_string();
                        }
                    }
                    let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
                    log.lock().unwrap().push(format!("{target} {key}"));
                    if !key.is_empty() {
                        let _ = writer
                            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                        return;
                    }
                    if writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

/// A scenario of `vus` VUs and `iterations` iterations against the server on `port`: setup and
/// teardown send a `uuid()` and a `uniqueId()`; each iteration picks scenario `a` (weight 3) or
/// `b`, sends its VU, iteration, random data row, `uuid()` and `uniqueId()` in the path, thinks
/// a random while, and opens a WebSocket.
fn scenario(dir: &std::path::Path, port: u16, vus: u32, iterations: u32) -> std::path::PathBuf {
    let mut csv = String::from("name\n");
    for i in 0..50 {
        csv.push_str(&format!("row{i}\n"));
    }
    std::fs::write(dir.join("users.csv"), csv).unwrap();
    let flow = |name: &str, weight: u32| {
        format!(
            "  - name: {name}\n    weight: {weight}\n    steps:\n      \
             - {{name: {name}, request: {{url: \"{{{{baseUrl}}}}/{name}/{{{{ vu.id }}}}/{{{{ vu.iteration }}}}/{{{{ users.name }}}}/{{{{ uuid() }}}}/{{{{ uniqueId() }}}}\"}}, think: {{min: 0ms, max: 2ms}}}}\n      \
             - {{name: {name}-ws, ws: {{url: \"{{{{baseUrl}}}}/ws/{name}\", actions: [{{send: hi}}]}}}}\n"
        )
    };
    let yaml = format!(
        "name: seeds\nbaseUrl: http://127.0.0.1:{port}\nload: {{executor: constant-vus, vus: {vus}, iterations: {iterations}}}\n\
         data:\n  users: {{csv: users.csv, mode: random}}\n\
         setup:\n  - {{name: prepare, request: {{url: \"{{{{baseUrl}}}}/setup/{{{{ uuid() }}}}/{{{{ uniqueId() }}}}\"}}}}\n\
         teardown:\n  - {{name: clean, request: {{url: \"{{{{baseUrl}}}}/teardown/{{{{ uuid() }}}}/{{{{ uniqueId() }}}}\"}}}}\n\
         scenarios:\n{}{}",
        flow("a", 3),
        flow("b", 1)
    );
    let path = dir.join("seeds.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Runs the scenario (with `seed`, if any) and gives what the server saw, in order.
fn run(vus: u32, iterations: u32, seed: Option<&str>) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = recording_server();
    let file = scenario(dir.path(), port, vus, iterations);
    let mut args = vec!["run", file.to_str().unwrap(), "--quiet"];
    if let Some(seed) = seed {
        args.extend(["--seed", seed]);
    }
    let out = stampede(&args);
    // The WebSockets are refused (errors), which no threshold judges.
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2 + 2 * iterations as usize, "setup, teardown, two per iteration: {seen:?}");
    seen
}

/// The parts of a plain request's path (`/a/1/0/row7/UUID/ID` → `[a, 1, 0, row7, UUID, ID]`).
fn parts(request: &str) -> Vec<&str> {
    request.split(' ').next().unwrap().trim_start_matches('/').split('/').collect()
}

/// The iterations' requests (not setup's or teardown's, not the WebSockets).
fn iterations(seen: &[String]) -> impl Iterator<Item = Vec<&str>> {
    seen.iter().map(|r| parts(r)).filter(|p| matches!(p[0], "a" | "b"))
}

#[test]
fn with_a_seed_a_run_repeats_exactly_and_without_one_two_runs_differ() {
    let seeded = run(1, 20, Some("7"));
    let again = run(1, 20, Some("7"));
    // A WebSocket key is drawn from the system's randomness for every connection, seed or not
    // (RFC 6455 §4.1): the rest of the run repeats.
    let without_keys = |seen: &[String]| -> Vec<String> {
        seen.iter()
            .map(|r| if r.starts_with("/ws/") { r.split(' ').next().unwrap().to_string() } else { r.clone() })
            .collect()
    };
    assert_eq!(without_keys(&again), without_keys(&seeded), "the same seed: the same rows, picks and ids");
    let keys_of = |seen: &[String]| -> BTreeSet<String> {
        seen.iter()
            .filter(|r| r.starts_with("/ws/"))
            .filter_map(|r| r.split_once(' ').map(|(_, k)| k.to_string()))
            .collect()
    };
    assert_eq!(keys_of(&seeded).union(&keys_of(&again)).count(), 40, "a fresh key per connection, across runs too");
    let picks: BTreeSet<&str> = iterations(&seeded).map(|p| p[0]).collect();
    assert_eq!(picks, BTreeSet::from(["a", "b"]), "{seeded:?}");
    let rows: BTreeSet<&str> = iterations(&seeded).map(|p| p[3]).collect();
    assert!(rows.len() > 1, "random rows: {seeded:?}");

    // Without a seed: other rows and picks, other WebSocket keys (not only other uuids).
    let (one, two) = (run(1, 20, None), run(1, 20, None));
    let choices = |seen: &[String]| -> Vec<String> { iterations(seen).map(|p| format!("{}/{}", p[0], p[3])).collect() };
    assert_ne!(choices(&one), choices(&two), "rows and picks\n{one:?}\n{two:?}");
    let keys = |seen: &[String]| -> Vec<String> {
        seen.iter().filter_map(|r| r.split_once(' ').map(|(_, k)| k.to_string())).filter(|k| !k.is_empty()).collect()
    };
    assert_eq!(keys(&one).len(), 20);
    assert_ne!(keys(&one), keys(&two), "WebSocket keys");
}

#[test]
fn setup_and_teardown_draw_their_own_values_and_unique_ids_never_repeat() {
    let seen = run(3, 30, Some("7"));
    let setup = seen.iter().map(|r| parts(r)).find(|p| p[0] == "setup").unwrap();
    let teardown = seen.iter().map(|r| parts(r)).find(|p| p[0] == "teardown").unwrap();
    // Each VU's first uuid, by vu.id.
    let mut first: BTreeMap<&str, &str> = BTreeMap::new();
    for p in iterations(&seen).filter(|p| p[2] == "0") {
        first.insert(p[1], p[4]);
    }
    assert!(first.contains_key("1"), "{seen:?}");
    assert!(first.values().all(|u| *u != setup[1] && *u != teardown[1]), "setup {setup:?}, VUs {first:?}");
    assert_ne!(setup[1], teardown[1]);

    let ids: Vec<&str> =
        [setup[2], teardown[2]].into_iter().chain(iterations(&seen).map(|p| p[5]).collect::<Vec<_>>()).collect();
    let distinct: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "{ids:?}");
    assert_eq!((setup[2], teardown[2]), ("0-setup-1", "0-teardown-1"));
    // The VUs draw different rows from one another.
    let rows_of = |vu: &str| -> Vec<&str> { iterations(&seen).filter(|p| p[1] == vu).map(|p| p[3]).collect() };
    let vus: BTreeSet<&str> = iterations(&seen).map(|p| p[1]).collect();
    for (a, b) in vus.iter().zip(vus.iter().skip(1)) {
        let (ra, rb) = (rows_of(a), rows_of(b));
        let n = ra.len().min(rb.len());
        assert!(n < 3 || ra[..n] != rb[..n], "VU {a} and VU {b} drew the same rows: {ra:?}");
    }
}
