//! The OpenAI chat-completions wire format: building request bodies (with
//! a prompt-cache mark for the models that cache only when told), and
//! turning response bodies (whole, or assembled from a stream) into a
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
pub mod search;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::secret::Scrubber;
use super::types::{
    ChatRequest, Failure, FailureKind, FormatSent, Message, Placed, Reply, ResponseFormat, Usage,
};
use crate::attach::{Attachment, Attachments, Body, Kind};
use crate::text::ellipsized;
use lenient::{Content, First, Text, WireError, WireUsage};

/// Whether `model` caches a prompt's prefix only where the request marks
/// it (`cache_control`): Anthropic's and Google's Gemini models, as
/// OpenRouter names them. Other models cache by themselves, or not at all.
pub fn caches_when_told(model: &str) -> bool {
    model.starts_with("anthropic/") || model.starts_with("google/gemini")
}

/// The message that ends what repeats across a run's calls and follow-ups
/// (the system prompt, a follow-up's history, earlier turns): the one
/// before the last, when there is one.
fn prefix_end(messages: &[Message]) -> Option<usize> {
    messages.len().checked_sub(2)
}

/// The messages as sent: the one at `mark` (if any) as a content block
/// carrying `cache_control: {"type": "ephemeral"}`; the attachments where
/// a plugin placed them, else after the last user message's text.
struct Messages<'a> {
    messages: &'a [Message],
    mark: Option<usize>,
    attachments: &'a Attachments,
    placed: &'a [Placed],
}

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        #[derive(Serialize)]
        struct Parts<'a> {
            role: super::types::Role,
            content: Vec<Part<'a>>,
        }
        let attach_at = (!self.attachments.is_empty() && self.placed.is_empty())
            .then(|| {
                self.messages
                    .iter()
                    .rposition(|m| m.role == super::types::Role::User)
            })
            .flatten();
        let mut seq = serializer.serialize_seq(Some(self.messages.len()))?;
        for (i, message) in self.messages.iter().enumerate() {
            let marked = Some(i) == self.mark;
            let placed: Vec<&Placed> = self.placed.iter().filter(|p| p.message == i).collect();
            if !marked && Some(i) != attach_at && placed.is_empty() {
                seq.serialize_element(message)?;
                continue;
            }
            let cache_control = marked.then_some(CacheControl {
                r#type: "ephemeral",
            });
            let mut content = Vec::new();
            let mut from = 0;
            for p in placed {
                let Some(attachment) = self.attachments.iter().find(|a| a.id == p.id) else {
                    continue;
                };
                let mut at = p.at.clamp(from, message.content.len());
                while !message.content.is_char_boundary(at) {
                    at -= 1;
                }
                if at > from {
                    content.push(Part::text(&message.content[from..at], None));
                }
                content.push(Part::of(attachment));
                from = at;
            }
            if from < message.content.len() || content.is_empty() || cache_control.is_some() {
                content.push(Part::text(&message.content[from..], cache_control));
            }
            if Some(i) == attach_at {
                content.extend(self.attachments.binary().map(Part::of));
            }
            seq.serialize_element(&Parts {
                role: message.role,
                content,
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct CacheControl {
    r#type: &'static str,
}

/// One content part of a message, as OpenAI-compatible providers take it.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ImageUrl {
        image_url: Url,
    },
    /// OpenRouter's (and OpenAI's) PDF input.
    File {
        file: File<'a>,
    },
    InputAudio {
        input_audio: Audio<'a>,
    },
}

#[derive(Serialize)]
struct Url {
    url: String,
}

#[derive(Serialize)]
struct File<'a> {
    filename: &'a str,
    file_data: String,
}

#[derive(Serialize)]
struct Audio<'a> {
    data: &'a str,
    format: &'a str,
}

impl<'a> Part<'a> {
    fn text(text: &'a str, cache_control: Option<CacheControl>) -> Self {
        Self::Text {
            text,
            cache_control,
        }
    }

    fn of(attachment: &'a Attachment) -> Self {
        match attachment.kind {
            Kind::Pdf => Self::File {
                file: File {
                    filename: &attachment.name,
                    file_data: attachment.url(),
                },
            },
            Kind::Audio => match &attachment.body {
                Body::Base64(data) => Self::InputAudio {
                    input_audio: Audio {
                        data,
                        format: attachment.audio_format(),
                    },
                },
                _ => Self::ImageUrl {
                    image_url: Url {
                        url: attachment.url(),
                    },
                },
            },
            Kind::Image | Kind::Text => Self::ImageUrl {
                image_url: Url {
                    url: attachment.url(),
                },
            },
        }
    }
}

