//! What names an artifact on a registry: `oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]`,
//! and the SHA-256 digests that pin one.

use std::fmt;
use std::net::IpAddr;

use sha2::{Digest as _, Sha256};

/// A `sha256:` digest: 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(crate::text::hex(&Sha256::digest(bytes)))
    }

    /// Parses `sha256:HEX`; other algorithms are refused (chorus checks
    /// what it downloads, and checks it with SHA-256).
    pub fn parse(text: &str) -> Result<Self, String> {
        let hex = text.strip_prefix("sha256:").ok_or_else(|| {
            format!("`{text}` is not a digest: write `sha256:` and 64 hex digits")
        })?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(format!(
                "`{text}` is not a digest: `sha256:` must be followed by 64 lowercase hex digits"
            ));
        }
        Ok(Self(hex.to_owned()))
    }

    /// The hex digits alone (a file name in the store).
    pub fn hex(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

/// A reference to an artifact on a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `HOST` or `HOST:PORT`, lowercase.
    pub registry: String,
    /// `team/plugins/judge`: lowercase path components.
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

impl Reference {
    /// Parses `oci://HOST[:PORT]/REPO(:TAG|@sha256:HEX|:TAG@sha256:HEX)`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let usage = "write oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST (or :TAG)";
        let rest = text
            .strip_prefix("oci://")
            .ok_or_else(|| format!("`{text}` is not an OCI reference: {usage}"))?;
        if text.len() > 1024 {
            return Err(format!(
                "the reference is {} bytes long; at most 1024",
                text.len()
            ));
        }
        let (rest, digest) = match rest.split_once('@') {
            Some((rest, digest)) => (rest, Some(Digest::parse(digest)?)),
            None => (rest, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| format!("`{text}` names no repository: {usage}"))?;
        // A tag is after the last `:` of the path (the host's port is not in it).
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) => (repository, Some(tag.to_owned())),
            None => (path, None),
        };
        if registry.is_empty()
            || !registry
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
        {
            return Err(format!("`{registry}` is not a registry host: {usage}"));
        }
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
                && c.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        };
        if !repository.split('/').all(component_ok) {
            return Err(format!(
                "`{repository}` is not a repository name: lowercase letters, digits, `.`, `_`, `-`, separated by `/`"
            ));
        }
        if let Some(tag) = &tag {
            let ok = tag.len() <= 128
                && tag
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                && tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(format!(
                    "`{tag}` is not a tag: letters, digits, `.`, `_`, `-`, at most 128"
                ));
            }
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!(
                "`{text}` names neither a digest nor a tag: {usage}"
            ));
        }
        Ok(Self {
            registry: registry.to_ascii_lowercase(),
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    /// The same artifact pinned to `digest` (the tag kept, for messages).
    pub fn pinned(&self, digest: Digest) -> Self {
        Self {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// What a registry's manifest URL ends with: the digest if pinned,
    /// else the tag.
    pub fn version(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => digest.to_string(),
            (None, Some(tag)) => tag.clone(),
            (None, None) => unreachable!("parse requires a tag or a digest"),
        }
    }

    /// The host without its port.
    pub fn host(&self) -> &str {
        let registry = self.registry.as_str();
        if let Some(inner) = registry.strip_prefix('[') {
            return inner.split(']').next().unwrap_or(inner);
        }
        registry.rsplit_once(':').map_or(registry, |(host, _)| host)
    }

    /// Whether the registry is on this machine: `localhost`, 127.0.0.0/8
    /// or ::1 — the only registries reached over plain HTTP unless
    /// `insecure_registries` lists them.
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_parse_with_ports_tags_and_digests() {
        let r = Reference::parse(&format!("oci://127.0.0.1:5000/team/judge@sha256:{HEX}")).unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team/judge");
        assert_eq!(r.tag, None);
        assert_eq!(r.version(), format!("sha256:{HEX}"));
        assert!(r.is_loopback());
        let r = Reference::parse("oci://ghcr.io/acme/plugins/judge:1.2").unwrap();
        assert_eq!((r.host(), r.tag.as_deref()), ("ghcr.io", Some("1.2")));
        assert!(!r.is_loopback());
        assert_eq!(r.to_string(), "oci://ghcr.io/acme/plugins/judge:1.2");
        let r = Reference::parse(&format!("oci://[::1]:5000/j:v1@sha256:{HEX}")).unwrap();
        assert!(r.is_loopback());
        assert_eq!(r.version(), format!("sha256:{HEX}"), "the digest wins");
    }

    #[test]
    fn malformed_references_say_what_is_wrong() {
        for (text, says) in [
            ("ghcr.io/a/b:1", "not an OCI reference"),
            ("oci://ghcr.io/a/b", "neither a digest nor a tag"),
            ("oci://ghcr.io/A/b:1", "not a repository name"),
            ("oci://ghcr.io/a/b@sha256:abc", "64 lowercase hex"),
            ("oci://ghcr.io/a/b@md5:abc", "not a digest"),
            ("oci://ghcr.io:1", "names no repository"),
            ("oci://ghcr.io/a/b:-x", "not a tag"),
        ] {
            let error = Reference::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
