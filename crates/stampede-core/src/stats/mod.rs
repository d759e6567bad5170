pub mod histogram;
pub mod metrics;
pub mod phases;
pub mod portable;
pub mod timeline;
