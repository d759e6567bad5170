//! Stampede's wire types: what crosses a boundary between the engine, the CLI, the runner,
//! the operator and the LoadTest resource.
//!
//! - [`scenario`]: the scenario file as users write it (its JSON Schema comes from here);
//! - [`report`]: the run report (`stampede run --out`) and threshold verdicts;
//! - [`portable`]: a runner's counters and histograms as stored in the cluster;
//! - [`secrets`]: which names carry credentials (reports hide them, importers lift them out);
//! - [`Dur`], [`ErrorKind`], [`StepKey`]: the small types they share.
//!
//! Plain serde/schemars data, no I/O: reading the CRD or a report never compiles the HTTP
//! client, and an engine refactor cannot change the CRD schema by accident.

#![warn(missing_docs)]

mod duration;
mod error_kind;
pub mod load;
pub mod portable;
pub mod report;
pub mod scenario;
pub mod schema;
pub mod secrets;
mod step_key;

pub use duration::{Dur, DurationError, parse_duration};
pub use error_kind::{ErrorKind, errors_by_name};
pub use step_key::StepKey;
