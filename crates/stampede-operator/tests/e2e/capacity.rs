//! #16 on the real control plane: a capacity search by three runners against a target with a
//! known capacity (16 at once × 20 ms = 800/s, on 127.0.0.1), beside the command line's search
//! of the same scenario against the same kind of target. The rate each finds is the machine's
//! of the moment and only printed; the test asserts what holds on any machine: the merged
//! search follows its rules, each plateau is the runners' shares added up, the runners stop
//! with the search.
//!
//! No plateau sits at the capacity itself: there the target's queue neither drains nor surely
//! grows (its timer rounds each 20 ms up to the next millisecond, so the true capacity is a few
//! percent below 800/s), and whether a plateau at 800/s passed was chance. The plateaus are 450,
//! 600, 750 (below), then 900 and 1,050 (well above: the queue grows by 100/s or more).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use stampede_api::{LoadTest, Phase, RESULT_KEY, RunnerReport, names};
use stampede_target::{TargetOptions, TargetServer};
use stampede_testcluster::wait_for;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::operator::{create, finish, loadtest, phase_is, setup};

fn known_capacity_target() -> TargetServer {
    let options = TargetOptions {
        service_time: Some(Duration::from_millis(20)),
        concurrency: Some(16),
        ..TargetOptions::default()
    };
    TargetServer::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1, options).unwrap()
}

fn search(base_url: &str) -> serde_json::Value {
    serde_json::json!({
        "name": "capacity",
        "baseUrl": base_url,
        "load": {
            "executor": "capacity", "startRate": 450, "step": 150, "plateau": "3s", "warmup": "1s",
            "maxRate": 1500, "stopAfter": 2, "preAllocatedVUs": 60, "maxVUs": 300, "gracefulStop": "1s"
        },
        "scenarios": [{"name": "s", "steps": [{"name": "get", "request": {"url": "{{baseUrl}}/get"}}]}],
        "thresholds": ["latency.p99 < 100ms", "errors.rate < 1%"],
    })
}

