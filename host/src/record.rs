//! The record of a run: what the MCP tool returns as structured content,
//! what `chorus ask --json` prints, what the run store keeps. A leaf: plain
//! data that the pipeline produces and every surface reads, depending on
//! nothing else in chorus.

use serde::Serialize;
use serde_json::Value;

/// What kind of answer a run produced. Never dress one kind up as another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerKind {
    /// Several answers merged by a model.
    Synthesis,
    /// The only answer that survived; not a synthesis.
    Single,
    /// The majority among several answers.
    Vote,
    /// One answer returned verbatim, chosen by a judge or a ranking.
    Pick,
    /// The answers side by side: merging them failed.
    Unmerged,
    /// No answer: every model failed.
    None,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
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
    /// The call's number in the run, from 0, in the order calls were sent.
    pub id: u32,
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

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(status) => write!(f, "{} (HTTP {status}): {}", self.kind, self.message),
            None => write!(f, "{}: {}", self.kind, self.message),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Sum of the costs that are known.
    pub cost_usd: f64,
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
