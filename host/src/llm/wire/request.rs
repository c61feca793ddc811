//! Request bodies on the OpenAI chat-completions wire: the messages with
//! their attachments where a plugin placed them, a prompt-cache mark for
//! the models that cache only when told, the response format a model
//! takes, the caller's tools and the exchange since its question (see
//! `llm::tools`), and what the operator's model `params` add or force.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::attach::{Attachment, Attachments, Body, Kind};
use crate::llm::types::{ChatRequest, FormatSent, Message, Placed, ResponseFormat};

/// Whether `model` caches a prompt's prefix only where the request marks
/// it (`cache_control`): Anthropic's and Google's Gemini models, as
/// OpenRouter names them. Other models cache by themselves, or not at all.
fn caches_when_told(model: &str) -> bool {
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
    /// The tool exchange since the question, after the messages.
    exchange: Vec<Value>,
}

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        #[derive(Serialize)]
        struct Parts<'a> {
            role: crate::llm::types::Role,
            content: Vec<Part<'a>>,
        }
        let attach_at = (!self.attachments.is_empty() && self.placed.is_empty())
            .then(|| {
                self.messages
                    .iter()
                    .rposition(|m| m.role == crate::llm::types::Role::User)
            })
            .flatten();
        let mut seq = serializer.serialize_seq(Some(self.messages.len() + self.exchange.len()))?;
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
        for step in &self.exchange {
            seq.serialize_element(step)?;
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
/// caches only when told, the end of the repeated prefix is marked. The
/// caller's tools go to a model that `takes_tools`; the exchange since
/// the question goes to every model, in words to one that takes none.
pub fn request_body(
    request: &ChatRequest,
    extra: &Map<String, Value>,
    params: &Map<String, Value>,
    stream: bool,
    format: FormatSent,
    takes_tools: bool,
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
    if let Some(tools) = request.tools.as_deref().filter(|_| takes_tools) {
        for (key, value) in tools.wire_fields() {
            if let Some(value) = value {
                fields.insert(key.to_owned(), value);
            }
        }
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
            exchange: request
                .tools
                .as_deref()
                .map(|tools| tools.wire_messages(takes_tools))
                .unwrap_or_default(),
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
