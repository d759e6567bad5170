//! Stampede's load engine: a scenario file in, load on a target, a report out.
//!
//! It stands on the pure core (`stampede-core`): compiling a scenario to a [`Plan`], the
//! expression language, thresholds, histograms, the report model and its renderers live there,
//! and the engine's code reaches them as `crate::compile`, `crate::stats::…` and
//! `crate::output::…` (re-exported). What is here runs a plan.
//!
//! The folders, in the order a run passes through them (each depends only on those above it;
//! `stampede-core/tests/layers.rs` checks it, and that no two files use each other in a circle):
//!
//! | folder | its job |
//! | --- | --- |
//! | `error` | why a run could not take place ([`RunError`]); a scenario's problems are the core's |
//! | `stats` | the process's own CPU, memory and open-file limit (`sysstat`), beside the core's statistics |
//! | `client` | opening connections (DNS, TCP, TLS from the plan's settings, source addresses), the HTTP/1.1 codec, HTTP/2, cookies |
//! | `run` | the workload models: VUs on worker threads, closed and open models, the reporter's ticks; one step of each protocol (`send` HTTP, `grpc`, `ws`, with `answer` below all three), flow blocks (`flow`), setup and teardown (`once`) |
//! | `output` | the Prometheus exposition (`prom`) and the live dashboard (`dashboard`) of a running test, served by `stampede-serve` |
//! | `execution` | one run end to end: the built-in target, compile (with gRPC reflection), run, measure, report; a capacity search's plateaus |
//!
//! Everything inside is `pub(crate)`; this file re-exports what the CLI, the runner and the
//! tests use.

#![warn(missing_docs)]

mod client;
mod error;
mod execution;
mod output;
mod run;
mod stats;

/// The workspace's seeded fuzz runner (its fuzz tests share one file).
#[cfg(test)]
#[path = "../tests/engine/fuzz/support.rs"]
mod fuzz_support;

pub use stampede_core::capacity::{
    Judged, SearchState, answer as capacity_answer, judge as judge_plateau, next_plateau, record as record_plateau,
};
pub use stampede_core::compile::plan::{BUILTIN_PLACEHOLDER, CapacitySearch, CapacityStep, CompileOptions, Plan};
pub use stampede_core::compile::threshold::Measured;
pub use stampede_core::error::{Problem, ScenarioError};
pub use stampede_core::output::ci::{
    render_junit, render_junit_not_run, render_summary_markdown, render_summary_not_run,
};
pub use stampede_core::output::compare::{Change, StepChange, compare, render_comparison};
pub use stampede_core::output::html::render_html;
pub use stampede_core::output::reference::language_reference;
pub use stampede_core::output::report::{
    build_report, latency_summary, plateau_line, render_capacity, render_phases, render_table,
};
pub use stampede_core::output::verdict::{Direction, FailOn, Figure, judge, render_verdict};
pub use stampede_core::stats::metrics::{DropReason, IntervalStats, StepStats, WorkerMetrics};
pub use stampede_core::stats::phases::LatencyPhase;
pub use stampede_core::stats::portable;
pub use stampede_core::stats::timeline::{interval_point, merged_point};
pub use stampede_core::wire::url::HttpUrl;
pub use stampede_core::{compile, load_file, parse_str, wants_builtin};

pub use error::RunError;
pub use execution::capacity::{Plateau, plateau as run_plateau};
pub use execution::{PrepareError, Prepared, execute, execute_capacity, execute_full, prepare, validate};
pub use output::dashboard::{Dashboard, DashboardServer, PAGES as DASHBOARD_PAGES};
pub use output::prom::{Exporter, MetricsServer};
pub use run::executor::{LiveControl, RunOptions, RunOutcome, Tick, Totals, run};
pub use run::once::{Once, OnceOutcome, run_once};
pub use stampede_core::output::live::LiveChange;
pub use stampede_model::report::Report;
pub use stampede_model::scenario::ScenarioFile;
