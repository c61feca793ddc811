//! One provider's client: a cap on requests in flight (a priority queue
//! that adapts to 429s, `queue`), one attempt at a time under its clocks
//! (`timeouts`), streamed or whole responses, and
//! retries with exponential backoff and jitter for 429, 5xx and broken
//! connections. Everything a provider sends back is scrubbed of the API key
//! before it leaves an attempt — before a retry notice logs it, before a
//! record keeps it, before anything truncates it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap, LOCATION, RETRY_AFTER};
use serde_json::{Map, Value};
use url::Url;

use super::http::{self, Auth, KeyProblem};
use super::limits::{Limiter, Shared};
use super::queue::PermitQueue;
use super::secret::Scrubber;
use super::timeouts::{Limits, Watch};
use super::types::{Failure, FailureKind, Reply};
use super::wire;
use crate::config::{Provider, Retry};
use crate::text::ellipsized;

mod body;
mod hooks;
mod models;

pub use hooks::{CallHooks, OnQueued, OnTokens};

/// How much of an error body we read to find the provider's message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

pub struct ProviderClient {
    pub name: String,
    pub base_url: Url,
    endpoint: Url,
    models_url: Url,
    http: reqwest::Client,
    headers: HeaderMap,
    extra_body: Map<String, Value>,
    auth: Auth,
    scrubber: Scrubber,
    permits: PermitQueue,
    /// Requests and tokens per minute, the 429 backoff, and (shared) the
    /// concurrency across instances.
    limiter: Limiter,
    limits: Limits,
    retry: Retry,
    stream: bool,
    max_response_bytes: usize,
    search: super::search::ProviderSearch,
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
    /// A provider's status (in the head, or inside a 200), classified.
    fn status(failure: Failure, retry_after: Option<Duration>) -> Self {
        match failure.status {
            Some(429) => Self {
                failure: Failure {
                    kind: FailureKind::RateLimited,
                    ..failure
                },
                retryable: true,
                retry_after,
            },
            Some(408) => Self::transient(Failure {
                kind: FailureKind::Timeout,
                ..failure
            }),
            Some(s) if s >= 500 => Self {
                failure,
                retryable: true,
                retry_after,
            },
            _ => Self::fatal(failure),
        }
    }
}

impl ProviderClient {
    /// Builds the client. Errors name the config key at fault (relative
    /// to `providers.NAME`).
    /// `roots`: the certificates trusted besides the built-in ones
    /// (`[tls] ca_files`).
    pub fn new(
        name: &str,
        config: &Provider,
        roots: &[reqwest::Certificate],
    ) -> Result<Self, (String, String)> {
        let key = |k: &str| format!("providers.{name}.{k}");
        let join = |segments: &[&str]| {
            let mut url = config.base_url.clone();
            url.path_segments_mut()
                .map_err(|()| (key("base_url"), "cannot be a base URL".to_owned()))?
                .pop_if_empty()
                .extend(segments);
            Ok::<_, (String, String)>(url)
        };
        let endpoint = join(&["chat", "completions"])?;
        let models_url = join(&["models"])?;
        let headers = http::headers(config).map_err(|(k, m)| (key(&k), m))?;
        let http = http::client(config, roots).map_err(|e| {
            (
                format!("providers.{name}"),
                format!("cannot build an HTTP client: {e}"),
            )
        })?;
        let extra_body = serde_json::to_value(&config.extra_body)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        let auth = Auth::from_env(name, config);
        Ok(Self {
            name: name.to_owned(),
            base_url: config.base_url.clone(),
            endpoint,
            models_url,
            http,
            headers,
            extra_body,
            scrubber: auth.scrubber(),
            auth,
            permits: PermitQueue::new(config.max_concurrency),
            limiter: Limiter::new(name, config),
            limits: Limits::of(name, config),
            retry: config.retry.clone(),
            stream: config.stream,
            max_response_bytes: config.max_response_bytes,
            search: super::search::ProviderSearch::of(config),
        })
    }

    /// How this provider searches the web.
    pub fn search(&self) -> super::search::ProviderSearch {
        self.search
    }

    /// The environment variable its key was read from, when one was.
    pub fn key_var(&self) -> Option<&str> {
        self.auth.var()
    }

    /// Why this provider's key cannot be used, if it cannot.
    pub fn key_problem(&self) -> Option<&KeyProblem> {
        self.auth.problem()
    }

    pub fn extra_body(&self) -> &Map<String, Value> {
        &self.extra_body
    }

    pub fn streams(&self) -> bool {
        self.stream
    }

    /// Counts this provider's limits in `shared` too (every instance on it).
    pub fn share_limits(&self, shared: std::sync::Arc<dyn Shared>) {
        self.limiter.share(shared);
    }

