//! The registry's HTTP API (the OCI distribution spec), as much of it as
//! pushing and pulling one artifact takes: manifests by tag or digest,
//! blobs, chunkless uploads, and the token dance (`WWW-Authenticate:
//! Bearer realm=…` → a token from the realm) or Basic auth.
//!
//! HTTPS with the built-in (Mozilla) roots, the system's CA bundle and
//! `[tls] ca_files`; plain HTTP only to a loopback registry or one listed
//! in `insecure_registries`. Every response is bounded in size, every
//! request in time; a redirect (blob storage) never goes from HTTPS to
//! HTTP, and credentials never follow it to another host.
//!
//! Credentials go only where the registry is: a request (an upload
//! `Location`, say) to another scheme, host or port than the registry's is
//! sent without them, and a token service (`realm`) on another host or
//! port gets them only when `registry_token_realms` lists it — a registry
//! cannot name a host of its choosing and be handed the password. What is
//! withheld is logged, and named in the error when the registry refuses.

use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Method, RequestBuilder, Response, StatusCode};

use super::auth::{self, Credentials};
use super::{Digest, MANIFEST_MEDIA_TYPE, OciError, Reference};

/// The largest manifest read.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The largest token response read.
const MAX_TOKEN_BYTES: u64 = 1 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// One request, body included (a 256 MB component over a slow link).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// How registries are reached: which may be plain HTTP, which CAs are
/// trusted besides the built-in roots.
#[derive(Clone, Default)]
pub struct Transport {
    /// `HOST[:PORT]`s reached over plain HTTP (besides loopback).
    pub insecure: Vec<String>,
    pub roots: Vec<reqwest::Certificate>,
    /// Token services (`HOST[:PORT]`) on another host than the registry
    /// that may be sent its credentials (`registry_token_realms`).
    pub token_realms: Vec<String>,
}

/// A client for one registry.
pub struct Client {
    http: reqwest::Client,
    base: String,
    /// `base` parsed: its scheme, host and port are the only ones
    /// credentials are sent to (besides `token_realms`).
    origin: reqwest::Url,
    registry: String,
    credentials: Option<Credentials>,
    token_realms: Vec<String>,
    /// The bearer token (or Basic header) that last worked.
    authorization: tokio::sync::Mutex<Option<String>>,
    /// Credentials not sent, and why: said in a refusal's error.
    withheld: std::sync::Mutex<Vec<String>>,
}

