//! The OpenAI chat-completions wire format: request bodies (`request`),
//! and turning response bodies (whole, or assembled from a stream) into a
//! `Reply` or a typed `Failure`.
//!
//! Responses are outside data: every shape a provider has been seen to send
//! (no choices, null content, content as parts, usage as floats or strings,
//! an `error` object with status 200, plain text) becomes a value, never a
//! panic — and a field of the wrong type never discards a complete answer.
//!
//! Every function here that cuts provider text for a message takes the
//! provider's `Scrubber` and scrubs before it cuts: a key echo cut at the
//! boundary would otherwise leave a run too short to be recognised.

pub mod lenient;
mod request;
pub mod search;

pub use request::{forced_format, max_tokens, request_body};

use std::sync::Arc;

use serde::Deserialize;

use super::secret::Scrubber;
use super::types::{Failure, FailureKind, FormatSent, Reply, Usage};
use crate::text::ellipsized;
use lenient::{Content, First, Text, WireError, WireUsage};

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(default, borrow)]
    model: Text<'a>,
    #[serde(default, borrow)]
    choices: Option<First<Choice<'a>>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    message: Option<ChoiceMessage<'a>>,
    #[serde(default, borrow)]
    finish_reason: Text<'a>,
}

#[derive(Deserialize)]
struct ChoiceMessage<'a> {
    #[serde(default)]
    content: Content,
    #[serde(default, borrow)]
    refusal: Text<'a>,
    #[serde(default)]
    annotations: search::Annotations,
    #[serde(default)]
    tool_calls: super::tools::WireToolCalls,
}

/// What an answer is made of, however it arrived (one body or a stream).
#[derive(Debug, Default)]
pub struct Parts {
    pub content: Content,
    pub refusal: Option<String>,
    pub finish_reason: Option<String>,
    pub served_by: Option<String>,
    pub usage: Option<WireUsage>,
    /// Its `url_citation` annotations (spans not yet read).
    pub citations: Vec<super::Citation>,
    /// The calls it proposed.
    pub tool_calls: Vec<super::tools::ToolCall>,
}

/// Parses a successful (2xx) response body.
pub fn parse_reply(
    body: &[u8],
    requested_model: &str,
    scrubber: &Scrubber,
) -> Result<Reply, Failure> {
    let malformed = |why: String| Failure::new(FailureKind::MalformedResponse, why);
    let response: Response = serde_json::from_slice(body).map_err(|e| {
        malformed(format!(
            "the body is not a chat completion ({e}): {}",
            excerpt(body, scrubber)
        ))
    })?;
    if let Some(error) = response.error {
        // Some providers (OpenRouter among them) report upstream failures
        // inside a 200 response.
        return Err(provider_error(&error, scrubber));
    }
    let choice = response.choices.and_then(|c| c.0).ok_or_else(|| {
        malformed(format!(
            "the response has no choices: {}",
            excerpt(body, scrubber)
        ))
    })?;
    let message = choice
        .message
        .ok_or_else(|| malformed("the first choice has no message".to_owned()))?;
    let mut tool_calls = super::tools::CallsAssembler::default();
    tool_calls.add(message.tool_calls);
    conclude(
        Parts {
            content: message.content,
            refusal: message.refusal.into_string(),
            finish_reason: choice.finish_reason.into_string(),
            served_by: response.model.into_string(),
            usage: response.usage,
            citations: message.annotations.0,
            tool_calls: tool_calls.finish(),
        },
        requested_model,
    )
}

