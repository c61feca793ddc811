//! The SQLite store's writer: one thread per process that owns the write
//! connection. Runs hand it their events through a bounded channel and
//! never wait on it; it writes them in batches, one transaction per batch,
//! so a busy run costs a few inserts and a commit every few milliseconds.
//! A run's end is the one message a run waits for (with a bound): when its
//! result is returned, the run is on disk for any other process to read.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rusqlite::{Connection, Transaction, TransactionBehavior, params};
use serde_json::Value;
use tokio::sync::mpsc;

use super::checkpoint::Checkpointer;
use super::retention;
use super::texts;
use crate::plugins::plan_to_value;
use crate::record::CallRecord;
use crate::store::WriteLag;
use crate::store::event::{Begin, End, Msg, now_ms, request_json};
use crate::store::retention::Retention;

/// Most messages in one transaction.
const BATCH: usize = 512;
/// Retention runs this often, and after this many runs ended.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
const PRUNE_AFTER_RUNS: u32 = 200;

/// Starts the writer thread on `conn`. It ends when every sender is gone,
/// after writing what was sent; `done` is signalled then.
pub fn spawn(
    conn: Connection,
    path: PathBuf,
    retention: Retention,
    capacity: usize,
    lag: WriteLag,
) -> std::io::Result<(mpsc::Sender<Msg>, std::sync::mpsc::Receiver<()>)> {
    // Checkpoints are the checkpointer's, so no commit waits on one.
    let _ = conn.pragma_update(None, "wal_autocheckpoint", 0);
    let checkpointer = Checkpointer::spawn(&path)?;
    let (sender, receiver) = mpsc::channel(capacity);
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("chorus-store".into())
        .spawn(move || {
            Writer {
                conn,
                path,
                retention,
                last_prune: Instant::now(),
                ended_since_prune: 0,
                lag,
                checkpointer,
            }
            .run(receiver);
            let _ = done_tx.send(());
        })?;
    Ok((sender, done))
}

struct Writer {
    conn: Connection,
    path: PathBuf,
    retention: Retention,
    last_prune: Instant,
    ended_since_prune: u32,
    lag: WriteLag,
    checkpointer: Checkpointer,
}

