//! `spec.live` end to end on the real local control plane (`make e2e`): three runner processes,
//! one recording target on 127.0.0.1. A `kubectl patch` raises the fleet's VUs mid-run, each
//! runner takes its share at the change's instant (as the target saw it); a pause stops new
//! iterations and the resume continues; a change the run cannot take is refused with a condition
//! and an Event while the run goes on.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use stampede_api::{LoadTest, Phase, REPORT_KEY, names};
use stampede_testcluster::wait_for;
use time::format_description::well_known::Rfc3339;

use crate::operator::{create, finish, loadtest, phase_is, reports, scenario, setup};
use crate::recorder::{Recorder, in_flight};

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
    // Each request says its runner (`r=`), so the target sees each runner's share.
    let target = Recorder::start();
    let sc = scenario(&target.base_url(), load, "/delay/50?r={{runner.index}}", &[]);
    let api = create(&env, &loadtest("live", 3, sc, json!({}))).await;
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
    // Paused only once the target has seen every runner at its new share (4 requests in flight),
    // so the 12 VUs are not paused before some runner has had the CPU to start its new ones.
    let us = |at: &str| {
        let t = time::OffsetDateTime::parse(at, &Rfc3339).unwrap();
        i64::try_from(t.unix_timestamp_nanos() / 1000).unwrap()
    };
    let raised_us = us(&change.at);
    let started = Instant::now();
    while !(0..3).all(|r| in_flight(&target.served(), r, raised_us, 2).most == 4) {
        assert!(started.elapsed() < Duration::from_secs(60), "the runners never reached 12 VUs together");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A pause: once the iterations in flight end, the target sees no request at all.
    patch_live(&api, "live", json!({"vus": 12, "paused": true})).await;
    changes(&api, "live", 2).await;
    let started = Instant::now();
    let mut last = target.count();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = target.count();
        if now == last {
            break;
        }
        last = now;
        assert!(started.elapsed() < Duration::from_secs(60), "requests never stopped while paused");
    }
    // The resume: requests come again.
    patch_live(&api, "live", json!({"vus": 12, "paused": false})).await;
    changes(&api, "live", 3).await;
    let paused_at = target.count();
    let started = Instant::now();
    while target.count() == paused_at {
        assert!(started.elapsed() < Duration::from_secs(60), "no request after the resume");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let lt =
        wait_for(&api, "live", Duration::from_secs(180), phase_is(&[Phase::Succeeded, Phase::Failed])).await.unwrap();
    let st = lt.status.unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    assert_eq!(st.summary.as_ref().unwrap().requests, target.count() as u64, "every request counted once");
    assert_eq!(target.count(), 6000, "every iteration (one request each) once");
    assert_eq!(st.history.len(), 0, "no new run for spec.live");
    assert_eq!(st.run, Some(1));

    // The runners' shares of the fleet's 12 VUs: 4 each, 12 together.
    let runner_reports = reports(&env, "live", 3).await;
    let peaks: Vec<u32> = runner_reports.iter().map(|r| r.generator.as_ref().unwrap().peak_vus).collect();
    assert_eq!(peaks, [4, 4, 4]);
    // The target's side: each runner had at most its 2 of the 6 VUs' requests in flight before
    // the change's instant, took a third no sooner than that instant, and went to 4 of 12.
    let served = target.served();
    let live = st.live.as_ref().unwrap();
    let (raised, paused, resumed) = (us(&live.changes[0].at), us(&live.changes[1].at), us(&live.changes[2].at));
    let mut steps = Vec::new();
    for r in 0..3u32 {
        let runner = r;
        let seen = in_flight(&served, r, raised, 2);
        assert_eq!(seen.most_before, 2, "runner {runner} before the change: its 2 of 6 VUs");
        let stepped = seen.first_above_limit_us.expect("each runner took more than 2 VUs");
        assert!(stepped >= raised, "runner {runner} took its new VUs {} µs before the change", raised - stepped);
        assert_eq!(seen.most, 4, "runner {runner} after the change: its 4 of 12 VUs");
        steps.push(stepped - raised);
    }
    // Paused: a VU may still send the request of an iteration it began before the pause's
    // instant, so at most 12 came in between the pause and the resume.
    let in_pause = served.iter().filter(|s| (paused..resumed).contains(&s.start_us)).count();
    assert!(in_pause <= 12, "{in_pause} requests came in while paused");
    // The target's count per second around the change, per runner (printed, not asserted: how
    // soon after its instant a VU's first request lands is the machine's).
    let second = |t: i64| t.div_euclid(1_000_000);
    let per_second: Vec<Vec<usize>> = (0..3)
        .map(|r| {
            (second(raised) - 2..=second(raised) + 2)
                .map(|sec| served.iter().filter(|s| s.runner == r && second(s.start_us) == sec).count())
                .collect()
        })
        .collect();
    eprintln!(
        "the step to 12 VUs, from the target's side: each runner's first request above its old share came \
         {steps:?} µs after the change's instant; requests per runner in the 5 whole seconds around it: \
         {per_second:?}; {in_pause} came in while paused; the pause {} µs and the resume {} µs after the raise",
        paused - raised,
        resumed - raised
    );

    // The merged report has the changes, and its timeline the step from 6 to 12 VUs.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let cm = cms.get(&names::report_config_map("live")).await.unwrap();
    let report: stampede_model::report::Report =
        serde_json::from_str(cm.data.unwrap().get(REPORT_KEY).unwrap()).unwrap();
    // Each runner's row counts what the target served it.
    let rows: Vec<(u32, u64)> = report.runners.iter().map(|r| (r.index, r.requests)).collect();
    let by_target: Vec<(u32, u64)> =
        (0..3).map(|r| (r, served.iter().filter(|s| s.runner == r).count() as u64)).collect();
    assert_eq!(rows, by_target, "each runner's requests, as the report and the target count them");
    let recorded: Vec<(Option<u32>, Option<bool>)> =
        report.run.load_changes.iter().map(|c| (c.vus, c.paused)).collect();
    assert_eq!(recorded, [(Some(12), None), (Some(12), Some(true)), (Some(12), Some(false))]);
    // Its HTML report (as the operator serves it) marks each change on the charts over time.
    let html = stampede_core::render_html(&report, None);
    for (change, what) in report.run.load_changes.iter().zip(["vus 12", "vus 12, paused", "vus 12, resumed"]) {
        let title = format!("<title>{} s: {what}</title></line>", change.t);
        assert!(html.contains(&title), "no chart marks {title}");
    }
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
