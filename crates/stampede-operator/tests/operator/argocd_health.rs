//! The Argo CD health checks run as Argo CD runs them, with the object as the global `obj`:
//! `gitops/argocd/loadtest-health.lua` on LoadTests in every phase, without status, and with an
//! invalid spec as the operator's own lifecycle reports it; `gitops/argocd/loadtestschedule-health.lua`
//! on LoadTestSchedules that are invalid, suspended, waiting for a first run, and after a run that
//! passed, failed or was aborted.

use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mlua::{Lua, LuaOptions, StdLib};
use stampede_api::{
    LoadTest, LoadTestSchedule, LoadTestScheduleStatus, LoadTestSpec, LoadTestStatus, Phase, RunRecord,
};
use stampede_operator::lifecycle::{self, Observed, Scenario};
use time::OffsetDateTime;

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn script() -> String {
    std::fs::read_to_string(repo_file("gitops/argocd/loadtest-health.lua")).unwrap()
}

fn schedule_script() -> String {
    std::fs::read_to_string(repo_file("gitops/argocd/loadtestschedule-health.lua")).unwrap()
}

/// JSON → Lua as Argo CD hands objects to health scripts: objects and arrays become tables
/// (arrays 1-indexed), null becomes nil.
fn to_lua(lua: &Lua, v: &serde_json::Value) -> mlua::Value {
    match v {
        serde_json::Value::Null => mlua::Value::Nil,
        serde_json::Value::Bool(b) => mlua::Value::Boolean(*b),
        serde_json::Value::Number(n) => mlua::Value::Number(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => mlua::Value::String(lua.create_string(s).unwrap()),
        serde_json::Value::Array(items) => {
            let t = lua.create_table().unwrap();
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)).unwrap();
            }
            mlua::Value::Table(t)
        }
        serde_json::Value::Object(fields) => {
            let t = lua.create_table().unwrap();
            for (k, item) in fields {
                t.raw_set(k.as_str(), to_lua(lua, item)).unwrap();
            }
            mlua::Value::Table(t)
        }
    }
}

/// Runs the LoadTest health check on `obj`; returns (status, message).
fn health(obj: &serde_json::Value) -> (String, String) {
    run_health_script(&script(), "loadtest-health.lua", obj)
}

/// Runs the health check `code` on `obj`; returns (status, message).
fn run_health_script(code: &str, name: &str, obj: &serde_json::Value) -> (String, String) {
    // Only what Argo CD's sandbox offers scripts: base, table, string, math.
    let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default()).unwrap();
    lua.globals().set("obj", to_lua(&lua, obj)).unwrap();
    let hs: mlua::Table = lua.load(code).set_name(name).eval().unwrap();
    (hs.get("status").unwrap(), hs.get("message").unwrap())
}

fn loadtest() -> LoadTest {
    let scenario: serde_json::Value = serde_yaml::from_str(crate::common::SCENARIO).unwrap();
    let spec: LoadTestSpec = serde_json::from_value(serde_json::json!({"runners": 2, "scenario": scenario})).unwrap();
    let mut lt = LoadTest::new("checkout", spec);
    lt.metadata = ObjectMeta {
        name: Some("checkout".into()),
        namespace: Some("shop".into()),
        uid: Some("0b0e2a4c-1111-2222-3333-444455556666".into()),
        generation: Some(1),
        ..ObjectMeta::default()
    };
    lt
}

fn with_status(phase: Phase, message: Option<&str>) -> serde_json::Value {
    let mut lt = loadtest();
    lt.status = Some(LoadTestStatus { phase, message: message.map(str::to_string), ..LoadTestStatus::default() });
    serde_json::to_value(&lt).unwrap()
}

/// What Argo CD should show for each phase. An exhaustive match: a new phase fails to compile
/// here until the health check and this table say what it means.
fn expected(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending | Phase::Initializing | Phase::Running => "Progressing",
        Phase::Succeeded => "Healthy",
        Phase::Failed | Phase::Aborted => "Degraded",
    }
}

const PHASES: [Phase; 6] =
    [Phase::Pending, Phase::Initializing, Phase::Running, Phase::Succeeded, Phase::Failed, Phase::Aborted];

#[test]
fn every_phase_maps_to_its_health_with_the_status_message() {
    for phase in PHASES {
        let message = format!("message while {phase:?}");
        let (status, msg) = health(&with_status(phase, Some(&message)));
        assert_eq!(status, expected(phase), "{phase:?}");
        assert_eq!(msg, message, "{phase:?}");
    }
}

#[test]
fn without_a_message_the_phase_is_the_message() {
    for phase in PHASES {
        let (status, msg) = health(&with_status(phase, None));
        assert_eq!(status, expected(phase), "{phase:?}");
        assert_eq!(msg, format!("{phase:?}"));
    }
}

