//! The PostgreSQL store's writer: one task per process, on the store's own
//! runtime. Runs hand it their events through the same bounded channel as
//! the SQLite writer's and never wait on it; it writes them in batches,
//! one transaction per batch, through the pool.
//!
//! When the database cannot be reached, what is not written yet stays in
//! a bounded backlog in memory (the oldest events of unfinished runs go
//! first when it is full; a run's end goes last) and the runs go on: each
//! run's end is answered at once with why it is not written yet, and the
//! backlog is written when the database is back. Said in the log once when
//! it goes, once when it comes back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_postgres::Transaction;

use super::{Failure, retention, schema};
use crate::plugins::plan_to_value;
use crate::record::CallRecord;
use crate::store::event::{Begin, End, Msg, now_ms, request_json};
use crate::store::memory::Memory;
use crate::store::retention::Retention;

/// Most messages in one transaction.
const BATCH: usize = 512;
/// Messages kept while the database is unreachable.
const BACKLOG: usize = 4 * crate::store::event::CAPACITY;
/// Retention runs this often, and after this many runs ended.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
const PRUNE_AFTER_RUNS: u32 = 200;
/// Waits between attempts to reach a database that is down.
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Whether the database can be reached, as the writer last found it.
#[derive(Default)]
pub struct Health {
    down: Mutex<Option<String>>,
}

impl Health {
    /// Why the database is unreachable, when it is.
    pub fn down(&self) -> Option<String> {
        self.down.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set(&self, why: Option<String>) {
        *self.down.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }
}

pub struct Writer {
    pub pool: Pool,
    pub shown: String,
    pub retention: Retention,
    pub health: Arc<Health>,
    /// This instance: the owner of the runs it writes.
    pub instance: String,
    /// Runs that ended while the database was down, readable until written.
    pub unwritten: Arc<Memory>,
    /// Whether this process has brought the schema up to date.
    pub migrated: bool,
    pub pending: VecDeque<Msg>,
    pub lost: u64,
    pub last_prune: Instant,
    pub ended_since_prune: u32,
    pub retry: Duration,
}

impl Writer {
    pub async fn run(mut self, mut receiver: mpsc::Receiver<Msg>) {
        self.prune().await;
        loop {
            let next = if self.pending.is_empty() {
                receiver.recv().await
            } else {
                // Down: retry when the wait is over, or sooner with more.
                match tokio::time::timeout(self.retry, receiver.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        self.write_pending().await;
                        continue;
                    }
                }
            };
            let Some(first) = next else {
                self.write_pending().await;
                break;
            };
            self.pending.push_back(first);
            for _ in 1..BATCH {
                match receiver.try_recv() {
                    Ok(msg) => self.pending.push_back(msg),
                    Err(_) => break,
                }
            }
            let shutdown = self.pending.iter().any(|m| matches!(m, Msg::Shutdown));
            self.write_pending().await;
            if shutdown {
                break;
            }
            if self.health.down().is_none()
                && (self.ended_since_prune >= PRUNE_AFTER_RUNS
                    || self.last_prune.elapsed() >= PRUNE_EVERY)
            {
                self.prune().await;
            }
        }
        let left = self.pending.len();
        if left > 0 {
            tracing::warn!(store = %self.shown, "{left} run events were not written: the database could not be reached before chorus stopped");
        }
        // Stopped on purpose: the lease is given back.
        if let Ok(client) = self.pool.get().await {
            let _ = client
                .execute("DELETE FROM instances WHERE id = $1", &[&self.instance])
                .await;
        }
    }

    /// A connection with the schema up to date.
    async fn connect(&mut self) -> Result<deadpool_postgres::Object, Failure> {
        let mut client = self
            .pool
            .get()
            .await
            .map_err(|e| Failure::Pool(e.to_string()))?;
        if !self.migrated {
            schema::migrate(&mut client).await?;
            self.migrated = true;
        }
        Ok(client)
    }

