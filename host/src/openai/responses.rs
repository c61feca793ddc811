//! `POST /v1/responses`, the Responses API, for the clients that speak
//! only it (Codex CLI's custom providers, the Agents SDK's default model):
//! its `input` and `instructions` are read as the chat messages they stand
//! for (text, images and files; see `request`; `function_call` and
//! `function_call_output` items as tool calls and results, `tools` as
//! chat tools), run the same way, and answered as a `response` object —
//! a message, or the panel's `function_call`s — or its stream of named
//! events.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::errors::ApiError;
use super::stream::Frames;
use super::{Shared, answer, request};
use crate::client::Client;
use crate::events::live::Streamed;
use crate::record::RunRecord;

/// Fields of a Responses request read here (beside `model`); the rest go
/// through as chat fields, or are listed as not applied.
const RENAMED: [(&str, &str); 1] = [("max_output_tokens", "max_tokens")];

pub(super) async fn create(
    State(shared): State<Arc<Shared>>,
    Extension(client): Extension<Arc<Client>>,
    request: Request,
) -> Response {
    super::answered(
        &shared.chorus,
        client,
        &shared.parses,
        request,
        |body, pipeline, declared, max| {
            request::chat(as_chat(body)?, pipeline, &declared.options, max)
        },
        |asked| Events::new(asked.pipeline.clone(), asked.not_applied.clone()),
        |mut frames, record| {
            frames.id = format!("resp_{}", record.run_id);
            frames.response(Some(record), "completed")
        },
    )
    .await
}

/// A Responses request as the chat completion request it stands for.
fn as_chat(mut body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    if body
        .get("previous_response_id")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::unsupported(
            "previous_response_id",
            "chorus keeps no Responses state: send the whole conversation in `input`.",
        ));
    }
    let mut messages = Vec::new();
    match body.remove("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(_) => {
            return Err(ApiError::invalid(
                "instructions",
                "`instructions` must be a string.",
            ));
        }
    }
    match body.remove("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (i, item) in items.into_iter().enumerate() {
                let param = format!("input[{i}]");
                match item["type"].as_str() {
                    Some("function_call") => called(&mut messages, &item, &param)?,
                    Some("function_call_output") => {
                        let output = match &item["output"] {
                            Value::String(text) => Value::String(text.clone()),
                            Value::Array(parts) => Value::Array(parts.clone()),
                            _ => {
                                return Err(ApiError::invalid(
                                    &param,
                                    format!(
                                        "`{param}.output` must be the tool's output as a string."
                                    ),
                                ));
                            }
                        };
                        messages.push(json!({"role": "tool", "tool_call_id": item["call_id"], "content": output}));
                    }
                    _ => messages.push(message(item, &param)?),
                }
            }
        }
        _ => {
            return Err(ApiError::invalid(
                "input",
                "`input` must be a string or a list of messages.",
            ));
        }
    }
    if let Some(Value::Array(tools)) = body.get_mut("tools") {
        for tool in tools.iter_mut() {
            if tool.get("function").is_none() && tool["type"] == "function" {
                let mut function = tool.clone();
                if let Value::Object(function) = &mut function {
                    function.remove("type");
                }
                *tool = json!({"type": "function", "function": function});
            }
        }
    }
    for (from, to) in RENAMED {
        if let Some(value) = body.remove(from) {
            body.insert(to.to_owned(), value);
        }
    }
    if let Some(format) = body.remove("text").and_then(|t| t.get("format").cloned()) {
        body.insert(
            "response_format".into(),
            super::format::from_responses(format),
        );
    }
    // Responses-only fields with nothing to do here.
    for key in [
        "store",
        "include",
        "truncation",
        "reasoning",
        "background",
        "service_tier",
        "prompt_cache_key",
    ] {
        if body.get(key).is_some_and(|v| {
            v.is_null() || *v == Value::Bool(false) || v.as_array().is_some_and(Vec::is_empty)
        }) {
            body.remove(key);
        }
    }
    body.insert("messages".into(), Value::Array(messages));
    Ok(body)
}

