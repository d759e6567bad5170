//! The core's reports and renderers ([`stampede_core::output`]), and what serves them while a
//! run goes on: the Prometheus exposition (served by `stampede-serve`).

pub(crate) use stampede_core::output::*;

pub(crate) mod prom;
