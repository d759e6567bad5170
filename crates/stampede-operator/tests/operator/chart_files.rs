//! The chart's committed files agree with what they describe or copy, without Helm (the
//! rendering checks are `make chart` and `make e2e`): the CRD copy is the one the types
//! generate, values.schema.json covers exactly values.yaml, and the chart README lists every
//! value.

use std::path::PathBuf;

fn chart_file(path: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/stampede").join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn values() -> serde_json::Value {
    let yaml: serde_yaml::Value = serde_yaml::from_str(&chart_file("values.yaml")).unwrap();
    serde_json::to_value(yaml).unwrap()
}

fn schema() -> serde_json::Value {
    serde_json::from_str(&chart_file("values.schema.json")).unwrap()
}

/// Dotted paths of the values a user sets: leaves, and objects the schema leaves free-form
/// (resources, security contexts, label maps) as one value.
fn value_paths(values: &serde_json::Value, schema: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    let Some(fields) = values.as_object() else { return };
    for (key, value) in fields {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        let sub = &schema["properties"][key];
        assert!(sub.is_object(), "values.schema.json has no schema for `{path}`");
        if value.is_object() && sub["additionalProperties"] == serde_json::Value::Bool(false) {
            value_paths(value, sub, &path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn the_chart_crd_is_the_generated_one() {
    assert!(
        chart_file("files/crds/loadtest.yaml") == stampede_api::crd_yaml(),
        "charts/stampede/files/crds/loadtest.yaml is out of date: run `make generate`"
    );
}

#[test]
fn the_schema_describes_every_value_and_no_other() {
    let (values, schema) = (values(), schema());
    let mut paths = Vec::new();
    value_paths(&values, &schema, "", &mut paths);
    assert!(paths.len() > 30, "{paths:?}");
    // The other way round: every structured object in the schema has its keys in values.yaml.
    fn schema_keys(schema: &serde_json::Value, values: &serde_json::Value, prefix: &str) {
        let Some(props) = schema["properties"].as_object() else { return };
        for (key, sub) in props {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            if key == "global" && prefix.is_empty() {
                continue; // Helm's own, set by parent charts
            }
            assert!(values.get(key).is_some(), "values.schema.json has `{path}`, values.yaml does not");
            schema_keys(sub, &values[key], &path);
        }
    }
    schema_keys(&schema, &values, "");
    assert_eq!(schema["additionalProperties"], serde_json::Value::Bool(false), "unknown top-level keys are refused");
}

#[test]
fn the_chart_readme_lists_every_value() {
    let readme = chart_file("README.md");
    let mut paths = Vec::new();
    value_paths(&values(), &schema(), "", &mut paths);
    let missing: Vec<&String> = paths.iter().filter(|p| !readme.contains(&format!("| `{p}` |"))).collect();
    assert!(missing.is_empty(), "charts/stampede/README.md lacks a row for {missing:?}");
}
