//! A finished run as OpenAI's `chat.completion`: the answer is the
//! message's content, alone; the usage sums every call of the run (with
//! OpenRouter's `cost`, in USD); what kind of answer it is, and what it
//! rests on, goes in a `chorus` object beside it, never into the content.

use serde_json::{Value, json};

use crate::record::{AnswerKind, RunRecord};

/// The response id of a run: `chatcmpl-<run id>`.
pub fn id(record: &RunRecord) -> String {
    format!("chatcmpl-{}", record.run_id)
}

/// Seconds since the epoch, for `created`.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The run's tokens and cost, summed over every call.
pub fn usage(record: &RunRecord) -> Value {
    let usage = &record.usage;
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "cost": usage.cost_usd,
    })
}

/// How the run ended: `tool_calls` when its answer is a call, `stop`, or
/// `length` when the answering call was cut at its token limit.
pub fn finish_reason(record: &RunRecord) -> &'static str {
    if record.kind == AnswerKind::ToolCall {
        return "tool_calls";
    }
    let cut = record
        .calls
        .iter()
        .rev()
        .find(|call| call.status == "ok")
        .and_then(|call| call.error.as_ref())
        .is_some_and(|e| e.kind == "token-limit");
    if cut { "length" } else { "stop" }
}

/// What kind of answer this is and what it rests on: chorus's own, beside
/// the answer.
pub fn extension(record: &RunRecord, not_applied: &[String]) -> Value {
    let panel = record.calls.iter().filter(|c| c.stage == "fan-out");
    let (mut answered, mut asked) = (0, 0);
    for call in panel {
        asked += 1;
        answered += usize::from(call.status == "ok");
    }
    let mut extension = json!({
        "run_id": record.run_id,
        "kind": record.kind.as_str(),
        "summary": record.summary,
        "panel": {"answered": answered, "asked": asked},
        "cost_usd": record.usage.cost_usd,
        "cost_estimated": record.usage.cost_estimated,
        "elapsed_ms": record.elapsed_ms,
    });
    if let Some(served) = &record.experiment {
        extension["experiment"] = json!({"name": served.experiment, "variant": served.variant});
    }
    if !record.notes.is_empty() {
        extension["notes"] = json!(record.notes);
    }
    if !not_applied.is_empty() {
        extension["not_applied"] = json!(not_applied);
    }
    if record.kind == AnswerKind::None {
        extension["failures"] = json!(
            record
                .calls
                .iter()
                .filter_map(|c| c
                    .error
                    .as_ref()
                    .map(|e| json!({"model": c.model, "error": e.to_string()})))
                .collect::<Vec<_>>()
        );
    }
    extension
}

/// The answer's message: its text, or the tool calls it is.
fn message(record: &RunRecord) -> Value {
    let calls = crate::pipeline::tool_calls::chosen(record);
    if record.kind == AnswerKind::ToolCall && !calls.is_empty() {
        let calls: Vec<Value> = calls.iter().map(|c| c.wire()).collect();
        return json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": calls});
    }
    json!({"role": "assistant", "content": record.answer, "refusal": null})
}

/// The answer's tool calls as a stream's delta (each with its `index`),
/// `None` when the answer is text.
pub fn tool_calls_delta(record: &RunRecord) -> Option<Value> {
    if record.kind != AnswerKind::ToolCall {
        return None;
    }
    let calls = crate::pipeline::tool_calls::chosen(record);
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let mut call = call.wire();
            call["index"] = json!(index);
            call
        })
        .collect();
    Some(json!({"tool_calls": calls}))
}

/// The whole `chat.completion` of a run.
pub fn completion(record: &RunRecord, not_applied: &[String]) -> Value {
    json!({
        "id": id(record),
        "object": "chat.completion",
        "created": now(),
        "model": record.pipeline,
        "system_fingerprint": null,
        "choices": [{
            "index": 0,
            "message": message(record),
            "logprobs": null,
            "finish_reason": finish_reason(record),
        }],
        "usage": usage(record),
        "chorus": extension(record, not_applied),
    })
}
