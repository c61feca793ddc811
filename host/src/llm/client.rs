//! One provider's HTTP client: a connection pool created once and shared by
//! every run, a cap on requests in flight, per-attempt timeouts, and retries
//! with exponential backoff and jitter for 429, 5xx and connection failures.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use reqwest::StatusCode;
use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER,
};
use serde_json::{Map, Value};
use tokio::sync::Semaphore;
use url::Url;

use super::types::{Failure, FailureKind, Reply};
use super::wire;
use crate::config::Provider;

/// How much of an error body we read to find the provider's message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

pub struct ProviderClient {
    pub name: String,
    endpoint: Url,
    http: reqwest::Client,
    headers: HeaderMap,
    extra_body: Map<String, Value>,
    /// `None` when the provider needs no key; `Some(Err(var))` when it
    /// needs one and the variable is not set (reported per call).
    api_key: Option<Result<HeaderValue, String>>,
    /// The key itself, only to scrub it from what providers send back.
    secret: Option<String>,
    permits: Semaphore,
    config: Provider,
}

/// One failed attempt and whether it is worth another.
struct AttemptError {
    failure: Failure,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl AttemptError {
    fn fatal(failure: Failure) -> Self {
        Self {
            failure,
            retryable: false,
            retry_after: None,
        }
    }
    fn transient(failure: Failure) -> Self {
        Self {
            failure,
            retryable: true,
            retry_after: None,
        }
    }
}

impl ProviderClient {
    /// Builds the client. Errors name the config key at fault.
    pub fn new(name: &str, config: &Provider) -> Result<Self, (String, String)> {
        let key = |k: &str| format!("providers.{name}.{k}");
        let mut endpoint = config.base_url.clone();
        endpoint
            .path_segments_mut()
            .map_err(|()| (key("base_url"), "cannot be a base URL".to_owned()))?
            .pop_if_empty()
            .extend(["chat", "completions"]);

        let mut headers = HeaderMap::new();
        for (header, value) in &config.headers {
            let name = HeaderName::try_from(header.as_str())
                .map_err(|e| (key(&format!("headers.{header}")), e.to_string()))?;
            let value = HeaderValue::try_from(value.as_str())
                .map_err(|e| (key(&format!("headers.{header}")), e.to_string()))?;
            headers.insert(name, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));

        let secret = config
            .api_key_env
            .as_ref()
            .and_then(|var| std::env::var(var).ok())
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty());
        let api_key = config.api_key_env.as_ref().map(|var| {
            secret
                .as_ref()
                .and_then(|v| HeaderValue::try_from(format!("Bearer {v}")).ok())
                .map(|mut v| {
                    v.set_sensitive(true);
                    v
                })
                .ok_or_else(|| var.clone())
        });

        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            .user_agent(concat!("chorus/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                (
                    format!("providers.{name}"),
                    format!("cannot build an HTTP client: {e}"),
                )
            })?;

        let extra_body = serde_json::to_value(&config.extra_body)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();