/// The command line's answer for the same search against a fresh target of the same capacity.
async fn cli_capacity() -> Option<f64> {
    let target = known_capacity_target();
    let dir = std::env::temp_dir().join(format!("stampede-capacity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("capacity.yaml");
    std::fs::write(&scenario, serde_yaml::to_string(&search(&target.base_url())).unwrap()).unwrap();
    let json = dir.join("report.json");
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(|deps| deps.parent()).unwrap().join("stampede");
    let (s, j) = (scenario.clone(), json.clone());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(bin).args(["run", "--quiet"]).arg(&s).arg("--out").arg(&j).output().unwrap()
    })
    .await
    .unwrap();
    target.stop();
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // Whether a plateau passed is the machine's; the exit code follows the verdicts kept.
    let passed = report["thresholds"].as_array().unwrap().iter().all(|v| v["passed"] == true);
    assert_eq!(out.status.code(), Some(if passed { 0 } else { 1 }), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(report["capacity"]["plateaus"][0]["rate"], 450.0, "the CLI ran the same search: {report}");
    report["capacity"]["capacity"].as_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_three_runners_search_for_the_capacity_by_its_rules_and_stop_after_the_stop_rule() {
    let env = setup("lt-capacity").await;
    let target = known_capacity_target();
    let lt = loadtest("capacity", 3, search(&target.base_url()), serde_json::json!({"cleanup": {"onSuccess": "none"}}));
    let api = create(&env, &lt).await;
    let lt: LoadTest =
        wait_for(&api, "capacity", Duration::from_secs(300), phase_is(&[Phase::Succeeded, Phase::Failed]))
            .await
            .unwrap();
    let ended = OffsetDateTime::now_utc();
    let st = lt.status.clone().unwrap();
    // Judged at the capacity (at the first plateau when none passed, as on a very busy box).
    let verdicts_passed = st.thresholds.iter().all(|v| v.passed);
    let phase = if verdicts_passed { Phase::Succeeded } else { Phase::Failed };
    assert_eq!(st.phase, phase, "{:?}", st.message);
    let cap = st.capacity.clone().expect("status.capacity");
    eprintln!("status.capacity: {}", serde_json::to_string_pretty(&cap).unwrap());
    assert!(cap.done, "{cap:?}");
    // Which rate the search finds is the machine's (a busy CI box stretches the p99 below the
    // target's 800/s; locally it finds 750/s): not asserted. What is: the merged search obeys
    // its rules. The plateaus rise by the step from the start; the capacity is the best rate
    // that passed; the limit names the first rate above it that failed and the thresholds that
    // failed there; the search stopped once `stopAfter` plateaus in a row failed (or, the
    // runners not keeping up, said the generator was the limit).
    // (A plateau the generator's machine stalled through is run again at its rate.)
    let mut rates: Vec<f64> = cap.plateaus.iter().map(|p| p.rate).collect();
    rates.dedup();
    let rising: Vec<f64> = (0..rates.len()).map(|k| 450.0 + 150.0 * k as f64).collect();
    assert_eq!(rates, rising, "{cap:?}");
    let best = cap.plateaus.iter().filter(|p| p.passed).map(|p| p.rate).reduce(f64::max);
    assert_eq!(cap.rate, best, "the capacity is the best rate that passed: {cap:?}");
    let first_failed = cap.plateaus.iter().find(|p| !p.passed && best.is_none_or(|c| p.rate > c)).expect("a failure");
    let limited_by = cap.limited_by.clone().unwrap_or_default();
    if cap.lower_bound {
        assert!(limited_by.starts_with("the generator"), "{cap:?}");
    } else {
        let why = first_failed.why.clone().unwrap_or_default();
        let failed: Vec<&str> = why.split(", ").collect();
        if failed.iter().all(|t| ["latency.p99 < 100ms", "errors.rate < 1%"].contains(t)) {
            assert!(limited_by.contains(&format!("failed first, at {:.1}/s", first_failed.rate)), "{cap:?}");
            assert!(failed.iter().all(|t| limited_by.contains(&format!("`{t}`"))), "{cap:?}");
        } else {
            assert!(limited_by.contains(&format!("at {:.1}/s only", first_failed.rate)), "{cap:?}");
        }
        assert!(cap.plateaus.last().is_some_and(|p| !p.passed), "stopped on a failure: {cap:?}");
        let mut failed_last: Vec<f64> = cap.plateaus.iter().rev().take_while(|p| !p.passed).map(|p| p.rate).collect();
        failed_last.dedup();
        assert_eq!(failed_last.len(), 2, "stopped once 2 rates in a row failed: {cap:?}");
    }
    let found = cap.rate.unwrap_or_default();

    // Each judged plateau is exactly the runners' shares added up.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let mut reports = Vec::new();
    for i in 0..3 {
        let cm = cms.get(&names::result_config_map("capacity", i)).await.unwrap();
        let text = cm.data.unwrap_or_default().get(RESULT_KEY).cloned().unwrap_or_default();
        reports.push(serde_json::from_str::<RunnerReport>(&text).unwrap());
    }
    for (k, row) in cap.plateaus.iter().enumerate() {
        let shares: Vec<u64> = reports
            .iter()
            .map(|r| {
                let share = r.plateaus.iter().find(|p| p.index == k as u32).expect("every runner's share");
                share.metrics.steps.iter().map(|s| s.requests).sum::<u64>()
            })
            .collect();
        assert_eq!(row.requests, shares.iter().sum::<u64>(), "plateau {k}: merged = the runners' samples");
        let rate: f64 = reports.iter().map(|r| r.plateaus[k].rate).sum();
        assert!((rate - row.rate).abs() < 1e-6, "plateau {k}: the runners' rates add up to {}", row.rate);
    }
    // The runners stopped once the search was over: none ran a plateau past the last judged one
    // (the one in progress was cut short and not reported).
    let judged = cap.plateaus.len();
    assert!(judged < 11, "stopped before maxRate");
    for r in &reports {
        assert_eq!(r.plateaus.len(), judged, "runner {} reported only the judged plateaus", r.index);
    }
    // For the note: from the end of the last judged plateau to the end of the test.
    let start = OffsetDateTime::parse(st.start_at.as_deref().unwrap(), &Rfc3339).unwrap();
    let every = Duration::from_secs(3 + 1 + 1);
    let decisive_end = start + every * (judged as u32 - 1) + Duration::from_secs(3);
    let done_at = OffsetDateTime::parse(cap.done_at.as_deref().unwrap(), &Rfc3339).unwrap();
    let completion = OffsetDateTime::parse(st.completion_time.as_deref().unwrap(), &Rfc3339).unwrap();
    eprintln!(
        "capacity {found}/s after {judged} plateaus; from the decisive plateau's end: search over after {:.2} s, \
         all runners stopped and merged after {:.2} s (seen at {:.2} s)",
        (done_at - decisive_end).as_seconds_f64(),
        (completion - decisive_end).as_seconds_f64(),
        (ended - decisive_end).as_seconds_f64()
    );
    target.stop();

    // The command line's search of the same scenario against the same kind of target, for the
    // note: both figures are the machine's of the moment.
    let cli = cli_capacity().await;
    eprintln!("the CLI found {cli:?}/s, the cluster {found}/s (the target's designed capacity: 800/s)");
    finish(env).await;
}
