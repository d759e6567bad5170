//! A scenario's TLS settings as data: the extra roots, the client certificate and key, the
//! server name and `insecure`. PEM is read here; the engine builds its TLS configurations from
//! these (and checks that a key fits its certificate) when a run starts.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Compiled TLS settings (`http.tls`).
#[derive(Default)]
pub struct TlsSettings {
    /// Certificates of `caFile`, trusted beside the system's roots.
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// `clientCert` and `clientKey`, for mutual TLS.
    pub client_auth: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    /// `serverName`: replaces the URL's host for SNI and the certificate check.
    pub server_name: Option<ServerName<'static>>,
    /// `insecure: true`: any server certificate is accepted.
    pub insecure: bool,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("extra_roots", &self.extra_roots.len())
            .field("client_auth", &self.client_auth.is_some())
            .field("server_name", &self.server_name)
            .field("insecure", &self.insecure)
            .finish()
    }
}

/// A PEM file's certificates, or why it has none.
pub fn certs_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs =
        CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().map_err(|e| format!("invalid PEM: {e}"))?;
    if certs.is_empty() { Err("holds no PEM certificate".into()) } else { Ok(certs) }
}

/// A PEM file's private key.
pub fn key_from_pem(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("no PEM private key: {e}"))
}

/// A TLS server name (SNI and the certificate check).
pub fn server_name(name: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(name.to_string()).map_err(|_| format!("`{name}` is not a DNS name or IP address"))
}
