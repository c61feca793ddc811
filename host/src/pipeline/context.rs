//! One run's share of the host: the fan-out that every chat completion goes
//! through (the panel's and the plugins' own), with the run's deadline, its
//! call budget, progress events, and the record of every call.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, join_all};
use tokio::time::Instant;

use super::events::{Event, Progress};
use crate::llm::{ChatRequest, Completion, Failure, FailureKind, Llm, ModelInfo};
use crate::plugins::{Budget, HostServices};
use crate::record::{CallError, CallRecord};

pub struct RunContext {
    llm: Arc<Llm>,
    progress: Progress,
    deadline: Instant,
    run_timeout: Duration,
    calls_left: AtomicU32,
    /// Calls refused for the budget: counted, not recorded, so a plugin
    /// that keeps asking cannot grow the record.
    refused: AtomicU32,
    call_budget: u32,
    next_id: AtomicU32,
    records: Mutex<Vec<Arc<CallRecord>>>,
}

impl RunContext {
    pub fn new(llm: Arc<Llm>, progress: Progress, run_timeout: Duration, call_budget: u32) -> Self {
        Self {
            llm,
            progress,
            deadline: Instant::now() + run_timeout,
            run_timeout,
            calls_left: AtomicU32::new(call_budget),
            refused: AtomicU32::new(0),
            call_budget,
            next_id: AtomicU32::new(0),
            records: Mutex::new(Vec::new()),
        }
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    pub fn emit(&self, event: Event) {
        (self.progress)(event);
    }

    /// Runs `requests` all at once (each provider's concurrency cap still
    /// applies) and returns their outcomes in request order.
    pub async fn fan_out(&self, stage: &str, requests: Vec<ChatRequest>) -> Vec<Completion> {
        let stage: Arc<str> = Arc::from(stage);
        // The budget and the ids are settled before anything is sent, in
        // request order, so ids follow the order plugins see.
        let admitted: Vec<(Option<u32>, Arc<ChatRequest>)> = requests
            .into_iter()
            .map(|request| (self.admit(), Arc::new(request)))
            .collect();
        for (id, request) in &admitted {
            if let Some(id) = *id {
                self.emit(Event::CallStarted {
                    id,
                    stage: stage.clone(),
                    request: request.clone(),
                });
            }
        }
        join_all(admitted.iter().map(|(id, request)| async {
            match *id {
                Some(id) => self.call(id, &stage, request).await,
                None => self.refuse(request),
            }
        }))
        .await
    }

    async fn call(&self, id: u32, stage: &str, request: &ChatRequest) -> Completion {
        let mut completion =
            match tokio::time::timeout_at(self.deadline, self.llm.complete(request)).await {
                Ok(completion) => completion,
                Err(_) => self.failed(
                    request,
                    Failure::new(
                        FailureKind::Timeout,
                        format!(
                            "the run's deadline ({:?}) passed before this call finished",
                            self.run_timeout
                        ),
                    ),
                    self.run_timeout,
                ),
            };
        completion.id = Some(id);
        let record = Arc::new(call_record(id, stage, &completion));
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.clone());
        self.emit(Event::CallFinished(record));
        completion
    }

    /// A call over the budget: counted, not recorded, so a plugin that keeps
    /// asking cannot grow the record.
    fn refuse(&self, request: &ChatRequest) -> Completion {
        let failure = Failure::new(
            FailureKind::OverBudget,
            format!(
                "the run already made its {} chat completions (limits.max_calls_per_run)",
                self.call_budget
            ),
        );
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.failed(request, failure, Duration::ZERO)
    }

    /// How many calls the budget refused.
    pub fn refused(&self) -> u32 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Takes one call from the budget and numbers it; `None` when spent.
    fn admit(&self) -> Option<u32> {
        self.calls_left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .ok()?;
        Some(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    fn failed(&self, request: &ChatRequest, failure: Failure, elapsed: Duration) -> Completion {
        Completion {
            id: None,
            label: request.label.clone(),
            model: request.model.clone(),
            latency_ms: u32::try_from(elapsed.as_millis()).unwrap_or(u32::MAX),
            attempts: 0,
            outcome: Err(failure),
        }
    }

    /// Every call so far, by id.
    pub fn records(&self) -> Vec<CallRecord> {
        let mut records: Vec<CallRecord> = self
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|r| CallRecord::clone(r))
            .collect();
        records.sort_unstable_by_key(|r| r.id);
        records
    }
}

/// A completion as the run's record keeps it.
pub fn call_record(id: u32, stage: &str, completion: &Completion) -> CallRecord {
    let (usage, error) = match &completion.outcome {
        Ok(reply) => (reply.usage, None),
        Err(failure) => (None, Some(call_error(failure))),
    };
    CallRecord {
        id,
        stage: stage.to_owned(),
        label: completion.label.clone(),
        model: completion.model.clone(),
        status: if error.is_none() { "ok" } else { "failed" }.to_owned(),
        latency_ms: completion.latency_ms,
        attempts: completion.attempts,
        prompt_tokens: usage.map(|u| u.prompt_tokens),
        completion_tokens: usage.map(|u| u.completion_tokens),
        cost_usd: usage.and_then(|u| u.cost),
        error,
    }
}

fn call_error(failure: &Failure) -> CallError {
    CallError {
        kind: failure.kind.as_str().to_owned(),
        status: failure.status,
        message: failure.message.clone(),
    }
}

impl HostServices for RunContext {
    fn complete(&self, plugin: &str, requests: Vec<ChatRequest>) -> BoxFuture<'_, Vec<Completion>> {
        let stage = plugin.to_owned();
        Box::pin(async move { self.fan_out(&stage, requests).await })
    }

    fn progress(&self, plugin: &str, message: String) {
        self.emit(Event::Note {
            plugin: plugin.to_owned(),
            message,
        });
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.llm.catalog().cloned().collect()
    }

    fn budget(&self) -> Budget {
        Budget {
            calls_left: self.calls_left.load(Ordering::Acquire),
            // The run has no cost ceiling yet.
            cost_left: None,
            time_left: self.deadline.saturating_duration_since(Instant::now()),
        }
    }
}