        Ok(Self {
            name: name.to_owned(),
            endpoint,
            http,
            headers,
            extra_body,
            api_key,
            secret,
            permits: Semaphore::new(config.max_concurrency),
            config: config.clone(),
        })
    }

    /// The API-key variable this provider needs but cannot find.
    pub fn missing_key(&self) -> Option<&str> {
        match &self.api_key {
            Some(Err(var)) => Some(var),
            _ => None,
        }
    }

    pub fn extra_body(&self) -> &Map<String, Value> {
        &self.extra_body
    }

    /// Sends `body`, retrying as configured. Returns the outcome and the
    /// number of attempts made.
    pub async fn send(&self, body: &Value, model: &str) -> (Result<Reply, Failure>, u32) {
        if let Some(Err(var)) = &self.api_key {
            let failure = Failure::new(
                FailureKind::MissingApiKey,
                format!(
                    "provider `{}` needs an API key in the environment variable {var}, which is not set; \
                     set it in the environment chorus runs in (for an MCP client, its `env` setting)",
                    self.name
                ),
            );
            return (Err(failure), 0);
        }
        let attempts = AtomicU32::new(0);
        let retry = &self.config.retry;
        let max_backoff = retry.max_backoff;
        let backoff = ExponentialBuilder::default()
            .with_min_delay(retry.initial_backoff)
            .with_max_delay(max_backoff)
            .with_max_times(retry.max_attempts.saturating_sub(1) as usize)
            .with_jitter();
        let result = (|| async {
            attempts.fetch_add(1, Ordering::Relaxed);
            self.attempt(body, model).await
        })
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(|e: &AttemptError| e.retryable)
        .adjust(move |e: &AttemptError, planned| {
            // A server that says when to come back knows better than our
            // backoff; we still never wait longer than max_backoff.
            planned.map(|d| e.retry_after.map_or(d, |after| after.min(max_backoff).max(d)))
        })
        .notify(|e: &AttemptError, wait| {
            tracing::debug!(provider = %self.name, model, "retrying in {wait:?} after {}", e.failure);
        })
        .await;
        let result = match result {
            Ok(reply) => Ok(Reply {
                content: self.redact(reply.content),
                ..reply
            }),
            Err(e) => Err(Failure {
                message: self.redact(e.failure.message),
                ..e.failure
            }),
        };
        (result, attempts.load(Ordering::Relaxed))
    }

    /// Removes the API key from text a provider sent back: some echo the
    /// request's credentials in their error messages.
    fn redact(&self, text: String) -> String {
        match &self.secret {
            Some(secret) if text.contains(secret.as_str()) => {
                text.replace(secret.as_str(), "[redacted]")
            }
            _ => text,
        }
    }

    async fn attempt(&self, body: &Value, model: &str) -> Result<Reply, AttemptError> {
        // Held for the attempt only, so backoff sleeps do not hold a slot.
        let _permit = self.permits.acquire().await.map_err(|_| {
            AttemptError::fatal(Failure::new(
                FailureKind::Cancelled,
                "the provider is shutting down",
            ))
        })?;
        let mut request = self
            .http
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .timeout(self.config.request_timeout)
            .json(body);
        if let Some(Ok(key)) = &self.api_key {
            request = request.header(AUTHORIZATION, key.clone());
        }
        let response = request.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        if status.is_success() {
            let body = self
                .read_body(response, self.config.max_response_bytes)
                .await?;
            return wire::parse_reply(&body, model).map_err(AttemptError::fatal);
        }
        let retry_after = retry_after(response.headers());
        let body = self
            .read_body(response, ERROR_BODY_LIMIT)
            .await
            .unwrap_or_default();
        let message = wire::error_message(&body);
        let code = status.as_u16();
        Err(match status {
            StatusCode::TOO_MANY_REQUESTS => AttemptError {
                failure: Failure::new(FailureKind::RateLimited, message).with_status(code),
                retryable: true,
                retry_after,
            },
            StatusCode::REQUEST_TIMEOUT => AttemptError::transient(
                Failure::new(FailureKind::Timeout, message).with_status(code),
            ),
            s if s.is_server_error() => AttemptError {
                failure: Failure::new(FailureKind::HttpStatus, message).with_status(code),
                retryable: true,
                retry_after,
            },
            _ => AttemptError::fatal(
                Failure::new(FailureKind::HttpStatus, message).with_status(code),
            ),
        })
    }

    /// Reads a body up to `limit` bytes; more is a `response-too-large` failure.
    async fn read_body(
        &self,
        mut response: reqwest::Response,
        limit: usize,
    ) -> Result<Vec<u8>, AttemptError> {
        let too_large = || {
            AttemptError::fatal(Failure::new(
                FailureKind::ResponseTooLarge,
                format!(
                    "the response is larger than providers.{}.max_response_bytes ({limit} bytes)",
                    self.name
                ),
            ))
        };
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(&e))?
        {
            if body.len() + chunk.len() > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport_error(&self, error: &reqwest::Error) -> AttemptError {
        let message = chain(error);
        if error.is_timeout() {
            let failure = Failure::new(FailureKind::Timeout, message);
            // A connect timeout is worth retrying; a whole request that ran
            // out of time would most likely run out again.
            return if error.is_connect() {
                AttemptError::transient(failure)
            } else {
                AttemptError::fatal(failure)
            };
        }
        AttemptError::transient(Failure::new(FailureKind::Connection, message))
    }
}

/// An error and its causes on one line, without the URL (which is config,
/// not news, and could carry credentials someone put in a query string).
fn chain(error: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
    let head = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else if error.is_body() || error.is_decode() {
        "the connection broke while reading the response"
    } else {
        "the request failed"
    };
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.contains(&text) {
            parts.push(text);
        }
        source = e.source();
    }
    if parts.is_empty() {
        head.to_owned()
    } else {
        format!("{head}: {}", parts.join(": "))
    }
}

/// Retry-After as delay-seconds or an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = value.parse::<f64>()
        && seconds.is_finite()
        && seconds >= 0.0
    {
        return Some(Duration::from_secs_f64(seconds.min(86_400.0)));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default())
}
