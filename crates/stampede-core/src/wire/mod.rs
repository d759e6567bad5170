//! What goes on the wire, as data: request URLs, request heads, and the compiled connection
//! settings (HTTP version, layout, TLS, source addresses).

pub mod request;
pub mod settings;
pub mod tls;
pub mod url;