impl Client {
    pub fn new(reference: &Reference, transport: &Transport) -> Result<Self, OciError> {
        let plain = reference.is_loopback()
            || transport
                .insecure
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&reference.registry));
        let scheme = if plain { "http" } else { "https" };
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("chorus/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= 5 {
                    attempt.error("more than 5 redirects")
                } else if !plain && attempt.url().scheme() != "https" {
                    attempt.error("a redirect from HTTPS to plain HTTP")
                } else {
                    attempt.follow()
                }
            }));
        // A registry on this machine is never reached through a proxy
        // ($HTTPS_PROXY applies to the others, as for providers).
        if reference.is_loopback() {
            builder = builder.no_proxy();
        }
        for root in transport.roots.iter().chain(system_roots().iter()) {
            builder = builder.add_root_certificate(root.clone());
        }
        let http = builder
            .build()
            .map_err(|e| OciError::Registry(format!("cannot make an HTTP client: {e}")))?;
        let base = format!(
            "{scheme}://{}/v2/{}",
            reference.registry, reference.repository
        );
        let origin = reqwest::Url::parse(&base).map_err(|e| {
            OciError::Registry(format!(
                "`{}` is not a registry address ({e})",
                reference.registry
            ))
        })?;
        let found = auth::credentials(&reference.registry);
        Ok(Self {
            http,
            base,
            origin,
            registry: reference.registry.clone(),
            credentials: found.credentials,
            token_realms: transport.token_realms.clone(),
            authorization: tokio::sync::Mutex::new(None),
            withheld: std::sync::Mutex::new(found.withheld.into_iter().collect()),
        })
    }

    /// The manifest `version` (a tag or `sha256:…`) and its digest (of the
    /// bytes as served: what a digest reference names).
    pub async fn manifest(&self, version: &str) -> Result<(Vec<u8>, Digest), OciError> {
        let url = format!("{}/manifests/{version}", self.base);
        let response = self
            .send(Method::GET, &url, "pull", |r| {
                r.header(ACCEPT, MANIFEST_MEDIA_TYPE)
            })
            .await?;
        let response = self
            .expect(response, &[StatusCode::OK], "fetch the manifest")
            .await?;
        let bytes = read_limited(response, MAX_MANIFEST_BYTES, "the manifest").await?;
        let digest = Digest::of(&bytes);
        Ok((bytes, digest))
    }

    /// The blob `digest`, at most `limit` bytes (not checked here against
    /// the digest: the caller does, naming what it expected).
    pub async fn blob(&self, digest: &Digest, limit: u64) -> Result<Vec<u8>, OciError> {
        let url = format!("{}/blobs/{digest}", self.base);
        let response = self.send(Method::GET, &url, "pull", |r| r).await?;
        let response = self
            .expect(response, &[StatusCode::OK], "fetch a blob")
            .await?;
        read_limited(response, limit, "the blob").await
    }

    /// Uploads `bytes` as the blob `digest` (skipped when the registry has it).
    pub async fn push_blob(&self, digest: &Digest, bytes: &[u8]) -> Result<(), OciError> {
        let url = format!("{}/blobs/{digest}", self.base);
        let head = self.send(Method::HEAD, &url, "pull,push", |r| r).await?;
        if head.status() == StatusCode::OK {
            return Ok(());
        }
        let start = format!("{}/blobs/uploads/", self.base);
        let started = self.send(Method::POST, &start, "pull,push", |r| r).await?;
        let started = self
            .expect(started, &[StatusCode::ACCEPTED], "start an upload")
            .await?;
        let location = started
            .headers()
            .get(LOCATION)
            .and_then(|l| l.to_str().ok())
            .ok_or_else(|| OciError::Registry("the upload answer has no Location".into()))?;
        let mut upload = reqwest::Url::parse(&start)
            .and_then(|base| base.join(location))
            .map_err(|e| OciError::Registry(format!("a bad upload Location `{location}`: {e}")))?;
        upload
            .query_pairs_mut()
            .append_pair("digest", &digest.to_string());
        let body = bytes.to_vec();
        let done = self
            .send(Method::PUT, upload.as_str(), "pull,push", move |r| {
                r.header(CONTENT_TYPE, "application/octet-stream")
                    .body(body.clone())
            })
            .await?;
        self.expect(done, &[StatusCode::CREATED], "finish an upload")
            .await?;
        Ok(())
    }

    /// Puts `manifest` (of `media_type`) under `tag`; the registry's digest.
    pub async fn push_manifest(
        &self,
        tag: &str,
        media_type: &str,
        manifest: &[u8],
    ) -> Result<Digest, OciError> {
        let url = format!("{}/manifests/{tag}", self.base);
        let body = manifest.to_vec();
        let media_type = media_type.to_owned();
        let response = self
            .send(Method::PUT, &url, "pull,push", move |r| {
                r.header(CONTENT_TYPE, media_type.clone())
                    .body(body.clone())
            })
            .await?;
        let response = self
            .expect(response, &[StatusCode::CREATED], "put the manifest")
            .await?;
        let ours = Digest::of(manifest);
        if let Some(theirs) = response
            .headers()
            .get("docker-content-digest")
            .and_then(|d| d.to_str().ok())
            .and_then(|d| Digest::parse(d).ok())
            && theirs != ours
        {
            return Err(OciError::WrongDigest {
                what: format!("the manifest {} stored", self.registry),
                expected: ours,
                found: theirs,
            });
        }
        Ok(ours)
    }

    /// Sends a request, authenticating when the registry asks (once).
    async fn send(
        &self,
        method: Method,
        url: &str,
        actions: &str,
        build: impl Fn(RequestBuilder) -> RequestBuilder,
    ) -> Result<Response, OciError> {
        let target = reqwest::Url::parse(url)
            .map_err(|e| OciError::Registry(format!("`{url}` is not a URL ({e})")))?;
        if target.origin() != self.origin.origin() {
            return self.send_elsewhere(method, &target, build).await;
        }
        let mut authorization = self.authorization.lock().await;
        let request = |auth: Option<&str>| {
            let request = build(self.http.request(method.clone(), url));
            match auth {
                Some(auth) => request.header(AUTHORIZATION, auth),
                None => request,
            }
        };
        let response = request(authorization.as_deref())
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|c| c.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let fresh = self.authorize(&challenge, actions).await?;
        let response = request(Some(&fresh))
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        *authorization = Some(fresh);
        Ok(response)
    }

    /// Sends a request to another scheme, host or port than the
    /// registry's (an upload `Location` it named) without credentials: they
    /// are the registry's, and a registry naming a host must not be a way
    /// to hand them to it. Never from HTTPS down to plain HTTP.
    async fn send_elsewhere(
        &self,
        method: Method,
        target: &reqwest::Url,
        build: impl Fn(RequestBuilder) -> RequestBuilder,
    ) -> Result<Response, OciError> {
        let elsewhere = authority(target);
        if self.origin.scheme() == "https" && target.scheme() != "https" {
            return Err(OciError::Registry(format!(
                "{} sent chorus to plain HTTP ({}://{elsewhere}): refusing it",
                self.registry,
                target.scheme()
            )));
        }
        if self.credentials.is_some() {
            let note = format!(
                "the credentials for {} are not sent to {}://{elsewhere}, which it named: \
                 they go only to {}://{}",
                self.registry,
                target.scheme(),
                self.origin.scheme(),
                authority(&self.origin)
            );
            tracing::warn!("{note}");
            self.withhold(note);
        }
        let response = build(self.http.request(method, target.clone()))
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        if response.status() == StatusCode::UNAUTHORIZED {
            return Err(self.denied(format!(
                "{}://{elsewhere}, where it sent chorus, asks for credentials",
                target.scheme()
            )));
        }
        Ok(response)
    }

    /// Notes that credentials were withheld, once per reason.
    fn withhold(&self, note: String) {
        let mut withheld = self.withheld.lock().unwrap_or_else(|e| e.into_inner());
        if !withheld.contains(&note) {
            withheld.push(note);
        }
    }

    /// A refusal, saying which credentials were withheld (the likely
    /// reason for it).
    fn denied(&self, why: String) -> OciError {
        let withheld = self.withheld.lock().unwrap_or_else(|e| e.into_inner());
        let why = if withheld.is_empty() {
            why
        } else {
            format!("{why} ({})", withheld.join("; "))
        };
        OciError::Denied {
            registry: self.registry.clone(),
            why,
        }
    }

    /// Whether the token service at `realm` may be sent the registry's
    /// credentials: it is on the registry's host and port, or the operator
    /// listed it in `registry_token_realms`.
    fn trusts_realm(&self, realm: &reqwest::Url) -> bool {
        let same_host = realm
            .host_str()
            .zip(self.origin.host_str())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
            && realm.port_or_known_default() == self.origin.port_or_known_default();
        let here = authority(realm);
        same_host
            || self
                .token_realms
                .iter()
                .any(|listed| listed.trim().eq_ignore_ascii_case(&here))
    }

    /// The Authorization header the registry's challenge asks for.
    async fn authorize(&self, challenge: &str, actions: &str) -> Result<String, OciError> {
        let denied = |why: &str| self.denied(why.to_owned());
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            // Only ever reached for the registry's own origin (`send`).
            let credentials = self
                .credentials
                .as_ref()
                .ok_or_else(|| denied("it asks for a user and password, and none is configured"))?;
            use base64::Engine as _;
            let pair = format!("{}:{}", credentials.user, credentials.secret);
            return Ok(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ));
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(denied(&format!(
                "it asks for `{scheme}` authentication, which chorus does not speak"
            )));
        }
        let param = |name: &str| challenge_param(params, name);
        let realm = param("realm").ok_or_else(|| denied("its Bearer challenge names no realm"))?;
        let mut url = reqwest::Url::parse(&realm)
            .map_err(|e| denied(&format!("its token realm `{realm}` is not a URL ({e})")))?;
        if url.scheme() != "https" && !self.base.starts_with("http://") {
            return Err(denied("its token realm is plain HTTP"));
        }
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = param("service") {
                query.append_pair("service", &service);
            }
            let repository = self.base.rsplit_once("/v2/").map_or("", |(_, r)| r);
            query.append_pair("scope", &format!("repository:{repository}:{actions}"));
        }
        // The credentials go to the realm only where the registry is (or
        // where the operator said): else the token asked for is anonymous.
        let credentials = match &self.credentials {
            Some(c) if self.trusts_realm(&url) => Some(c),
            Some(_) => {
                let note = format!(
                    "the credentials for {} are not sent to its token service at {}, \
                     another host: list it in `registry_token_realms` to allow that",
                    self.registry,
                    authority(&url)
                );
                tracing::info!("{note}; asking it for an anonymous token");
                self.withhold(note);
                None
            }
            None => {
                if let Some(note) = self
                    .withheld
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .first()
                {
                    tracing::info!("{note}; asking for an anonymous token");
                }
                None
            }
        };
        let mut request = self.http.get(url);
        if let Some(c) = credentials {
            request = request.basic_auth(&c.user, Some(&c.secret));
        }
        let response = request.send().await.map_err(|e| self.unreachable(e))?;
        if !response.status().is_success() {
            return Err(denied(&format!(
                "its token service answered {}{}",
                response.status(),
                if credentials.is_none() {
                    " (no credentials sent)"
                } else {
                    ""
                }
            )));
        }
        let body = read_limited(response, MAX_TOKEN_BYTES, "the token").await?;
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body)
            .map_err(|e| denied(&format!("its token answer is not JSON ({e})")))?;
        let token = token
            .token
            .or(token.access_token)
            .ok_or_else(|| denied("its token answer holds no token"))?;
        Ok(format!("Bearer {token}"))
    }

    /// `response` if its status is one of `expected`, else an error with
    /// the registry's own message (its first 300 bytes).
    async fn expect(
        &self,
        response: Response,
        expected: &[StatusCode],
        doing: &str,
    ) -> Result<Response, OciError> {
        let status = response.status();
        if expected.contains(&status) {
            return Ok(response);
        }
        let body = read_limited(response, 64 << 10, "the error")
            .await
            .unwrap_or_default();
        let said: String = String::from_utf8_lossy(&body).chars().take(300).collect();
        Err(match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => self.denied(match said.trim() {
                "" => format!("{status} when trying to {doing}"),
                said => format!("{status} when trying to {doing}: {said}"),
            }),
            StatusCode::NOT_FOUND => OciError::NotFound(format!(
                "{} has no such {} ({})",
                self.base.replacen("/v2/", "/", 1),
                if doing.contains("manifest") {
                    "manifest"
                } else {
                    "blob"
                },
                said.trim()
            )),
            _ => OciError::Registry(format!(
                "{} answered {status} when asked to {doing}: {}",
                self.registry,
                said.trim()
            )),
        })
    }

    fn unreachable(&self, error: reqwest::Error) -> OciError {
        let mut why = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(inner) = source {
            why = format!("{why}: {inner}");
            source = inner.source();
        }
        OciError::Unreachable {
            registry: self.registry.clone(),
            why,
        }
    }
}

