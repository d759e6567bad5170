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

/// The fields of `schema` (an OpenAPI schema as JSON) that have no description, by path.
fn undescribed(schema: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    if let Some(props) = schema.get("properties").and_then(|p| p.as_object()) {
        for (name, prop) in props {
            let here = format!("{path}.{name}");
            let described = prop.get("description").and_then(|d| d.as_str()).is_some_and(|d| !d.trim().is_empty());
            if !described {
                out.push(here.clone());
            }
            undescribed(prop, &here, out);
        }
    }
    if let Some(items) = schema.get("items") {
        undescribed(items, &format!("{path}[]"), out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        undescribed(values, &format!("{path}{{}}"), out);
    }
}

/// #34: `kubectl explain loadtest.spec…` (and `.status…`, and the schedule's) explains every
/// field: each property of both CRDs has a description.
#[test]
fn every_field_of_both_crds_has_a_description_for_kubectl_explain() {
    for (kind, yaml) in
        [("loadtest", stampede_api::crd_yaml()), ("loadtestschedule", stampede_api::schedule_crd_yaml())]
    {
        let crd: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        let mut missing = Vec::new();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let root = &version["schema"]["openAPIV3Schema"];
            for part in ["spec", "status"] {
                assert!(root["properties"][part].is_object(), "{kind} has no {part}");
                undescribed(&root["properties"][part], &format!("{kind}.{part}"), &mut missing);
            }
        }
        assert!(missing.is_empty(), "{kind}: fields without a description: {missing:#?}");
    }
}
