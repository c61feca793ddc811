//! The record of a finished run: what the MCP tool returns as structured
//! content, what `chorus ask --json` prints, what the runs store keeps.

use serde::Serialize;
use serde_json::Value;

use crate::llm::{Completion, Failure};
use crate::plugins::AnswerKind;

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub run_id: String,
    pub pipeline: String,
    /// What kind of answer this is: synthesis, single, vote, pick, unmerged or none.
    pub kind: AnswerKind,
    /// One line: what the answer rests on.
    pub summary: String,
    /// The answer text in full.
    pub answer: String,
    /// What fell back, what was cut, what failed.
    pub notes: Vec<String>,
    /// Every chat completion of the run, in order.
    pub calls: Vec<CallRecord>,
    pub usage: Totals,
    pub elapsed_ms: u64,
    /// Strategy-specific detail (votes, scores, rankings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// `fan-out`, or the plugin that made the call.
    pub stage: String,
    pub label: String,
    pub model: String,
    /// `ok` or `failed`.
    pub status: String,
    pub latency_ms: u32,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<CallError>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallError {
    /// timeout, rate-limited, http-status, connection, malformed-response,
    /// response-too-large, cancelled, over-budget, unknown-model, missing-api-key
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The provider's own message.
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Sum of the costs that are known.
    pub cost_usd: f64,
}

impl CallRecord {
    pub fn new(stage: &str, completion: &Completion) -> Self {
        let (usage, error) = match &completion.outcome {
            Ok(reply) => (reply.usage, None),
            Err(failure) => (None, Some(CallError::from(failure))),
        };
        Self {
            stage: stage.to_owned(),
            label: completion.label.clone(),
            model: completion.model.clone(),
            status: if error.is_none() { "ok" } else { "failed" }.to_owned(),
            latency_ms: completion.latency_ms,
            attempts: completion.attempts,
            prompt_tokens: usage.map(|u| u.prompt_tokens),
            completion_tokens: usage.map(|u| u.completion_tokens),
            cost_usd: usage.and_then(|u| u.cost),
            error,
        }
    }
}

impl From<&Failure> for CallError {
    fn from(f: &Failure) -> Self {
        Self {
            kind: f.kind.as_str().to_owned(),
            status: f.status,
            message: f.message.clone(),
        }
    }
}

impl Totals {
    pub fn of(calls: &[CallRecord]) -> Self {
        calls.iter().fold(Self::default(), |mut t, c| {
            t.prompt_tokens += u64::from(c.prompt_tokens.unwrap_or(0));
            t.completion_tokens += u64::from(c.completion_tokens.unwrap_or(0));
            t.cost_usd += c.cost_usd.unwrap_or(0.0);
            t
        })
    }
}
