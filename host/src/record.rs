//! The record of a run: what the MCP tool returns as structured content,
//! what `chorus ask --json` prints, what the run store keeps. A leaf: plain
//! data that the pipeline produces and every surface reads, depending on
//! nothing else in chorus.

use std::sync::Arc;

pub mod sources;
pub mod spent;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// Which experiment a run served and by which of its variants: the
/// pipeline its caller asked for (`experiment`) and the one that ran
/// (`variant`), see `config::Experiment`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assignment {
    #[serde(rename = "name")]
    pub experiment: String,
    pub variant: String,
    /// What ties the run to its conversation's earlier turns (a hash),
    /// so a later turn is served by the same variant.
    #[serde(skip)]
    pub conversation: Option<String>,
}

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
    /// A tool call for the caller to make, agreed by the panel (see
    /// `pipeline::tool_calls`).
    ToolCall,
}

impl AnswerKind {
    pub const ALL: [AnswerKind; 7] = [
        Self::Synthesis,
        Self::Single,
        Self::Vote,
        Self::Pick,
        Self::Unmerged,
        Self::None,
        Self::ToolCall,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Synthesis => "synthesis",
            Self::Single => "single",
            Self::Vote => "vote",
            Self::Pick => "pick",
            Self::Unmerged => "unmerged",
            Self::ToolCall => "tool-call",
            Self::None => "none",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }
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
    /// The run this one follows up: its models saw that conversation first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_up_of: Option<String>,
    /// The run whose answers this one merged again, without asking the panel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resynthesis_of: Option<String>,
    /// The web sources the answer's calls cited, merged and numbered (see
    /// `sources`); the text answer ends with them as links.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<sources::Source>,
    /// What the question came with: names, types, sizes, hashes (see
    /// docs/attachments.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::attach::Info>,
    /// The experiment this run served, when its pipeline is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<Assignment>,
}

#[derive(Debug, Clone, Default, Serialize)]
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
    /// Of the latency, how long the call waited for its provider's permits
    /// (`max_concurrency`); absent when it never had to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u32>,
    /// Time to first token: from the answering attempt's request being
    /// sent to its first token (streamed) or the first bytes of its body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u32>,
    /// Of the completion tokens, those spent reasoning, when reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
    /// Of the prompt tokens, those read from the provider's prompt cache
    /// (billed at its cache-read price), when reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u32>,
    /// Of the prompt tokens, those written to the prompt cache, when
    /// reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u32>,
    /// USD: the provider's figure, or an estimate (`cost_estimated`).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "usd_option")]
    pub cost_usd: Option<f64>,
    /// True when `cost_usd` is chorus's estimate from prices and tokens,
    /// not the provider's figure.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    /// True when the token counts are chorus's estimate from the text's
    /// length: the provider reported none (see `record::spent`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tokens_estimated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<CallError>,
    /// The model's answer, when it gave one. Not in the tool result (it
    /// would repeat every answer to the client); kept by the run store and
    /// shown with the run (see `StoredCall`).
    #[serde(skip_serializing)]
    pub reply: Option<Arc<String>>,
    /// Set when this answer was not asked for again but taken from an
    /// earlier run (re-synthesis). Such a call costs this run nothing: its
    /// tokens and cost stay with the run that paid for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<CallRef>,
    /// The response format the provider was asked for (`json-schema` or
    /// `json-object`), when the request named one and the model took it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format_sent: Option<String>,
    /// The models that failed for good before this one filled the seat,
    /// each as `model: failure` (see fallback models).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_from: Vec<String>,
    /// The answer's `url_citation` annotations (web search): each source
    /// and the span of the answer citing it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<crate::llm::Citation>,
    /// Set when this answer came from the response cache (see `respcache`):
    /// the call of an earlier run that answered the same request. It cost
    /// this run nothing and took no time; its tokens are that call's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_from: Option<CallRef>,
}

/// A call of some run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallRef {
    pub run_id: String,
    pub call: u32,
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
    /// In USD (to 1e-9); `null` when some call that may have been billed
    /// has no known cost: then nobody knows what the run cost, and a
    /// budget counts its worst case (see `record::spent`).
    #[serde(serialize_with = "usd_option")]
    pub cost_usd: Option<f64>,
    /// True when part of `cost_usd` is chorus's estimate.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    /// True when some of the token counts are chorus's estimates.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tokens_estimated: bool,
}

impl Totals {
    pub fn of(calls: &[CallRecord]) -> Self {
        // A cached answer's tokens were spent by the run that asked.
        calls
            .iter()
            .filter(|c| c.cached_from.is_none())
            .fold(Self::zero(), |mut t, c| {
                t.prompt_tokens += u64::from(c.prompt_tokens.unwrap_or(0));
                t.completion_tokens += u64::from(c.completion_tokens.unwrap_or(0));
                t.cost_usd = match (t.cost_usd, c.cost_usd) {
                    (Some(sum), Some(usd)) => Some(sum + usd),
                    (sum, None) if !c.cost_unknown() => sum,
                    _ => None,
                };
                t.cost_estimated |= c.cost_estimated && c.cost_usd.is_some();
                t.tokens_estimated |= c.tokens_estimated && c.prompt_tokens.is_some();
                t
            })
    }

