pub(crate) mod ci;
pub(crate) mod compare;
pub(crate) mod html;
pub(crate) mod prom;
pub(crate) mod reference;
pub(crate) mod report;
pub(crate) mod serve;
pub(crate) mod verdict;