    /// Sends `body`, retrying as configured, each attempt waiting its turn
    /// for a permit by the call's priority, counting each attempt in
    /// `hooks.attempts` as it starts (so a caller that gives up early still
    /// knows), and what each failed attempt had streamed (billed, but in no
    /// usage). `worst_tokens` (prompt estimate + max_tokens) is what each
    /// attempt reserves of `tokens_per_minute` until its usage is known.
    pub async fn send(
        &self,
        body: Bytes,
        model: &str,
        worst_tokens: u64,
        hooks: &CallHooks<'_>,
    ) -> Result<Reply, Failure> {
        let (on_tokens, attempts) = (hooks.on_tokens, hooks.attempts);
        if let Some(problem) = self.auth.problem() {
            return Err(Failure::new(
                FailureKind::MissingApiKey,
                problem.to_string(),
            ));
        }
        let max_backoff = self.retry.max_backoff;
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.retry.initial_backoff)
            .with_max_delay(max_backoff)
            .with_max_times(self.retry.max_attempts.saturating_sub(1) as usize)
            .with_jitter();
        let result = (|| async {
            let attempt = attempts.started.fetch_add(1, Ordering::Relaxed) + 1;
            let before = attempts.lost_tokens.load(Ordering::Relaxed);
            let streamed = AtomicU32::new(0);
            let on = |tokens: u32| {
                streamed.store(tokens, Ordering::Relaxed);
                on_tokens(before.saturating_add(tokens));
            };
            let outcome = self
                .attempt(&body, model, worst_tokens, &on, attempt, hooks)
                .await;
            let streamed = streamed.load(Ordering::Relaxed);
            if outcome.is_err() && streamed > 0 {
                attempts.lost_tokens.fetch_add(streamed, Ordering::Relaxed);
                attempts.lost_attempts.fetch_add(1, Ordering::Relaxed);
            }
            outcome
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
            // Already scrubbed: the notice is as safe as the record.
            tracing::debug!(provider = %self.name, model, "retrying in {wait:?} after {}", e.failure);
            let attempt = attempts.started.load(Ordering::Relaxed);
            (hooks.on_retry)(model, attempt, &e.failure, wait);
        })
        .await;
        result.map_err(|e| e.failure)
    }

    /// One attempt, once a permit is free, its outcome scrubbed of the key.
    /// The permit is held for the attempt only, so backoff sleeps do not
    /// hold a slot; the attempt's clocks start once the request can go.
    async fn attempt(
        &self,
        body: &Bytes,
        model: &str,
        worst_tokens: u64,
        on_tokens: OnTokens<'_>,
        attempt: u32,
        hooks: &CallHooks<'_>,
    ) -> Result<Reply, AttemptError> {
        let permit = match self.permits.acquire(hooks.priority) {
            Ok(permit) => permit,
            Err(waiting) => {
                (hooks.on_queued)(Some(waiting.behind()));
                let _wait = hooks.attempts.queue_wait();
                let permit = waiting.await;
                (hooks.on_queued)(None);
                permit
            }
        };
        let mut ticket = self.limiter.admit(worst_tokens, hooks.attempts).await;
        let streamed = AtomicU32::new(0);
        let on = |tokens: u32| {
            streamed.store(tokens, Ordering::Relaxed);
            on_tokens(tokens);
        };
        // Boxed: a call waiting for its permit (or its backoff) holds a
        // small future, and only an attempt on the wire holds the HTTP
        // exchange's state (a response, its stream reader, the watch).
        let text = hooks
            .on_text
            .map(|on_text| move |piece: &str| on_text(attempt, piece));
        let text = text.as_ref().map(|t| t as &(dyn Fn(&str) + Send + Sync));
        let outcome = Box::pin(self.attempt_raw(body, model, &on, text)).await;
        match &outcome {
            Ok((reply, _)) => {
                permit.succeeded();
                ticket.settle(reply.usage.as_ref().map(|u| {
                    u64::from(u.prompt_tokens).saturating_add(u64::from(u.completion_tokens))
                }));
            }
            Err(e) => {
                if e.failure.kind == FailureKind::RateLimited {
                    permit.rate_limited();
                    // As a retry's wait: never longer than max_backoff.
                    let wait = e.retry_after.unwrap_or(self.retry.initial_backoff);
                    self.limiter.rate_limited(wait.min(self.retry.max_backoff));
                }
                // Refused before streaming: no tokens spent. Having
                // streamed, its worst case stays counted.
                if streamed.load(Ordering::Relaxed) == 0 {
                    ticket.settle(Some(0));
                }
            }
        }
        drop(ticket);
        drop(permit);
        match outcome {
            Ok((reply, first_token)) => {
                hooks.attempts.answered(first_token);
                Ok(Reply {
                    content: Arc::new(
                        self.scrubber
                            .scrub_owned(Arc::unwrap_or_clone(reply.content)),
                    ),
                    served_by: self.scrubber.scrub_owned(reply.served_by),
                    finish_reason: reply.finish_reason.map(|r| self.scrubber.scrub_owned(r)),
                    usage: reply.usage,
                    format_sent: reply.format_sent,
                    citations: reply
                        .citations
                        .into_iter()
                        .map(|c| crate::llm::Citation {
                            url: self.scrubber.scrub_owned(c.url),
                            title: c.title.map(|t| self.scrubber.scrub_owned(t)),
                            cited: c.cited.map(|t| self.scrubber.scrub_owned(t)),
                            ..c
                        })
                        .collect(),
                    tool_calls: reply
                        .tool_calls
                        .into_iter()
                        .map(|call| crate::llm::tools::ToolCall {
                            id: self.scrubber.scrub_owned(call.id),
                            name: self.scrubber.scrub_owned(call.name),
                            arguments: self.scrubber.scrub_owned(call.arguments),
                        })
                        .collect(),
                })
            }
            Err(mut e) => {
                e.failure.message = self.scrubber.scrub_owned(e.failure.message);
                Err(e)
            }
        }
    }

    /// One attempt once its permit is held: the reply, and its time to
    /// first token (see `Watch::first_token_after`).
    async fn attempt_raw(
        &self,
        body: &Bytes,
        model: &str,
        on_tokens: OnTokens<'_>,
        on_text: Option<&(dyn Fn(&str) + Send + Sync)>,
    ) -> Result<(Reply, Option<Duration>), AttemptError> {
        let mut watch = Watch::start(&self.limits);
        let request = self.auth.apply(
            self.http
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .body(body.clone()),
        );
        let response = watch
            .bound(request.send())
            .await
            .map_err(AttemptError::fatal)?
            .map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        if status.is_redirection() {
            return Err(AttemptError::fatal(self.redirect_failure(&response)));
        }
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let body = self
                .read_all(response, ERROR_BODY_LIMIT, &mut watch, true)
                .await
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&body);
            let message = wire::error_message(&text, &self.scrubber);
            let failure =
                Failure::new(FailureKind::HttpStatus, message).with_status(status.as_u16());
            return Err(AttemptError::status(failure, retry_after));
        }
        let event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if event_stream {
            let reply = self
                .read_stream(response, model, &mut watch, on_tokens, on_text)
                .await?;
            return Ok((reply, watch.first_token_after(true)));
        }
        // A whole body: the answer arrives with its last byte. (Also what
        // a server that ignores `stream: true` sends.)
        let body = self
            .read_all(response, self.max_response_bytes, &mut watch, false)
            .await?;
        let reply = wire::parse_reply(&body, model, &self.scrubber).map_err(|failure| {
            if failure.status.is_some() {
                AttemptError::status(failure, None)
            } else {
                AttemptError::fatal(failure)
            }
        })?;
        Ok((reply, watch.first_token_after(false)))
    }

    /// A 3xx we did not follow: to another origin, or one too many.
    fn redirect_failure(&self, response: &reqwest::Response) -> Failure {
        let status = response.status().as_u16();
        let target = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|l| response.url().join(l).ok());
        let message = match target {
            Some(target) if http::origin(&target) != http::origin(&self.endpoint) => {
                let shown = ellipsized(&self.scrubber.scrub(target.as_str()), 200);
                format!(
                    "the provider redirected to {shown}, another origin (scheme, host or port); \
                     chorus does not follow such redirects, so the prompt and headers were not sent there \
                     (if the provider moved, update providers.{}.base_url)",
                    self.name
                )
            }
            Some(_) => "the provider redirected more than 5 times within its own origin".to_owned(),
            None => "the provider answered with a redirect without a usable Location".to_owned(),
        };
        Failure::new(FailureKind::HttpStatus, message).with_status(status)
    }

    fn transport_error(&self, error: &reqwest::Error) -> AttemptError {
        let host = http::host_port(&self.endpoint);
        if error.is_connect() && error.is_timeout() {
            return AttemptError::transient(self.limits.connect_failure(&host));
        }
        let message = if error.is_connect() {
            chain(&format!("cannot connect to {host}"), error)
        } else if error.is_body() || error.is_decode() {
            chain("the connection broke while reading the response", error)
        } else {
            chain(&format!("the request to {host} failed"), error)
        };
        AttemptError::transient(Failure::new(FailureKind::Connection, message))
    }
}

/// A head and an error's causes on one line — without the URL, which is
/// config, not news, and could carry credentials in a query string.
fn chain(head: &str, error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
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
        return Some(Duration::from_secs(seconds.min(86_400)));
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
