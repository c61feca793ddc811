//! What the SQLite writer does with one batch of run events: the
//! statements, in one transaction. Events of one row that meet in a batch
//! are written together — a call's start and its end as one insert, a
//! run's start and its plan as one — so a busy store writes each row once.
//! Nothing a reader sees changes: a batch commits whole, or not at all.

use std::sync::LazyLock;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::retention;
use super::texts;
use crate::llm::ChatRequest;
use crate::plugins::{Plan, plan_json};
use crate::record::{CallRecord, RunRecord};
use crate::store::event::{Begin, End, Msg, Part, pair, request_json};

/// One transaction for the batch. A message that fails is logged and
/// skipped (its index and error returned); the rest are still written —
/// unless SQLite rolled the whole transaction back (a full disk, an I/O
/// error): then that error is the batch's, and nothing more is tried.
/// Attachment bytes are kept within `max_bytes` (`[store] max_bytes`).
pub(super) fn transaction(
    conn: &mut Connection,
    path: &std::path::Path,
    batch: &[Msg],
    max_bytes: u64,
) -> Result<Vec<(usize, String)>, String> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| e.to_string())?;
    let parts = pair(batch);
    let mut errors = Vec::new();
    for (i, msg) in batch.iter().enumerate() {
        let written = match parts[i] {
            Part::Alone => apply(&tx, msg, max_bytes),
            Part::With(later) => apply_pair(&tx, msg, &batch[later], max_bytes),
            Part::Written => continue,
        };
        if let Err(e) = written {
            if tx.is_autocommit() {
                return Err(format!("{e} (nothing of this batch was written)"));
            }
            tracing::warn!(store = %path.display(), "a run event was not recorded: {e}");
            errors.push((i, e.to_string()));
        }
    }
    tx.commit().map_err(|e| e.to_string())?;
    Ok(errors)
}

/// Two events of one row, as one write.
fn apply_pair(
    tx: &Transaction<'_>,
    first: &Msg,
    later: &Msg,
    max_bytes: u64,
) -> rusqlite::Result<()> {
    match (first, later) {
        (Msg::Begin(begin), Msg::Plan { plan, .. }) => insert_run(tx, begin, Some(plan), max_bytes),
        (
            Msg::CallStarted {
                run_id,
                request,
                at,
                ..
            },
            Msg::CallFinished { call, .. },
        ) => write_call(tx, run_id, call, Some((request, *at))),
        _ => {
            apply(tx, first, max_bytes)?;
            apply(tx, later, max_bytes)
        }
    }
}

fn apply(tx: &Transaction<'_>, msg: &Msg, max_bytes: u64) -> rusqlite::Result<()> {
    match msg {
        Msg::Begin(begin) => insert_run(tx, begin, None, max_bytes),
        Msg::Plan { run_id, plan } => {
            tx.prepare_cached("UPDATE runs SET plan = ?1 WHERE id = ?2")?
                .execute(params![plan_json(plan), run_id])?;
            Ok(())
        }
        Msg::CallStarted {
            run_id,
            id,
            stage,
            request,
            at,
        } => {
            let kept = request_json(request);
            let placed = texts::place(tx, Some(&kept))?;
            let written = tx
                .prepare_cached(
                    "INSERT INTO calls (run_seq, id, stage, label, model, status, started_at,
                         request, request_text)
                     SELECT seq, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8 FROM runs WHERE id = ?1
                     ON CONFLICT (run_seq, id) DO NOTHING",
                )?
                .execute(params![
                    run_id,
                    id,
                    &**stage,
                    request.label,
                    request.model,
                    at,
                    placed.inline(),
                    placed.long(),
                ])?;
            if written == 0 {
                texts::discard(tx, &placed)?;
            }
            Ok(())
        }
        Msg::CallFinished { run_id, call } => write_call(tx, run_id, call, None),
        Msg::End {
            begin,
            plan,
            end,
            lost_events,
            at,
            ..
        } => {
            let run_id = &begin.request.run_id;
            // The run's row, made here if its start was lost; its plan, if
            // that was lost (serialized only then).
            let planless = tx
                .prepare_cached("SELECT plan IS NULL FROM runs WHERE id = ?1")?
                .query_row([run_id], |row| row.get::<_, bool>(0))
                .optional()?;
            match (planless, plan) {
                (None, _) => insert_run(tx, begin, plan.as_ref(), max_bytes)?,
                (Some(true), Some(plan)) => {
                    tx.prepare_cached("UPDATE runs SET plan = ?1 WHERE id = ?2")?
                        .execute(params![plan_json(plan), run_id])?;
                }
                (Some(_), _) => {}
            }
            let elapsed = at.saturating_sub(begin.started_at);
            match end {
                End::Done(record) => {
                    // Only what dropped events missed: a call on record with
                    // its outcome is left as it is, its reply not written again.
                    let finished = finished_calls(tx, run_id)?;
                    for call in record.calls.iter().filter(|c| !finished.contains(&c.id)) {
                        write_call(tx, run_id, call, None)?;
                    }
                    done(tx, run_id, record, *lost_events, *at)
                }
                End::Failed(error) => {
                    tx.prepare_cached(
                        "UPDATE runs SET status = 'failed', finished_at = ?2, error = ?3,
                             elapsed_ms = ?4, lost_events = ?5
                         WHERE id = ?1",
                    )?
                    .execute(params![
                        run_id,
                        at,
                        error,
                        elapsed,
                        lost_events
                    ])?;
                    sum_usage(tx, run_id)?;
                    retention::measure(tx, run_id)
                }
                End::Cancelled => {
                    tx.prepare_cached(
                        "UPDATE runs SET status = 'cancelled', finished_at = ?2, elapsed_ms = ?3,
                             lost_events = ?4
                         WHERE id = ?1 AND status = 'running'",
                    )?
                    .execute(params![run_id, at, elapsed, lost_events])?;
                    sum_usage(tx, run_id)?;
                    retention::measure(tx, run_id)
                }
            }
        }
        Msg::Flush(_) | Msg::Shutdown => Ok(()),
    }
}

