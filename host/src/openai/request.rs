//! A `POST /v1/chat/completions` body, read into a run: `model` names the
//! pipeline; system (and developer) messages become instructions every
//! call of the run sees; earlier user/assistant turns the conversation the
//! panel sees (as a follow-up's); the last user message(s) the question.
//! Content parts become the run's attachments (`attach::Source`), read
//! and held to the same limits as MCP's `attachments` argument.
//!
//! What chorus cannot do is refused by name (`n` > 1, logprobs), never
//! dropped in silence; `response_format` is the answer's format (see
//! `format`); `tools`, `tool_choice` and the tool messages of the history
//! are the tools the panel may call (see `tools`); sampling parameters go
//! to the pipeline when
//! it declares an option of that name, and are listed as not applied
//! (in the answer's `chorus` object) when it does not.

use serde_json::{Map, Value};

use super::errors::ApiError;
use super::parts::{text_only, user_content};
use crate::attach::Source;
use crate::config::OptionSpec;
use crate::llm::tools::{Exchanged, ToolChoice, ToolUse};
use crate::pipeline::Question;
use crate::pipeline::follow_up::{Conversation, Turn};

/// The prefix a model id may carry (`chorus/ask` is `ask`).
pub const MODEL_PREFIX: &str = "chorus/";

/// Parameters a pipeline may declare as options of the same name.
const SAMPLING: [&str; 7] = [
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
];

/// The fields read here; any other is listed as not applied.
const READ: [&str; 17] = [
    "model",
    "response_format",
    "messages",
    "stream",
    "stream_options",
    "n",
    "tools",
    "functions",
    "tool_choice",
    "function_call",
    "parallel_tool_calls",
    "logprobs",
    "top_logprobs",
    "user",
    "metadata",
    "chorus",
    "max_completion_tokens",
];

/// OpenAI's own bounds on `metadata`.
const MAX_METADATA_KEYS: usize = 16;
const MAX_METADATA_KEY_CHARS: usize = 64;
const MAX_METADATA_VALUE_CHARS: usize = 512;
const MAX_USER_CHARS: usize = 256;

/// A request read: what to run, and how to answer.
#[derive(Debug)]
pub struct Asked {
    pub pipeline: String,
    /// The question's text; its attachments are in `sources`, read later.
    pub question: Question,
    pub sources: Vec<Source>,
    pub conversation: Option<Conversation>,
    pub options: Map<String, Value>,
    pub stream: bool,
    pub include_usage: bool,
    /// Parameters taken but not applied: said in the answer.
    pub not_applied: Vec<String>,
}

/// The JSON object of a request body, or a 400 saying what is wrong.
pub fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(ApiError::invalid(
            "",
            "The request body must be a JSON object.",
        )),
        Err(e) => Err(ApiError::invalid(
            "",
            format!("The request body is not valid JSON: {e}."),
        )),
    }
}

/// The pipeline `model` names (`chorus/NAME` or `NAME`).
pub fn pipeline_of(model: &str) -> &str {
    model.strip_prefix(MODEL_PREFIX).unwrap_or(model)
}

/// `body`'s `model`, or a 400.
pub fn model(body: &Map<String, Value>) -> Result<String, ApiError> {
    match body.get("model") {
        Some(Value::String(model)) if !model.is_empty() => Ok(pipeline_of(model).to_owned()),
        _ => Err(ApiError::invalid(
            "model",
            "`model` must name a chorus pipeline (GET /v1/models lists them).",
        )),
    }
}

