pub(crate) mod prom;
pub(crate) mod report;
