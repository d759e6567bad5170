//! A LoadTest's merged report on the real control plane: its timeline is the union of the
//! runners' samples interval by interval, it outlives the runners' cleanup, the CLI reads it,
//! and later LoadTests are judged against it as their baseline.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use stampede_api::{LoadTest, Phase, REPORT_KEY, RunnerReport, names};
use stampede_model::report::Report;
use stampede_testcluster::{TestCluster, wait_deleted, wait_for};

use crate::operator::{Env, create, finish, loadtest, phase_is, reports, scenario, setup};

pub(crate) async fn merged_report(env: &Env, lt: &str) -> Report {
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let cm = cms.get(&names::report_config_map(lt)).await.unwrap();
    serde_json::from_str(cm.data.unwrap().get(REPORT_KEY).unwrap()).unwrap()
}

async fn finished(api: &Api<LoadTest>, name: &str) -> LoadTest {
    wait_for(api, name, Duration::from_secs(120), phase_is(&[Phase::Succeeded, Phase::Failed])).await.unwrap()
}

/// The `stampede` binary built beside this test.
fn stampede() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(|deps| deps.parent()).unwrap().join("stampede")
}

fn cli(args: &[&str]) -> (bool, String) {
    let out =
        Command::new(stampede()).args(args).env("KUBECONFIG", TestCluster::shared().kubeconfig()).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Per interval index: requests, errors and the union of the runners' latency samples (all
/// steps), decoded straight from the runners' result ConfigMaps.
fn union_per_interval(runners: &[RunnerReport]) -> BTreeMap<u64, (u64, u64, Histogram<u64>)> {
    let mut union: BTreeMap<u64, (u64, u64, Histogram<u64>)> = BTreeMap::new();
    for r in runners {
        let timeline = r.timeline.as_ref().expect("a runner's final report has its timeline");
        assert_eq!(timeline.interval_seconds, 1, "a short run keeps 1-s intervals");
        for p in &timeline.points {
            let entry =
                union.entry(p.index).or_insert_with(|| (0, 0, Histogram::new_with_bounds(1, 600_000_000, 2).unwrap()));
            for s in &p.steps {
                entry.0 += s.requests;
                entry.1 += s.errors.values().sum::<u64>();
                let raw = base64::engine::general_purpose::STANDARD.decode(&s.histogram).unwrap();
                if !raw.is_empty() {
                    let h: Histogram<u64> = Deserializer::new().deserialize(&mut Cursor::new(raw)).unwrap();
                    entry.2.add(&h).unwrap();
                }
            }
        }
    }
    union
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_the_merged_report_is_the_union_of_the_runners_and_later_runs_are_judged_against_it() {
    let env = setup("lt-report").await;
    // A count, not a time: how many requests fit in a time is the machine's, and the runs
    // judged against the base must meet the same count exactly.
    let load = serde_json::json!({"executor": "constant-vus", "vus": 3, "iterations": 1500});
    let keep = serde_json::json!({"cleanup": {"onSuccess": "none"}});
    let api =
        create(&env, &loadtest("base", 3, scenario(&env.target.base_url(), load.clone(), "/get", &[]), keep)).await;
    let base = finished(&api, "base").await.status.unwrap();
    assert_eq!(base.phase, Phase::Succeeded, "{:?}", base.message);
    let summary = base.summary.unwrap();

    // The merged timeline, interval by interval, is the union of the runners' samples.
    let report = merged_report(&env, "base").await;
    let runners = reports(&env, "base", 3).await;
    let union = union_per_interval(&runners);
    assert_eq!(report.timeline.len(), union.len(), "one point per interval any runner had");
    for (point, (index, (requests, errors, h))) in report.timeline.iter().zip(&union) {
        assert_eq!((point.requests, point.errors), (*requests, *errors), "interval {index}");
        let ms = |q: f64| (h.value_at_quantile(q) as f64 / 1000.0 * 1000.0).round() / 1000.0;
        assert_eq!((point.p50_ms, point.p99_ms), (ms(0.5), ms(0.99)), "interval {index}");
    }
    assert_eq!(report.timeline.iter().map(|p| p.requests).sum::<u64>(), summary.requests);
    assert_eq!(summary.requests, 1500);
    assert_eq!(report.total.requests, summary.requests);
    assert_eq!(report.runners.len(), 3);
    assert_eq!(report.runners.iter().map(|r| r.requests).sum::<u64>(), summary.requests, "runner rows");
    assert_eq!(report.run.loadtest.as_deref(), Some(format!("{}/base", env.ns).as_str()));

    // Judged against it: a pass, a regression, and a baseline that does not exist.
    let relative = |name: &str, baseline: &str, thresholds: &[&str], cleanup: &str| {
        let sc = scenario(&env.target.base_url(), load.clone(), "/get", thresholds);
        let extra = serde_json::json!({"baseline": {"loadTest": baseline}, "cleanup": {"onSuccess": cleanup}});
        loadtest(name, 2, sc, extra)
    };
    create(&env, &relative("same", "base", &["requests.count >= baseline", "requests.count <= baseline"], "all")).await;
    create(&env, &relative("slower", "base", &["requests.count > baseline * 100"], "none")).await;
    create(&env, &relative("orphan", "no-such-test", &["latency.p99 < baseline * 1.1"], "none")).await;

    let same = finished(&api, "same").await.status.unwrap();
    assert_eq!(same.phase, Phase::Succeeded, "{:?} {:?}", same.message, same.thresholds);
    for v in &same.thresholds {
        assert_eq!((v.baseline, v.ratio), (Some(1500.0), Some(1.0)), "{v:?}");
    }
    let ready = same.conditions.iter().find(|c| c.type_ == "BaselineReady").unwrap();
    assert_eq!(ready.status, "True");

    let slower = finished(&api, "slower").await.status.unwrap();
    assert_eq!(slower.phase, Phase::Failed);
    let v = &slower.thresholds[0];
    assert_eq!(v.baseline, Some(summary.requests as f64));
    assert_eq!(v.ratio, Some(((v.actual / summary.requests as f64) * 1000.0).round() / 1000.0));
    assert!(v.actual_text.contains("baseline"), "{v:?}");
    assert!(slower.message.as_deref().unwrap().contains("requests.count > baseline * 100"), "{:?}", slower.message);

    let orphan = finished(&api, "orphan").await.status.unwrap();
    assert_eq!(orphan.phase, Phase::Failed, "never a silent pass");
    let ready = orphan.conditions.iter().find(|c| c.type_ == "BaselineReady").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "BaselineUnavailable"));
    assert!(ready.message.contains("LoadTest no-such-test: not found"), "{}", ready.message);
    assert!(orphan.thresholds[0].message.as_deref().unwrap().contains("not found"), "{:?}", orphan.thresholds);

    // "same" was cleaned up entirely (cleanup: all); its report stays with the LoadTest.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    wait_deleted(&cms, &names::result_config_map("same", 0), Duration::from_secs(30)).await.unwrap();
    assert_eq!(merged_report(&env, "same").await.total.requests, same.summary.unwrap().requests);

    // The CLI reads LoadTests: the HTML report (with a baseline) and a comparison.
    let html = std::env::temp_dir().join(format!("stampede-e2e-{}.html", env.ns));
    let (ok, out) =
        cli(&["report", "loadtest/same", "-n", &env.ns, "-o", html.to_str().unwrap(), "--baseline", "loadtest/base"]);
    assert!(ok, "{out}");
    let page = std::fs::read_to_string(&html).unwrap();
    std::fs::remove_file(&html).unwrap();
    assert!(page.contains("Runners") && page.contains("baseline"), "the page has runner rows and the baseline");
    // The verdict line depends on the machine's noise; the table's request counts do not.
    let (ok, out) = cli(&["compare", "loadtest/base", "loadtest/same", "-n", &env.ns, "--details"]);
    assert!(ok && out.contains("base: loadtest/base") && out.lines().any(|l| l.starts_with("total")), "{out}");
    let counts =
        out.lines().filter(|l| l.split_whitespace().collect::<Vec<_>>() == ["requests", "1500", "1500", "+0.0", "%"]);
    assert_eq!(counts.count(), 2, "the step's and the total's requests, 1500 in both runs: {out}");
    let (ok, out) = cli(&["report", "loadtest/no-such-test", "-n", &env.ns, "-o", "/dev/null"]);
    assert!(!ok && out.contains("no-such-test"), "{out}");
    finish(env).await;
}