/// A finished run's outcome and its size (`retention::measure`'s sum, in
/// the same statement: the texts this statement writes counted from the
/// record, the others from the row).
fn done(
    tx: &Transaction<'_>,
    run_id: &str,
    record: &RunRecord,
    lost_events: u32,
    at: i64,
) -> rusqlite::Result<()> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE runs SET status = 'done', finished_at = ?2, kind = ?3, summary = ?4,
                 answer = ?5, notes = ?6, details = ?7, elapsed_ms = ?8,
                 prompt_tokens = ?9, completion_tokens = ?10, cost_usd = ?11,
                 lost_events = ?12, cost_estimated = ?13,
                 bytes = octet_length(prompt) + octet_length(options)
                     + coalesce(octet_length(plan), 0) + coalesce(octet_length(error), 0)
                     + ?14 + {calls}
             WHERE id = ?1",
            calls = retention::calls_bytes(),
        )
    });
    let notes = serde_json::to_string(&record.notes).expect("notes serialize");
    let details = record.details.as_ref().map(serde_json::Value::to_string);
    let written = record.summary.len()
        + record.answer.len()
        + notes.len()
        + details.as_ref().map_or(0, String::len);
    tx.prepare_cached(&SQL)?.execute(params![
        run_id,
        at,
        record.kind.as_str(),
        record.summary,
        record.answer,
        notes,
        details,
        i64::try_from(record.elapsed_ms).unwrap_or(i64::MAX),
        i64::try_from(record.usage.prompt_tokens).unwrap_or(i64::MAX),
        i64::try_from(record.usage.completion_tokens).unwrap_or(i64::MAX),
        record.usage.cost_usd,
        lost_events,
        record.usage.cost_estimated,
        i64::try_from(written).unwrap_or(i64::MAX),
    ])?;
    Ok(())
}

/// The run's first row — with its plan, when that came in the same batch —
/// and its attachments (once: the end of a run whose start was written
/// finds its row there).
fn insert_run(
    tx: &Transaction<'_>,
    begin: &Begin,
    plan: Option<&std::sync::Arc<Plan>>,
    max_bytes: u64,
) -> rusqlite::Result<()> {
    let request = &begin.request;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt, options,
                           follow_up_of, resynthesis_of, owner, client, attachments, plan)
         VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            request.run_id,
            request.pipeline,
            begin.started_at,
            begin.deadline_at,
            request.prompt,
            request.options.to_string(),
            begin.follow_up_of,
            begin.resynthesis_of,
            crate::store::owner::this_process(),
            begin.client,
            begin.attachments,
            plan.map(|plan| plan_json(plan)),
        ])?;
    if inserted > 0
        && let Some(assignment) = &begin.experiment
    {
        super::experiments::assign(tx, tx.last_insert_rowid(), assignment)?;
    }
    if inserted > 0 && !begin.files.is_empty() {
        super::attachments::keep(tx, begin, max_bytes)?;
    }
    Ok(())
}

/// The calls of a run already on record with their outcome, in one query.
fn finished_calls(tx: &Transaction<'_>, run_id: &str) -> rusqlite::Result<Vec<u32>> {
    tx.prepare_cached(
        "SELECT id FROM calls WHERE run_seq = (SELECT seq FROM runs WHERE id = ?1)
             AND status <> 'running'",
    )?
    .query_map([run_id], |row| row.get(0))?
    .collect()
}