/// The body of `POST {base_url}/chat/completions`. Later sources win:
/// the provider's `extra_body`, then the plugin's sampling and response
/// format (as much of it as `format` says to send), then the model's
/// `params` (the operator's word on that model). The model, the messages
/// and `stream` are chorus's and never overridden. For a model that
/// caches only when told, the end of the repeated prefix is marked.
pub fn request_body(
    request: &ChatRequest,
    extra: &Map<String, Value>,
    params: &Map<String, Value>,
    stream: bool,
    format: FormatSent,
) -> Vec<u8> {
    #[derive(Serialize)]
    struct Body<'a> {
        #[serde(flatten)]
        fields: Map<String, Value>,
        model: &'a str,
        messages: Messages<'a>,
        stream: bool,
    }
    let mut fields = extra.clone();
    let s = &request.sampling;
    let sampling = [
        ("temperature", s.temperature.map(Value::from)),
        ("top_p", s.top_p.map(Value::from)),
        ("max_tokens", s.max_tokens.map(Value::from)),
        ("seed", s.seed.map(Value::from)),
    ];
    for (key, value) in sampling {
        if let Some(value) = value {
            fields.insert(key.to_owned(), value);
        }
    }
    if let Some(format) = response_format(request.response_format.as_ref(), format) {
        fields.insert("response_format".to_owned(), format);
    }
    for (key, value) in params {
        fields.insert(key.clone(), value.clone());
    }
    for key in ["model", "messages", "stream"] {
        fields.remove(key);
    }
    if stream {
        ask_for_usage(&mut fields);
    }
    let body = Body {
        fields,
        model: &request.model,
        messages: Messages {
            messages: &request.messages,
            mark: prefix_end(&request.messages).filter(|_| caches_when_told(&request.model)),
            attachments: &request.attachments,
            placed: &request.placed,
        },
        stream,
    };
    serde_json::to_vec(&body).expect("a map of JSON values serializes")
}

/// A streamed answer's usage (and cost, where the server reports one)
/// comes only when asked for (`stream_options.include_usage`) from OpenAI,
/// LiteLLM, vLLM, llama.cpp and most gateways; OpenRouter sends it anyway
/// and accepts the field. An operator's own `stream_options` stays, and
/// an explicit `include_usage = false` (a server that rejects the field
/// can be told so in `extra_body`) is left as written.
fn ask_for_usage(fields: &mut Map<String, Value>) {
    let options = fields
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(options) = options {
        options.entry("include_usage").or_insert(Value::Bool(true));
    }
}

/// OpenAI's `response_format` for `asked`, cut down to what `format` says
/// the model takes.
fn response_format(asked: Option<&ResponseFormat>, format: FormatSent) -> Option<Value> {
    match (asked?, format) {
        (_, FormatSent::None) => None,
        (ResponseFormat::JsonSchema(schema), FormatSent::JsonSchema) => Some(serde_json::json!({
            "type": "json_schema",
            "json_schema": schema,
        })),
        (_, FormatSent::JsonObject | FormatSent::JsonSchema) => {
            Some(serde_json::json!({ "type": "json_object" }))
        }
    }
}

/// The response format a model's `params` force on every request, if any
/// (the operator's word wins over a plugin's).
pub fn forced_format(params: &Map<String, Value>) -> Option<FormatSent> {
    let format = params.get("response_format")?;
    Some(match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => FormatSent::JsonSchema,
        Some("json_object") => FormatSent::JsonObject,
        _ => FormatSent::None,
    })
}

/// The `max_tokens` a request will be sent with: the model's params win
/// over the plugin's sampling, as in `request_body`.
pub fn max_tokens(request: &ChatRequest, params: &Map<String, Value>) -> Option<u32> {
    params
        .get("max_tokens")
        .or_else(|| params.get("max_completion_tokens"))
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        .or(request.sampling.max_tokens)
}

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
    conclude(
        Parts {
            content: message.content,
            refusal: message.refusal.into_string(),
            finish_reason: choice.finish_reason.into_string(),
            served_by: response.model.into_string(),
            usage: response.usage,
            citations: message.annotations.0,
        },
        requested_model,
    )
}

/// Turns the parts of an answer into a reply, or the failure they amount to.
pub fn conclude(parts: Parts, requested_model: &str) -> Result<Reply, Failure> {
    let malformed = |why: String| Failure::new(FailureKind::MalformedResponse, why);
    let out_of_tokens = parts.finish_reason.as_deref() == Some("length");
    let content = match parts.content {
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
