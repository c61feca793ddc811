//! The values that cross the llm boundary: what to ask, and what happened.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
}

/// Sampling parameters; `None` leaves the provider's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sampling {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub max_tokens: Option<u32>,
    pub seed: Option<u64>,
}

/// One chat completion to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// What the call is for ("panel", "synthesis", "judge").
    pub label: String,
    pub model: String,
    pub messages: Vec<Message>,
    pub sampling: Sampling,
    /// Ask for JSON, or JSON of a schema; `None` for free text. Sent only
    /// to models that accept it (see `FormatSent`).
    pub response_format: Option<ResponseFormat>,
    /// Images, PDFs and audio the model sees as they are, sent with the
    /// last user message (text attachments and descriptions are in the
    /// messages already). Shared by every call of the run.
    pub attachments: crate::attach::Attachments,
    /// Where a plugin placed attachments in the messages (contract 0.4's
    /// `content-part.attachment`), in message and text order. Empty: the
    /// attachments go with the last user message.
    pub placed: Vec<Placed>,
    /// The tools the run's caller offered and the exchange since its
    /// question, on the calls that put the question (see `tools`); sent
    /// as far as the model takes tools.
    pub tools: Option<Arc<super::tools::ToolUse>>,
}

impl ChatRequest {
    /// A request of `messages` to `model`, labelled `label`, and nothing
    /// else: the provider's sampling, free text, no attachments, no tools.
    pub fn plain(label: &str, model: &str, messages: Vec<Message>) -> Self {
        Self {
            label: label.to_owned(),
            model: model.to_owned(),
            messages,
            sampling: Sampling::default(),
            response_format: None,
            attachments: Default::default(),
            placed: Vec::new(),
            tools: None,
        }
    }

    /// The attachment parts the wire sends, each time it sends one: those
    /// placed, in placing order, else every binary attachment once (text
    /// files are in the messages already).
    pub fn sent_attachments(&self) -> impl Iterator<Item = &crate::attach::Attachment> {
        let placed = self
            .placed
            .iter()
            .filter_map(|p| self.attachments.iter().find(|a| a.id == p.id));
        let unplaced = self.attachments.binary().filter(|_| self.placed.is_empty());
        placed.chain(unplaced)
    }
}

/// A run attachment placed in a message: at byte `at` of the content of
/// message `message`, before the text that follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub message: usize,
    pub at: usize,
    /// The attachment's id in the run.
    pub id: u32,
}

/// How a reply must be written when a plugin reads it as data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Any JSON object: the provider's JSON mode.
    JsonObject,
    /// JSON matching a schema: the provider's structured outputs.
    JsonSchema(JsonSchema),
}

/// A named JSON Schema, as OpenAI's `response_format.json_schema` holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonSchema {
    pub name: String,
    pub schema: Value,
    pub strict: bool,
}

impl JsonSchema {
    /// Checks what providers refuse with a 400: a name of 1 to 64 letters,
    /// digits, `_` or `-`, and a schema that is a JSON object. The error
    /// says which, for the plugin that sent it.
    pub fn new(name: String, schema: &str, strict: bool) -> Result<Self, String> {
        let schema: Value = serde_json::from_str(schema)
            .map_err(|e| format!("the response format's schema `{name}` is not JSON: {e}"))?;
        Self::of_value(name, schema, strict)
    }

    /// As `new`, of a schema already read.
    pub fn of_value(name: String, schema: Value, strict: bool) -> Result<Self, String> {
        if !super::tools::is_function_name(&name) {
            return Err(format!(
                "the response format's schema name {name:?} must be 1 to 64 letters, digits, `_` or `-`"
            ));
        }
        if !schema.is_object() {
            return Err(format!(
                "the response format's schema `{name}` must be a JSON object, not {schema}"
            ));
        }
        Ok(Self {
            name,
            schema,
            strict,
        })
    }
}

