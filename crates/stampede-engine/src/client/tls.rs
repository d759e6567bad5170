//! TLS for `https://` targets, with rustls (ring provider).
//!
//! Server certificates are checked against the system's roots (Mozilla's, from
//! `webpki-roots`, when the system has none) plus the scenario's `caFile`; `insecure: true`
//! accepts any certificate. A client certificate can be presented for mutual TLS, and
//! `serverName` replaces the URL's host for SNI and for the certificate check. Handshake
//! failures are errors of kind [`ErrorKind::Tls`] whose message says which: unknown CA,
//! hostname mismatch, expired certificate, or the handshake itself.

use std::io;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::client::exchange::ExchangeError;
use stampede_core::wire::tls::TlsSettings;
use stampede_model::ErrorKind;

/// Application protocols offered in the handshake (ALPN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alpn {
    /// `http/1.1` only.
    Http11,
    /// `h2` only.
    H2,
    /// `h2`, then `http/1.1`.
    Both,
}

impl Alpn {
    fn protocols(self) -> Vec<Vec<u8>> {
        match self {
            Alpn::Http11 => vec![b"http/1.1".to_vec()],
            Alpn::H2 => vec![b"h2".to_vec()],
            Alpn::Both => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        }
    }
}

/// Compiled TLS settings; the client configurations are built on first use.
#[derive(Default)]
pub(crate) struct TlsPlan {
    extra_roots: Vec<CertificateDer<'static>>,
    client_auth: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    server_name: Option<ServerName<'static>>,
    insecure: bool,
    /// One per [`Alpn`] value.
    configs: [OnceLock<Result<TlsConnector, String>>; 3],
}

impl std::fmt::Debug for TlsPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsPlan")
            .field("extra_roots", &self.extra_roots.len())
            .field("client_auth", &self.client_auth.is_some())
            .field("server_name", &self.server_name)
            .field("insecure", &self.insecure)
            .finish()
    }
}

/// The ring provider, shared by every configuration.
fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

/// The system's trusted roots, loaded once per process; Mozilla's when the system has none.
fn system_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        roots
    })
}

impl TlsPlan {
    /// The TLS side of a run, from the plan's settings; configurations are built on first use.
    pub(crate) fn new(settings: &TlsSettings) -> TlsPlan {
        TlsPlan {
            extra_roots: settings.extra_roots.clone(),
            client_auth: settings.client_auth.as_ref().map(|(chain, key)| (chain.clone(), key.clone_key())),
            server_name: settings.server_name.clone(),
            insecure: settings.insecure,
            ..TlsPlan::default()
        }
    }

    /// Builds a configuration now: a key that does not fit its certificate, or a `caFile`
    /// whose certificates cannot be trust anchors, is found before the run.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.connector(Alpn::Both).map(|_| ())
    }

    /// The connector offering `alpn`.
    pub(crate) fn connector(&self, alpn: Alpn) -> Result<TlsConnector, String> {
        let slot = match alpn {
            Alpn::Http11 => 0,
            Alpn::H2 => 1,
            Alpn::Both => 2,
        };
        self.configs[slot].get_or_init(|| self.build(alpn).map(|c| TlsConnector::from(Arc::new(c)))).clone()
    }

    fn build(&self, alpn: Alpn) -> Result<ClientConfig, String> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = if self.insecure {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
        } else {
            let mut roots = system_roots().clone();
            let (_, ignored) = roots.add_parsable_certificates(self.extra_roots.iter().cloned());
            if ignored > 0 {
                return Err(format!("{ignored} certificate(s) of `caFile` cannot be used as trust anchors"));
            }
            builder.with_root_certificates(roots)
        };
        let mut config = match &self.client_auth {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| format!("the client certificate and key do not go together: {e}"))?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.protocols();
        Ok(config)
    }

    /// Runs the TLS handshake for `host` on `tcp`.
    pub(crate) async fn handshake(
        &self,
        alpn: Alpn,
        host: &str,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, ExchangeError> {
        let connector = self.connector(alpn).map_err(|message| ExchangeError {
            kind: ErrorKind::Tls,
            message: format!("TLS setup: {message}"),
            sent: false,
            answered: false,
        })?;
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => ServerName::try_from(host.to_string()).map_err(|_| ExchangeError {
                kind: ErrorKind::Tls,
                message: format!("TLS: `{host}` is not a valid server name"),
                sent: false,
                answered: false,
            })?,
        };
        let shown = name.to_str().into_owned();
        connector.connect(name, tcp).await.map_err(|e| classify(&e, &shown))
    }
}

/// Names what went wrong in a handshake with `name`.
pub(crate) fn classify(e: &io::Error, name: &str) -> ExchangeError {
    let tls = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let message = match tls {
        Some(rustls::Error::InvalidCertificate(cert)) => match cert {
            CertificateError::UnknownIssuer => format!(
                "TLS unknown CA: the certificate of `{name}` is not issued by a trusted root (trust it with `http.tls.caFile`)"
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!("TLS hostname mismatch: the server's certificate is not valid for `{name}`")
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                format!("TLS certificate expired: the certificate of `{name}` is no longer valid")
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                format!("TLS certificate not yet valid: the certificate of `{name}`")
            }
            other => format!("TLS handshake with `{name}` failed: invalid certificate: {other:?}"),
        },
        Some(other) => format!("TLS handshake with `{name}` failed: {other}"),
        None => format!("TLS handshake with `{name}` failed: {e}"),
    };
    ExchangeError { kind: ErrorKind::Tls, message, sent: false, answered: false }
}

/// `insecure: true`: any certificate is accepted; handshake signatures are still checked.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
