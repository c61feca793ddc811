//! A finished run in the Messages API's shape — a `message` whose content
//! is the answer's text, or the panel's call as `tool_use` blocks — and
//! its stream of named events: `message_start`, `ping` while the panel
//! works, a text block's `content_block_start` / `text_delta`s /
//! `content_block_stop` as the merge is written, each `tool_use` block
//! with its `input_json_delta`, then `message_delta` (the stop reason,
//! the usage) and `message_stop`; a failure once the stream has begun is
//! an `error` event.

use serde_json::{Value, json};

use super::errors::anthropic_type;
use crate::events::live::Streamed;
use crate::openai::answer;
use crate::openai::errors::ApiError;
use crate::openai::stream::Frames;
use crate::record::{AnswerKind, RunRecord};

/// The message id of a run.
pub fn id(run_id: &str) -> String {
    format!("msg_{run_id}")
}

fn stop_reason(record: &RunRecord) -> &'static str {
    match answer::finish_reason(record) {
        "tool_calls" => "tool_use",
        "length" => "max_tokens",
        _ => "end_turn",
    }
}

/// The answer's content blocks: its text, or its calls as `tool_use`.
fn content(record: &RunRecord) -> Vec<Value> {
    if record.kind == AnswerKind::ToolCall {
        return crate::pipeline::tool_calls::chosen(record)
            .iter()
            .map(|call| {
                let input: Value =
                    serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
            })
            .collect();
    }
    vec![json!({"type": "text", "text": record.answer})]
}

fn usage(record: &RunRecord) -> Value {
    json!({
        "input_tokens": record.usage.prompt_tokens,
        "output_tokens": record.usage.completion_tokens,
    })
}

/// The whole `message` of a run.
pub fn message(record: &RunRecord, not_applied: &[String]) -> Value {
    json!({
        "id": id(&record.run_id),
        "type": "message",
        "role": "assistant",
        "model": record.pipeline,
        "content": content(record),
        "stop_reason": stop_reason(record),
        "stop_sequence": null,
        "usage": usage(record),
        "chorus": answer::extension(record, not_applied),
    })
}

/// The Messages API's named stream events.
pub struct Events {
    model: String,
    not_applied: Vec<String>,
    /// A text block is open at index 0.
    text_open: bool,
}

impl Events {
    pub fn new(model: String, not_applied: Vec<String>) -> Self {
        Self {
            model,
            not_applied,
            text_open: false,
        }
    }

    /// The request's parameters taken but not applied.
    pub fn not_applied(&self) -> &[String] {
        &self.not_applied
    }

    fn open_text(&mut self) -> Vec<Value> {
        if self.text_open {
            return Vec::new();
        }
        self.text_open = true;
        vec![json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}})]
    }
}

impl Frames for Events {
    fn opening(&mut self, run_id: &str) -> Vec<Value> {
        vec![json!({"type": "message_start", "message": {
            "id": id(run_id),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }})]
    }

    /// Progress keeps the stream alive as a `ping`: a Messages client
    /// shows no progress line, and thinking blocks need a signature that
    /// only Anthropic can make.
    fn progress(&mut self, _: &str) -> Vec<Value> {
        vec![json!({"type": "ping"})]
    }

    fn text(&mut self, text: &str) -> Vec<Value> {
        let mut events = self.open_text();
        events.push(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}));
        events
    }

    fn answer(&mut self, record: &RunRecord, rest: &str, streamed: Streamed) -> Vec<Value> {
        let mut events = Vec::new();
        if record.kind == AnswerKind::ToolCall {
            for (index, block) in content(record).into_iter().enumerate() {
                let input = block["input"].to_string();
                let mut start = block;
                start["input"] = json!({});
                events.extend([
                    json!({"type": "content_block_start", "index": index, "content_block": start}),
                    json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": input}}),
                    json!({"type": "content_block_stop", "index": index}),
                ]);
            }
        } else {
            if !rest.is_empty() || streamed == Streamed::Whole {
                events.extend(self.text(rest));
            }
            events.extend(self.open_text());
            events.push(json!({"type": "content_block_stop", "index": 0}));
        }
        let mut chorus = answer::extension(record, &self.not_applied);
        chorus["streamed"] = json!(streamed.as_str());
        events.extend([
            json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(record), "stop_sequence": null},
                "usage": usage(record),
                "chorus": chorus}),
            json!({"type": "message_stop"}),
        ]);
        events
    }

    fn error(&mut self, error: &ApiError) -> Vec<Value> {
        vec![json!({"type": "error", "error": {
            "type": anthropic_type(error.status),
            "message": error.message,
        }})]
    }

    fn done_marker(&self) -> bool {
        false
    }

    fn name(&self, event: &Value) -> Option<String> {
        event["type"].as_str().map(str::to_owned)
    }
}