#[test]
fn a_loadtest_without_status_is_progressing() {
    let obj = serde_json::to_value(loadtest()).unwrap();
    assert!(obj.get("status").is_none(), "{obj}");
    let (status, msg) = health(&obj);
    assert_eq!(status, "Progressing");
    assert!(msg.contains("Waiting for the Stampede operator"), "{msg}");
    // An empty status object (as a status patch may leave it) too.
    let mut obj = obj;
    obj["status"] = serde_json::json!({});
    assert_eq!(health(&obj).0, "Progressing");
}

#[test]
fn an_invalid_spec_as_the_operator_reports_it_is_degraded_with_the_problem() {
    // The status the operator's own lifecycle writes for an invalid scenario.
    let lt = loadtest();
    let problem = "scenario `buy` step `home`: unknown variable `{{nope}}`";
    let observed = Observed {
        live: None,
        now: OffsetDateTime::now_utc(),
        plan: Scenario::Invalid(problem.to_string()),
        reports: Vec::new(),
        unreadable: vec![],
        job: None,
        baseline: None,
        once: Default::default(),
    };
    let decision = lifecycle::decide(&lt, &observed);
    assert_eq!(decision.status.phase, Phase::Failed);
    let mut lt = lt;
    lt.status = Some(decision.status);
    let (status, msg) = health(&serde_json::to_value(&lt).unwrap());
    assert_eq!(status, "Degraded");
    assert_eq!(msg, format!("Invalid spec: {problem}"));
}

#[test]
fn valid_false_is_degraded_whatever_the_phase_and_valid_true_changes_nothing() {
    let condition = |status: &str| {
        serde_json::json!({"type": "Valid", "status": status, "reason": "InvalidSpec", "message": "bad stage",
            "lastTransitionTime": "2025-01-01T00:00:00Z"})
    };
    let mut obj = with_status(Phase::Pending, None);
    obj["status"]["conditions"] = serde_json::json!([{"type": "RunnersReady", "status": "False"}, condition("False")]);
    assert_eq!(health(&obj), ("Degraded".into(), "Invalid spec: bad stage".into()));
    let mut obj = with_status(Phase::Running, Some("running"));
    obj["status"]["conditions"] = serde_json::json!([condition("True")]);
    assert_eq!(health(&obj), ("Progressing".into(), "running".into()));
}

#[test]
fn an_unknown_phase_is_unknown_not_healthy() {
    let mut obj = with_status(Phase::Running, Some("hm"));
    obj["status"]["phase"] = "Exploded".into();
    let (status, msg) = health(&obj);
    assert_eq!(status, "Unknown");
    assert!(msg.contains("Exploded"), "{msg}");
}

#[test]
fn the_argocd_cm_patch_carries_the_same_scripts() {
    let text = std::fs::read_to_string(repo_file("gitops/argocd/argocd-cm.yaml")).unwrap();
    let patch: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    for (key, file, code) in [
        ("resource.customizations.health.stampede.dev_LoadTest", "loadtest-health.lua", script()),
        (
            "resource.customizations.health.stampede.dev_LoadTestSchedule",
            "loadtestschedule-health.lua",
            schedule_script(),
        ),
    ] {
        let embedded = patch["data"][key].as_str().unwrap_or_default();
        assert!(
            embedded == code,
            "gitops/argocd/argocd-cm.yaml does not embed gitops/argocd/{file} under {key} as it is: copy it in"
        );
    }
}

#[test]
fn the_scripts_use_only_lua_5_1_syntax_argo_cd_runs() {
    // Argo CD runs gopher-lua (Lua 5.1): no integer division, bit operators, goto or labels.
    for (file, code) in [("loadtest-health.lua", script()), ("loadtestschedule-health.lua", schedule_script())] {
        let code: String = code.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
        for needle in ["//", "goto ", "::", "<<", ">>", " & ", " ~ ", "<const>", "<close>"] {
            assert!(!code.contains(needle), "{file} uses `{needle}`, which Lua 5.1 lacks");
        }
    }
}

/// Runs the LoadTestSchedule health check on `obj`; returns (status, message).
fn schedule_health(obj: &serde_json::Value) -> (String, String) {
    run_health_script(&schedule_script(), "loadtestschedule-health.lua", obj)
}

/// A LoadTestSchedule (typed, so field names are the API's) with `suspend` and `status`, as JSON.
fn schedule(suspend: bool, status: Option<LoadTestScheduleStatus>) -> serde_json::Value {
    let scenario: serde_json::Value = serde_yaml::from_str(crate::common::SCENARIO).unwrap();
    let mut lts: LoadTestSchedule = serde_json::from_value(serde_json::json!({
        "apiVersion": "stampede.dev/v1alpha1",
        "kind": "LoadTestSchedule",
        "metadata": {"name": "nightly", "namespace": "shop"},
        "spec": {"schedule": "0 3 * * *", "suspend": suspend,
            "template": {"spec": {"runners": 2, "scenario": scenario}}},
    }))
    .unwrap();
    lts.status = status;
    serde_json::to_value(&lts).unwrap()
}

