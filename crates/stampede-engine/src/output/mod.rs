pub(crate) mod prom;
pub(crate) mod report;
pub(crate) mod serve;