    /// Nothing spent: no calls, a cost of exactly $0.
    pub fn zero() -> Self {
        Self {
            cost_usd: Some(0.0),
            ..Self::default()
        }
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

fn usd_option<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => serializer.serialize_some(&round_usd(*v)),
        None => serializer.serialize_none(),
    }
}

/// Where a kept run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Still working, in this process or another.
    Running,
    /// Finished with a result, whatever kind of answer it is.
    Done,
    /// Ended without a result: a plugin failed, or the deadline passed.
    Failed,
    /// Cancelled by its caller.
    Cancelled,
    /// Its process stopped (a crash, a kill) before the run finished; what
    /// it recorded until then is kept.
    Interrupted,
}

impl RunStatus {
    pub const ALL: [RunStatus; 5] = [
        Self::Running,
        Self::Done,
        Self::Failed,
        Self::Cancelled,
        Self::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// A run as chorus keeps it (in the run store, or in memory): what was
/// asked, how, and what came of it so far. A superset of `RunRecord` for a
/// finished run; a running, failed or interrupted run has what it recorded.
#[derive(Debug, Clone, Serialize)]
pub struct StoredRun {
    pub run_id: String,
    pub pipeline: String,
    pub status: RunStatus,
    /// Unix time in milliseconds; RFC 3339 in JSON.
    #[serde(serialize_with = "rfc3339")]
    pub started_at: i64,
    #[serde(
        serialize_with = "rfc3339_optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub finished_at: Option<i64>,
    pub prompt: String,
    /// The options as the plugins saw them, defaults filled in.
    pub options: Value,
    /// The selector's plan, once it was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_up_of: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resynthesis_of: Option<String>,
    /// Who made it (`[[http.clients]]`, or the local user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// What the question came with: names, types, sizes, hashes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::attach::Info>,
    /// The experiment this run served, when its pipeline is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<Assignment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<AnswerKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    pub notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Why the run ended without a result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub usage: Totals,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    pub calls: Vec<StoredCall>,
}

impl StoredRun {
    /// The record its run returned, rebuilt from what the store kept;
    /// `None` for a run that ended without one (failed, or still running).
    pub fn into_record(self) -> Option<RunRecord> {
        let calls: Vec<CallRecord> = self.calls.into_iter().map(|c| c.call).collect();
        Some(RunRecord {
            run_id: self.run_id,
            pipeline: self.pipeline,
            kind: self.kind?,
            summary: self.summary?,
            answer: self.answer.unwrap_or_default(),
            notes: self.notes,
            sources: sources::merged(&calls),
            calls,
            usage: self.usage,
            elapsed_ms: self.elapsed_ms.unwrap_or_default(),
            details: self.details,
            follow_up_of: self.follow_up_of,
            resynthesis_of: self.resynthesis_of,
            attachments: self.attachments.clone(),
            experiment: self.experiment,
        })
    }
}

/// A call as kept: its record (status `running` while it is in flight, or
/// `unfinished` when its run ended first), its answer, and, when asked for,
/// the request as sent.
#[derive(Debug, Clone)]
pub struct StoredCall {
    pub call: CallRecord,
    /// The chat request: label, model, messages, sampling. Never headers.
    pub request: Option<Value>,
}

impl Serialize for StoredCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            call: &'a CallRecord,
            #[serde(skip_serializing_if = "Option::is_none")]
            reply: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            request: Option<&'a Value>,
        }
        Out {
            call: &self.call,
            reply: self.call.reply.as_deref().map(String::as_str),
            request: self.request.as_ref(),
        }
        .serialize(serializer)
    }
}

/// A run in a listing: enough to recognise it.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub pipeline: String,
    pub status: RunStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<AnswerKind>,
    #[serde(serialize_with = "rfc3339")]
    pub started_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The prompt's first line, shortened.
    pub prompt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_up_of: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resynthesis_of: Option<String>,
    /// Who made it (`[[http.clients]]`, or the local user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// The first line of `text`, at most `max` characters (an ellipsis marks a cut).
pub fn first_line(text: &str, max: usize) -> String {
    let line = text.trim_start().lines().next().unwrap_or("").trim_end();
    let more = line.len() < text.trim().len();
    match crate::text::cut_at_chars(line, max) {
        Some(head) => format!("{head}…"),
        None if more => format!("{line} …"),
        None => line.to_owned(),
    }
}

/// Unix milliseconds as RFC 3339 (UTC, millisecond precision).
pub fn format_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

fn rfc3339<S: Serializer>(ms: &i64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_time(*ms))
}

fn rfc3339_optional<S: Serializer>(ms: &Option<i64>, serializer: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => rfc3339(ms, serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests;
