//! Stampede's pure core: what the load engine, the runner, the CLI and the operator all stand
//! on, with no runtime, socket or TLS stack in its dependency tree (a test keeps it so).
//!
//! The modules, lowest first (each uses only those above it, and the `stampede-model` crate
//! for the wire types; `tests/layers.rs` checks it, and that no two files of any crate use each other in a circle):
//!
//! | module | what lives there |
//! | --- | --- |
//! | [`error`] | a scenario's problems, each naming the file, the field and the reason |
//! | [`stats`] | HDR histograms, per-step counters, latency phases, portable (mergeable) results, timeline points |
//! | [`wire`] | request URLs and heads, the compiled connection settings (HTTP version, layout, TLS as data, source addresses) |
//! | [`compile`] | a scenario file to an immutable [`Plan`]: templates (`template`), the expression language (`expr`, CEL), flow blocks (`flow`), checks, extractors, data files, gRPC (`grpc`: descriptors and messages), WebSocket (`ws`), thresholds (`threshold`), budgets |
//! | [`outcome`] | what a run gives: ticks, totals, error samples, the outcome |
//! | [`output`] | the report model (`report`), threshold verdicts (`verdict`), the table, JSON, HTML (`html`), JUnit and Markdown (`ci`), comparisons (`compare`), the live view and its page (`live`), the language reference |
//! | [`capacity`] | a capacity search's rules: judging a plateau, the next one, the answer |
//! | [`validate`] | a scenario file checked without running it |
//!
//! The engine (`stampede-engine`) runs plans on these; the operator validates, merges and
//! judges with them alone.

#![warn(missing_docs)]

pub mod capacity;
/// Scenario file to immutable [`Plan`]: parsing, templates, expressions, flow, checks, gRPC,
/// WebSocket, thresholds and budgets.
pub mod compile;
pub mod error;
pub mod outcome;
/// What a run is shown as: the report model, table, JSON, HTML, JUnit and Markdown, comparisons
/// and verdicts, the language reference.
pub mod output;
/// What a run records: HDR histograms, per-step counters, latency phases, portable (mergeable)
/// results, timeline points.
pub mod stats;
pub mod validate;
pub mod wire;

/// The workspace's seeded fuzz runner (its fuzz tests share one file).
#[cfg(test)]
#[path = "../../stampede-engine/tests/engine/fuzz/support.rs"]
mod fuzz_support;

pub use capacity::{
    Judged, SearchState, answer as capacity_answer, judge as judge_plateau, next_plateau, record as record_plateau,
};
pub use compile::parse::{load_file, parse_str};
pub use compile::plan::{BUILTIN_PLACEHOLDER, CapacitySearch, CapacityStep, CompileOptions, Once, Plan, compile};
pub use compile::threshold::{Baseline, Measured, NO_BASELINE, judge_thresholds, live_verdicts};
pub use error::{Problem, ScenarioError};
pub use outcome::{RunOutcome, Tick, Totals};
pub use output::html::render_html;
pub use output::report::{build_report, latency_summary};
pub use stats::metrics::{DropReason, IntervalStats, StepStats, WorkerMetrics};
pub use stats::portable;
pub use stats::timeline::{interval_point, merged_point};
pub use validate::{validate, wants_builtin};
