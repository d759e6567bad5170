//! `stampede run --dashboard` in a real browser: headless Chromium (Debian's `chromium`;
//! `make unit` installs it) driven over the Chrome DevTools protocol opens the link the run
//! prints, sees the figures change while the run goes on, changes the run's VUs and pauses and
//! resumes it with the page's own controls, and at the end holds the report's per-step figures
//! and the same HTML report as `--html`. A screenshot is written to the test's temporary folder.
//! Every wait is bounded; none measures speed: the run lasts (up to 10 minutes) until the test has
//! seen what it waits for, then Ctrl-C (SIGINT) ends it, as a user ends a run early.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::cdp::{CHROMIUM, Cdp, Killed};

/// What the page shows: its state, figures, step table and changes.
const SEEN: &str = "(() => { const t = (id) => document.getElementById(id)?.textContent ?? ''; \
             const rows = (id) => Array.from(document.querySelectorAll('#' + id + ' tbody tr')) \
               .map((tr) => Array.from(tr.children).map((c) => c.textContent)); \
             return { state: t('state'), requests: t('requests'), errors: t('errors'), vus: t('vus'), \
               message: t('control-msg'), steps: rows('steps'), changes: rows('changes'), \
               head: Array.from(document.querySelectorAll('#steps thead th')).map((c) => c.textContent), \
               report: document.body?.dataset.report ?? '', \
               lines: document.querySelectorAll('#chart-rps polyline').length, \
               changeLines: document.querySelectorAll('#chart-vus line.change').length }; })()";

#[test]
fn chromium_watches_and_steers_a_run_on_its_live_dashboard_and_ends_with_the_reports_figures() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: `make unit` installs Debian's chromium (or: apt-get install chromium)"
    );
    let dir = tempfile::tempdir().unwrap();
    let (html, out) = (dir.path().join("r.html"), dir.path().join("r.json"));
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart.yaml");
    let mut run = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("run")
        .arg(&quickstart)
        .args(["--quiet", "--threads", "1", "--duration", "10m", "--dashboard", "127.0.0.1:0"])
        .args(["--dashboard-keep", "5m", "--html"])
        .arg(&html)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = run.stderr.take().unwrap();
    let run = Killed(run);
    let mut lines = BufReader::new(stderr).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("stampede: dashboard at ").map(str::to_string))
        .expect("the run prints its dashboard's link");
    assert!(url.starts_with("http://127.0.0.1:") && url.contains("/?token="), "{url}");
    // The rest of stderr is drained, so that the run never blocks on it.
    let drained = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());

    let (_browser, mut cdp) = Cdp::start(dir.path());
    cdp.call("Page.navigate", json!({"url": url}));

    // Live: the count of requests grows while the run goes on, and the throughput chart draws.
    let first = cdp.wait_until("a first count of requests", SEEN, |s| s["state"] == "running" && s["requests"] != "0");
    let count = |s: &Value| s["requests"].as_str().unwrap().replace(',', "").parse::<u64>().unwrap();
    let before = count(&first);
    let later = cdp.wait_until("a larger count", SEEN, |s| s["state"] == "running" && count(s) > before);
    assert!(later["lines"].as_u64() >= Some(1), "{later}");

    // The page's controls: fewer VUs, a pause, a resume; each taken, and listed as a change.
    cdp.eval("document.getElementById('vus-input').value = '4'; document.getElementById('vus-apply').click(); 1");
    cdp.wait_until("VUs changed to 4", SEEN, |s| s["message"] == "taken: VUs → 4" || s["vus"] == "4");
    cdp.eval("document.getElementById('pause').click(); 1");
    cdp.wait_until("the pause", SEEN, |s| s["state"] == "paused");
    cdp.eval("document.getElementById('resume').click(); 1");
    let resumed =
        cdp.wait_until("the resume", SEEN, |s| s["state"] != "paused" && s["changes"].as_array().unwrap().len() == 3);
    let changes: Vec<String> =
        resumed["changes"].as_array().unwrap().iter().map(|r| r[0].as_str().unwrap().into()).collect();
    assert!(
        changes[0].ends_with("VUs → 4") && changes[1].ends_with("paused") && changes[2].ends_with("resumed"),
        "{changes:?}"
    );
    // Enough seen: Ctrl-C ends the run (its partial report is written; the page stays up).
    let interrupted = Command::new("kill").args(["-INT", &run.0.id().to_string()]).status().unwrap();
    assert!(interrupted.success());

    // The end: the page's step table is the report's, and it holds the same HTML report.
    let end =
        cdp.wait_until("the end of the run and its report", SEEN, |s| s["state"] == "ended" && s["report"] == "ready");
    cdp.screenshot(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-dashboard.png"));

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(end["head"], json!(["step", "requests", "errors", "error %", "p50 ms", "p90 ms", "p99 ms", "req/s"]));
    let rows = end["steps"].as_array().unwrap();
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(rows.len(), steps.len() + 1, "one row per step and the total: {rows:?}");
    for (row, step) in rows.iter().zip(steps.iter().chain([&report["total"]])) {
        let name = if step.get("step").is_some() {
            format!("{} / {}", step["scenario"].as_str().unwrap(), step["step"].as_str().unwrap())
        } else {
            "total".into()
        };
        // The report's numbers, written as the page writes numbers (its own `fmt`).
        let l = &step["latencyMs"];
        let mut shown = |n: &Value, digits: u32| cdp.eval(&format!("fmt({n}, {digits})")).as_str().unwrap().to_string();
        let expected = [
            name,
            shown(&step["requests"], 0),
            shown(&step["errors"], 0),
            shown(&json!(step["errorRate"].as_f64().unwrap() * 100.0), 2),
            shown(&l["p50"], 3),
            shown(&l["p90"], 3),
            shown(&l["p99"], 3),
            shown(&step["rps"], 1),
        ];
        assert_eq!(row, &json!(expected), "the page's row against the report's step");
    }
    let recorded: Vec<(Option<u64>, Option<bool>)> = report["run"]["loadChanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["vus"].as_u64(), c["paused"].as_bool()))
        .collect();
    assert_eq!(recorded, [(Some(4), None), (None, Some(true)), (None, Some(false))]);
    let kept = cdp.eval("report");
    assert_eq!(kept.as_str(), Some(std::fs::read_to_string(&html).unwrap().as_str()), "the page keeps --html's report");
    assert!(kept.as_str().unwrap().contains("class=\"load-change\""), "the HTML report marks the changes");
    assert!(cdp.complaints.is_empty(), "the page logged or threw: {:?}", cdp.complaints);
    drop(run);
    let _ = drained.join();
}
