//! Stampede's load engine: a scenario file in, load on a target, a report out.
//!
//! The folders, in the order a run passes through them (each depends only on those above it,
//! and on the `stampede-model` crate for the wire types; `tests/engine/layers.rs` checks it):
//!
//! | folder | its job |
//! | --- | --- |
//! | `error` | errors and validation problems, each naming the file, the field and the reason |
//! | `stats` | HDR histograms, per-step counters, latency phases, portable (mergeable) results, the process's own CPU and memory |
//! | `client` | request URLs, opening connections (DNS, TCP, TLS, source addresses), the HTTP/1.1 codec, HTTP/2, cookies |
//! | `compile` | a scenario file to an immutable [`Plan`]: templates, checks, extractors, data files, thresholds, the `http` section |
//! | `run` | the workload models: VUs on worker threads, closed and open models, the reporter's ticks |
//! | `output` | the report (table and JSON) and the Prometheus exposition |
//! | `session` | one run end to end: the built-in target, compile, run, measure, report |
//!
//! Everything inside is `pub(crate)`; this file re-exports what the CLI, the runner and the
//! operator use.

mod client;
mod compile;
mod error;
mod output;
mod run;
mod session;
mod stats;

/// The workspace's seeded fuzz runner (its fuzz tests share one file).
#[cfg(test)]
#[path = "../tests/engine/fuzz/support.rs"]
mod fuzz_support;

pub use client::url::HttpUrl;
pub use compile::parse::{load_file, parse_str};
pub use compile::plan::{BUILTIN_PLACEHOLDER, CapacitySearch, CapacityStep, CompileOptions, Plan, compile};
pub use compile::threshold::Measured;
pub use error::{Problem, RunError, ScenarioError};
pub use output::ci::{render_junit, render_junit_not_run, render_summary_markdown, render_summary_not_run};
pub use output::compare::{Change, StepChange, compare, render_comparison};
pub use output::html::render_html;
pub use output::prom::{Exporter, MetricsServer};
pub use output::reference::language_reference;
pub use output::report::{build_report, latency_summary, plateau_line, render_capacity, render_phases, render_table};
pub use output::serve::{Accept, serve_http};
pub use output::verdict::{Direction, FailOn, Figure, judge, render_verdict};
pub use run::executor::{RunOptions, RunOutcome, Tick, Totals, run};
pub use run::once::{Once, OnceOutcome, run_once};
pub use session::capacity::{
    Judged, Plateau, SearchState, answer as capacity_answer, judge as judge_plateau, next_plateau,
    plateau as run_plateau, record as record_plateau,
};
pub use session::{PrepareError, Prepared, execute, execute_capacity, execute_full, prepare, validate, wants_builtin};
pub use stampede_model::report::Report;
pub use stampede_model::scenario::ScenarioFile;
pub use stats::metrics::{DropReason, IntervalStats, StepStats, WorkerMetrics};
pub use stats::phases::Phase;
pub use stats::portable;
pub use stats::timeline::{interval_point, merged_point};
