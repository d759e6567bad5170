//! The core's statistics ([`stampede_core::stats`]) and the process's own CPU and memory.

pub(crate) use stampede_core::stats::*;

pub(crate) mod sysstat;