/// What chorus asked the provider for, of a request's `response_format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormatSent {
    /// Nothing: none was asked, the model does not take one, or the
    /// provider refused it and the call was made again without.
    #[default]
    None,
    JsonObject,
    JsonSchema,
}

impl FormatSent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::JsonObject => "json-object",
            Self::JsonSchema => "json-schema",
        }
    }

    /// The kind `text` spells (as a stored record does).
    pub fn parse(text: &str) -> Option<Self> {
        [Self::None, Self::JsonObject, Self::JsonSchema]
            .into_iter()
            .find(|f| f.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// Of the completion tokens, those spent thinking, when reported.
    pub reasoning_tokens: Option<u32>,
    /// Of the prompt tokens, those read from the provider's prompt cache
    /// (billed at its cache-read price), when reported.
    pub cached_tokens: Option<u32>,
    /// Of the prompt tokens, those written to the prompt cache (billed at
    /// its cache-write price), when reported.
    pub cache_write_tokens: Option<u32>,
    /// USD, as reported by the provider or estimated from prices.
    pub cost: Option<f64>,
    /// True when `cost` is chorus's estimate, not the provider's figure.
    pub cost_estimated: bool,
    /// True when the provider reported no token counts and these are
    /// estimated from the text's length.
    pub tokens_estimated: bool,
}

/// What the attempts of one call have done so far. The caller keeps it, so
/// it is known even when the call is dropped midway (a deadline, a cut).
#[derive(Debug, Default)]
pub struct Attempts {
    /// Attempts started (retries included).
    pub started: AtomicU32,
    /// Tokens (estimated) streamed by attempts that then failed: most
    /// providers bill them, and no usage reports them.
    pub lost_tokens: AtomicU32,
    /// Attempts that failed after streaming something; each paid for its
    /// prompt as well.
    pub lost_attempts: AtomicU32,
    /// Microseconds the attempts waited for the provider's permits, in all.
    queued_us: AtomicU64,
    /// Whether any attempt had to wait for a permit.
    queued: std::sync::atomic::AtomicBool,
    /// The time to first token of the attempt that answered.
    first_token: Mutex<Option<Duration>>,
}

impl Attempts {
    pub fn started(&self) -> u32 {
        self.started.load(Ordering::Relaxed)
    }

    /// (attempts, tokens) lost to failed attempts that had streamed.
    pub fn lost(&self) -> (u32, u32) {
        (
            self.lost_attempts.load(Ordering::Relaxed),
            self.lost_tokens.load(Ordering::Relaxed),
        )
    }

    /// An attempt begins to wait for a permit; the wait is counted when
    /// the returned guard drops, so a call dropped while queued (a
    /// deadline, a cut) still counts what it waited.
    pub fn queue_wait(&self) -> QueueWait<'_> {
        self.queued.store(true, Ordering::Relaxed);
        QueueWait {
            attempts: self,
            since: Instant::now(),
        }
    }

    /// Milliseconds the attempts waited for the provider's permits, in
    /// all; `None` if none had to wait.
    pub fn queued_ms(&self) -> Option<u32> {
        self.queued.load(Ordering::Relaxed).then(|| {
            millis(Duration::from_micros(
                self.queued_us.load(Ordering::Relaxed),
            ))
        })
    }

    /// The attempt that answered got its first token `after` its request
    /// was sent.
    pub fn answered(&self, after: Option<Duration>) {
        *self.first_token.lock().unwrap_or_else(|e| e.into_inner()) = after;
    }

    /// The time to first token of the attempt that answered, in ms.
    pub fn ttft_ms(&self) -> Option<u32> {
        self.first_token
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(millis)
    }
}

/// A wait for a permit in progress (see [`Attempts::queue_wait`]).
pub struct QueueWait<'a> {
    attempts: &'a Attempts,
    since: Instant,
}

impl Drop for QueueWait<'_> {
    fn drop(&mut self) {
        let us = u64::try_from(self.since.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.attempts.queued_us.fetch_add(us, Ordering::Relaxed);
    }
}

