//! The PostgreSQL store's writer: one task per process, on the store's own
//! runtime. Runs hand it their events through the same bounded channel as
//! the SQLite writer's and never wait on it; it writes them in batches,
//! one transaction per batch, through the pool.
//!
//! When the database cannot be reached, what is not written yet stays in
//! a bounded backlog in memory (the oldest events of unfinished runs go
//! first when it is full; a run's end goes last) and the runs go on: each
//! run's end is answered at once with why it is not written yet, and the
//! backlog is written when the database is back. The backlog is bounded
//! in events and in the attachment bytes they hold (see `backlog`). Said
//! in the log once when it goes, once when it comes back.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use tokio::sync::mpsc;

use super::apply::transaction;
use super::{Failure, retention, schema};
use crate::store::event::{Msg, now_ms};
use crate::store::memory::Memory;
use crate::store::retention::Retention;

/// Most messages in one transaction.
const BATCH: usize = 512;
/// Messages kept while the database is unreachable.
const BACKLOG: usize = 4 * crate::store::event::CAPACITY;
/// Attachment bytes those messages may hold on to.
const BACKLOG_BYTES: u64 = 128 << 20;
/// Retention runs this often, and after this many runs ended.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
const PRUNE_AFTER_RUNS: u32 = 200;
/// The first pass, this long after the store opens (after a server has
/// answered `initialize`).
const FIRST_PRUNE: Duration = Duration::from_secs(5);
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
    /// Whether a retention pass is going (see `prune`).
    pub pruning: Arc<AtomicBool>,
    pub retry: Duration,
    pub lag: crate::store::WriteLag,
}

impl Writer {
    pub async fn run(mut self, mut receiver: mpsc::Receiver<Msg>) {
        self.prune(FIRST_PRUNE).await;
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
                self.prune(Duration::ZERO).await;
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
            match transaction(
                &mut client,
                &batch,
                &self.instance,
                self.retention.max_bytes,
            )
            .await
            {
                Ok(()) => self.answer(batch, None),
                Err(failure) if failure.transient() => {
                    for msg in batch.into_iter().rev() {
                        self.pending.push_front(msg);
                    }
                    return self.went_down(&failure);
                }
                // A message the database refuses: each on its own, so the
                // rest are still written.
                Err(_) => {
                    for (i, msg) in batch.into_iter().enumerate() {
                        match transaction(
                            &mut client,
                            std::slice::from_ref(&msg),
                            &self.instance,
                            self.retention.max_bytes,
                        )
                        .await
                        {
                            Ok(()) => self.answer(vec![msg], None),
                            Err(failure) if failure.transient() => {
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
        if error.is_none() {
            self.lag.written(&batch);
        }
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

    /// Past `BACKLOG` events or `BACKLOG_BYTES` of attachments, the
    /// oldest events go (for bytes, those that carry them), a run's end
    /// last of all (see `backlog`).
    fn bound(&mut self) {
        let let_go = super::backlog::bound(&mut self.pending, BACKLOG, BACKLOG_BYTES);
        if let_go == super::backlog::LetGo::default() {
            return;
        }
        if self.lost == 0 {
            let dropped = let_go.events;
            let bytes = crate::text::show_bytes(let_go.bytes);
            let stripped = let_go.ends_stripped;
            tracing::warn!(store = %self.shown, "the run store has been unreachable long enough that {dropped} run events kept for it were dropped and {bytes} of attachments let go (the backlog keeps at most {BACKLOG} events and {} of attachments; {stripped} runs will record theirs as not kept)", crate::text::show_bytes(BACKLOG_BYTES));
        }
        self.lost += (let_go.events + let_go.ends_stripped) as u64;
    }

    /// Starts a retention pass beside the writer (on its own pooled
    /// connection) `after` this long, unless one is still going: the
    /// writes of the runs never wait on it.
    async fn prune(&mut self, after: Duration) {
        self.last_prune = Instant::now();
        self.ended_since_prune = 0;
        if self.pruning.swap(true, Ordering::AcqRel) {
            return;
        }
        // The tables made first, if this process has not yet.
        if let Err(e) = self.connect().await {
            tracing::warn!(store = %self.shown, "retention failed: {e}");
            self.pruning.store(false, Ordering::Release);
            return;
        }
        let (pool, retention) = (self.pool.clone(), self.retention.clone());
        let (shown, pruning) = (self.shown.clone(), self.pruning.clone());
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let pruned = match pool.get().await {
                Ok(mut client) => retention::prune(&mut client, &retention, now_ms()).await,
                Err(e) => Err(Failure::Pool(e.to_string())),
            };
            match pruned {
                Ok(Some(p)) if p.removed > 0 => tracing::info!(
                    store = %shown,
                    "retention removed {} runs ({} bytes); {} kept",
                    p.removed, p.removed_bytes, p.kept
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(store = %shown, "retention failed: {e}"),
            }
            pruning.store(false, Ordering::Release);
        });
    }
}
