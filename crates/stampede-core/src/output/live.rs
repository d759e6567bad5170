//! The live view of a run, as a dashboard shows it while the run goes on: one [`LiveFrame`]
//! per interval (from a local run's ticks), the last one from the run's report (so that its
//! table equals the report's), and the load changes a run may take mid-way, checked before
//! they are taken ([`check_change`]).

use serde::{Deserialize, Serialize};
use stampede_model::report::{LoadChange, Report, StepSummary, TimelinePoint, Verdict, round3};

use crate::compile::plan::Plan;
use crate::compile::threshold::Measured;
use crate::outcome::Tick;
use crate::output::report::live_summaries;
use crate::stats::timeline::interval_point;

/// The page that shows a run live: self-contained (no request but its own server's), it reads
/// frames from `events?token=…` (server-sent events) and sends changes to `control?token=…`.
pub const PAGE: &str = include_str!("live/page.html");

/// The most points of a run's history a dashboard keeps (an hour at one a second); past it,
/// [`thin`] halves them.
pub const HISTORY_POINTS: usize = 3600;

/// Keeps `points` at most `max` long (at least 2) by dropping every other one but the last, as
/// often as needed: a chart of a long run keeps its shape at a coarser step.
pub fn thin<T>(points: &mut Vec<T>, max: usize) {
    let max = max.max(2);
    while points.len() > max {
        let last = points.pop();
        let mut i = 0;
        points.retain(|_| {
            i += 1;
            i % 2 == 1
        });
        points.extend(last);
    }
}

/// What a dashboard shows of a run at one instant.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LiveFrame {
    /// The test's name.
    pub name: String,
    /// The executors, as the report names them.
    pub executor: String,
    /// Seconds since the start.
    pub elapsed: f64,
    /// The run has ended: `total`, `steps` and `thresholds` are the report's.
    pub ended: bool,
    /// VUs running.
    pub active_vus: u32,
    /// The latest interval (absent in the final frame and before the first interval ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<TimelinePoint>,
    /// Every step together, since the start.
    pub total: StepSummary,
    /// Each step since the start, in the scenario's order.
    pub steps: Vec<StepSummary>,
    /// The thresholds' verdicts: live ones on the figures so far while the run goes on (not a
    /// relative threshold, judged at the end against its baseline, nor one whose steps have no
    /// answer yet, nor any in a capacity search), the report's in the final frame.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Verdict>,
    /// What the run can be changed to, and the changes taken so far.
    pub control: ControlState,
}

/// What a run can be changed to, and the changes it took.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ControlState {
    /// The VUs a change may ask for, at most (a closed model with one load); absent: VUs
    /// cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_vus: Option<u32>,
    /// The iterations per second a change may ask for, at most (an open model with one load);
    /// absent: the rate cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<u32>,
    /// The run can be paused.
    pub can_pause: bool,
    /// Paused now.
    pub paused: bool,
    /// The changes taken so far, in order.
    pub changes: Vec<LoadChange>,
}

/// A change asked for (a dashboard's control, a LoadTest's `spec.live`), before it is checked.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChangeRequest {
    /// The VUs the run should hold from now on (closed models).
    #[serde(default)]
    pub vus: Option<i64>,
    /// The iterations per second the run should start from now on (open models).
    #[serde(default)]
    pub rate: Option<i64>,
    /// `true`: start no new iteration until `false`.
    #[serde(default)]
    pub paused: Option<bool>,
}

/// A change that was checked: what the run takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveChange {
    /// The VUs the run holds from now on.
    pub vus: Option<u32>,
    /// The iterations per second the run starts from now on.
    pub rate: Option<u32>,
    /// Paused or resumed.
    pub paused: Option<bool>,
}

/// What a live change may do to a run of a plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// The most VUs (a closed model with one load); `None`: VUs cannot be changed.
    pub max_vus: Option<u32>,
    /// The highest rate (an open model with one load); `None`: the rate cannot be changed.
    pub max_rate: Option<u32>,
    /// Whether it pauses (any run but a capacity search).
    pub pause: bool,
}

