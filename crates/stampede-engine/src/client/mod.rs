//! Opening connections (DNS, TCP, TLS, source addresses) and exchanging requests over them:
//! the HTTP/1.1 codec, HTTP/2, cookies. URLs and request heads are the core's
//! ([`stampede_core::wire`]).

pub(crate) mod connect;
pub(crate) mod cookies;
pub(crate) mod exchange;
pub(crate) mod h2;
pub(crate) mod http1;
#[cfg(test)]
mod http1_fuzz;
pub(crate) mod settings;
pub(crate) mod source;
pub(crate) mod tls;
pub(crate) mod transport;

pub(crate) use stampede_core::wire::url;
#[cfg(test)]
mod tls_tests;
