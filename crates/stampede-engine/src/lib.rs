//! Stampede's load engine.
//!
//! It owns the scenario model and its validation ([`scenario`], [`parse`], [`plan`]),
//! templating ([`template`]), a lean HTTP/1.1 client ([`http1`]) with TLS ([`tls`]) and
//! HTTP/2 ([`h2`]) beside it ([`transport`]), the workload models ([`executor`]), latency
//! phases ([`phases`]), HDR latency metrics ([`metrics`]), reports ([`report`]) and the
//! built-in target server ([`target`]). [`session`] ties them into one run.

pub mod check;
pub mod cookies;
pub mod data;
pub mod error;
pub mod executor;
pub mod extract;
pub mod h2;
pub mod http1;
pub mod metrics;
pub mod parse;
pub mod phases;
pub mod plan;
pub mod portable;
pub mod prom;
pub mod report;
pub mod session;
pub mod source;
pub mod sysstat;
pub mod template;
pub mod threshold;
pub mod tls;
pub mod transport;

pub use error::{Problem, RunError, ScenarioError};
pub use executor::{RunOptions, Tick};
pub use plan::{CompileOptions, Plan};
pub use report::Report;
pub use stampede_model::scenario::ScenarioFile;
