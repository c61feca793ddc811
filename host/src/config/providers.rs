//! `[providers.NAME]`: the OpenAI-compatible endpoints chorus calls, with
//! their timeouts, retries, rate limits and extra headers; their defaults
//! and their check (URLs, header names, keys chorus owns).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::check::{
    Invalid, MAX_CONCURRENCY, MAX_PRICE, MAX_TIMEOUT, MAX_TTL, count, duration, duration_or_zero,
};

/// Headers chorus sets itself: framing (which the HTTP client must own) and
/// authorization (which comes from `api_key_env`, so it can be scrubbed).
pub const FORBIDDEN_HEADERS: [&str; 10] = [
    "authorization",
    "proxy-authorization",
    "content-length",
    "content-type",
    "transfer-encoding",
    "host",
    "connection",
    "te",
    "trailer",
    "upgrade",
];

/// Request-body fields chorus owns; `params` and `extra_body` may not set them.
pub(super) const RESERVED_BODY_FIELDS: [&str; 3] = ["model", "messages", "stream"];

const MAX_BACKOFF: Duration = Duration::from_secs(3600);
const MAX_RESPONSE_BYTES: usize = 256 << 20;
const MAX_ATTEMPTS: u32 = 20;
/// The most a `*_per_minute` limit may be (a billion: beyond any
/// provider's, and far from overflowing the counts).
const MAX_PER_MINUTE: u64 = 1_000_000_000;

/// An OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// The API root; chorus appends `/chat/completions` and `/models`.
    pub base_url: Url,
    /// Name of the environment variable that holds the API key. Leave out
    /// for endpoints without authentication (a local server). The default
    /// name, `OPENROUTER_API_KEY`, also takes `CHORUS_API_KEY` (read first)
    /// and, off OpenRouter, `OPENAI_API_KEY` (read last): see
    /// `llm::key_vars` and docs/gateways.md.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request (not framing or auth
    /// headers: chorus sets those).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Extra top-level JSON fields merged into every request body.
    #[serde(default)]
    pub extra_body: toml::Table,
    /// Ask for server-sent events (`"stream": true`); `false` for servers
    /// that cannot stream.
    #[serde(default = "defaults::stream")]
    pub stream: bool,
    /// Requests in flight to this provider at once, across all runs.
    #[serde(default = "defaults::max_concurrency")]
    pub max_concurrency: usize,
    /// Requests sent to this provider in any 60 s, across all runs (and
    /// all instances on one PostgreSQL store). Unset: no such limit.
    #[serde(default)]
    pub requests_per_minute: Option<u64>,
    /// Tokens (prompt + answer) in any 60 s: each request reserves its
    /// worst case (prompt estimate + max_tokens) and settles with its
    /// usage. Unset: no such limit.
    #[serde(default)]
    pub tokens_per_minute: Option<u64>,
    /// Establishing the TCP (and TLS) connection.
    #[serde(default = "defaults::connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// From sending the request to the first token of the answer or of its
    /// reasoning. Keep-alive comments do not count: a model that only says
    /// it is alive has not started. Without streaming, the whole answer is
    /// the first token.
    #[serde(default = "defaults::first_token_timeout", with = "humantime_serde")]
    pub first_token_timeout: Duration,
    /// Longest silence once the response body has started; keep-alive
    /// comments count as life. `read_timeout` is the old name.
    #[serde(
        default = "defaults::idle_timeout",
        with = "humantime_serde",
        alias = "read_timeout"
    )]
    pub idle_timeout: Duration,
    /// One attempt, end to end, from sending the request to the last byte.
    #[serde(default = "defaults::request_timeout", with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Largest response accepted, in bytes (a stream's total, or one body).
    #[serde(default = "defaults::max_response_bytes")]
    pub max_response_bytes: usize,
    /// Fetch `{base_url}/models` to check model ids and fill in context
    /// windows and prices the config leaves out.
    #[serde(default = "defaults::catalog")]
    pub catalog: bool,
    /// How long a fetched model list is kept on disk. Default: one day,
    /// or not at all for a server on this machine (its list changes as
    /// models are loaded).
    #[serde(default, with = "humantime_serde")]
    pub catalog_ttl: Option<Duration>,
    #[serde(default)]
    pub retry: Retry,
    /// How this provider is asked to search the web: `"openrouter-plugin"`,
    /// `"web-search-options"` or `"none"`. Default: the plugin for
    /// openrouter.ai, `web_search_options` for any other.
    #[serde(default)]
    pub web_search: Option<super::search::SearchStyle>,
    /// What one searching request costs on top of its tokens, in USD, for
    /// the worst case checked against `max_cost_usd` and for estimates.
    /// Default: OpenRouter's $0.004 a result for its plugin, $0.05 a
    /// request for `web_search_options` (see docs/configuration.md).
    #[serde(default)]
    pub web_search_usd_per_request: Option<f64>,
    /// Whether the provider fetches a URL attachment itself. `false`:
    /// chorus fetches it once per run (https, same-origin redirects,
    /// `[limits]` sizes) and sends the bytes, to every model of the run.
    #[serde(default = "defaults::fetch_urls")]
    pub fetch_urls: bool,
}

/// Retries for 429, 5xx and connection failures, with exponential backoff
/// and jitter; a 429's Retry-After is honoured up to `max_backoff`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Retry {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    #[serde(with = "humantime_serde")]
    pub initial_backoff: Duration,
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
        }
    }
}

