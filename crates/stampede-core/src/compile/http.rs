//! The scenario's `http` section: HTTP version, connection layout, source addresses and TLS.
//! TLS files (`caFile`, `clientCert`, `clientKey`) are read through [`Files`], like data
//! files, so a CA that comes from a LoadTest's `spec.data` validates as it will run.

use stampede_model::scenario::{ConnectionPolicy, HttpDefaults, HttpVersion, TlsSpec};

use crate::compile::files::Files;
use crate::error::{Problems, Under};
use crate::wire::settings::{DEFAULT_MAX_STREAMS, TransportPlan, parse_local_addresses};
use crate::wire::tls::{self, TlsSettings};

/// Checks the `http` settings and reads the TLS files they name.
pub fn compile_transport(http: &HttpDefaults, files: Files<'_>, problems: &mut Problems) -> TransportPlan {
    let h2 = matches!(http.version, HttpVersion::Http2 | HttpVersion::Auto);
    let h1 = matches!(http.version, HttpVersion::Http11 | HttpVersion::Auto);
    let mut at_least_one = |field: &str, value: Option<u32>, applies: bool, to: &str| {
        if value == Some(0) {
            problems.add(format!("http.{field}"), "must be at least 1");
        } else if value.is_some() && !applies {
            problems.add(format!("http.{field}"), format!("applies to {to}"));
        }
    };
    let for_h2 = "HTTP/2 (`version: 2` or `auto`)";
    let for_h1 = "HTTP/1.1 (`version: 1.1` or `auto`)";
    at_least_one("connections", http.connections, h2, for_h2);
    at_least_one("maxStreams", http.max_streams, h2, for_h2);
    at_least_one("maxRequestsPerConnection", http.max_requests_per_connection, h1, for_h1);
    if http.connection_policy != ConnectionPolicy::KeepAlive && !h1 {
        problems.add("http.connectionPolicy", format!("applies to {for_h1}"));
    }
    let tls = match &http.tls {
        Some(spec) => compile_tls(spec, files, problems),
        None => TlsSettings::default(),
    };
    let local_addresses = parse_local_addresses(&http.local_addresses).unwrap_or_else(|bad| {
        for (i, reason) in bad {
            problems.add(format!("http.localAddresses[{i}]"), reason);
        }
        Vec::new()
    });
    TransportPlan {
        version: http.version,
        connections: http.connections,
        max_streams: http.max_streams.unwrap_or(DEFAULT_MAX_STREAMS),
        policy: http.connection_policy,
        max_requests_per_connection: http.max_requests_per_connection,
        tls,
        local_addresses,
    }
}

/// Reads the certificates and key `spec` names and checks the settings (problems under
/// `http.tls`). Whether the key fits its certificate is the engine's check, made where it
/// builds its TLS configurations.
fn compile_tls(spec: &TlsSpec, files: Files<'_>, problems: &mut Problems) -> TlsSettings {
    let before = problems.len();
    let mut tls = problems.under("http.tls.");
    // A PEM file's contents by the field that names it; a file that cannot be read is a problem.
    let read = |field: &str, name: &str, tls: &mut Under<'_>| {
        files.read(name).map_err(|e| tls.add(field, e)).ok().map(|bytes| (bytes, files.shown(name)))
    };
    let mut extra_roots = Vec::new();
    if let Some(name) = &spec.ca_file
        && let Some((pem, shown)) = read("caFile", name, &mut tls)
    {
        match tls::certs_from_pem(&pem) {
            Ok(certs) => extra_roots = certs,
            Err(e) => tls.add("caFile", format!("{}: {e}", shown.display())),
        }
    }
    let mut client_auth = None;
    match (&spec.client_cert, &spec.client_key) {
        (Some(cert), Some(key)) => {
            let chain = read("clientCert", cert, &mut tls).and_then(|(pem, shown)| {
                tls::certs_from_pem(&pem).map_err(|e| tls.add("clientCert", format!("{}: {e}", shown.display()))).ok()
            });
            let key = read("clientKey", key, &mut tls).and_then(|(pem, shown)| {
                tls::key_from_pem(&pem).map_err(|e| tls.add("clientKey", format!("{}: {e}", shown.display()))).ok()
            });
            client_auth = chain.zip(key);
        }
        (Some(_), None) => tls.add("clientKey", "`clientCert` needs `clientKey`"),
        (None, Some(_)) => tls.add("clientCert", "`clientKey` needs `clientCert`"),
        (None, None) => {}
    }
    let server_name =
        spec.server_name.as_deref().and_then(|name| tls::server_name(name).map_err(|e| tls.add("serverName", e)).ok());
    if problems.len() > before {
        return TlsSettings::default();
    }
    TlsSettings { extra_roots, client_auth, server_name, insecure: spec.insecure }
}
