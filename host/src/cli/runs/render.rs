//! How `chorus runs` shows runs in a terminal: one run in full (`show`:
//! its prompt, attachments, calls, answer and notes; `to_json` for
//! `--json` and `export`), and the pieces a listing uses —
//! local times, dollars, sizes, the shortest ids that stay apart.

use crate::store::Feedback;
use std::io::Write;

use chrono::{Local, TimeZone};

use crate::record::{RunSummary, StoredRun, format_time};
use crate::store::attachments::Stored;

/// The shortest id prefix that tells the listed runs apart; at least the
/// time part of a uuid v7 (`0196a1b2-c3d4`), which already tells most apart.
pub(super) fn short_id_width(runs: &[RunSummary]) -> usize {
    let mut ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    ids.sort_unstable();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let longest = ids.iter().map(|id| id.len()).max().unwrap_or(0);
    ids.windows(2)
        .map(|pair| common(pair[0], pair[1]) + 1)
        .chain([13])
        .max()
        .unwrap_or(13)
        .min(longest)
}

/// `run` in full; `stored` says what the store holds of each attachment.
pub(super) fn show(
    run: &StoredRun,
    stored: &[Stored],
    feedback: &[Feedback],
    out: &mut impl Write,
) -> std::io::Result<()> {
    let what = match run.kind {
        Some(kind) => format!("{} · {}", run.pipeline, kind.as_str()),
        None => run.pipeline.clone(),
    };
    writeln!(
        out,
        "run       {}  ({what} · {})",
        run.run_id,
        run.status.as_str()
    )?;
    let took = run
        .elapsed_ms
        .map(|ms| format!(" (took {:.2} s)", ms as f64 / 1000.0))
        .unwrap_or_default();
    writeln!(out, "started   {}{took}", local_time(run.started_at, true))?;
    writeln!(
        out,
        "usage     {} · {} prompt + {} completion tokens",
        run.usage
            .cost_usd
            .map_or_else(|| "cost unknown".to_owned(), dollars),
        run.usage.prompt_tokens,
        run.usage.completion_tokens
    )?;
    if let Some(of) = &run.follow_up_of {
        writeln!(out, "follows   {of}")?;
    }
    if let Some(of) = &run.resynthesis_of {
        writeln!(out, "merges    the answers of {of} again")?;
    }
    if let Some(served) = &run.experiment {
        writeln!(
            out,
            "serves    the experiment {} as its variant {}",
            served.experiment, served.variant
        )?;
    }
    if let Some(options) = run.options.as_object().filter(|o| !o.is_empty()) {
        writeln!(
            out,
            "options   {}",
            serde_json::Value::Object(options.clone())
        )?;
    }
    writeln!(out, "\nprompt")?;
    indented(&run.prompt, out)?;
    if !run.attachments.is_empty() {
        writeln!(out, "\nattachments")?;
        for a in &run.attachments {
            let mut size = a
                .url
                .clone()
                .unwrap_or_else(|| crate::text::show_bytes(a.bytes as u64));
            if let Some(shape) = a.shape.describe() {
                size.push_str(&format!(", {shape}"));
            }
            let held = stored
                .iter()
                .find(|s| s.info.id == a.id)
                .map_or_else(|| "not known".to_owned(), |s| s.held.describe());
            writeln!(
                out,
                "  #{} {}  {}  {size}  sha256:{:.12}  bytes {held}",
                a.id, a.name, a.mime, a.sha256
            )?;
        }
    }
    if let Some(summary) = &run.summary {
        writeln!(out, "\nsummary   {summary}")?;
    }
    if !run.calls.is_empty() {
        writeln!(out, "\ncalls")?;
    }
    for stored in &run.calls {
        let call = &stored.call;
        let outcome = match &call.error {
            Some(error) => error.to_string(),
            None => {
                let guessed = if call.tokens_estimated { "~" } else { "" };
                let tokens = call
                    .completion_tokens
                    .map(|t| format!("{guessed}{t} tokens"))
                    .unwrap_or_default();
                let cost = call.cost_usd.map(dollars).unwrap_or_default();
                format!("{tokens}  {cost}{}", prompt_cache(call))
                    .trim()
                    .to_owned()
            }
        };
        let reused = call
            .reused_from
            .as_ref()
            .map(|r| format!("  (reused from {} #{})", r.run_id, r.call))
            .or_else(|| {
                call.cached_from
                    .as_ref()
                    .map(|r| format!("  (cached from {}/{}, cost $0)", r.run_id, r.call))
            })
            .unwrap_or_default();
        writeln!(
            out,
            "  #{:<3} {:<12} {:<32} {:<10} {:>7.2} s  {outcome}{}{reused}",
            call.id,
            call.stage,
            call.model,
            call.status,
            f64::from(call.latency_ms) / 1000.0,
            timing(call)
        )?;
    }
    if !run.notes.is_empty() {
        writeln!(out, "\nnotes")?;
        for note in &run.notes {
            writeln!(out, "  - {note}")?;
        }
    }
    let calls: Vec<crate::record::CallRecord> = run.calls.iter().map(|c| c.call.clone()).collect();
    let sources = crate::record::sources::merged(&calls);
    if !sources.is_empty() {
        writeln!(out, "\nsources")?;
        for s in &sources {
            let title = s
                .title
                .as_deref()
                .map(|t| format!("{t} — "))
                .unwrap_or_default();
            writeln!(
                out,
                "  {}. {title}{} (cited by {})",
                s.number,
                s.url,
                s.cited_by.join(", ")
            )?;
        }
    }
    if !feedback.is_empty() {
        writeln!(out, "\nfeedback")?;
        for f in feedback {
            let comment = f
                .comment
                .as_deref()
                .map(|c| format!("  “{}”", c.replace('\n', " ")))
                .unwrap_or_default();
            writeln!(
                out,
                "  {} = {}  by {} at {}{comment}",
                f.metric,
                f.value,
                f.client,
                local_time(f.at, true)
            )?;
        }
    }
    if let Some(error) = &run.error {
        writeln!(out, "\nerror     {error}")?;
    }
    if let Some(answer) = &run.answer {
        writeln!(out, "\nanswer")?;
        indented(answer, out)?;
    }
    Ok(())
}