impl Writer {
    fn run(mut self, mut receiver: mpsc::Receiver<Msg>) {
        self.prune();
        while let Some(first) = receiver.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match receiver.try_recv() {
                    Ok(msg) => batch.push(msg),
                    Err(_) => break,
                }
            }
            let shutdown = batch.iter().any(|m| matches!(m, Msg::Shutdown));
            self.write(batch);
            if shutdown {
                return;
            }
            if self.ended_since_prune >= PRUNE_AFTER_RUNS
                || self.last_prune.elapsed() >= PRUNE_EVERY
            {
                self.prune();
            }
        }
    }

    /// Writes a batch in one transaction (tried twice if the store stays
    /// busy), then answers whoever waits on it.
    fn write(&mut self, mut batch: Vec<Msg>) {
        let mut outcome = self.transaction(&batch);
        if let Err(e) = &outcome {
            tracing::warn!(store = %self.path.display(), "writing to the run store failed ({e}); trying once more");
            std::thread::sleep(Duration::from_millis(100));
            outcome = self.transaction(&batch);
        }
        let failed = |i: usize| -> Option<String> {
            match &outcome {
                Err(e) => Some(e.clone()),
                Ok(errors) => errors
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map(|(_, e)| e.clone()),
            }
        };
        match &outcome {
            Err(e) => {
                tracing::warn!(store = %self.path.display(), "{} run events were not recorded: {e}", batch.len());
            }
            Ok(_) => {
                self.lag.written(&batch);
                self.checkpointer.nudge();
            }
        }
        for (i, msg) in batch.drain(..).enumerate() {
            let result = failed(i).map_or(Ok(()), Err);
            match msg {
                Msg::End { ack, .. } => {
                    self.ended_since_prune += 1;
                    if let Some(ack) = ack {
                        let _ = ack.send(result);
                    }
                }
                Msg::Flush(ack) => {
                    let _ = ack.send(result);
                }
                _ => {}
            }
        }
    }

    /// One transaction for the batch. A message that fails is logged and
    /// skipped (its index and error returned); the rest are still written.
    fn transaction(&mut self, batch: &[Msg]) -> Result<Vec<(usize, String)>, String> {
        transaction(&mut self.conn, &self.path, batch, self.retention.max_bytes)
    }

    fn prune(&mut self) {
        self.last_prune = Instant::now();
        self.ended_since_prune = 0;
        match retention::prune(&mut self.conn, &self.retention, now_ms()) {
            Ok(p) if p.removed > 0 => tracing::info!(
                store = %self.path.display(),
                "retention removed {} runs ({} bytes); {} kept",
                p.removed, p.removed_bytes, p.kept
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(store = %self.path.display(), "retention failed: {e}"),
        }
    }
}

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
    let mut errors = Vec::new();
    for (i, msg) in batch.iter().enumerate() {
        if let Err(e) = apply(&tx, msg, max_bytes) {
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

fn apply(tx: &Transaction<'_>, msg: &Msg, max_bytes: u64) -> rusqlite::Result<()> {
    match msg {
        Msg::Begin(begin) => insert_run(tx, begin, max_bytes),
        Msg::Plan { run_id, plan } => {
            tx.prepare_cached("UPDATE runs SET plan = ?1 WHERE id = ?2")?
                .execute(params![plan_to_value(plan).to_string(), run_id])?;
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
        Msg::CallFinished { run_id, call } => upsert_call(tx, run_id, call),
        Msg::End {
            begin,
            plan,
            end,
            lost_events,
            at,
            ..
        } => {
            insert_run(tx, begin, max_bytes)?;
            let run_id = &begin.request.run_id;
            if let Some(plan) = plan {
                tx.prepare_cached("UPDATE runs SET plan = ?1 WHERE id = ?2 AND plan IS NULL")?
                    .execute(params![plan_to_value(plan).to_string(), run_id])?;
            }
            let elapsed = at.saturating_sub(begin.started_at);
            match end {
                End::Done(record) => {
                    // Only what dropped events missed: a call on record with
                    // its outcome is left as it is, its reply not written again.
                    let finished = finished_calls(tx, run_id)?;
                    for call in record.calls.iter().filter(|c| !finished.contains(&c.id)) {
                        upsert_call(tx, run_id, call)?;
                    }
                    tx.prepare_cached(
                        "UPDATE runs SET status = 'done', finished_at = ?2, kind = ?3, summary = ?4,
                             answer = ?5, notes = ?6, details = ?7, elapsed_ms = ?8,
                             prompt_tokens = ?9, completion_tokens = ?10, cost_usd = ?11,
                             lost_events = ?12, cost_estimated = ?13
                         WHERE id = ?1",
                    )?
                    .execute(params![
                        run_id,
                        at,
                        record.kind.as_str(),
                        record.summary,
                        record.answer,
                        Value::from(record.notes.clone()).to_string(),
                        record.details.as_ref().map(Value::to_string),
                        i64::try_from(record.elapsed_ms).unwrap_or(i64::MAX),
                        i64::try_from(record.usage.prompt_tokens).unwrap_or(i64::MAX),
                        i64::try_from(record.usage.completion_tokens).unwrap_or(i64::MAX),
                        record.usage.cost_usd,
                        lost_events,
                        record.usage.cost_estimated,
                    ])?;
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
                }
                End::Cancelled => {
                    tx.prepare_cached(
                        "UPDATE runs SET status = 'cancelled', finished_at = ?2, elapsed_ms = ?3,
                             lost_events = ?4
                         WHERE id = ?1 AND status = 'running'",
                    )?
                    .execute(params![run_id, at, elapsed, lost_events])?;
                    sum_usage(tx, run_id)?;
                }
            }
            retention::measure(tx, run_id)
        }
        Msg::Flush(_) | Msg::Shutdown => Ok(()),
    }
}

/// The run's first row, and its attachments (once: the end of a run whose
/// start was written finds its row there).
fn insert_run(tx: &Transaction<'_>, begin: &Begin, max_bytes: u64) -> rusqlite::Result<()> {
    let request = &begin.request;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt, options,
                           follow_up_of, resynthesis_of, owner, client, attachments)
         VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
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
        ])?;
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

/// Writes a call's outcome.
fn upsert_call(tx: &Transaction<'_>, run_id: &str, call: &CallRecord) -> rusqlite::Result<()> {
    let placed = texts::place(tx, call.reply.as_deref().map(String::as_str))?;
    let written = tx.prepare_cached(UPSERT_CALL)?.execute(params![
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
        placed.inline(),
        call.reused_from.as_ref().map(|r| r.run_id.as_str()),
        call.reused_from.as_ref().map(|r| r.call),
        call.reasoning_tokens,
        call.cost_estimated,
        placed.long(),
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
    ])?;
    if written == 0 {
        texts::discard(tx, &placed)?;
    }
    Ok(())
}

const UPSERT_CALL: &str = "INSERT INTO calls (run_seq, id, stage, label, model, status, latency_ms,
        attempts, prompt_tokens, completion_tokens, cost_usd, error_kind, error_status,
        error_message, reply, reused_from_run, reused_from_call, reasoning_tokens, cost_estimated,
        reply_text, format_sent, fallback_from, cached_tokens, cache_write_tokens, citations,
        queued_ms, ttft_ms, cached_from_run, cached_from_call)
    SELECT seq, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,
        ?23, ?24, ?25, ?26, ?27, ?28, ?29
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
        cached_from_call = excluded.cached_from_call";

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