/// A `function_call` input item: a call the caller's model made, joined
/// to the assistant message of the calls just before it.
fn called(messages: &mut Vec<Value>, item: &Value, param: &str) -> Result<(), ApiError> {
    let (Some(call_id), Some(name)) = (item["call_id"].as_str(), item["name"].as_str()) else {
        return Err(ApiError::invalid(
            param,
            format!("`{param}` is a function call: it needs its `call_id` and `name`."),
        ));
    };
    let arguments = match &item["arguments"] {
        Value::String(text) => text.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    };
    let call = json!({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}});
    match messages.last_mut() {
        Some(last) if last["role"] == "assistant" && last["tool_calls"].is_array() => {
            if let Some(calls) = last["tool_calls"].as_array_mut() {
                calls.push(call);
            }
        }
        _ => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
    }
    Ok(())
}

/// One input item as a chat message.
fn message(item: Value, param: &str) -> Result<Value, ApiError> {
    let kind = item["type"].as_str().unwrap_or("message");
    if kind != "message" {
        return Err(ApiError::unsupported(
            param,
            format!(
                "`{param}` is a {kind:?} item: chorus takes messages, function calls and their outputs (it keeps no reasoning items)."
            ),
        ));
    }
    let role = item["role"].as_str().unwrap_or("user");
    let content = match &item["content"] {
        Value::String(text) => Value::String(text.clone()),
        Value::Array(parts) => {
            let mut converted = Vec::new();
            for (j, part) in parts.iter().enumerate() {
                let at = format!("{param}.content[{j}]");
                converted.push(match part["type"].as_str() {
                    Some("input_text" | "output_text" | "text") => {
                        json!({"type": "text", "text": part["text"]})
                    }
                    Some("refusal") => json!({"type": "text", "text": part["refusal"]}),
                    Some("input_image") => {
                        if part.get("file_id").is_some_and(|v| !v.is_null()) {
                            return Err(ApiError::unsupported(&at, format!("`{at}.file_id`: chorus has no Files API; send `image_url`.")));
                        }
                        json!({"type": "image_url", "image_url": {"url": part["image_url"]}})
                    }
                    Some("input_file") => json!({"type": "file", "file": {
                        "file_data": part["file_data"], "filename": part["filename"], "file_id": part["file_id"]}}),
                    other => {
                        return Err(ApiError::invalid(
                            &at,
                            format!("`{at}` is of type {other:?}: chorus takes input_text, input_image and input_file."),
                        ));
                    }
                });
            }
            Value::Array(converted)
        }
        _ => {
            return Err(ApiError::invalid(
                param,
                format!("`{param}.content` must be a string or a list of parts."),
            ));
        }
    };
    Ok(json!({"role": role, "content": content}))
}

/// The Responses API's objects and named stream events.
struct Events {
    id: String,
    model: String,
    created: u64,
    not_applied: Vec<String>,
    sequence: u64,
    /// The message item was announced (`open_message`).
    opened: bool,
}

impl Events {
    fn new(model: String, not_applied: Vec<String>) -> Self {
        Self {
            id: String::new(),
            model,
            created: answer::now(),
            not_applied,
            sequence: 0,
            opened: false,
        }
    }

    /// The message item and its text part, announced once, before the
    /// first text.
    fn open_message(&mut self) -> Vec<Value> {
        if self.opened {
            return Vec::new();
        }
        self.opened = true;
        let id = self.message_id();
        let empty = self.item("", "in_progress");
        let part = json!({"type": "output_text", "text": "", "annotations": []});
        vec![
            self.event(
                "response.output_item.added",
                json!({"output_index": 0, "item": empty}),
            ),
            self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": 0, "content_index": 0, "part": part}),
            ),
        ]
    }

    fn message_id(&self) -> String {
        format!("msg_{}", self.id.trim_start_matches("resp_"))
    }

    fn item(&self, text: &str, status: &str) -> Value {
        json!({
            "type": "message",
            "id": self.message_id(),
            "status": status,
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    }

    /// The answer's tool calls as `function_call` output items (none when
    /// the answer is text).
    fn calls(&self, record: &RunRecord, status: &str) -> Vec<Value> {
        if record.kind != crate::record::AnswerKind::ToolCall {
            return Vec::new();
        }
        let run = self.id.trim_start_matches("resp_");
        crate::pipeline::tool_calls::chosen(record)
            .iter()
            .enumerate()
            .map(|(i, call)| {
                json!({
                    "type": "function_call",
                    "id": format!("fc_{run}_{i}"),
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": status,
                })
            })
            .collect()
    }

    /// The `response` object, with `record`'s answer once there is one.
    fn response(&self, record: Option<&RunRecord>, status: &str) -> Value {
        let mut response = json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": [],
            "parallel_tool_calls": false,
            "tool_choice": "none",
            "tools": [],
            "error": null,
            "incomplete_details": null,
            "instructions": null,
            "metadata": {},
            "usage": null,
        });
        if let Some(record) = record {
            let calls = self.calls(record, "completed");
            if calls.is_empty() {
                response["output"] = json!([self.item(&record.answer, "completed")]);
                response["output_text"] = json!(record.answer);
            } else {
                response["output"] = Value::Array(calls);
            }
            let usage = &record.usage;
            response["usage"] = json!({
                "input_tokens": usage.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                "cost": usage.cost_usd,
            });
            response["chorus"] = answer::extension(record, &self.not_applied);
        }
        response
    }

    fn event(&mut self, kind: &str, mut fields: Value) -> Value {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        fields
    }
}

