//! An HTTPS file server on 127.0.0.1 for URL attachments: real TLS, with
//! a CA and a server certificate (for `localhost` and `127.0.0.1`) made at
//! test time by rcgen. The CA's PEM file is what a test config names in
//! `[tls] ca_files`. Each path answers as set (bytes, a status, a
//! redirect); every request is counted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// What a path answers.
#[derive(Clone)]
pub enum Reply {
    /// 200 with these bytes.
    Bytes(Vec<u8>),
    /// 302 to this location.
    Redirect(String),
}

pub struct Https {
    /// `https://localhost:PORT`.
    pub origin: String,
    pub port: u16,
    /// The CA's certificate, as a PEM file.
    pub ca_file: PathBuf,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    hits: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Https {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Https {
    pub async fn start() -> Self {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "chorus test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("test-ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let routes: Arc<Mutex<HashMap<String, Reply>>> = Arc::default();
        let hits = Arc::new(AtomicUsize::new(0));
        let (served, counted) = (routes.clone(), hits.clone());
        let server = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, routes, hits) = (acceptor.clone(), served.clone(), counted.clone());
                tokio::spawn(async move {
                    // A client that does not trust the CA hangs up here.
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(tls, &routes, &hits).await;
                    }
                });
            }
        });
        Self {
            origin: format!("https://localhost:{port}"),
            port,
            ca_file,
            routes,
            hits,
            _dir: dir,
            server,
        }
    }

    /// `path` (from `/`) answers `reply`.
    pub fn route(&self, path: &str, reply: Reply) -> &Self {
        self.routes.lock().unwrap().insert(path.to_owned(), reply);
        self
    }

    /// Requests read so far (over TLS that was accepted).
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The `[tls]` section trusting this server's CA.
    pub fn tls_section(&self) -> String {
        format!(
            "[tls]\nca_files = [{:?}]\n",
            self.ca_file.display().to_string()
        )
    }
}

/// One request on one connection, then closed.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    routes: &Mutex<HashMap<String, Reply>>,
    hits: &AtomicUsize,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 * 1024 {
            return;
        }
    }
    hits.fetch_add(1, Ordering::SeqCst);
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let reply = routes.lock().unwrap().get(&path).cloned();
    let (status, extra, body) = match reply {
        Some(Reply::Bytes(bytes)) => ("200 OK", String::new(), bytes),
        Some(Reply::Redirect(to)) => ("302 Found", format!("location: {to}\r\n"), Vec::new()),
        None => ("404 Not Found", String::new(), b"not here".to_vec()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\ncontent-type: application/octet-stream\r\nconnection: close\r\n{extra}\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
}