/// What `plan` lets a live change do.
pub fn control_limits(plan: &Plan) -> Limits {
    if plan.capacity.is_some() {
        return Limits::default();
    }
    let one = (plan.groups.len() == 1).then(|| &plan.groups[0].load);
    Limits {
        max_vus: one.filter(|l| !l.is_open()).map(crate::compile::load::LoadPlan::max_vus),
        max_rate: one.filter(|l| l.is_open()).map(|_| crate::compile::budget::RATE),
        pause: true,
    }
}

/// Checks `request` against `plan` (and whether the run has `ended`): the change the run
/// takes, or why it cannot take it, in words for the user.
pub fn check_change(plan: &Plan, request: &ChangeRequest, ended: bool) -> Result<LiveChange, String> {
    if ended {
        return Err("the run has ended: a change applies to a run that goes on".into());
    }
    if request.vus.is_none() && request.rate.is_none() && request.paused.is_none() {
        return Err("nothing to change: give `vus`, `rate` or `paused`".into());
    }
    let executor = plan.executor_name();
    if plan.capacity.is_some() {
        return Err("a capacity search sets its own load, plateau by plateau: it cannot be changed mid-run".into());
    }
    let limits = control_limits(plan);
    let open = plan.groups.iter().any(|g| g.load.is_open());
    let one_load = |what: &str| format!("`{what}` changes a run with one load; this one has {}", plan.groups.len());
    let vus = match request.vus {
        None => None,
        Some(_) if open => {
            return Err(format!(
                "`vus` applies to closed models (constant-vus, ramping-vus); this run is {executor} (an open model): change `rate`"
            ));
        }
        Some(v) if v < 1 => {
            return Err(format!("`vus` must be at least 1 (got {v}); to stop starting iterations, pause"));
        }
        Some(v) => {
            let Some(max) = limits.max_vus else { return Err(one_load("vus")) };
            if v > i64::from(max) {
                return Err(format!(
                    "`vus` ({v}) is more than the load's maxVUs ({max}): set `load.maxVUs` to allow it"
                ));
            }
            Some(v as u32)
        }
    };
    let rate = match request.rate {
        None => None,
        Some(_) if !open => {
            return Err(format!(
                "`rate` applies to arrival-rate executors; this run is {executor} (a closed model): change `vus`"
            ));
        }
        Some(r) if r < 1 => {
            return Err(format!("`rate` must be at least 1 iteration/s (got {r}); to stop starting iterations, pause"));
        }
        Some(r) => {
            let Some(max) = limits.max_rate else { return Err(one_load("rate")) };
            if r > i64::from(max) {
                return Err(crate::compile::budget::over("rate", format!("`rate` {r}/s")));
            }
            Some(r as u32)
        }
    };
    Ok(LiveChange { vus, rate, paused: request.paused })
}

/// The frame of `tick` of a run of `plan` (its totals asked for: without them, `total`,
/// `steps` and `thresholds` are empty), with `control`.
pub fn tick_frame(plan: &Plan, tick: &Tick, control: ControlState) -> LiveFrame {
    let seconds = tick.elapsed.as_secs_f64();
    let (total, steps) = match &tick.totals {
        Some(t) => live_summaries(&plan.step_keys, &t.steps, seconds),
        None => Default::default(),
    };
    let thresholds = match &tick.totals {
        Some(t) if plan.capacity.is_none() => {
            let m = Measured {
                step_keys: &plan.step_keys,
                steps: &t.steps,
                group_keys: &plan.group_keys,
                groups: &t.groups,
            };
            plan.thresholds.iter().filter_map(|th| th.evaluate_live(&m, seconds)).collect()
        }
        _ => Vec::new(),
    };
    LiveFrame {
        name: plan.name.clone(),
        executor: plan.executor_name(),
        elapsed: round3(seconds),
        ended: false,
        active_vus: tick.active_vus,
        point: Some(interval_point(tick.elapsed, tick.length, tick.active_vus, &tick.stats, &plan.step_keys)),
        total,
        steps,
        thresholds,
        control,
    }
}