impl Frames for Events {
    fn opening(&mut self, run_id: &str) -> Vec<Value> {
        self.id = format!("resp_{run_id}");
        let response = self.response(None, "in_progress");
        vec![
            self.event("response.created", json!({"response": response.clone()})),
            self.event("response.in_progress", json!({"response": response})),
        ]
    }

    /// Progress keeps the stream alive as `response.in_progress`, which
    /// every client takes; its words are in the object's `chorus`.
    fn progress(&mut self, text: &str) -> Vec<Value> {
        let mut response = self.response(None, "in_progress");
        response["chorus"] = json!({"progress": text});
        vec![self.event("response.in_progress", json!({"response": response}))]
    }

    fn text(&mut self, text: &str) -> Vec<Value> {
        let mut events = self.open_message();
        let id = self.message_id();
        events.push(self.event("response.output_text.delta", json!({"item_id": id, "output_index": 0, "content_index": 0, "delta": text, "logprobs": []})));
        events
    }

    /// The deltas carry what the client was sent; the `done` events and
    /// the completed response carry the answer itself.
    fn answer(&mut self, record: &RunRecord, rest: &str, streamed: Streamed) -> Vec<Value> {
        let calls = self.calls(record, "completed");
        if !calls.is_empty() {
            let mut events = Vec::new();
            for (index, call) in calls.into_iter().enumerate() {
                let mut added = call.clone();
                added["status"] = json!("in_progress");
                added["arguments"] = json!("");
                let id = call["id"].clone();
                let arguments = call["arguments"].clone();
                events.extend([
                    self.event(
                        "response.output_item.added",
                        json!({"output_index": index, "item": added}),
                    ),
                    self.event(
                        "response.function_call_arguments.delta",
                        json!({"item_id": id, "output_index": index, "delta": arguments}),
                    ),
                    self.event(
                        "response.function_call_arguments.done",
                        json!({"item_id": id, "output_index": index, "arguments": arguments}),
                    ),
                    self.event(
                        "response.output_item.done",
                        json!({"output_index": index, "item": call}),
                    ),
                ]);
            }
            let mut completed = self.response(Some(record), "completed");
            completed["chorus"]["streamed"] = json!(streamed.as_str());
            events.push(self.event("response.completed", json!({"response": completed})));
            return events;
        }
        let mut events = if rest.is_empty() {
            self.open_message()
        } else {
            self.text(rest)
        };
        let id = self.message_id();
        let text = record.answer.clone();
        let done_part = json!({"type": "output_text", "text": text, "annotations": []});
        let done_item = self.item(&text, "completed");
        let mut completed = self.response(Some(record), "completed");
        completed["chorus"]["streamed"] = json!(streamed.as_str());
        events.extend([
            self.event("response.output_text.done", json!({"item_id": id, "output_index": 0, "content_index": 0, "text": text, "logprobs": []})),
            self.event("response.content_part.done", json!({"item_id": id, "output_index": 0, "content_index": 0, "part": done_part})),
            self.event("response.output_item.done", json!({"output_index": 0, "item": done_item})),
            self.event("response.completed", json!({"response": completed})),
        ]);
        events
    }

    fn error(&mut self, error: &ApiError) -> Vec<Value> {
        let body = error.body();
        let mut response = self.response(None, "failed");
        response["error"] =
            json!({"code": error.code.unwrap_or(error.kind), "message": error.message});
        vec![
            self.event("error", json!({"code": error.code, "message": body["error"]["message"], "param": error.param})),
            self.event("response.failed", json!({"response": response})),
        ]
    }

    fn done_marker(&self) -> bool {
        false
    }

    fn name(&self, event: &Value) -> Option<String> {
        event["type"].as_str().map(str::to_owned)
    }
}
