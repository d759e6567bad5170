//! JSON Schemas of the scenario file and of the JSON report, generated from the Rust
//! types. `make generate` writes them to `schemas/`; a test fails when the committed
//! copies drift.

use crate::report::Report;
use crate::scenario::ScenarioFile;

/// The scenario file's JSON Schema (for editors: yaml-language-server modelines).
pub fn scenario_schema() -> String {
    let mut schema = schemars::schema_for!(ScenarioFile);
    schema.insert("$id".into(), "https://stampede.dev/schemas/scenario.schema.json".into());
    schema.insert("title".into(), "Stampede scenario file".into());
    pretty(&schema)
}

/// The JSON report's schema (`stampede run --out`).
pub fn report_schema() -> String {
    let mut schema = schemars::schema_for!(Report);
    schema.insert("$id".into(), "https://stampede.dev/schemas/report.schema.json".into());
    schema.insert("title".into(), "Stampede run report".into());
    pretty(&schema)
}

fn pretty(schema: &schemars::Schema) -> String {
    serde_json::to_string_pretty(schema).unwrap_or_default() + "\n"
}
