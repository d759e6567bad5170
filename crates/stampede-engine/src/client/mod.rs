pub(crate) mod connect;
pub(crate) mod cookies;
pub(crate) mod exchange;
pub(crate) mod h2;
pub(crate) mod http1;
#[cfg(test)]
mod http1_fuzz;
pub(crate) mod source;
pub(crate) mod tls;
pub(crate) mod transport;
pub(crate) mod url;

pub(crate) mod request;
pub(crate) mod settings;
#[cfg(test)]
mod tls_tests;
