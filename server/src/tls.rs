//! Optional TLS for `partita serve --tls`: rustls (ring provider) over the
//! same hyper connection code as plain HTTP.
//!
//! ```text
//!   --tls                    rcgen: a fresh self-signed certificate for
//!                            localhost, 127.0.0.1 and ::1 (its PEM is written
//!                            where clients can read and trust it)
//!   --tls-cert F --tls-key K the user's PEM chain and private key
//!        └─► rustls ServerConfig, ALPN h2 then http/1.1
//!              └─► accept loop: TLS handshake (bounded by the header
//!                  timeout), then hyper's auto builder as for plain TCP
//! ```
//!
//! A generated certificate lives only as long as the process: each start
//! makes a new key pair, so a client must trust the PEM of the run it talks
//! to. Nothing here is on the request path; after the handshake the
//! connection is served exactly as a plain one.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// The names a generated certificate is valid for.
pub const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read.
    #[error("cannot read the TLS {what} file {path}: {source}")]
    Read {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the kind needed.
    #[error("the TLS {what} file {path} holds no PEM {what} ({reason})")]
    Pem {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: String,
        /// What the PEM reader reported.
        reason: String,
    },
    /// rustls refused the certificate and key (e.g. they do not match).
    #[error("the TLS certificate and key cannot be used: {0}")]
    Config(#[from] rustls::Error),
    /// The self-signed certificate could not be generated.
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

impl TlsError {
    /// The Cosmos status of the error: 400 for files the user named that
    /// cannot be used, 500 when generating a certificate failed.
    pub fn status(&self) -> u16 {
        match self {
            TlsError::Read { .. } | TlsError::Pem { .. } | TlsError::Config(_) => 400,
            TlsError::Generate(_) => 500,
        }
    }
}

/// A TLS configuration for the server, and the certificate it presents.
#[derive(Clone)]
pub struct TlsConfig {
    config: Arc<ServerConfig>,
    cert_pem: String,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("alpn", &self.config.alpn_protocols)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// A fresh self-signed certificate for [`SELF_SIGNED_NAMES`] and its key
    /// (ECDSA P-256), generated in memory.
    ///
    /// # Errors
    /// [`TlsError::Generate`] or [`TlsError::Config`] (neither expected).
    pub fn self_signed() -> Result<TlsConfig, TlsError> {
        let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|&n| n.to_owned()).collect();
        let certified = rcgen::generate_simple_self_signed(names)?;
        let cert_pem = certified.cert.pem();
        let key = PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        TlsConfig::new(vec![certified.cert.der().clone()], key, cert_pem)
    }

    /// The certificate chain in `cert` and the private key in `key` (PEM
    /// files, as most tools write them; the key in PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    /// [`TlsError::Read`] when a file cannot be read, [`TlsError::Pem`] when
    /// it holds no certificate or key, [`TlsError::Config`] when rustls
    /// refuses them (a key that does not belong to the certificate, say).
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<TlsConfig, TlsError> {
        let read = |what, path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                what,
                path: path.display().to_string(),
                source,
            })
        };
        let pem_error = |what, path: &Path, reason: String| TlsError::Pem {
            what,
            path: path.display().to_string(),
            reason,
        };
        let cert_bytes = read("certificate", cert)?;
        let chain = CertificateDer::pem_slice_iter(&cert_bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_error("certificate", cert, e.to_string()))?;
        if chain.is_empty() {
            return Err(pem_error(
                "certificate",
                cert,
                "no CERTIFICATE section".to_owned(),
            ));
        }
        let key_bytes = read("private key", key)?;
        let private = PrivateKeyDer::from_pem_slice(&key_bytes)
            .map_err(|e| pem_error("private key", key, e.to_string()))?;
        let cert_pem = String::from_utf8_lossy(&cert_bytes).into_owned();
        TlsConfig::new(chain, private, cert_pem)
    }

    fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        cert_pem: String,
    ) -> Result<TlsConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        // h2 first: clients that offer both get HTTP/2, as over h2c.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsConfig {
            config: Arc::new(config),
            cert_pem,
        })
    }

    /// The certificate (chain) the server presents, PEM: what a client
    /// adds to its trusted roots.
    pub fn certificate_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The acceptor the transport wraps each accepted socket with.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_certificate_names_loopback_and_offers_h2_first() {
        let tls = TlsConfig::self_signed().unwrap();
        assert!(
            tls.certificate_pem()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert_eq!(
            tls.config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        // Each start makes a new key pair.
        let other = TlsConfig::self_signed().unwrap();
        assert_ne!(tls.certificate_pem(), other.certificate_pem());
    }

    #[test]
    fn unusable_files_are_400_and_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = TlsConfig::from_pem_files(&missing, &missing).unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(err.to_string().contains("missing.pem"), "{err}");

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not pem at all").unwrap();
        let err = TlsConfig::from_pem_files(&garbage, &garbage).unwrap_err();
        assert!(matches!(err, TlsError::Pem { .. }), "{err}");
        assert_eq!(err.status(), 400);

        // A certificate with somebody else's key.
        let a = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&cert, a.cert.pem()).unwrap();
        std::fs::write(&key, b.signing_key.serialize_pem()).unwrap();
        let err = TlsConfig::from_pem_files(&cert, &key).unwrap_err();
        assert!(matches!(err, TlsError::Config(_)), "{err}");
        // Its own key works.
        std::fs::write(&key, a.signing_key.serialize_pem()).unwrap();
        let tls = TlsConfig::from_pem_files(&cert, &key).unwrap();
        assert_eq!(tls.certificate_pem(), a.cert.pem());
    }
}
