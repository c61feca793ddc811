//! One run's share of the host: the fan-out that every chat completion goes
//! through (the panel's and the plugins' own), with the run's deadline, its
//! call budget, progress events, and the record of every call.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, join_all};
use tokio::time::Instant;

use super::events::{CallSummary, Event, Progress};
use crate::llm::{ChatRequest, Completion, Failure, FailureKind, Llm, ModelInfo};
use crate::plugins::HostServices;
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
    records: Mutex<Vec<CallRecord>>,
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
    /// applies) and returns their outcomes in order.
    pub async fn fan_out(&self, stage: &str, requests: Vec<ChatRequest>) -> Vec<Completion> {
        let completions = join_all(requests.iter().map(|r| self.one(stage, r))).await;
        // Recorded in request order, so a record's position matches the
        // index plugins use for the completion.
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(
                completions
                    .iter()
                    .filter(|c| !is_refused(c))
                    .map(|c| call_record(stage, c)),
            );
        completions
    }

    async fn one(&self, stage: &str, request: &ChatRequest) -> Completion {
        let completion = if self.take_call() {
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
            }
        } else {
            let failure = Failure::new(
                FailureKind::OverBudget,
                format!(
                    "the run already made its {} chat completions (limits.max_calls_per_run)",
                    self.call_budget
                ),
            );
            self.refused.fetch_add(1, Ordering::Relaxed);
            return self.failed(request, failure, Duration::ZERO);
        };
        self.emit(Event::Call(CallSummary::new(stage, &completion)));
        completion
    }

    /// How many calls the budget refused.
    pub fn refused(&self) -> u32 {
        self.refused.load(Ordering::Relaxed)
    }

    fn take_call(&self) -> bool {
        self.calls_left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .is_ok()
    }

    fn failed(&self, request: &ChatRequest, failure: Failure, elapsed: Duration) -> Completion {
        Completion {
            label: request.label.clone(),
            model: request.model.clone(),
            latency_ms: u32::try_from(elapsed.as_millis()).unwrap_or(u32::MAX),
            attempts: 0,
            outcome: Err(failure),
        }
    }

    /// Every call so far: batch by batch, each in request order.
    pub fn records(&self) -> Vec<CallRecord> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A completion as the run's record keeps it.
pub fn call_record(stage: &str, completion: &Completion) -> CallRecord {
    let (usage, error) = match &completion.outcome {
        Ok(reply) => (reply.usage, None),
        Err(failure) => (None, Some(call_error(failure))),
    };
    CallRecord {
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

fn is_refused(completion: &Completion) -> bool {
    matches!(&completion.outcome, Err(f) if f.kind == FailureKind::OverBudget)
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
}