/// The run as JSON, with its merged web `sources` (rebuilt from its calls'
/// citations) when it has any, and with each attachment what the store
/// holds of it (`stored`) and its bytes as base64 (`data`) when read.
pub(super) fn to_json(run: &StoredRun, stored: &[Stored], feedback: &[Feedback]) -> String {
    let mut value = serde_json::to_value(run).unwrap_or_default();
    if let Some(list) = value
        .get_mut("attachments")
        .and_then(serde_json::Value::as_array_mut)
    {
        for (entry, s) in list.iter_mut().zip(stored) {
            let Some(entry) = entry.as_object_mut() else {
                continue;
            };
            entry.insert(
                "stored".into(),
                serde_json::to_value(&s.held).unwrap_or_default(),
            );
            if let Some(bytes) = &s.bytes {
                use base64::Engine;
                entry.insert(
                    "data".into(),
                    base64::engine::general_purpose::STANDARD
                        .encode(bytes)
                        .into(),
                );
            }
        }
    }
    let calls: Vec<crate::record::CallRecord> = run.calls.iter().map(|c| c.call.clone()).collect();
    let sources = crate::record::sources::merged(&calls);
    if let (false, Some(object)) = (sources.is_empty(), value.as_object_mut()) {
        object.insert(
            "sources".into(),
            serde_json::to_value(sources).unwrap_or_default(),
        );
    }
    if let (false, Some(object)) = (feedback.is_empty(), value.as_object_mut()) {
        object.insert(
            "feedback".into(),
            serde_json::to_value(feedback).unwrap_or_default(),
        );
    }
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

pub(super) fn indented(text: &str, out: &mut impl Write) -> std::io::Result<()> {
    for line in text.trim_end().lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

pub(super) fn local_time(ms: i64, seconds: bool) -> String {
    match Local.timestamp_millis_opt(ms).single() {
        Some(time) if seconds => time.format("%Y-%m-%d %H:%M:%S").to_string(),
        Some(time) => time.format("%Y-%m-%d %H:%M").to_string(),
        None => format_time(ms),
    }
}

pub(super) fn dollars(usd: f64) -> String {
    if usd > 0.0 && usd < 0.0001 {
        "<$0.0001".to_owned()
    } else {
        format!("${usd:.4}")
    }
}

/// What the provider's prompt cache did for a call, when it said:
/// `  (800 of 1000 prompt tokens cached, 150 written to the cache)`.
pub(super) fn prompt_cache(call: &crate::record::CallRecord) -> String {
    let read = call.cached_tokens.filter(|&n| n > 0);
    let written = call.cache_write_tokens.filter(|&n| n > 0);
    let of = call
        .prompt_tokens
        .map(|p| format!(" of {p}"))
        .unwrap_or_default();
    match (read, written) {
        (None, None) => String::new(),
        (Some(r), None) => format!("  ({r}{of} prompt tokens cached)"),
        (None, Some(w)) => format!("  ({w}{of} prompt tokens written to the cache)"),
        (Some(r), Some(w)) => {
            format!("  ({r}{of} prompt tokens cached, {w} written to the cache)")
        }
    }
}

/// Where a call's time went, when it is known:
/// `  (first token 0.31 s, 0.10 s queued for a permit)`.
pub(super) fn timing(call: &crate::record::CallRecord) -> String {
    let secs = |ms: u32| format!("{:.2} s", f64::from(ms) / 1000.0);
    let parts: Vec<String> = [
        call.ttft_ms.map(|ms| format!("first token {}", secs(ms))),
        call.queued_ms
            .filter(|&ms| ms > 0)
            .map(|ms| format!("{} queued for a permit", secs(ms))),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("  ({})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_line_says_when_the_first_token_came_and_how_long_it_queued() {
        let mut call = crate::record::CallRecord {
            id: 0,
            stage: "fan-out".into(),
            label: "panel".into(),
            model: "m".into(),
            status: "ok".into(),
            latency_ms: 2_000,
            attempts: 1,
            ttft_ms: Some(310),
            ..crate::record::CallRecord::default()
        };
        assert_eq!(timing(&call), "  (first token 0.31 s)");
        call.queued_ms = Some(100);
        assert_eq!(
            timing(&call),
            "  (first token 0.31 s, 0.10 s queued for a permit)"
        );
        call.ttft_ms = None;
        call.queued_ms = Some(0);
        assert_eq!(timing(&call), "");
    }
}
