//! The runner's side of the result ConfigMap: the reports it writes, as pure values.

use std::time::{Duration, SystemTime};

use stampede_api::{RESULT_KEY, RunnerReport, RunnerState};
use stampede_engine::{WorkerMetrics, portable};
use stampede_model::StepKey;
use stampede_model::portable::PortableStep;
use stampede_model::report::round3;

use crate::clock::format_micros;

/// What a running runner reports: seconds since its start, its cumulative total, the VUs
/// running, and its steps so far (see [`RunnerReport::live_steps`]).
#[derive(Clone, Debug)]
pub(crate) struct Live {
    pub(crate) elapsed: Duration,
    pub(crate) total: PortableStep,
    pub(crate) active_vus: u32,
    pub(crate) steps: Vec<PortableStep>,
}

/// The most a running report's steps take, encoded (bytes): a quarter of a ConfigMap.
pub(crate) const LIVE_STEPS_BYTES: usize = 256 * 1024;

/// The report while running, from its start instant.
pub(crate) fn running_report(index: u32, started_at: SystemTime, live: &Live) -> RunnerReport {
    RunnerReport {
        started_at: Some(format_micros(started_at)),
        duration_seconds: round3(live.elapsed.as_secs_f64()),
        live: Some(live.total.clone()),
        live_steps: live.steps.clone(),
        active_vus: Some(live.active_vus),
        ..RunnerReport::new(index, RunnerState::Running)
    }
}

/// The final report of a runner that did not run (no share of the load, or aborted before the
/// start): zero counts for every step, so it merges like any other.
pub(crate) fn empty_done_report(
    index: u32,
    keys: &[StepKey],
    scenario_names: &[String],
    started_at: Option<SystemTime>,
) -> RunnerReport {
    let metrics = WorkerMetrics::new(keys.len(), scenario_names.len());
    RunnerReport {
        started_at: started_at.map(format_micros),
        result: Some(portable::encode(keys, &metrics, scenario_names)),
        ..RunnerReport::new(index, RunnerState::Done)
    }
}

/// A `Failed` report with what went wrong.
pub(crate) fn failed_report(index: u32, message: String) -> RunnerReport {
    RunnerReport { message: Some(message), ..RunnerReport::new(index, RunnerState::Failed) }
}

/// The JSON merge patch that stores `report` in a result ConfigMap.
pub(crate) fn report_patch(report: &RunnerReport) -> serde_json::Value {
    let text = serde_json::to_string(report).unwrap_or_default();
    serde_json::json!({ "data": { RESULT_KEY: text } })
}

#[cfg(test)]
mod tests {
    use stampede_engine::IntervalStats;

    use super::*;
    use crate::clock::parse_start_at;

    #[test]
    fn reports_serialize_into_a_merge_patch_of_one_key() {
        let total = portable::step_from_interval("", "total", &IntervalStats::default());
        let t = parse_start_at("2030-01-02T03:04:05.000007Z").unwrap();
        let keys =
            [StepKey { scenario: "s".into(), step: "a".into() }, StepKey { scenario: "s".into(), step: "b".into() }];
        let mut stats = vec![stampede_engine::StepStats::default(), stampede_engine::StepStats::default()];
        stats[1].record_status(201);
        let mut interval = IntervalStats::default();
        interval.step(0);
        for _ in 0..3 {
            interval.record_request(1);
        }
        interval.record_latency(1, 1_500);
        let steps = portable::encode_live_steps(&keys, &interval, Some(&stats), LIVE_STEPS_BYTES).unwrap();
        let live = Live { elapsed: Duration::from_millis(2_001), total, active_vus: 5, steps };
        let r = running_report(1, t, &live);
        let patch = report_patch(&r);
        let text = patch["data"]["result.json"].as_str().unwrap();
        let back: RunnerReport = serde_json::from_str(text).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.state, RunnerState::Running);
        assert_eq!(back.started_at.as_deref(), Some("2030-01-02T03:04:05.000007Z"));
        assert_eq!(back.duration_seconds, 2.001);
        assert_eq!(back.active_vus, Some(5));
        // Only the step that sent a request, with its codes; none past the budget.
        let steps: Vec<(&str, u64)> = back.live_steps.iter().map(|s| (s.step.as_str(), s.requests)).collect();
        assert_eq!(steps, [("b", 3)]);
        assert_eq!(back.live_steps[0].status.get("201"), Some(&1));
        let one = serde_json::to_vec(&back.live_steps[0]).unwrap().len();
        let within = |budget| portable::encode_live_steps(&keys, &interval, Some(&stats), budget).map(|s| s.len());
        assert_eq!(within(one + 1), Some(1));
        assert_eq!(within(one), None);
        assert_eq!(patch["data"].as_object().unwrap().len(), 1);

        let ready: serde_json::Value = serde_json::from_str(
            report_patch(&RunnerReport::new(0, RunnerState::Ready))["data"]["result.json"].as_str().unwrap(),
        )
        .unwrap();
        assert_eq!(ready, serde_json::json!({"index": 0, "state": "ready", "durationSeconds": 0.0}));

        let failed = failed_report(2, "bad".into());
        assert_eq!((failed.state, failed.message.as_deref()), (RunnerState::Failed, Some("bad")));
    }

    #[test]
    fn an_empty_result_has_every_step_with_zero_counts() {
        let keys = vec![
            stampede_model::StepKey { scenario: "buy".into(), step: "a".into() },
            stampede_model::StepKey { scenario: "buy".into(), step: "b".into() },
        ];
        let names = vec!["buy".to_string()];
        let r = empty_done_report(4, &keys, &names, None);
        assert_eq!(r.state, RunnerState::Done);
        let result = r.result.unwrap();
        assert_eq!(result.steps.len(), 2);
        assert!(result.steps.iter().all(|s| s.requests == 0));
        assert_eq!(result.iterations.get("buy"), Some(&0));
        let mut merged = WorkerMetrics::new(2, 1);
        portable::merge_into(&result, &keys, &names, &mut merged).unwrap();
        assert_eq!(merged.steps[0].requests, 0);
    }
}
