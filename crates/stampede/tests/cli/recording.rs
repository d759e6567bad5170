//! #24: recordings and plans from other tools, imported and run. Headless Chromium (Debian's
//! `chromium`), driven through its DevTools protocol by `tests/har/record.py`, clicks through the
//! built-in target's shop page (`/shop/app`: log in, show the products, add one, check out) and
//! records a HAR;
//! `stampede import har` makes a scenario of it with the login's token correlated by itself (an
//! extractor on the login, `Bearer {{token}}` after it), which then runs twice against a fresh
//! target with 0 errors and no duplicate order. Real JMeter runs two plans; imported, they send
//! what JMeter sent, sampler by sampler.

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
    assert!(yaml.contains("{{env.HOST_127_0_0_1_PASSWORD}}"), "the login's password from the environment:\n{yaml}");

    // Replayed twice against a fresh target: 0 errors, two orders, no duplicate.
    let fresh = start();
    for _ in 0..2 {
        let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["run", "--quiet", "--base-url", &fresh.base_url()])
            .arg(&scenario)
            .env("HOST_127_0_0_1_PASSWORD", "pw")
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

/// The JMeter home `tests/jmeter/home.sh` caches (`make unit` builds it through tests/deps.sh).
fn jmeter_home() -> PathBuf {
    let cache = std::env::var_os("STAMPEDE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/stampede"));
    let home = cache.join("jmeter-5.6.3");
    assert!(home.join("complete").exists(), "{} is missing: run `bash tests/deps.sh` (make unit does)", home.display());
    home
}

/// Request counts by label in a JMeter results file (CSV with a header row), leaving out `skip`
/// (a transaction controller's own rows).
fn jtl_counts(jtl: &Path, skip: &[&str]) -> std::collections::BTreeMap<String, u64> {
    let text = std::fs::read_to_string(jtl).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let (label, success) =
        (header.iter().position(|h| *h == "label").unwrap(), header.iter().position(|h| *h == "success").unwrap());
    let mut counts = std::collections::BTreeMap::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        if skip.contains(&cells[label]) {
            continue;
        }
        assert_eq!(cells[success], "true", "JMeter's own sample failed: {line}");
        *counts.entry(cells[label].to_string()).or_insert(0) += 1;
    }
    counts
}

/// #24: two JMeter plans that real JMeter (5.6.3, from Maven Central) runs against the built-in
/// target for a fixed number of iterations — one with CSV data, HTTP defaults, headers, a JSON
/// extractor and assertions; one with a transaction controller, a loop controller, timers and
/// JMeter functions — imported and run by Stampede: every sampler's request count equals
/// JMeter's own results file, with 0 errors, and the target saw both runs' requests.
#[test]
fn jmeter_plans_import_to_scenarios_that_send_what_jmeter_sends() {
    let home = jmeter_home();
    let fixtures = repo_root().join("crates/stampede/tests/cli/fixtures/jmx");
    for (plan, transactions) in [("csv-extract", &[][..]), ("transaction-timers", &["checkout"][..])] {
        let target = start();
        let port = target.base_url().rsplit(':').next().unwrap().to_string();
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(fixtures.join("users.csv"), dir.path().join("users.csv")).unwrap();
        let text_in = std::fs::read_to_string(fixtures.join(format!("{plan}.jmx"))).unwrap();
        let jmx = dir.path().join(format!("{plan}.jmx"));
        std::fs::write(&jmx, text_in.replace("PORT", &port)).unwrap();
        let jtl = dir.path().join("results.jtl");
        let jmeter = Command::new("timeout")
            .arg("120")
            .arg("java")
            .arg("-jar")
            .arg(home.join("bin/ApacheJMeter.jar"))
            .args(["-n", "-Jjmeter.save.saveservice.subresults=false", "-t"])
            .arg(&jmx)
            .arg("-l")
            .arg(&jtl)
            .arg("-j")
            .arg(dir.path().join("jmeter.log"))
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(jmeter.status.success(), "{plan}: JMeter failed: {}{}", text(&jmeter.stdout), text(&jmeter.stderr));
        let expected = jtl_counts(&jtl, transactions);
        let sent_by_jmeter: u64 = expected.values().sum();
        assert_eq!(target.stats().requests(), sent_by_jmeter, "{plan}");

        let scenario = dir.path().join(format!("{plan}.yaml"));
        let import = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["import", "jmx"])
            .arg(&jmx)
            .arg("-o")
            .arg(&scenario)
            .output()
            .unwrap();
        assert!(import.status.success(), "{plan}: {}", text(&import.stderr));
        let out = dir.path().join("report.json");
        let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["run", "--quiet", "--out"])
            .arg(&out)
            .arg(&scenario)
            .output()
            .unwrap();
        assert!(run.status.success(), "{plan}: {}{}", text(&run.stdout), text(&run.stderr));
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(report["total"]["errors"], 0, "{plan}: {}", text(&run.stdout));
        let got: std::collections::BTreeMap<String, u64> = report["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["step"].as_str().unwrap().to_string(), s["requests"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, expected, "{plan}: Stampede's requests per step, JMeter's per sampler");
        assert_eq!(target.stats().requests(), 2 * sent_by_jmeter, "{plan}");
        if plan == "transaction-timers" {
            let group = report["groups"].as_array().unwrap().iter().find(|g| g["step"] == "checkout").unwrap();
            assert_eq!(group["requests"], 6, "one checkout transaction per iteration, as JMeter's 6 rows");
            assert!(text(&import.stderr).contains("element `DebugPostProcessor` is not converted"), "listed");
            assert!(!text(&import.stderr).contains("DebugSampler"), "a disabled element is not JMeter's either");
        }
        target.stop();
    }
}

/// A `.jmx` cut short: a clear error naming the file and the element left open, exit 2.
#[test]
fn a_truncated_jmeter_plan_is_refused_naming_the_element_left_open() {
    let dir = tempfile::tempdir().unwrap();
    let jmx = dir.path().join("cut.jmx");
    std::fs::write(
        &jmx,
        "<jmeterTestPlan><hashTree><TestPlan testname=\"t\"/><hashTree>\n<HTTPSamplerProxy testname=\"s\">",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stampede")).args(["import", "jmx"]).arg(&jmx).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cut.jmx: not a JMeter plan (XML)") && stderr.contains("`<HTTPSamplerProxy>` is not closed"),
        "{stderr}"
    );
}
