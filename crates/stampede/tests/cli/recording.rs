//! #24: a browser recording imported and replayed. Headless Chromium (Debian's `chromium`), driven
//! through its DevTools protocol by `tests/har/record.py`, clicks through the built-in target's
//! shop page (`/shop/app`: log in, show the products, add one, check out) and records a HAR;
//! `stampede import har` makes a scenario of it with the login's token correlated by itself (an
//! extractor on the login, `Bearer {{token}}` after it), which then runs twice against a fresh
//! target with 0 errors and no duplicate order.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use stampede_target::TargetServer;

const CHROMIUM: &str = "/usr/bin/chromium";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn start() -> TargetServer {
    TargetServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap()
}

#[test]
fn a_chromium_recording_of_the_shop_imports_with_its_token_correlated_and_replays_clean() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: `make unit` installs Debian's chromium (or: apt-get install chromium)"
    );
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("shop.har");
    let recorded = start();
    let steps = [
        r#"#login|document.getElementById("status").textContent.startsWith("logged in")"#,
        r#"#products|document.querySelectorAll(".add").length > 0"#,
        r#".add|document.getElementById("cart").textContent === "1""#,
        r#"#checkout|document.getElementById("order").textContent.startsWith("ordered")"#,
    ];
    let mut record = Command::new("python3");
    record.arg(repo_root().join("tests/har/record.py")).args(["--chromium", CHROMIUM, "--out"]).arg(&har);
    record.args(["--url", &format!("{}/shop/app", recorded.base_url())]);
    for s in steps {
        record.args(["--step", s]);
    }
    let out = record.output().unwrap();
    assert!(out.status.success(), "the recording failed: {}", text(&out.stderr));
    let shop = recorded.stats().shop().counts();
    assert_eq!((shop.logins, shop.orders), (1, 1), "the person's path went through: {shop:?}");
    recorded.stop();
    let recording: Value = serde_json::from_str(&std::fs::read_to_string(&har).unwrap()).unwrap();
    let token = recording["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["request"]["url"].as_str().unwrap().ends_with("/shop/login"))
        .map(|e| {
            serde_json::from_str::<Value>(e["response"]["content"]["text"].as_str().unwrap()).unwrap()["token"].clone()
        })
        .expect("the login and its token in the recording");

    let scenario = dir.path().join("shop.yaml");
    let import = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["import", "har"])
        .arg(&har)
        .arg("-o")
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(import.status.success(), "{}", text(&import.stderr));
    assert!(text(&import.stderr).contains("static asset request(s)"), "the favicon is left out, and said so");
    let yaml = std::fs::read_to_string(&scenario).unwrap();
    let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&yaml).unwrap();
    let names: Vec<&str> = file.scenarios[0].steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["GET /shop/app", "POST /shop/login", "GET /shop/products", "POST /shop/cart", "POST /shop/checkout"]
    );
    let login = &file.scenarios[0].steps[1];
    assert_eq!(login.extract.keys().collect::<Vec<_>>(), ["token"], "the token, correlated:\n{yaml}");
    for step in &file.scenarios[0].steps[2..] {
        assert_eq!(step.request.as_ref().unwrap().headers["Authorization"], "Bearer {{token}}", "{yaml}");
    }
    assert!(!yaml.contains(&format!("Bearer {}", token.as_str().unwrap())), "no recorded token:\n{yaml}");
    assert!(yaml.contains("{{ uuid() }}"), "the page's order id is made anew:\n{yaml}");

    // Replayed twice against a fresh target: 0 errors, two orders, no duplicate.
    let fresh = start();
    for _ in 0..2 {
        let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["run", "--quiet", "--base-url", &fresh.base_url()])
            .arg(&scenario)
            .output()
            .unwrap();
        assert!(run.status.success(), "{}{}", text(&run.stdout), text(&run.stderr));
        assert!(text(&run.stdout).contains("status codes: 200 ×3, 201 ×2"), "{}", text(&run.stdout));
    }
    let shop = fresh.stats().shop().counts();
    assert_eq!((shop.logins, shop.orders, shop.duplicate_order_ids, shop.unauthorized), (2, 2, 0, 0), "{shop:?}");
    fresh.stop();
}

/// A HAR cut short (a recording saved while the browser was still writing it): a clear error
/// naming the file, exit 2, never a panic.
#[test]
fn a_truncated_har_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("cut.har");
    std::fs::write(
        &har,
        r#"{"log": {"version": "1.2", "entries": [{"request": {"method": "GET", "url": "http://127.0.0.1:1/"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stampede")).args(["import", "har"]).arg(&har).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cut.har: not a HAR recording (JSON)"), "{}", text(&out.stderr));
}