/// The last frame of a run: its report's figures, so that what the page shows at the end is
/// what the report says.
pub fn final_frame(report: &Report, control: ControlState) -> LiveFrame {
    LiveFrame {
        name: report.name.clone(),
        executor: report.run.executor.clone(),
        elapsed: report.run.duration_seconds,
        ended: true,
        active_vus: 0,
        point: None,
        total: report.total.clone(),
        steps: report.steps.clone(),
        thresholds: report.thresholds.clone(),
        control: ControlState { paused: false, changes: report.run.load_changes.clone(), ..control },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::plan::CompileOptions;
    use crate::{StepStats, Totals};

    fn file(load: &str) -> String {
        format!(
            "name: live\nbaseUrl: http://127.0.0.1:1\nload: {load}\nscenarios:\n  - name: s\n    steps:\n      - {{name: a, request: {{url: \"{{{{baseUrl}}}}/\"}}}}\n"
        )
    }

    /// The plan of a file with `load`, or its problems in words.
    fn compiled(load: &str) -> Result<Plan, String> {
        let file = crate::parse_str(&file(load), std::path::Path::new("live.yaml")).unwrap();
        crate::compile(&file, &CompileOptions::default()).map_err(|problems| {
            problems.iter().map(|p| format!("{}: {}", p.location, p.message)).collect::<Vec<_>>().join("; ")
        })
    }

    fn plan(load: &str) -> Plan {
        compiled(load).unwrap()
    }

    fn ask(vus: Option<i64>, rate: Option<i64>, paused: Option<bool>) -> ChangeRequest {
        ChangeRequest { vus, rate, paused }
    }

    /// A local dashboard's frame judges the thresholds on the totals so far (not a relative one,
    /// nor one whose steps have no answer yet); a frame without totals judges none.
    #[test]
    fn a_ticks_frame_judges_the_thresholds_on_the_totals_so_far() {
        let text = file("{executor: constant-vus, vus: 2, duration: 10s}")
            + "thresholds: [\"latency.p99 < 10s\", \"requests.count > 1000\", \"latency.p99 < baseline * 1.1\"]\n";
        let file = crate::parse_str(&text, std::path::Path::new("live.yaml")).unwrap();
        let p = crate::compile(&file, &CompileOptions::default()).unwrap();
        let tick = |totals: Option<Totals>| Tick {
            index: 1,
            elapsed: std::time::Duration::from_secs(1),
            length: std::time::Duration::from_secs(1),
            active_vus: 2,
            stats: crate::IntervalStats::default(),
            totals: totals.map(std::sync::Arc::new),
        };
        let empty = Totals { steps: vec![StepStats::default()], ..Totals::default() };
        assert!(tick_frame(&p, &tick(Some(empty)), ControlState::default()).thresholds.is_empty(), "no answer yet");
        let mut step = StepStats::default();
        for us in [2_000, 3_000] {
            step.requests += 1;
            step.record_latency_us(us);
        }
        let frame =
            tick_frame(&p, &tick(Some(Totals { steps: vec![step], ..Totals::default() })), ControlState::default());
        let judged: Vec<(&str, bool)> = frame.thresholds.iter().map(|v| (v.threshold.as_str(), v.passed)).collect();
        assert_eq!(judged, [("latency.p99 < 10s", true), ("requests.count > 1000", false)]);
        assert!(tick_frame(&p, &tick(None), ControlState::default()).thresholds.is_empty());
    }

    #[test]
    fn a_closed_load_takes_vus_up_to_its_max_and_a_pause() {
        let p = plan("{executor: constant-vus, vus: 6, maxVUs: 12, duration: 10s}");
        assert_eq!(control_limits(&p), Limits { max_vus: Some(12), max_rate: None, pause: true });
        assert_eq!(
            check_change(&p, &ask(Some(12), None, None), false),
            Ok(LiveChange { vus: Some(12), ..LiveChange::default() })
        );
        assert_eq!(
            check_change(&p, &ask(None, None, Some(true)), false),
            Ok(LiveChange { paused: Some(true), ..LiveChange::default() })
        );
        let over = check_change(&p, &ask(Some(13), None, None), false).unwrap_err();
        assert!(over.contains("more than the load's maxVUs (12)"), "{over}");
    }

    #[test]
    fn what_a_run_cannot_take_is_refused_saying_why() {
        let closed = plan("{executor: constant-vus, vus: 6, duration: 10s}");
        let open = plan("{executor: constant-arrival-rate, rate: 10, duration: 10s, preAllocatedVUs: 2}");
        let refused = |p: &Plan, r: ChangeRequest, ended: bool| check_change(p, &r, ended).unwrap_err();
        assert!(refused(&closed, ask(Some(-3), None, None), false).contains("at least 1 (got -3)"));
        assert!(refused(&closed, ask(Some(0), None, None), false).contains("at least 1"));
        assert!(refused(&closed, ask(Some(7), None, None), false).contains("maxVUs (6)"), "the default max is vus");
        assert!(refused(&closed, ask(None, Some(50), None), false).contains("applies to arrival-rate executors"));
        assert!(refused(&closed, ask(None, None, Some(true)), true).contains("the run has ended"));
        assert!(refused(&closed, ask(None, None, None), false).contains("nothing to change"));
        assert!(refused(&open, ask(Some(3), None, None), false).contains("open model): change `rate`"));
        assert!(refused(&open, ask(None, Some(0), None), false).contains("at least 1 iteration/s (got 0)"));
        assert!(refused(&open, ask(None, Some(-5), None), false).contains("(got -5)"));
        assert!(refused(&open, ask(None, Some(10_000_001), None), false).contains("over the `rate` budget"));
    }

    #[test]
    fn an_open_load_takes_a_rate_and_a_pause() {
        let open = plan("{executor: constant-arrival-rate, rate: 10, duration: 10s, preAllocatedVUs: 2}");
        assert_eq!(control_limits(&open), Limits { max_vus: None, max_rate: Some(10_000_000), pause: true });
        assert_eq!(
            check_change(&open, &ask(None, Some(40), Some(false)), false),
            Ok(LiveChange { rate: Some(40), paused: Some(false), ..LiveChange::default() })
        );
        let err = compiled("{executor: constant-arrival-rate, rate: 20000000, duration: 1s, preAllocatedVUs: 2}");
        assert!(err.unwrap_err().contains("20000000 iterations/s: over the `rate` budget"));
    }

    #[test]
    fn a_max_below_the_load_is_a_problem_of_the_file() {
        let err = compiled("{executor: constant-vus, vus: 6, maxVUs: 4, duration: 1s}").unwrap_err();
        assert!(err.contains("maxVUs") && err.contains("less than the 6 VUs"), "{err}");
        let err = compiled("{executor: constant-vus, vus: 6, maxVUs: 2000000, duration: 1s}").unwrap_err();
        assert!(err.contains("over the `vus` budget of 1,000,000"), "{err}");
        let err = compiled("{executor: ramping-vus, stages: [{duration: 1s, target: 1000001}]}").unwrap_err();
        assert!(err.contains("1000001 VUs: over the `vus` budget"), "{err}");
        let ramp = plan("{executor: ramping-vus, startVus: 2, stages: [{duration: 1s, target: 5}], maxVUs: 9}");
        assert_eq!(control_limits(&ramp).max_vus, Some(9));
    }

    #[test]
    fn a_long_history_is_thinned_to_its_budget_keeping_its_ends() {
        let mut points: Vec<u32> = (0..10_000).collect();
        thin(&mut points, HISTORY_POINTS);
        assert!(points.len() <= HISTORY_POINTS && points.len() > HISTORY_POINTS / 2, "{}", points.len());
        assert_eq!((points[0], *points.last().unwrap()), (0, 9_999));
        assert!(points.windows(2).all(|w| w[0] < w[1]), "in order");
        let mut short = vec![1, 2, 3];
        thin(&mut short, HISTORY_POINTS);
        assert_eq!(short, [1, 2, 3], "a short history is kept whole");
    }

    #[test]
    fn a_change_request_names_only_its_fields() {
        let err = serde_json::from_str::<ChangeRequest>(r#"{"vus": 3, "users": 4}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `users`"), "{err}");
        let asked: ChangeRequest = serde_json::from_str(r#"{"paused": true}"#).unwrap();
        assert_eq!(asked, ask(None, None, Some(true)));
    }
}