    /// Writes the backlog, a batch per transaction, answering whoever
    /// waits; stops at the first sign that the database is gone.
    async fn write_pending(&mut self) {
        self.pending.retain(|m| !matches!(m, Msg::Shutdown));
        if self.pending.is_empty() {
            return;
        }
        let mut client = match self.connect().await {
            Ok(client) => client,
            Err(failure) => return self.went_down(&failure),
        };
        if self.health.down().is_some() {
            tracing::info!(store = %self.shown, "the run store is reachable again; what was kept in memory is written");
            self.health.set(None);
        }
        while !self.pending.is_empty() {
            let take = self.pending.len().min(BATCH);
            let batch: Vec<Msg> = self.pending.drain(..take).collect();
            match transaction(&mut client, &batch, &self.instance).await {
                Ok(()) => self.answer(batch, None),
                Err(failure) if failure.unreachable() => {
                    for msg in batch.into_iter().rev() {
                        self.pending.push_front(msg);
                    }
                    return self.went_down(&failure);
                }
                // A message the database refuses: each on its own, so the
                // rest are still written.
                Err(_) => {
                    for (i, msg) in batch.into_iter().enumerate() {
                        match transaction(&mut client, std::slice::from_ref(&msg), &self.instance)
                            .await
                        {
                            Ok(()) => self.answer(vec![msg], None),
                            Err(failure) if failure.unreachable() => {
                                self.pending.push_front(msg);
                                let _ = i;
                                return self.went_down(&failure);
                            }
                            Err(failure) => {
                                tracing::warn!(store = %self.shown, "a run event was not recorded: {failure}");
                                self.answer(vec![msg], Some(failure.to_string()));
                            }
                        }
                    }
                }
            }
        }
        self.retry = RETRY_FIRST;
    }

    /// Answers the ends and flushes of a written (or refused) batch.
    fn answer(&mut self, batch: Vec<Msg>, error: Option<String>) {
        let result = || error.clone().map_or(Ok(()), Err);
        for msg in batch {
            match msg {
                Msg::End { ack, .. } => {
                    self.ended_since_prune += 1;
                    if let Some(ack) = ack {
                        let _ = ack.send(result());
                    }
                }
                Msg::Flush(ack) => {
                    let _ = ack.send(result());
                }
                _ => {}
            }
        }
    }

    /// The database cannot be reached: say so (once), tell whoever waits,
    /// keep the backlog within its bound, and wait longer before the next
    /// attempt.
    fn went_down(&mut self, failure: &Failure) {
        let why = failure.to_string();
        if self.health.down().is_none() {
            tracing::warn!(store = %self.shown, "the run store cannot be reached ({why}): runs go on, kept in memory, and are written when it is back");
        }
        self.health.set(Some(why.clone()));
        let not_yet = format!(
            "the run store cannot be reached ({why}); the run is kept in memory and written when it is back"
        );
        self.keep_readable();
        let mut kept = VecDeque::with_capacity(self.pending.len());
        for mut msg in self.pending.drain(..) {
            match &mut msg {
                Msg::End { ack, .. } => {
                    if let Some(ack) = ack.take() {
                        let _ = ack.send(Err(not_yet.clone()));
                    }
                }
                Msg::Flush(_) => {
                    if let Msg::Flush(ack) = msg {
                        let _ = ack.send(Err(not_yet.clone()));
                    }
                    continue;
                }
                _ => {}
            }
            kept.push_back(msg);
        }
        self.pending = kept;
        self.bound();
        self.retry = (self.retry * 2).min(RETRY_MAX);
    }

    /// Each run that ended and waits for the database, as a whole run in
    /// memory: this instance can still read it (a follow-up of it, say).
    fn keep_readable(&self) {
        for msg in &self.pending {
            let Msg::End {
                begin,
                plan,
                end,
                at,
                ..
            } = msg
            else {
                continue;
            };
            let run_id = &begin.request.run_id;
            if self.unwritten.get(run_id).is_some() {
                continue;
            }
            let calls = self
                .pending
                .iter()
                .filter_map(|m| match m {
                    Msg::CallFinished { run_id: of, call } if of == run_id => Some(call.clone()),
                    _ => None,
                })
                .collect();
            self.unwritten.insert(crate::store::recorder::stored(
                begin,
                plan.as_ref(),
                end.clone(),
                calls,
                *at,
            ));
        }
    }

    /// Past `BACKLOG`, the oldest events go, a run's end last of all.
    fn bound(&mut self) {
        let mut over = self.pending.len().saturating_sub(BACKLOG);
        if over == 0 {
            return;
        }
        let before = self.pending.len();
        self.pending.retain(|m| {
            if over > 0 && !matches!(m, Msg::End { .. }) {
                over -= 1;
                false
            } else {
                true
            }
        });
        while over > 0 && self.pending.pop_front().is_some() {
            over -= 1;
        }
        let dropped = before - self.pending.len();
        if self.lost == 0 {
            tracing::warn!(store = %self.shown, "the run store has been unreachable long enough that {dropped} run events kept for it were dropped");
        }
        self.lost += dropped as u64;
    }

