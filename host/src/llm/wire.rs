//! The OpenAI chat-completions wire format: building request bodies and
//! turning response bodies into a `Reply` or a typed `Failure`.
//!
//! Responses are outside data: every shape a provider has been seen to send
//! (no choices, null content, an `error` object with status 200, plain text)
//! becomes a value, never a panic.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::types::{ChatRequest, Failure, FailureKind, Reply, Usage};

/// The request body for `POST {base_url}/chat/completions`.
/// `extra` (the provider's `extra_body`) is merged in, but never overrides
/// the model or the messages.
pub fn request_body(request: &ChatRequest, extra: &Map<String, Value>) -> Value {
    let mut body = extra.clone();
    let s = &request.sampling;
    let optional = [
        ("temperature", s.temperature.map(Value::from)),
        ("top_p", s.top_p.map(Value::from)),
        ("max_tokens", s.max_tokens.map(Value::from)),
        ("seed", s.seed.map(Value::from)),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            body.insert(key.to_owned(), value);
        }
    }
    body.insert("model".to_owned(), json!(request.model));
    body.insert("messages".to_owned(), json!(request.messages));
    body.insert("stream".to_owned(), json!(false));
    Value::Object(body)
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ChoiceMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    cost: Option<f64>,
}

/// Parses a successful (2xx) response body.
pub fn parse_reply(body: &[u8], requested_model: &str) -> Result<Reply, Failure> {
    let malformed = |why: String| Failure::new(FailureKind::MalformedResponse, why);
    let response: Response = serde_json::from_slice(body).map_err(|e| {
        malformed(format!(
            "the body is not a chat completion ({e}): {}",
            excerpt(body)
        ))
    })?;
    if let Some(error) = response.error {
        // Some providers (OpenRouter among them) report upstream failures
        // inside a 200 response.
        let (status, message) = error_details(&error);
        let failure = Failure::new(FailureKind::HttpStatus, message);
        return Err(match status {
            Some(status) => failure.with_status(status),
            None => failure,
        });
    }
    let choice = response
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| malformed(format!("the response has no choices: {}", excerpt(body))))?;
    let message = choice
        .message
        .ok_or_else(|| malformed("the first choice has no message".to_owned()))?;
    let content = match message.content {
        Some(Value::String(text)) => text,
        // Content given as parts: keep the text parts.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(Value::Null) | None => match message.refusal {
            Some(refusal) => return Err(malformed(format!("the model refused: {refusal}"))),
            None => return Err(malformed("the message content is null".to_owned())),
        },
        Some(other) => {
            return Err(malformed(format!(
                "the message content is not text: {other}"
            )));
        }
    };
    let usage = response.usage.map(|u| Usage {
        prompt_tokens: saturate(u.prompt_tokens),
        completion_tokens: saturate(u.completion_tokens),
        cost: u.cost.filter(|c| c.is_finite() && *c >= 0.0),
    });
    Ok(Reply {
        content,
        served_by: response.model.unwrap_or_else(|| requested_model.to_owned()),
        finish_reason: choice.finish_reason,
        usage,
    })
}

/// The provider's own message from an error body (JSON or text).
pub fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => {
            let inner = value.get("error").unwrap_or(&value);
            error_details(inner).1
        }
        Err(_) => excerpt(body),
    }
}

fn error_details(error: &Value) -> (Option<u16>, String) {
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (100..600).contains(c));
    let message = match error {
        Value::String(s) => s.clone(),
        _ => match error.get("message").and_then(Value::as_str) {
            Some(m) => {
                // OpenRouter puts the upstream provider's words in metadata.raw.
                match error.pointer("/metadata/raw").and_then(Value::as_str) {
                    Some(raw) if !raw.is_empty() => format!("{m} ({})", truncate(raw, 300)),
                    _ => m.to_owned(),
                }
            }
            None => truncate(&error.to_string(), 500),
        },
    };
    (status, message)
}

fn saturate(n: Option<u64>) -> u32 {
    n.map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The start of a body, for messages: valid UTF-8, bounded.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(600)]);
    let text = truncate(text.trim(), 500);
    if text.is_empty() {
        "(empty body)".to_owned()
    } else {
        text
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests;