/// `HOST[:PORT]` of `url`, the port only when it is not the scheme's
/// default: how `registry_token_realms` and messages name a host.
fn authority(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// A parameter of a `WWW-Authenticate` challenge: `name="value"`.
fn challenge_param(params: &str, name: &str) -> Option<String> {
    let mut rest = params;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].trim().trim_start_matches(',').trim();
        let after = &rest[eq + 1..];
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"')?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => {
                let end = after.find(',').unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        if key.eq_ignore_ascii_case(name) {
            return Some(value.to_owned());
        }
        rest = next;
    }
    None
}

/// The system's CA bundle (`$SSL_CERT_FILE`, else Debian's and Red Hat's
/// usual places), read once; empty where there is none.
fn system_roots() -> &'static [reqwest::Certificate] {
    static ROOTS: std::sync::OnceLock<Vec<reqwest::Certificate>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let candidates = std::env::var_os("SSL_CERT_FILE")
            .map(std::path::PathBuf::from)
            .into_iter()
            .chain(
                [
                    "/etc/ssl/certs/ca-certificates.crt",
                    "/etc/pki/tls/certs/ca-bundle.crt",
                ]
                .map(std::path::PathBuf::from),
            );
        for path in candidates {
            if let Ok(bytes) = crate::config::read_regular_file(&path, 4 << 20)
                && let Ok(certs) = reqwest::Certificate::from_pem_bundle(&bytes)
            {
                return certs;
            }
        }
        Vec::new()
    })
}

/// The body of `response`, refusing more than `limit` bytes.
async fn read_limited(response: Response, limit: u64, what: &str) -> Result<Vec<u8>, OciError> {
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(OciError::TooLarge(format!(
            "{what} is {} bytes, over the limit of {limit}",
            response.content_length().unwrap_or_default()
        )));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| OciError::Registry(format!("reading {what}: {e}")))?;
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(OciError::TooLarge(format!(
                "{what} is over the limit of {limit} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::challenge_param;

    #[test]
    fn challenges_are_read_quoted_or_not() {
        let params = r#"realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#;
        assert_eq!(
            challenge_param(params, "realm").as_deref(),
            Some("https://auth.example/token")
        );
        assert_eq!(
            challenge_param(params, "service").as_deref(),
            Some("registry.example")
        );
        assert_eq!(
            challenge_param("realm=x,service=y", "service").as_deref(),
            Some("y")
        );
        assert_eq!(challenge_param(params, "nothing"), None);
    }
}
