//! What both backends read the same way: a run's status as its row, the
//! clock and the system say; JSON kept as text; a listing's prompt line;
//! `LIKE` patterns.

use serde_json::Value;

use crate::record::RunStatus;

/// The columns of `runs` a run is read from, in the order both backends'
/// row readers take them.
pub const RUN_COLUMNS: &str =
    "seq, id, pipeline, status, deadline_at, started_at, finished_at, prompt,
    options, plan, follow_up_of, resynthesis_of, kind, summary, answer, notes, details, error,
    elapsed_ms, prompt_tokens, completion_tokens, cost_usd, owner, cost_estimated, client,
    attachments";

/// Characters of the prompt a listing shows.
pub const PROMPT_LINE: usize = 72;

/// A run's status as its row, the clock and the system say: a running run
/// whose deadline has passed, or whose process is gone, was interrupted.
pub fn status(stored: &str, deadline_at: i64, owner: Option<&str>, now: i64) -> RunStatus {
    match RunStatus::parse(stored) {
        Some(RunStatus::Running)
            if deadline_at <= now || owner.is_some_and(super::owner::is_gone) =>
        {
            RunStatus::Interrupted
        }
        Some(status) => status,
        None => RunStatus::Failed,
    }
}

/// A run's attachments as kept (JSON text); none when missing.
pub fn attachments(text: Option<String>) -> Vec<crate::attach::Info> {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// JSON kept as text; nothing when missing or unreadable.
pub fn json(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

/// `text` for a `LIKE` pattern, with a backslash as its escape character.
pub fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}