/// Reads a chat completion request for `pipeline`, whose declared options
/// are `declared`; the conversation is held to `max_bytes`.
pub fn chat(
    mut body: Map<String, Value>,
    pipeline: String,
    declared: &std::collections::BTreeMap<String, OptionSpec>,
    max_bytes: usize,
) -> Result<Asked, ApiError> {
    refuse_unsupported(&body)?;
    let stream = flag(&body, "stream")?;
    let include_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => o.get("include_usage").and_then(Value::as_bool) == Some(true),
        Some(_) => {
            return Err(ApiError::invalid(
                "stream_options",
                "`stream_options` must be an object.",
            ));
        }
    };
    let mut options = match body.remove("chorus") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o,
        Some(_) => {
            return Err(ApiError::invalid(
                "chorus",
                "`chorus` holds the pipeline's options, as an object (e.g. {\"max_cost_usd\": 0.05}).",
            ));
        }
    };
    let mut not_applied = Vec::new();
    if let Some(value) = body.remove("max_completion_tokens") {
        body.entry("max_tokens").or_insert(value);
    }
    for key in SAMPLING {
        let Some(value) = body.remove(key) else {
            continue;
        };
        if value.is_null() {
            continue;
        }
        if declared.contains_key(key) && !options.contains_key(key) {
            options.insert(key.to_owned(), value);
        } else {
            not_applied.push(key.to_owned());
        }
    }
    not_applied.extend(
        body.iter()
            .filter(|(key, value)| !READ.contains(&key.as_str()) && !value.is_null())
            .map(|(key, _)| key.clone()),
    );
    let format = match body.get("response_format") {
        None | Some(Value::Null) => None,
        Some(value) => {
            // A pipeline that declares the option sees it too.
            if declared.contains_key("response_format") && !options.contains_key("response_format")
            {
                options.insert("response_format".to_owned(), value.clone());
            }
            super::format::read(value)?
        }
    };
    let kept = kept_note(&body)?;
    let messages = match body.remove("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        _ => {
            return Err(ApiError::invalid(
                "messages",
                "`messages` must be a non-empty list ending with the user's question.",
            ));
        }
    };
    let offered = super::tools::read(&body)?;
    let read = read_messages(messages, max_bytes)?;
    let mut question = Question::text(read.question);
    question.notes.extend(kept);
    question.format = format;
    question.tools = match offered {
        None if read.exchange.is_empty() => None,
        offered => {
            // A history of tool calls with no tools offered now: the
            // exchange alone, and no call to make.
            let mut offered = offered.unwrap_or(ToolUse {
                tools: Vec::new(),
                choice: ToolChoice::None,
                parallel: None,
                exchange: Vec::new(),
            });
            offered.exchange = read.exchange;
            Some(std::sync::Arc::new(offered))
        }
    };
    let conversation = match (read.turns.is_empty(), read.system.is_empty()) {
        (true, true) => None,
        _ => Some(Conversation::sent(read.turns, max_bytes).with_system(read.system)),
    };
    Ok(Asked {
        pipeline,
        question,
        sources: read.sources,
        conversation,
        options,
        stream,
        include_usage,
        not_applied,
    })
}

fn flag(body: &Map<String, Value>, key: &str) -> Result<bool, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::invalid(
            key,
            format!("`{key}` must be true or false."),
        )),
    }
}

fn present(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Bool(b)) => *b,
        Some(_) => true,
    }
}

/// What chorus cannot do, refused by name.
fn refuse_unsupported(body: &Map<String, Value>) -> Result<(), ApiError> {
    match body.get("n") {
        None | Some(Value::Null) => {}
        Some(n) if n.as_u64() == Some(1) => {}
        Some(n) => {
            return Err(ApiError::unsupported(
                "n",
                format!(
                    "chorus gives one answer per request (n = 1), and n = {n} was asked: a pipeline already merges several models' answers into one. Send n = 1, or several requests."
                ),
            ));
        }
    }
    for key in ["logprobs", "top_logprobs"] {
        let asked = match body.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::Number(n)) => n.as_u64() != Some(0),
            Some(_) => true,
        };
        if asked {
            return Err(ApiError::unsupported(
                key,
                format!(
                    "chorus has no log probabilities to give (its answer is merged from several models'): send the request without `{key}`."
                ),
            ));
        }
    }
    Ok(())
}

/// `user` and `metadata`, kept on the run as a note.
fn kept_note(body: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    let user = match body.get("user") {
        None | Some(Value::Null) => None,
        Some(Value::String(user)) if user.chars().count() <= MAX_USER_CHARS => Some(user.clone()),
        Some(_) => {
            return Err(ApiError::invalid(
                "user",
                format!("`user` must be a string of at most {MAX_USER_CHARS} characters."),
            ));
        }
    };
    let metadata = match body.get("metadata") {
        None | Some(Value::Null) => None,
        Some(Value::Object(pairs)) => {
            let fits = pairs.len() <= MAX_METADATA_KEYS
                && pairs.iter().all(|(k, v)| {
                    k.chars().count() <= MAX_METADATA_KEY_CHARS
                        && v.as_str()
                            .is_some_and(|v| v.chars().count() <= MAX_METADATA_VALUE_CHARS)
                });
            if !fits {
                return Err(ApiError::invalid(
                    "metadata",
                    format!(
                        "`metadata` holds at most {MAX_METADATA_KEYS} pairs of strings, keys of at most {MAX_METADATA_KEY_CHARS} characters and values of at most {MAX_METADATA_VALUE_CHARS}."
                    ),
                ));
            }
            (!pairs.is_empty()).then(|| Value::Object(pairs.clone()).to_string())
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "metadata",
                "`metadata` must be an object of strings.",
            ));
        }
    };
    Ok(match (user, metadata) {
        (None, None) => None,
        (user, metadata) => {
            let mut parts = vec!["Asked through the OpenAI endpoint".to_owned()];
            parts.extend(user.map(|u| format!("user {u:?}")));
            parts.extend(metadata.map(|m| format!("metadata {m}")));
            Some(format!("{}.", parts.join("; ")))
        }
    })
}