/// Writes a call's outcome — and its request, when its start is written
/// with it (`started`: the request and when it was sent).
fn write_call(
    tx: &Transaction<'_>,
    run_id: &str,
    call: &CallRecord,
    started: Option<(&ChatRequest, i64)>,
) -> rusqlite::Result<()> {
    let reply = texts::place(tx, call.reply.as_deref().map(String::as_str))?;
    let kept = started.map(|(request, _)| request_json(request));
    let request = texts::place(tx, kept.as_deref())?;
    let written = tx.prepare_cached(WRITE_CALL)?.execute(params![
        run_id,
        call.id,
        call.stage,
        call.label,
        call.model,
        call.status,
        call.latency_ms,
        call.attempts,
        call.prompt_tokens,
        call.completion_tokens,
        call.cost_usd,
        call.error.as_ref().map(|e| e.kind.as_str()),
        call.error.as_ref().and_then(|e| e.status),
        call.error.as_ref().map(|e| e.message.as_str()),
        reply.inline(),
        call.reused_from.as_ref().map(|r| r.run_id.as_str()),
        call.reused_from.as_ref().map(|r| r.call),
        call.reasoning_tokens,
        call.cost_estimated,
        reply.long(),
        call.format_sent,
        (!call.fallback_from.is_empty())
            .then(|| serde_json::to_string(&call.fallback_from).unwrap_or_default()),
        call.cached_tokens,
        call.cache_write_tokens,
        (!call.citations.is_empty())
            .then(|| serde_json::to_string(&call.citations).unwrap_or_default()),
        call.queued_ms,
        call.ttft_ms,
        call.cached_from.as_ref().map(|r| r.run_id.as_str()),
        call.cached_from.as_ref().map(|r| r.call),
        started.map(|(_, at)| at),
        request.inline(),
        request.long(),
        call.tokens_estimated,
    ])?;
    if written == 0 {
        texts::discard(tx, &reply)?;
        texts::discard(tx, &request)?;
    }
    Ok(())
}

/// A call's row: inserted whole, or its outcome written over its start (the
/// request and when it was sent are the start's; the end never has them).
const WRITE_CALL: &str = "INSERT INTO calls (run_seq, id, stage, label, model, status, latency_ms,
        attempts, prompt_tokens, completion_tokens, cost_usd, error_kind, error_status,
        error_message, reply, reused_from_run, reused_from_call, reasoning_tokens, cost_estimated,
        reply_text, format_sent, fallback_from, cached_tokens, cache_write_tokens, citations,
        queued_ms, ttft_ms, cached_from_run, cached_from_call, started_at, request, request_text,
        tokens_estimated)
    SELECT seq, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,
        ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33
    FROM runs WHERE id = ?1
    ON CONFLICT (run_seq, id) DO UPDATE SET status = excluded.status, model = excluded.model,
        latency_ms = excluded.latency_ms, attempts = excluded.attempts,
        prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,
        cost_usd = excluded.cost_usd, error_kind = excluded.error_kind,
        error_status = excluded.error_status, error_message = excluded.error_message,
        reply = excluded.reply, reply_text = excluded.reply_text,
        reasoning_tokens = excluded.reasoning_tokens, cost_estimated = excluded.cost_estimated,
        format_sent = excluded.format_sent, fallback_from = excluded.fallback_from,
        cached_tokens = excluded.cached_tokens, cache_write_tokens = excluded.cache_write_tokens,
        citations = excluded.citations, queued_ms = excluded.queued_ms,
        ttft_ms = excluded.ttft_ms, cached_from_run = excluded.cached_from_run,
        cached_from_call = excluded.cached_from_call, tokens_estimated = excluded.tokens_estimated";

/// A run that ended without a record: its totals from the calls on record.
fn sum_usage(tx: &Transaction<'_>, run_id: &str) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE runs SET
             prompt_tokens = (SELECT SUM(prompt_tokens) FROM calls WHERE run_seq = runs.seq),
             completion_tokens = (SELECT SUM(completion_tokens) FROM calls WHERE run_seq = runs.seq),
             cost_usd = (SELECT SUM(cost_usd) FROM calls WHERE run_seq = runs.seq),
             cost_estimated = (SELECT COALESCE(MAX(cost_estimated), 0) FROM calls
                               WHERE run_seq = runs.seq AND cost_usd IS NOT NULL)
         WHERE id = ?1",
    )?
    .execute([run_id])?;
    Ok(())
}
