//! The record of a run: what the MCP tool returns as structured content,
//! what `chorus ask --json` prints, what the run store keeps. A leaf: plain
//! data that the pipeline produces and every surface reads, depending on
//! nothing else in chorus.

use serde::{Serialize, Serializer};
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
    /// `ok`, `failed`, `cut` (stopped by the fan-out policy: the quorum
    /// had answered, or the time kept for the merge began) or `skipped`
    /// (never sent: its worst-case cost would cross `max_cost_usd`).
    pub status: String,
    pub latency_ms: u32,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u32>,
    /// Of the completion tokens, those spent reasoning, when reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
    /// USD: the provider's figure, or an estimate (`cost_estimated`).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "usd_option")]
    pub cost_usd: Option<f64>,
    /// True when `cost_usd` is chorus's estimate from prices and tokens,
    /// not the provider's figure.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<CallError>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallError {
    /// timeout, rate-limited, http-status, connection, malformed-response,
    /// response-too-large, cancelled, over-budget, unknown-model,
    /// missing-api-key, cut, token-limit
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
    /// Sum of the costs that are known, in USD (to 1e-9).
    #[serde(serialize_with = "usd")]
    pub cost_usd: f64,
    /// True when part of `cost_usd` is chorus's estimate.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
}

impl Totals {
    pub fn of(calls: &[CallRecord]) -> Self {
        calls.iter().fold(Self::default(), |mut t, c| {
            t.prompt_tokens += u64::from(c.prompt_tokens.unwrap_or(0));
            t.completion_tokens += u64::from(c.completion_tokens.unwrap_or(0));
            t.cost_usd += c.cost_usd.unwrap_or(0.0);
            t.cost_estimated |= c.cost_estimated && c.cost_usd.is_some();
            t
        })
    }
}

/// USD rounded to 1e-9: exact enough to add up, free of float noise
/// (`0.0006000000000000001` is `0.0006`).
pub fn round_usd(usd: f64) -> f64 {
    if usd.is_finite() {
        (usd * 1e9).round() / 1e9
    } else {
        0.0
    }
}

/// USD for people: cents for dollars, more digits for fractions of a cent,
/// never float noise. `0.0006` → `$0.0006`, `1.5` → `$1.50`.
pub fn show_usd(usd: f64) -> String {
    let usd = round_usd(usd);
    if usd == 0.0 {
        return "$0".to_owned();
    }
    if usd.abs() >= 1.0 {
        return format!("${usd:.2}");
    }
    let text = format!("{usd:.6}");
    let trimmed = text.trim_end_matches('0');
    let digits = trimmed.split('.').nth(1).map_or(0, str::len);
    if digits < 2 {
        format!("${usd:.2}")
    } else {
        format!("${trimmed}")
    }
}

fn usd<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(round_usd(*value))
}

fn usd_option<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => serializer.serialize_some(&round_usd(*v)),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_prints_without_float_noise() {
        let noisy = 0.0002 + 0.0004;
        assert_ne!(noisy, 0.0006, "the float noise this guards against");
        assert_eq!(round_usd(noisy), 0.0006);
        assert_eq!(serde_json::to_string(&round_usd(noisy)).unwrap(), "0.0006");
        assert_eq!(show_usd(noisy), "$0.0006");
        assert_eq!(show_usd(1.5), "$1.50");
        assert_eq!(show_usd(0.1), "$0.10");
        assert_eq!(show_usd(0.123456789), "$0.123457");
        assert_eq!(show_usd(0.0), "$0");
    }
}
