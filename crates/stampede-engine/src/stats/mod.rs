pub(crate) mod histogram;
pub(crate) mod metrics;
pub(crate) mod phases;
pub mod portable;
pub(crate) mod sysstat;
pub(crate) mod timeline;