/// A finished scheduled run as the operator records it (`RunRecord::of` a LoadTest's status).
fn run_record(name: &str, phase: Phase, message: Option<&str>) -> RunRecord {
    let status = LoadTestStatus { phase, message: message.map(str::to_string), ..LoadTestStatus::default() };
    let mut record = RunRecord::of(&status);
    record.name = Some(name.into());
    record.p99 = Some("12.3ms".into());
    record
}

fn valid(status: &str, message: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    serde_json::from_value(serde_json::json!({"type": "Valid", "status": status,
        "reason": if status == "True" { "Valid" } else { "InvalidSchedule" }, "message": message,
        "lastTransitionTime": "2025-01-01T00:00:00Z"}))
    .unwrap()
}

#[test]
fn a_schedule_whose_last_run_passed_is_healthy_and_names_it_even_while_the_next_runs() {
    let status = LoadTestScheduleStatus {
        last_run: Some(run_record("nightly-20250101-0300", Phase::Succeeded, Some("every threshold passed"))),
        conditions: vec![valid("True", "the schedule and time zone are valid")],
        ..LoadTestScheduleStatus::default()
    };
    let want = ("Healthy".to_string(), "Last run, LoadTest nightly-20250101-0300: Passed, p99 12.3ms".to_string());
    assert_eq!(schedule_health(&schedule(false, Some(status.clone()))), want);
    // A run in progress does not hide the last verdict.
    let running = LoadTestScheduleStatus { active: vec!["nightly-20250102-0300".into()], active_count: 1, ..status };
    assert_eq!(schedule_health(&schedule(false, Some(running))), want);
}

#[test]
fn a_schedule_whose_last_run_failed_or_was_aborted_is_degraded_with_the_loadtest_verdict_and_reason() {
    for (phase, verdict) in [(Phase::Failed, "Failed"), (Phase::Aborted, "Aborted")] {
        let status = LoadTestScheduleStatus {
            last_run: Some(run_record("nightly-20250101-0300", phase, Some("thresholds failed: latency.p99 < 200ms"))),
            ..LoadTestScheduleStatus::default()
        };
        assert_eq!(
            schedule_health(&schedule(false, Some(status))),
            (
                "Degraded".to_string(),
                format!(
                    "Last run, LoadTest nightly-20250101-0300: {verdict}, p99 12.3ms: thresholds failed: latency.p99 < 200ms"
                )
            ),
            "{phase:?}"
        );
    }
}

#[test]
fn a_schedule_without_a_finished_run_is_progressing() {
    let (status, msg) = schedule_health(&schedule(false, None));
    assert_eq!((status.as_str(), msg.as_str()), ("Progressing", "No run has finished yet"));
    let waiting =
        LoadTestScheduleStatus { next_schedule_time: Some("2025-01-02T03:00:00Z".into()), ..Default::default() };
    assert_eq!(
        schedule_health(&schedule(false, Some(waiting))),
        ("Progressing".into(), "No run has finished yet; the first is due at 2025-01-02T03:00:00Z".into())
    );
    let running = LoadTestScheduleStatus {
        active: vec!["nightly-20250101-0300".into()],
        active_count: 1,
        next_schedule_time: Some("2025-01-02T03:00:00Z".into()),
        ..Default::default()
    };
    assert_eq!(
        schedule_health(&schedule(false, Some(running))),
        ("Progressing".into(), "No run has finished yet; running nightly-20250101-0300".into())
    );
}

#[test]
fn a_suspended_schedule_is_suspended_whatever_its_last_run() {
    let failed = LoadTestScheduleStatus {
        last_run: Some(run_record("nightly-20250101-0300", Phase::Failed, Some("runner failed"))),
        ..LoadTestScheduleStatus::default()
    };
    for status in [None, Some(failed)] {
        assert_eq!(
            schedule_health(&schedule(true, status)),
            ("Suspended".into(), "Suspended: no new runs are created".into())
        );
    }
}

#[test]
fn an_invalid_schedule_is_degraded_before_anything_else() {
    let why = "schedule `0 25 * * *`: hour 25 is out of range 0-23";
    let status = LoadTestScheduleStatus {
        last_run: Some(run_record("nightly-20250101-0300", Phase::Succeeded, None)),
        conditions: vec![valid("False", why)],
        ..LoadTestScheduleStatus::default()
    };
    for suspend in [false, true] {
        assert_eq!(
            schedule_health(&schedule(suspend, Some(status.clone()))),
            ("Degraded".into(), format!("Invalid schedule: {why}")),
            "suspend {suspend}"
        );
    }
}

#[test]
fn a_schedule_whose_last_verdict_is_unknown_is_unknown_not_healthy() {
    let mut record = run_record("nightly-20250101-0300", Phase::Succeeded, None);
    record.verdict = "Exploded".into();
    let status = LoadTestScheduleStatus { last_run: Some(record), ..LoadTestScheduleStatus::default() };
    let (status, msg) = schedule_health(&schedule(false, Some(status)));
    assert_eq!(status, "Unknown");
    assert!(msg.contains("nightly-20250101-0300: Exploded"), "{msg}");
}