    async fn prune(&mut self) {
        self.last_prune = Instant::now();
        self.ended_since_prune = 0;
        let pruned = match self.connect().await {
            Ok(mut client) => retention::prune(&mut client, &self.retention, now_ms()).await,
            Err(failure) => Err(failure),
        };
        match pruned {
            Ok(Some(p)) if p.removed > 0 => tracing::info!(
                store = %self.shown,
                "retention removed {} runs ({} bytes); {} kept",
                p.removed, p.removed_bytes, p.kept
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(store = %self.shown, "retention failed: {e}"),
        }
    }
}

/// One transaction for the batch.
async fn transaction(
    client: &mut tokio_postgres::Client,
    batch: &[Msg],
    owner: &str,
) -> Result<(), Failure> {
    let tx = client.transaction().await?;
    for msg in batch {
        apply(&tx, msg, owner).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Text as PostgreSQL takes it: it refuses NUL characters in `TEXT`.
fn text(value: &str) -> std::borrow::Cow<'_, str> {
    if value.contains('\0') {
        value.replace('\0', "\u{FFFD}").into()
    } else {
        value.into()
    }
}

fn big(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

async fn apply(tx: &Transaction<'_>, msg: &Msg, owner: &str) -> Result<(), Failure> {
    match msg {
        Msg::Begin(begin) => insert_run(tx, begin, owner).await,
        Msg::Plan { run_id, plan } => {
            tx.execute(
                "UPDATE runs SET plan = $1 WHERE id = $2",
                &[&plan_to_value(plan).to_string(), run_id],
            )
            .await?;
            Ok(())
        }
        Msg::CallStarted {
            run_id,
            id,
            stage,
            request,
            at,
        } => {
            tx.execute(
                "INSERT INTO calls (run_seq, id, stage, label, model, status, started_at, request)
                 SELECT seq, $2, $3, $4, $5, 'running', $6, $7 FROM runs WHERE id = $1
                 ON CONFLICT (run_seq, id) DO NOTHING",
                &[
                    run_id,
                    &i64::from(*id),
                    &&**stage,
                    &request.label,
                    &request.model,
                    at,
                    &request_json(request),
                ],
            )
            .await?;
            Ok(())
        }
        Msg::CallFinished { run_id, call } => upsert_call(tx, run_id, call, false).await,
        Msg::End {
            begin,
            plan,
            end,
            lost_events,
            at,
            ..
        } => {
            insert_run(tx, begin, owner).await?;
            let run_id = &begin.request.run_id;
            if let Some(plan) = plan {
                tx.execute(
                    "UPDATE runs SET plan = $1 WHERE id = $2 AND plan IS NULL",
                    &[&plan_to_value(plan).to_string(), run_id],
                )
                .await?;
            }
            let elapsed = at.saturating_sub(begin.started_at);
            let lost = i64::from(*lost_events);
            match end {
                End::Done(record) => {
                    for call in &record.calls {
                        upsert_call(tx, run_id, call, true).await?;
                    }
                    tx.execute(
                        "UPDATE runs SET status = 'done', finished_at = $2, kind = $3, summary = $4,
                             answer = $5, notes = $6, details = $7, elapsed_ms = $8,
                             prompt_tokens = $9, completion_tokens = $10, cost_usd = $11,
                             lost_events = $12, cost_estimated = $13
                         WHERE id = $1",
                        &[
                            run_id,
                            at,
                            &record.kind.as_str(),
                            &text(&record.summary),
                            &text(&record.answer),
                            &Value::from(record.notes.clone()).to_string(),
                            &record.details.as_ref().map(Value::to_string),
                            &big(record.elapsed_ms),
                            &big(record.usage.prompt_tokens),
                            &big(record.usage.completion_tokens),
                            &record.usage.cost_usd,
                            &lost,
                            &record.usage.cost_estimated,
                        ],
                    )
                    .await?;
                }
                End::Failed(error) => {
                    tx.execute(
                        "UPDATE runs SET status = 'failed', finished_at = $2, error = $3,
                             elapsed_ms = $4, lost_events = $5
                         WHERE id = $1",
                        &[run_id, at, &text(error), &elapsed, &lost],
                    )
                    .await?;
                    sum_usage(tx, run_id).await?;
                }
                End::Cancelled => {
                    tx.execute(
                        "UPDATE runs SET status = 'cancelled', finished_at = $2, elapsed_ms = $3,
                             lost_events = $4
                         WHERE id = $1 AND status = 'running'",
                        &[run_id, at, &elapsed, &lost],
                    )
                    .await?;
                    sum_usage(tx, run_id).await?;
                }
            }
            retention::measure(tx, run_id).await
        }
        Msg::Flush(_) | Msg::Shutdown => Ok(()),
    }
}

async fn insert_run(tx: &Transaction<'_>, begin: &Begin, owner: &str) -> Result<(), Failure> {
    let request = &begin.request;
    tx.execute(
        "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt, options,
                           follow_up_of, resynthesis_of, owner)
         VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (id) DO NOTHING",
        &[
            &request.run_id,
            &request.pipeline,
            &begin.started_at,
            &begin.deadline_at,
            &text(&request.prompt),
            &request.options.to_string(),
            &begin.follow_up_of,
            &begin.resynthesis_of,
            &owner,
        ],
    )
    .await?;
    Ok(())
}

/// Writes a call's outcome; with `only_if_unfinished`, a call already on
/// record with its outcome is left as it is.
async fn upsert_call(
    tx: &Transaction<'_>,
    run_id: &str,
    call: &CallRecord,
    only_if_unfinished: bool,
) -> Result<(), Failure> {
    let condition = if only_if_unfinished {
        "WHERE calls.status = 'running'"
    } else {
        ""
    };
    let reply = call.reply.as_deref().map(|r| text(r));
    let error_message = call.error.as_ref().map(|e| text(&e.message));
    tx.execute(
        &format!(
            "INSERT INTO calls (run_seq, id, stage, label, model, status, latency_ms,
                 attempts, prompt_tokens, completion_tokens, cost_usd, error_kind, error_status,
                 error_message, reply, reused_from_run, reused_from_call, reasoning_tokens,
                 cost_estimated, format_sent, fallback_from, cached_tokens, cache_write_tokens)
             SELECT seq, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                    $18, $19, $20, $21, $22, $23
             FROM runs WHERE id = $1
             ON CONFLICT (run_seq, id) DO UPDATE SET status = excluded.status,
                 model = excluded.model, latency_ms = excluded.latency_ms,
                 attempts = excluded.attempts, prompt_tokens = excluded.prompt_tokens,
                 completion_tokens = excluded.completion_tokens, cost_usd = excluded.cost_usd,
                 error_kind = excluded.error_kind, error_status = excluded.error_status,
                 error_message = excluded.error_message, reply = excluded.reply,
                 reasoning_tokens = excluded.reasoning_tokens,
                 cost_estimated = excluded.cost_estimated, format_sent = excluded.format_sent,
                 fallback_from = excluded.fallback_from,
                 cached_tokens = excluded.cached_tokens,
                 cache_write_tokens = excluded.cache_write_tokens
             {condition}"
        ),
        &[
            &run_id,
            &i64::from(call.id),
            &call.stage,
            &call.label,
            &call.model,
            &call.status,
            &i64::from(call.latency_ms),
            &i64::from(call.attempts),
            &call.prompt_tokens.map(i64::from),
            &call.completion_tokens.map(i64::from),
            &call.cost_usd,
            &call.error.as_ref().map(|e| e.kind.as_str()),
            &call.error.as_ref().and_then(|e| e.status).map(i64::from),
            &error_message.as_deref(),
            &reply.as_deref(),
            &call.reused_from.as_ref().map(|r| r.run_id.as_str()),
            &call.reused_from.as_ref().map(|r| i64::from(r.call)),
            &call.reasoning_tokens.map(i64::from),
            &call.cost_estimated,
            &call.format_sent,
            &(!call.fallback_from.is_empty())
                .then(|| serde_json::to_string(&call.fallback_from).unwrap_or_default()),
            &call.cached_tokens.map(i64::from),
            &call.cache_write_tokens.map(i64::from),
        ],
    )
    .await?;
    Ok(())
}

/// A run that ended without a record: its totals from the calls on record.
async fn sum_usage(tx: &Transaction<'_>, run_id: &str) -> Result<(), Failure> {
    tx.execute(
        "UPDATE runs SET
             prompt_tokens = (SELECT SUM(prompt_tokens) FROM calls WHERE run_seq = runs.seq),
             completion_tokens = (SELECT SUM(completion_tokens) FROM calls WHERE run_seq = runs.seq),
             cost_usd = (SELECT SUM(cost_usd) FROM calls WHERE run_seq = runs.seq),
             cost_estimated = COALESCE((SELECT bool_or(cost_estimated) FROM calls
                               WHERE run_seq = runs.seq AND cost_usd IS NOT NULL), FALSE)
         WHERE id = $1",
        &[&run_id],
    )
    .await?;
    Ok(())
}