/// The messages, read.
struct Read {
    system: String,
    /// Newest first.
    turns: Vec<Turn>,
    question: String,
    sources: Vec<Source>,
    /// The tool calls and results since the question.
    exchange: Vec<Exchanged>,
}

/// A 400 when a message of `size` bytes is over `max_bytes`: every turn of
/// a conversation is held to `limits.max_prompt_bytes`, as the question
/// is (the turns together are too, the oldest left out first).
fn within(param: &str, what: &str, size: usize, max_bytes: usize) -> Result<(), ApiError> {
    if size <= max_bytes {
        return Ok(());
    }
    Err(ApiError::invalid(
        param,
        format!(
            "The {what} at `{param}` is {size} bytes, over the limit of {max_bytes} (limits.max_prompt_bytes), which holds every turn of a conversation: shorten it, or leave it out."
        ),
    ))
}

fn read_messages(messages: Vec<Value>, max_bytes: usize) -> Result<Read, ApiError> {
    let mut system: Vec<String> = Vec::new();
    let mut turns = Vec::new();
    let mut asked: Vec<String> = Vec::new();
    let mut sources = Vec::new();
    // Tool calls and results since the last user or answering message.
    let mut exchange: Vec<Exchanged> = Vec::new();
    let mut exchanged_bytes = 0;
    // System messages may come anywhere (instructions every call sees,
    // Claude Code's reminders): the last of the others is what is asked.
    let last = messages
        .iter()
        .rposition(|m| !matches!(m["role"].as_str(), Some("system" | "developer")))
        .unwrap_or(messages.len() - 1);
    for (i, message) in messages.into_iter().enumerate() {
        let param = format!("messages[{i}]");
        let Value::Object(message) = message else {
            return Err(ApiError::invalid(
                &param,
                format!("`{param}` must be an object."),
            ));
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if present(message.get("function_call")) {
            return Err(ApiError::unsupported(
                &param,
                format!(
                    "`{param}` holds a `function_call`, OpenAI's old form of tool calls: send `tool_calls`."
                ),
            ));
        }
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => system.push(text_only(content, &param)?),
            "user" => {
                let text = user_content(content, &param, &mut sources)?;
                within(&param, "message", text.len(), max_bytes)?;
                if !exchange.is_empty() {
                    asked.push(super::tools::said(&std::mem::take(&mut exchange)));
                    exchanged_bytes = 0;
                }
                asked.push(text);
            }
            "assistant" if present(message.get("tool_calls")) => {
                let calls = super::tools::calls_of(&message["tool_calls"], &param)?;
                let text = match content {
                    Value::Null => String::new(),
                    content => text_only(content, &param)?,
                };
                exchanged_bytes +=
                    text.len() + calls.iter().map(|c| c.arguments.len()).sum::<usize>();
                within(
                    &param,
                    "tool exchange that ends",
                    exchanged_bytes,
                    max_bytes,
                )?;
                exchange.push(Exchanged::Called { text, calls });
            }
            "assistant" => {
                let mut answer = text_only(content, &param)?;
                if !exchange.is_empty() {
                    let said = super::tools::said(&std::mem::take(&mut exchange));
                    answer = format!("{said}\n\n{answer}");
                    exchanged_bytes = 0;
                }
                within(&param, "message", answer.len(), max_bytes)?;
                let question = std::mem::take(&mut asked).join("\n\n");
                let turn = question.len() + answer.len();
                within(&param, "turn that ends", turn, max_bytes)?;
                turns.push(Turn { question, answer });
            }
            "tool" => {
                let Some(call_id) = message.get("tool_call_id").and_then(Value::as_str) else {
                    return Err(ApiError::invalid(
                        &param,
                        format!(
                            "`{param}` is a tool result: it needs the `tool_call_id` of the call it answers."
                        ),
                    ));
                };
                let called = exchange.iter().any(|step| {
                    matches!(step, Exchanged::Called { calls, .. } if calls.iter().any(|c| c.id == call_id))
                });
                if !called {
                    return Err(ApiError::invalid(
                        &param,
                        format!(
                            "`{param}` answers the tool call {call_id:?}, which no assistant message before it made."
                        ),
                    ));
                }
                let content = text_only(content, &param)?;
                exchanged_bytes += content.len();
                within(
                    &param,
                    "tool exchange that ends",
                    exchanged_bytes,
                    max_bytes,
                )?;
                exchange.push(Exchanged::Returned {
                    call_id: call_id.to_owned(),
                    content,
                });
            }
            "function" => {
                return Err(ApiError::unsupported(
                    &param,
                    format!(
                        "`{param}` is a `function` result, OpenAI's old form: send a `tool` message."
                    ),
                ));
            }
            other => {
                return Err(ApiError::invalid(
                    &param,
                    format!(
                        "`{param}` has role {other:?}: chorus takes system, developer, user, assistant and tool messages."
                    ),
                ));
            }
        }
        if i == last && !matches!(role, "user" | "tool") {
            return Err(ApiError::invalid(
                &param,
                "The last message must be the user's (the question the pipeline answers), or the results of the tool calls made since.",
            ));
        }
    }
    if asked.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "No user message asks a question: the pipeline answers the last user message, with the tool results after it.",
        ));
    }
    let system = system.join("\n\n");
    if system.len() > max_bytes {
        return Err(ApiError::invalid(
            "messages",
            format!(
                "The system messages are {} bytes, over the limit of {max_bytes} (limits.max_prompt_bytes).",
                system.len()
            ),
        ));
    }
    turns.reverse();
    Ok(Read {
        system,
        turns,
        question: asked.join("\n\n"),
        sources,
        exchange,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(body: Value) -> Result<Asked, ApiError> {
        let Value::Object(body) = body else { panic!() };
        chat(body, "ask".into(), &Default::default(), 1 << 20)
    }

    #[test]
    fn earlier_turns_become_the_conversation_and_the_last_user_message_the_question() {
        let asked = read(json!({
            "model": "ask",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is 2+2?"},
                {"role": "assistant", "content": "4"},
                {"role": "user", "content": [{"type": "text", "text": "And 3+3?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}
            ],
            "temperature": 0.2,
            "user": "u-1"
        }))
        .unwrap();
        assert_eq!(asked.question.text, "And 3+3?");
        assert_eq!(asked.sources.len(), 1);
        assert_eq!(asked.not_applied, ["temperature"]);
        assert!(asked.question.notes[0].contains("user \"u-1\""));
        let messages = asked.conversation.unwrap().messages();
        let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["Be brief.", "What is 2+2?", "4"]);
    }

    #[test]
    fn a_turn_over_the_prompt_limit_is_refused_naming_it() {
        let big = "x".repeat(2 << 20);
        for (messages, param) in [
            (
                json!([{"role": "user", "content": "q"}, {"role": "assistant", "content": big},
                    {"role": "user", "content": "and?"}]),
                "messages[1]",
            ),
            (
                json!([{"role": "user", "content": big}, {"role": "assistant", "content": "a"},
                    {"role": "user", "content": "and?"}]),
                "messages[0]",
            ),
        ] {
            let error = read(json!({"model": "ask", "messages": messages})).unwrap_err();
            assert_eq!(error.status, 400);
            assert_eq!(error.param.as_deref(), Some(param));
            assert!(
                error.message.contains("limits.max_prompt_bytes"),
                "{}",
                error.message
            );
        }
        let fits = "x".repeat(1 << 19);
        let three = json!([{"role": "user", "content": "q"}, {"role": "assistant", "content": fits},
            {"role": "user", "content": "q"}, {"role": "assistant", "content": fits},
            {"role": "user", "content": "q"}, {"role": "assistant", "content": fits},
            {"role": "user", "content": "and?"}]);
        let asked = read(json!({"model": "ask", "messages": three})).unwrap();
        let kept: usize = asked
            .conversation
            .unwrap()
            .messages()
            .iter()
            .map(|m| m.content.len())
            .sum();
        assert!(
            kept <= 1 << 20,
            "the turns together are held to the limit: {kept}"
        );
    }

    #[test]
    fn what_chorus_cannot_do_is_refused_by_name() {
        let user = json!([{"role": "user", "content": "q"}]);
        for (key, value) in [
            ("n", json!(2)),
            ("logprobs", json!(true)),
            ("tool_choice", json!("required")),
            ("functions", json!([{"name": "f"}])),
        ] {
            let mut body = json!({"model": "ask", "messages": user});
            body[key] = value;
            let error = read(body).unwrap_err();
            assert_eq!(error.status, 400, "{key}");
            assert_eq!(error.param.as_deref(), Some(key));
        }
        assert!(read(json!({"model": "ask", "messages": user, "n": 1, "tools": []})).is_ok());
        let last_assistant =
            read(json!({"model": "ask", "messages": [{"role": "assistant", "content": "a"}]}));
        assert!(last_assistant.is_err());
        let http = read(
            json!({"model": "ask", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}]}]}),
        );
        assert!(http.unwrap_err().message.contains("https://"));
    }
}
