//! A run's recorder: watches the run's events and hands them to the store
//! as they happen, then the run's end. Watching never blocks the run: an
//! event that does not fit in the writer's queue is counted and dropped,
//! and the end — which carries everything needed to write the run whole —
//! is the one message a run waits for, with a bound.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::oneshot;

use super::event::{Begin, End, Msg, now_ms};
use super::memory::Memory;
use super::queue::Queue;
use crate::events::{Event, Progress};
use crate::plugins::Plan;
use crate::plugins::plan_to_value;
use crate::record::{CallRecord, RunRecord, RunStatus, StoredCall, StoredRun, Totals};

/// How long a run waits for the store to confirm its end before it
/// returns anyway (the end is still written when the store can).
const END_WAIT: Duration = Duration::from_secs(10);

/// What a run builds on: recorded with it from its first row.
#[derive(Debug, Clone, Default)]
pub struct Links {
    pub follow_up_of: Option<String>,
    pub resynthesis_of: Option<String>,
    /// Who makes the run.
    pub client: Option<String>,
    /// What the question came with: its metadata is recorded with the run,
    /// its bytes kept once by content (see `store::attachments`).
    pub attachments: crate::attach::Attachments,
    /// The experiment the run serves, and by which variant.
    pub experiment: Option<crate::record::Assignment>,
}

#[derive(Clone)]
pub(super) enum Sink {
    Writer(Queue),
    Memory(Arc<Memory>),
}

impl Sink {
    /// A backend's writer; a store opened for reading has none, and every
    /// write to it is refused (and counted as lost).
    pub(super) fn writer(queue: Option<&Queue>) -> Self {
        Self::Writer(queue.cloned().unwrap_or_else(|| super::queue::channel(1).0))
    }
}

pub struct Recorder {
    shared: Arc<Shared>,
    ended: bool,
}

struct Shared {
    sink: Sink,
    links: Links,
    time_limit: Duration,
    begin: OnceLock<Begin>,
    plan: OnceLock<Arc<Plan>>,
    /// For the memory sink, which keeps a run only when it ends.
    calls: Mutex<Vec<Arc<CallRecord>>>,
    lost: AtomicU32,
}

impl Recorder {
    pub(super) fn new(sink: Sink, links: Links, time_limit: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                sink,
                links,
                time_limit,
                begin: OnceLock::new(),
                plan: OnceLock::new(),
                calls: Mutex::new(Vec::new()),
                lost: AtomicU32::new(0),
            }),
            ended: false,
        }
    }

    /// The watcher to give the run (alongside any other).
    pub fn watcher(&self) -> Progress {
        let shared = self.shared.clone();
        Arc::new(move |event| shared.see(event))
    }

    /// The run's id, once it has started.
    pub fn run_id(&self) -> Option<&str> {
        self.shared.begin.get().map(|b| b.request.run_id.as_str())
    }

    /// Records the run's end and waits (a bounded time) until it is written.
    /// A run that never started (its request was refused) leaves no trace.
    pub async fn finish(&mut self, outcome: Result<&Arc<RunRecord>, String>) -> Result<(), String> {
        self.ended = true;
        let end = match outcome {
            Ok(record) => End::Done(record.clone()),
            Err(error) => End::Failed(error),
        };
        let (Some(msg), Sink::Writer(queue)) = (self.shared.end(end), &self.shared.sink) else {
            return Ok(());
        };
        let (msg, confirmed) = with_ack(msg);
        let stopped = || "the run store's writer has stopped".to_owned();
        let written = async {
            queue.deliver(msg).await.map_err(|_| stopped())?;
            confirmed.await.map_err(|_| stopped())?
        };
        tokio::time::timeout(END_WAIT, written).await.unwrap_or_else(|_| {
            Err(format!(
                "the run store did not confirm the write within {END_WAIT:?} (it is busy); it is still queued"
            ))
        })
    }
}

/// A run dropped before its end was cancelled (by its caller, or because the
/// process is shutting down): say so, without waiting.
impl Drop for Recorder {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        if let Some(msg) = self.shared.end(End::Cancelled)
            && let Sink::Writer(queue) = &self.shared.sink
        {
            let _ = queue.post(msg);
        }
    }
}

fn with_ack(mut msg: Msg) -> (Msg, oneshot::Receiver<Result<(), String>>) {
    let (sender, receiver) = oneshot::channel();
    if let Msg::End { ack, .. } = &mut msg {
        *ack = Some(sender);
    }
    (msg, receiver)
}

