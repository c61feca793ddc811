//! The tool calls a panel proposed (contract 0.6): a completion's calls,
//! a proposal as a ballot (equal proposals — the same functions with
//! arguments equal as JSON, keys in any order — are one ballot), and an
//! answer that makes a proposal's calls.

use serde_json::Value;

use crate::wit::types::{Answer, AnswerKind, Completion, ToolCall};

/// The calls a completion proposed; empty for a text answer or a failure.
pub fn of(completion: &Completion) -> &[ToolCall] {
    match &completion.outcome {
        Ok(reply) => &reply.tool_calls,
        Err(_) => &[],
    }
}

/// A proposal as a ballot: its functions and their arguments as canonical
/// JSON, in order, without the ids a model made up. Never equal to the
/// normalised text of an answer (`crate::normalise`).
pub fn ballot(calls: &[ToolCall]) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            let arguments = serde_json::from_str::<Value>(c.arguments.trim())
                .map(crate::reply::canonical)
                .unwrap_or_else(|_| Value::String(c.arguments.trim().to_owned()));
            serde_json::json!({"call": c.name, "arguments": arguments})
        })
        .collect();
    format!("tool calls: {}", Value::Array(calls))
}

/// The answer that makes `calls`, resting on `sources`; `why` says why.
pub fn answer(
    calls: &[ToolCall],
    why: String,
    sources: Vec<u32>,
    notes: Vec<String>,
    details: String,
) -> Answer {
    Answer {
        kind: AnswerKind::ToolCall,
        text: why,
        sources,
        notes,
        details,
        tool_calls: calls.to_vec(),
    }
}