impl Provider {
    /// `Err((key, message))` for the first key of provider `name` that is
    /// wrong.
    pub(super) fn check(&self, name: &str) -> Result<(), Invalid> {
        let key = |k: &str| format!("providers.{name}.{k}");
        if self
            .web_search_usd_per_request
            .is_some_and(|usd| !usd.is_finite() || !(0.0..=MAX_PRICE).contains(&usd))
        {
            return Err((
                key("web_search_usd_per_request"),
                format!("must be a price in USD per searching request, from 0 to {MAX_PRICE}"),
            ));
        }
        if !matches!(self.base_url.scheme(), "http" | "https") {
            return Err((
                key("base_url"),
                format!(
                    "must be an http:// or https:// URL, got `{}`",
                    self.base_url
                ),
            ));
        }
        if self.base_url.cannot_be_a_base() || self.base_url.host().is_none() {
            return Err((key("base_url"), format!("`{}` has no host", self.base_url)));
        }
        if let Some(var) = &self.api_key_env
            && (var.is_empty() || var.contains('=') || var.contains('\0'))
        {
            return Err((
                key("api_key_env"),
                format!("`{var}` is not an environment variable name"),
            ));
        }
        count(
            &key("max_concurrency"),
            self.max_concurrency,
            1,
            MAX_CONCURRENCY,
        )?;
        per_minute(&key("requests_per_minute"), self.requests_per_minute)?;
        per_minute(&key("tokens_per_minute"), self.tokens_per_minute)?;
        let retry = &self.retry;
        if retry.max_attempts == 0 || retry.max_attempts > MAX_ATTEMPTS {
            return Err((
                key("retry.max_attempts"),
                format!(
                    "must be from 1 to {MAX_ATTEMPTS} (1 means no retries), got {}",
                    retry.max_attempts
                ),
            ));
        }
        duration_or_zero(
            &key("retry.initial_backoff"),
            retry.initial_backoff,
            MAX_BACKOFF,
        )?;
        duration_or_zero(&key("retry.max_backoff"), retry.max_backoff, MAX_BACKOFF)?;
        count(
            &key("max_response_bytes"),
            self.max_response_bytes,
            1,
            MAX_RESPONSE_BYTES,
        )?;
        for (k, value) in [
            ("connect_timeout", self.connect_timeout),
            ("first_token_timeout", self.first_token_timeout),
            ("idle_timeout", self.idle_timeout),
            ("request_timeout", self.request_timeout),
        ] {
            duration(&key(k), value, MAX_TIMEOUT)?;
        }
        if let Some(ttl) = self.catalog_ttl {
            duration_or_zero(&key("catalog_ttl"), ttl, MAX_TTL)?;
        }
        for field in RESERVED_BODY_FIELDS {
            if self.extra_body.contains_key(field) {
                return Err((
                    key(&format!("extra_body.{field}")),
                    format!("`{field}` is set by chorus{}", stream_hint(field, name)),
                ));
            }
        }
        for (header, value) in &self.headers {
            check_header(header, value).map_err(|m| (key(&format!("headers.{header}")), m))?;
        }
        Ok(())
    }
}

/// One of `headers`: a name chorus does not set itself, well-formed, and a
/// value without control characters.
fn check_header(header: &str, value: &str) -> Result<(), String> {
    if FORBIDDEN_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
        let why = if header.eq_ignore_ascii_case("authorization")
            || header.eq_ignore_ascii_case("proxy-authorization")
        {
            "chorus sends the key itself: name its environment variable in `api_key_env` \
             (so the key stays out of this file and out of every log)"
        } else {
            "it is a framing header the HTTP client sets itself"
        };
        return Err(format!("`{header}` may not be set here: {why}"));
    }
    let name_ok = !header.is_empty()
        && header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !name_ok {
        return Err("is not a valid HTTP header name".into());
    }
    if value.bytes().any(|b| b.is_ascii_control()) {
        return Err("has control characters in its value".into());
    }
    Ok(())
}

/// A provider's requests or tokens per minute: from 1 up, when set.
fn per_minute(key: &str, value: Option<u64>) -> Result<(), Invalid> {
    match value {
        Some(n) if n == 0 || n > MAX_PER_MINUTE => Err((
            key.into(),
            format!("must be from 1 to {MAX_PER_MINUTE}, got {n} (leave it out for no limit)"),
        )),
        _ => Ok(()),
    }
}

/// What to say besides "set by chorus" about a reserved body field.
pub(super) fn stream_hint(field: &str, provider: &str) -> String {
    if field == "stream" {
        format!("; to turn streaming off, set providers.{provider}.stream = false")
    } else {
        String::new()
    }
}

mod defaults {
    use std::time::Duration;

    pub fn stream() -> bool {
        true
    }
    pub fn catalog() -> bool {
        true
    }
    pub fn fetch_urls() -> bool {
        true
    }
    pub fn max_concurrency() -> usize {
        8
    }
    pub fn connect_timeout() -> Duration {
        Duration::from_secs(10)
    }
    pub fn first_token_timeout() -> Duration {
        Duration::from_secs(300)
    }
    pub fn idle_timeout() -> Duration {
        Duration::from_secs(90)
    }
    pub fn request_timeout() -> Duration {
        Duration::from_secs(600)
    }
    pub fn max_response_bytes() -> usize {
        8 * 1024 * 1024
    }
}
