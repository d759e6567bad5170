//! The core's reports and renderers ([`stampede_core::output`]), and what serves them while a
//! run goes on: the Prometheus exposition and the live dashboard (served by `stampede-serve`).

pub(crate) use stampede_core::output::*;

pub(crate) mod dashboard;
pub(crate) mod prom;