/// A duration in whole milliseconds, saturating.
pub fn millis(duration: Duration) -> u32 {
    u32::try_from(duration.as_millis()).unwrap_or(u32::MAX)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reply {
    /// Shared, not copied, with the run's record of the call and with
    /// whatever keeps it (an answer can be megabytes). An `Arc<String>`
    /// rather than `Arc<str>`: the assembled `String` moves in as it is.
    pub content: Arc<String>,
    /// The model the provider says answered.
    pub served_by: String,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    /// What was asked of the provider, of the request's `response_format`.
    pub format_sent: FormatSent,
    /// The answer's `url_citation` annotations, in the order given.
    pub citations: Vec<super::Citation>,
    /// The calls the model proposed (when it was offered tools).
    pub tool_calls: Vec<super::tools::ToolCall>,
}

impl Reply {
    /// The reply, saying `format` was what the provider was asked for.
    pub fn sent(self, format: FormatSent) -> Self {
        Self {
            format_sent: format,
            ..self
        }
    }
}

/// Why a call failed. Kept in step with `failure-kind` in the WIT contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    Timeout,
    RateLimited,
    HttpStatus,
    Connection,
    MalformedResponse,
    ResponseTooLarge,
    Cancelled,
    OverBudget,
    UnknownModel,
    MissingApiKey,
    /// Cut by the fan-out policy: the quorum had answered and the grace
    /// period passed, or the time kept for the merge began.
    Cut,
    /// The model spent its whole token budget (often on reasoning) and
    /// wrote no answer.
    TokenLimit,
    /// Never sent: the model cannot take the run's attachments (an image,
    /// a PDF, audio) and the pipeline leaves such models out, or the
    /// request placed an attachment the run does not have.
    UnsupportedInput,
}

impl FailureKind {
    pub const ALL: [Self; 13] = [
        Self::Timeout,
        Self::RateLimited,
        Self::HttpStatus,
        Self::Connection,
        Self::MalformedResponse,
        Self::ResponseTooLarge,
        Self::Cancelled,
        Self::OverBudget,
        Self::UnknownModel,
        Self::MissingApiKey,
        Self::Cut,
        Self::TokenLimit,
        Self::UnsupportedInput,
    ];

    /// The kind whose `as_str` is `text` (as a stored record spells it).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::RateLimited => "rate-limited",
            Self::HttpStatus => "http-status",
            Self::Connection => "connection",
            Self::MalformedResponse => "malformed-response",
            Self::ResponseTooLarge => "response-too-large",
            Self::Cancelled => "cancelled",
            Self::OverBudget => "over-budget",
            Self::UnknownModel => "unknown-model",
            Self::MissingApiKey => "missing-api-key",
            Self::Cut => "cut",
            Self::TokenLimit => "token-limit",
            Self::UnsupportedInput => "unsupported-input",
        }
    }
}

/// A failed call: what kind, the HTTP status if any, and the provider's own
/// words (or what chorus observed) — never a generic "error".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub status: Option<u16>,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            status: None,
            message: message.into(),
        }
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(
                f,
                "{} (HTTP {status}): {}",
                self.kind.as_str(),
                self.message
            ),
            None => write!(f, "{}: {}", self.kind.as_str(), self.message),
        }
    }
}

/// The outcome of one chat request, retries included.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The call's number in its run (see `pipeline::Event::CallStarted`);
    /// set by the run, `None` for a call that was never sent.
    pub id: Option<u32>,
    pub label: String,
    pub model: String,
    pub latency_ms: u32,
    pub attempts: u32,
    /// How long the attempts waited for the provider's permits, in all;
    /// `None` if they never had to.
    pub queued_ms: Option<u32>,
    /// From the answering attempt's request being sent to its first token
    /// (streamed) or the first bytes of its body (not); `None` without an
    /// answer.
    pub ttft_ms: Option<u32>,
    pub outcome: Result<Reply, Failure>,
}