/// Turns the parts of an answer into a reply, or the failure they amount to.
pub fn conclude(parts: Parts, requested_model: &str) -> Result<Reply, Failure> {
    let malformed = |why: String| Failure::new(FailureKind::MalformedResponse, why);
    let out_of_tokens = parts.finish_reason.as_deref() == Some("length");
    let content = match parts.content {
        // A reply that proposes tool calls may have no text.
        Content::Null | Content::Text(_) if !parts.tool_calls.is_empty() && !out_of_tokens => {
            match parts.content {
                Content::Text(text) => text,
                _ => String::new(),
            }
        }
        Content::Text(text) if !(text.is_empty() && out_of_tokens) => text,
        Content::Text(_) | Content::Null if out_of_tokens => {
            return Err(token_limit(requested_model, parts.usage));
        }
        Content::Null | Content::Text(_) => match parts.refusal {
            Some(refusal) if !refusal.is_empty() => {
                return Err(malformed(format!("the model refused: {refusal}")));
            }
            _ => return Err(malformed("the message content is null".to_owned())),
        },
        Content::Other(kind) => {
            return Err(malformed(format!(
                "the message content is not text but {kind}"
            )));
        }
    };
    let citations = search::with_spans(parts.citations, &content);
    Ok(Reply {
        citations,
        content: Arc::new(content),
        served_by: parts
            .served_by
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        finish_reason: parts.finish_reason,
        usage: parts.usage.and_then(usage),
        format_sent: FormatSent::None,
        tool_calls: parts.tool_calls,
    })
}

/// Token counts as the provider gave them; `None` when it gave none.
fn usage(wire: WireUsage) -> Option<Usage> {
    if wire.prompt_tokens.is_none() && wire.completion_tokens.is_none() && wire.cost.is_none() {
        return None;
    }
    Some(Usage {
        prompt_tokens: wire.prompt_tokens.unwrap_or(0),
        completion_tokens: wire.completion_tokens.unwrap_or(0),
        reasoning_tokens: wire.reasoning_tokens,
        cached_tokens: wire.cached_tokens,
        cache_write_tokens: wire.cache_write_tokens,
        cost: wire.cost,
        cost_estimated: false,
        tokens_estimated: wire.prompt_tokens.is_none() || wire.completion_tokens.is_none(),
    })
}

fn token_limit(model: &str, usage: Option<WireUsage>) -> Failure {
    let spent = match usage {
        Some(WireUsage {
            completion_tokens: Some(n),
            reasoning_tokens: Some(r),
            ..
        }) => format!(" ({n} completion tokens, {r} of them reasoning)"),
        Some(WireUsage {
            completion_tokens: Some(n),
            ..
        }) => format!(" ({n} completion tokens)"),
        _ => String::new(),
    };
    Failure::new(
        FailureKind::TokenLimit,
        format!(
            "the model spent its whole token budget{spent} without writing an answer \
             (finish_reason = length), often on reasoning; raise max_tokens \
             (models.\"{model}\".params or the plugin's settings) or lower the reasoning effort"
        ),
    )
}

/// A provider's error object as a failure: its status if it gave one.
pub fn provider_error(error: &WireError, scrubber: &Scrubber) -> Failure {
    let failure = Failure::new(FailureKind::HttpStatus, error.describe(scrubber));
    match error.status {
        Some(status) => failure.with_status(status),
        None => failure,
    }
}

#[derive(Deserialize)]
struct ErrorBody<'a> {
    #[serde(default)]
    error: Option<WireError>,
    #[serde(default, borrow)]
    message: Text<'a>,
    /// FastAPI-based servers (vLLM among them) say `{"detail": "..."}`.
    #[serde(default, borrow)]
    detail: Text<'a>,
}

/// The provider's own message from an error body (JSON or text).
pub fn error_message(body: &str, scrubber: &Scrubber) -> String {
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(ErrorBody {
            error: Some(error), ..
        }) => error.describe(scrubber),
        Ok(ErrorBody {
            message, detail, ..
        }) if message.is_nonempty() || detail.is_nonempty() => {
            let text = message.0.or(detail.0).unwrap_or_default();
            ellipsized(&scrubber.scrub(&text), 500)
        }
        _ => excerpt(body.as_bytes(), scrubber),
    }
}

/// The start of a body, for messages: valid UTF-8, scrubbed, bounded.
/// The whole body is scrubbed (only failures get here), so an echo that
/// straddles the cut is found before the cut hides half of it.
pub fn excerpt(body: &[u8], scrubber: &Scrubber) -> String {
    let text = String::from_utf8_lossy(body);
    let text = ellipsized(scrubber.scrub(&text).trim(), 500);
    if text.is_empty() {
        "(empty body)".to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_attachments;