impl Shared {
    fn see(&self, event: Event) {
        match event {
            Event::Started(request) => {
                let started_at = now_ms();
                let limit = i64::try_from(self.time_limit.as_millis()).unwrap_or(i64::MAX);
                let begin = Begin {
                    request,
                    follow_up_of: self.links.follow_up_of.clone(),
                    resynthesis_of: self.links.resynthesis_of.clone(),
                    client: self.links.client.clone(),
                    experiment: self.links.experiment.clone(),
                    attachments: (!self.links.attachments.is_empty())
                        .then(|| serde_json::to_string(&self.links.attachments.infos()).ok())
                        .flatten(),
                    files: self.links.attachments.clone(),
                    bytes_let_go: None,
                    started_at,
                    deadline_at: started_at.saturating_add(limit),
                };
                let _ = self.begin.set(begin.clone());
                self.send(|| Msg::Begin(begin));
            }
            Event::Planned(plan) => {
                let _ = self.plan.set(plan.clone());
                if let Some(run_id) = self.run_id() {
                    self.send(|| Msg::Plan { run_id, plan });
                }
            }
            Event::CallStarted { id, stage, request } => {
                if let Some(run_id) = self.run_id() {
                    self.send(|| Msg::CallStarted {
                        run_id,
                        id,
                        stage,
                        request,
                        at: now_ms(),
                    });
                }
            }
            Event::CallFinished(call) => match &self.sink {
                Sink::Memory(_) => self
                    .calls
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(call),
                Sink::Writer(_) => {
                    if let Some(run_id) = self.run_id() {
                        self.send(|| Msg::CallFinished { run_id, call });
                    }
                }
            },
            _ => {}
        }
    }

    fn run_id(&self) -> Option<String> {
        self.begin.get().map(|b| b.request.run_id.clone())
    }

    /// Hands `msg` to the writer if there is room; otherwise counts it.
    fn send(&self, msg: impl FnOnce() -> Msg) {
        let Sink::Writer(queue) = &self.sink else {
            return;
        };
        if queue.post(msg()).is_err() && self.lost.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                run = self.run_id().unwrap_or_default(),
                "the run store's queue is full: some of this run's events are not written as they happen (its end will be, whole)"
            );
        }
    }

    /// The end of the run as a message for the disk, or kept at once in
    /// memory. `None` when the run never started.
    fn end(&self, end: End) -> Option<Msg> {
        let begin = self.begin.get()?.clone();
        let at = now_ms();
        match &self.sink {
            Sink::Memory(memory) => {
                let calls =
                    std::mem::take(&mut *self.calls.lock().unwrap_or_else(|e| e.into_inner()));
                memory.insert(stored(&begin, self.plan.get(), end, calls, at));
                None
            }
            Sink::Writer(_) => Some(Msg::End {
                begin,
                plan: self.plan.get().cloned(),
                end,
                lost_events: self.lost.load(Ordering::Relaxed),
                at,
                ack: None,
            }),
        }
    }
}

/// A run as the memory sink keeps it (and the PostgreSQL store, while
/// its database is down).
pub(super) fn stored(
    begin: &Begin,
    plan: Option<&Arc<Plan>>,
    end: End,
    calls: Vec<Arc<CallRecord>>,
    at: i64,
) -> StoredRun {
    let request = &begin.request;
    let mut run = StoredRun {
        run_id: request.run_id.clone(),
        pipeline: request.pipeline.clone(),
        status: RunStatus::Done,
        started_at: begin.started_at,
        finished_at: Some(at),
        prompt: request.prompt.clone(),
        options: request.options.clone(),
        plan: plan.map(|p| plan_to_value(p)),
        follow_up_of: begin.follow_up_of.clone(),
        resynthesis_of: begin.resynthesis_of.clone(),
        client: begin.client.clone(),
        attachments: super::row::attachments(begin.attachments.clone()),
        experiment: begin.experiment.clone(),
        kind: None,
        summary: None,
        answer: None,
        notes: Vec::new(),
        details: None,
        error: None,
        usage: Totals::default(),
        elapsed_ms: u64::try_from(at.saturating_sub(begin.started_at)).ok(),
        calls: Vec::new(),
    };
    let calls: Vec<CallRecord> = match end {
        End::Done(record) => {
            run.kind = Some(record.kind);
            run.summary = Some(record.summary.clone());
            run.answer = Some(record.answer.clone());
            run.notes = record.notes.clone();
            run.details = record.details.clone();
            run.elapsed_ms = Some(record.elapsed_ms);
            record.calls.clone()
        }
        End::Failed(error) => {
            run.status = RunStatus::Failed;
            run.error = Some(error);
            calls.iter().map(|c| CallRecord::clone(c)).collect()
        }
        End::Cancelled => {
            run.status = RunStatus::Cancelled;
            calls.iter().map(|c| CallRecord::clone(c)).collect()
        }
    };
    let mut calls = calls;
    calls.sort_by_key(|c| c.id);
    run.usage = Totals::of(&calls);
    run.calls = calls
        .into_iter()
        .map(|call| StoredCall {
            call,
            request: None,
        })
        .collect();
    run
}
