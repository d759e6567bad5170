//! The Argo CD health check (`gitops/argocd/loadtest-health.lua`) run, as Argo CD runs it, with
//! the LoadTest as the global `obj`, on LoadTests in every phase, without status, and with an
//! invalid spec as the operator's own lifecycle reports it.

use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mlua::{Lua, LuaOptions, StdLib};
use stampede_api::{LoadTest, LoadTestSpec, LoadTestStatus, Phase};
use stampede_operator::lifecycle::{self, Observed, Scenario};
use time::OffsetDateTime;

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn script() -> String {
    std::fs::read_to_string(repo_file("gitops/argocd/loadtest-health.lua")).unwrap()
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

/// Runs the health check on `obj`; returns (status, message).
fn health(obj: &serde_json::Value) -> (String, String) {
    // Only what Argo CD's sandbox offers scripts: base, table, string, math.
    let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default()).unwrap();
    lua.globals().set("obj", to_lua(&lua, obj)).unwrap();
    let hs: mlua::Table = lua.load(script()).set_name("loadtest-health.lua").eval().unwrap();
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
        now: OffsetDateTime::now_utc(),
        plan: Scenario::Invalid(problem.to_string()),
        reports: Vec::new(),
        unreadable: vec![],
        job: None,
        baseline: None,
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
fn the_argocd_cm_patch_carries_the_same_script() {
    let text = std::fs::read_to_string(repo_file("gitops/argocd/argocd-cm.yaml")).unwrap();
    let patch: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let embedded = patch["data"]["resource.customizations.health.stampede.dev_LoadTest"].as_str().unwrap_or_default();
    assert!(
        embedded == script(),
        "gitops/argocd/argocd-cm.yaml does not embed gitops/argocd/loadtest-health.lua as it is: copy it in"
    );
}

#[test]
fn the_script_uses_only_lua_5_1_syntax_argo_cd_runs() {
    // Argo CD runs gopher-lua (Lua 5.1): no integer division, bit operators, goto or labels.
    let code: String = script().lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
    for needle in ["//", "goto ", "::", "<<", ">>", " & ", " ~ ", "<const>", "<close>"] {
        assert!(!code.contains(needle), "the script uses `{needle}`, which Lua 5.1 lacks");
    }
}
