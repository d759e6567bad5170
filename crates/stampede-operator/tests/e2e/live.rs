//! `spec.live` end to end on the real local control plane (`make e2e`): three runner processes,
//! one built-in target on 127.0.0.1. A `kubectl patch` raises the fleet's VUs mid-run, each runner
//! takes its share at the same instant; a pause stops new iterations and the resume continues; a
//! change the run cannot take is refused with a condition and an Event while the run goes on.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use stampede_api::{LoadTest, Phase, REPORT_KEY, names};
use stampede_testcluster::wait_for;
use time::format_description::well_known::Rfc3339;

use crate::operator::{create, finish, loadtest, phase_is, reports, scenario, setup};

/// Patches `spec.live` of `name` as `kubectl patch --type=merge` does.
async fn patch_live(api: &Api<LoadTest>, name: &str, live: serde_json::Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"live": live}}))).await.unwrap();
}

/// Waits until `lt` has taken `n` changes; returns it.
async fn changes(api: &Api<LoadTest>, name: &str, n: usize) -> LoadTest {
    let taken = move |lt: Option<&LoadTest>| {
        lt.and_then(|l| l.status.as_ref()?.live.as_ref()).is_some_and(|l| l.changes.len() >= n)
    };
    wait_for(api, name, Duration::from_secs(60), taken).await.unwrap()
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_spec_live_raises_the_fleets_vus_at_one_instant_pauses_resumes_and_refuses_what_it_cannot_take() {
    let env = setup("lt-live").await;
    // Ended by its iterations, not a clock: each takes at least the target's 50 ms, so 6,000 of
    // them last 25 s or more at 12 VUs (50 s at 6), and none start while paused. However slow the
    // machine, the changes below come while it runs.
    let load = json!({"executor": "constant-vus", "vus": 6, "maxVUs": 12, "iterations": 6000, "duration": "10m"});
    let api =
        create(&env, &loadtest("live", 3, scenario(&env.target.base_url(), load, "/delay/50", &[]), json!({}))).await;
    wait_for(&api, "live", Duration::from_secs(120), phase_is(&[Phase::Running])).await.unwrap();

    // More than maxVUs: refused, said, and the run goes on.
    patch_live(&api, "live", json!({"vus": 20})).await;
    let refused = move |lt: Option<&LoadTest>| {
        lt.and_then(|l| l.status.as_ref())
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "LiveChange" && c.status == "False"))
    };
    let lt = wait_for(&api, "live", Duration::from_secs(60), refused).await.unwrap();
    let st = lt.status.unwrap();
    assert_eq!(st.phase, Phase::Running);
    let cond = st.conditions.iter().find(|c| c.type_ == "LiveChange").unwrap();
    assert!(cond.message.contains("maxVUs (12)"), "{}", cond.message);
    // A rate, on this closed model: refused too, saying why.
    patch_live(&api, "live", json!({"vus": null, "rate": 500})).await;
    let rate_refused = move |lt: Option<&LoadTest>| {
        lt.and_then(|l| l.status.as_ref()).is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "LiveChange" && c.status == "False" && c.message.contains("rate 500/s"))
        })
    };
    let lt = wait_for(&api, "live", Duration::from_secs(60), rate_refused).await.unwrap();
    let st = lt.status.unwrap();
    assert_eq!(st.phase, Phase::Running);
    let cond = st.conditions.iter().find(|c| c.type_ == "LiveChange").unwrap();
    assert!(cond.message.contains("`rate` applies to arrival-rate executors"), "{}", cond.message);

    // 6 → 12 VUs: each runner takes its share (2 → 4) at the change's instant.
    patch_live(&api, "live", json!({"vus": 12, "rate": null})).await;
    let lt = changes(&api, "live", 1).await;
    let change = lt.status.unwrap().live.unwrap().changes[0].clone();
    assert_eq!((change.seq, change.vus), (1, Some(12)));

    // A pause: once the iterations in flight end, the target sees no request at all.
    patch_live(&api, "live", json!({"vus": 12, "paused": true})).await;
    changes(&api, "live", 2).await;
    let target = env.target.stats();
    let started = Instant::now();
    let mut last = target.requests();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = target.requests();
        if now == last {
            break;
        }
        last = now;
        assert!(started.elapsed() < Duration::from_secs(60), "requests never stopped while paused");
    }
    // The resume: requests come again.
    patch_live(&api, "live", json!({"vus": 12, "paused": false})).await;
    changes(&api, "live", 3).await;
    let paused_at = target.requests();
    let started = Instant::now();
    while target.requests() == paused_at {
        assert!(started.elapsed() < Duration::from_secs(60), "no request after the resume");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let lt =
        wait_for(&api, "live", Duration::from_secs(180), phase_is(&[Phase::Succeeded, Phase::Failed])).await.unwrap();
    let st = lt.status.unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    assert_eq!(st.summary.unwrap().requests, env.target.stats().requests(), "every request counted once");
    assert_eq!(env.target.stats().requests(), 6000, "every iteration (one request each) once");
    assert_eq!(st.history.len(), 0, "no new run for spec.live");
    assert_eq!(st.run, Some(1));

    // The runners' shares of the fleet's 12 VUs: 4 each, 12 together.
    let runner_reports = reports(&env, "live", 3).await;
    let peaks: Vec<u32> = runner_reports.iter().map(|r| r.generator.as_ref().unwrap().peak_vus).collect();
    assert_eq!(peaks, [4, 4, 4]);
    // The merged report has the changes, and its timeline the step from 6 to 12 VUs.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let cm = cms.get(&names::report_config_map("live")).await.unwrap();
    let report: stampede_model::report::Report =
        serde_json::from_str(cm.data.unwrap().get(REPORT_KEY).unwrap()).unwrap();
    let recorded: Vec<(Option<u32>, Option<bool>)> =
        report.run.load_changes.iter().map(|c| (c.vus, c.paused)).collect();
    assert_eq!(recorded, [(Some(12), None), (Some(12), Some(true)), (Some(12), Some(false))]);
    // The timeline: 6 VUs until the change's instant, 12 after it. A runner's intervals end by its
    // own start, up to its start skew after the fleet's: only points a skew's length before the
    // change are sure to be before it.
    let start_at = time::OffsetDateTime::parse(st.start_at.as_deref().unwrap(), &Rfc3339).unwrap();
    let skew = runner_reports
        .iter()
        .map(|r| {
            (time::OffsetDateTime::parse(r.started_at.as_deref().unwrap(), &Rfc3339).unwrap() - start_at)
                .as_seconds_f64()
        })
        .fold(0.0, f64::max);
    let vus: Vec<(f64, u32)> = report.timeline.iter().map(|p| (p.t, p.active_vus)).collect();
    let t = report.run.load_changes[0].t;
    assert!(vus.iter().filter(|(at, _)| at + skew < t).all(|(_, v)| *v <= 6), "before {t} s (skew {skew} s): {vus:?}");
    let first_12 = vus.iter().find(|(_, v)| *v == 12).expect("the timeline reaches 12 VUs");
    assert!(first_12.0 + skew >= t, "12 VUs no sooner than the change ({t} s, skew {skew} s): {vus:?}");

    // Events say each change, and the refusal (repeats of one reason are one Event's series,
    // as the events API counts them).
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    let listed = events.list(&ListParams::default()).await.unwrap().items;
    let count = |reason: &str| -> i32 {
        listed
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| e.series.as_ref().map_or(1, |s| s.count))
            .sum()
    };
    assert_eq!((count("LoadChanged"), count("LiveChangeRefused")), (3, 2));
    finish(env).await;
}
