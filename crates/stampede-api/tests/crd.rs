//! The committed CRD is the one the types generate (`make generate`).

use std::path::Path;

#[test]
fn committed_crd_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds/loadtest.yaml");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == stampede_api::crd_yaml(), "crds/loadtest.yaml is out of date: run `make generate`");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds/loadtestschedule.yaml");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == stampede_api::schedule_crd_yaml(),
        "crds/loadtestschedule.yaml is out of date: run `make generate`"
    );
}

#[test]
fn the_schedule_crd_has_its_short_name_print_columns_and_template_rule() {
    let yaml = stampede_api::schedule_crd_yaml();
    for needle in [
        "shortNames:\n    - lts",
        "name: Schedule",
        "name: Suspend",
        "name: Last Run",
        "jsonPath: .status.lastRun.verdict",
        "jsonPath: .status.lastRun.p99",
        "- Forbid",
        "- Replace",
        "rule: has(self.scenario) != has(self.scenarioFrom)",
    ] {
        assert!(yaml.contains(needle), "the CRD lacks `{needle}`");
    }
}

#[test]
fn the_crd_has_the_print_columns_and_admission_rules_users_rely_on() {
    let yaml = stampede_api::crd_yaml();
    for needle in [
        "shortNames:\n    - lt",
        "name: Phase",
        "name: RPS",
        "name: P99",
        "name: Errors",
        "subresources:\n      status: {}",
        "minimum: 1.0",
        "- constant-vus",
        "x-kubernetes-preserve-unknown-fields: true",
        "rule: has(self.spec.scenario) != has(self.spec.scenarioFrom)",
    ] {
        assert!(yaml.contains(needle), "the CRD lacks `{needle}`");
    }
}
