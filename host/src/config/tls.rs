//! The `[tls]` keys: `ca_files`, PEM files whose certificates chorus
//! trusts for outgoing HTTPS (provider calls and URL attachments alike)
//! besides the built-in roots — for a private CA, or a TLS-inspecting
//! corporate proxy. Each file is read and parsed at load, so a missing,
//! unreadable or non-PEM file is a config error naming it, never a TLS
//! failure in the middle of a run.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Invalid;
use super::files::read_regular_file;

/// The largest CA file read (a system bundle is ~250 KB).
const MAX_CA_FILE_BYTES: u64 = 4 << 20;

/// `[tls]`: how chorus's outgoing HTTPS connections are checked.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tls {
    /// PEM files of certificates to trust besides the built-in (Mozilla)
    /// roots; relative to the config file.
    pub ca_files: Vec<PathBuf>,
}

impl Tls {
    /// The extra roots, read from `ca_files` (relative to `base_dir`), or
    /// `(key, message)` naming the file that cannot be used.
    pub fn roots(&self, base_dir: &Path) -> Result<Vec<reqwest::Certificate>, Invalid> {
        let mut roots = Vec::new();
        for file in &self.ca_files {
            let path = base_dir.join(file);
            let wrong = |why: String| {
                (
                    "tls.ca_files".to_owned(),
                    format!(
                        "`{}` {why}; give PEM files (`-----BEGIN CERTIFICATE-----`) of the CA certificates to trust",
                        path.display()
                    ),
                )
            };
            let bytes = read_regular_file(&path, MAX_CA_FILE_BYTES)
                .map_err(|e| wrong(format!("cannot be read: {e}")))?;
            let certs = reqwest::Certificate::from_pem_bundle(&bytes)
                .map_err(|e| wrong(format!("is not PEM ({e})")))?;
            if certs.is_empty() {
                return Err(wrong("holds no PEM certificate".to_owned()));
            }
            // rustls parses each certificate when a client is built: build
            // one here, so a broken certificate is an error at load.
            let mut builder = reqwest::Client::builder();
            for cert in &certs {
                builder = builder.add_root_certificate(cert.clone());
            }
            builder
                .build()
                .map_err(|e| wrong(format!("holds a certificate that cannot be used ({e})")))?;
            roots.extend(certs);
        }
        Ok(roots)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::Loaded;

    fn parse(tls: &str, base: PathBuf) -> Result<Loaded, crate::config::ConfigError> {
        let text = format!("{}\n[tls]\n{tls}\n", crate::config::tests::MINIMAL);
        Loaded::parse(&text, "test.toml", base)
    }

    /// A real CA certificate (made at test time), as PEM.
    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn ca_files_are_read_at_load_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_path_buf();
        std::fs::write(dir.path().join("corp.pem"), ca_pem()).unwrap();
        let loaded = parse("ca_files = [\"corp.pem\"]", base.clone()).unwrap();
        let roots = loaded.config.tls.roots(&loaded.base_dir).unwrap();
        assert_eq!(roots.len(), 1);

        let error = parse("ca_files = [\"missing.pem\"]", base.clone()).unwrap_err();
        assert_eq!(error.key, "tls.ca_files");
        let text = error.to_string();
        assert!(
            text.contains("missing.pem` cannot be read") && text.contains("BEGIN CERTIFICATE"),
            "{text}"
        );

        std::fs::write(dir.path().join("notes.txt"), "not a certificate\n").unwrap();
        let error = parse("ca_files = [\"notes.txt\"]", base.clone()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("notes.txt` holds no PEM certificate"),
            "{error}"
        );

        std::fs::write(
            dir.path().join("broken.pem"),
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let error = parse("ca_files = [\"broken.pem\"]", base.clone()).unwrap_err();
        assert!(error.to_string().contains("broken.pem`"), "{error}");

        let error = parse("ca_files = [\".\"]", base).unwrap_err();
        assert!(error.to_string().contains("directory"), "{error}");
    }
}
