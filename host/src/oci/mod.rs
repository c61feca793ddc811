//! Strategy plugins on OCI registries: a component is published as an OCI
//! artifact in the CNCF Wasm layout Spin and wasm-pkg-tools use (a config
//! of type `application/vnd.wasm.config.v0+json`, one `application/wasm`
//! layer), pulled by digest (or by tag, pinned to the digest it resolved
//! to), checked against that digest on download and again every time it is
//! read from the local store, so every instance of a team runs the same
//! bytes and a restart with the registry down still starts.
//!
//! `reference` names artifacts, `client` speaks the registry's HTTP API
//! (and keeps credentials to the registry's own origin), `auth` finds
//! credentials (a token only for the registry it names), `store` keeps what was pulled, `artifact`
//! builds and reads the manifests, `pull` puts them together. Depends on
//! `config` only (bounded file reads); `plugins` and `cli` use it.

mod artifact;
mod auth;
mod client;
mod pull;
mod store;

use std::fmt;

pub use crate::config::oci_reference::{Digest, Reference};
pub use artifact::{Artifact, CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE};
pub use auth::{HOST_ENV, TOKEN_ENV, USER_ENV};
pub use client::{Client, Transport};
pub use pull::{Pulled, pull, pull_blocking, push};
pub use store::Store;

/// Why an artifact could not be pushed or pulled.
#[derive(Debug, Clone)]
pub enum OciError {
    /// No answer: connection refused, DNS, TLS, timeout.
    Unreachable {
        registry: String,
        why: String,
    },
    /// 401/403, or no credentials for a registry that asks for them.
    Denied {
        registry: String,
        why: String,
    },
    NotFound(String),
    /// Bytes that are not what their digest says.
    WrongDigest {
        what: String,
        expected: Digest,
        found: Digest,
    },
    /// A manifest that is not a Wasm component artifact.
    NotAComponent(String),
    TooLarge(String),
    /// Any other answer the registry should not have given.
    Registry(String),
    /// The local store.
    Cache(String),
}

impl OciError {
    /// Whether the registry could not be reached at all (as opposed to
    /// answering something wrong): what fails only that plugin's
    /// pipelines at a start instead of the whole start.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }
}

impl fmt::Display for OciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreachable { registry, why } => {
                write!(f, "the registry {registry} cannot be reached ({why})")
            }
            Self::Denied { registry, why } => write!(
                f,
                "the registry {registry} refused access: {why}; log in with `podman login`/`docker login` \
                 (chorus reads their auth.json / ~/.docker/config.json) or set ${} \
                 with ${}={registry}",
                auth::TOKEN_ENV,
                auth::HOST_ENV
            ),
            Self::NotFound(why) => write!(f, "{why}"),
            Self::WrongDigest {
                what,
                expected,
                found,
            } => write!(
                f,
                "{what} has the digest {found}, not the expected {expected}: refusing it"
            ),
            Self::NotAComponent(why) => write!(f, "not a Wasm component artifact: {why}"),
            Self::TooLarge(why) => write!(f, "{why}"),
            Self::Registry(why) => write!(f, "{why}"),
            Self::Cache(why) => write!(f, "the local plugin cache: {why}"),
        }
    }
}

impl std::error::Error for OciError {}
