//! #16 on the real control plane: a capacity search by three runners against a target with a
//! known capacity (16 at once × 20 ms = 800/s, on 127.0.0.1), compared with the command line's
//! search of the same scenario against the same kind of target.
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
async fn cli_capacity() -> f64 {
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
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    report["capacity"]["capacity"].as_f64().expect("the CLI found a capacity")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_three_runners_find_the_capacity_the_cli_finds_and_stop_after_the_stop_rule() {
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
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    let cap = st.capacity.clone().expect("status.capacity");
    eprintln!("status.capacity: {}", serde_json::to_string_pretty(&cap).unwrap());
    assert!(cap.done && !cap.lower_bound, "{cap:?}");
    assert!(cap.limited_by.as_deref().unwrap_or_default().contains("`latency.p99 < 100ms`"), "{cap:?}");
    let found = cap.rate.expect("a capacity");
    assert!((found - 800.0).abs() <= 80.0, "the cluster found {found}/s against a known 800/s");

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

    let cli = cli_capacity().await;
    eprintln!("the CLI found {cli}/s, the cluster {found}/s");
    assert!((found - cli).abs() <= cli * 0.10, "cluster {found}/s vs CLI {cli}/s");
    finish(env).await;
}
