//! One run's share of the host: the fan-out that every chat completion goes
//! through (the panel's and the plugins' own), with the run's deadline, its
//! call and cost budgets, the straggler policy, progress events (tokens
//! included), and the record of every call. A follow-up's conversation goes
//! ahead of every request here, and a re-synthesis starts with the answers
//! it reuses already on record.
//!
//! `RunContext` composes one part per concern, each in its own file:
//! `batch` (a batch of calls: admit, send, gather, note), `calls` (the
//! call budget and ids), `budget` (money, in `pipeline/budget.rs`),
//! `attach` (the run's attachments, their descriptions and extracted
//! text), `search`, `cached` (the response cache port), `fallback`,
//! `recording` (the call log), `caller` (what the caller asked beyond its
//! question: an answer format, tools) and `host` (what plugins may ask of
//! it).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

mod attach;
mod batch;
mod cached;
mod caller;
mod calls;
mod fallback;
mod host;
mod recording;
mod search;

use batch::Live;
pub use search::search_of_stage;

#[cfg(test)]
pub use recording::call_record;

use super::attachments::RunAttachments;
use super::budget::{Budget, Ceiling, Reservation};
use super::describe::{Descriptions, Extracted};
use super::stragglers::Policy;
use crate::config::{FanOut, show_duration};
use crate::events::{Event, Progress, Stage, TOKENS_EVERY};
use crate::llm::{
    CallHooks, ChatRequest, Completion, Failure, FailureKind, Llm, Message, next_run_seq,
};

use crate::record::CallRecord;

/// What a run is allowed: time, calls, money, and how its batches gather.
#[derive(Debug, Clone)]
pub struct Limits {
    pub run_timeout: Duration,
    pub call_budget: u32,
    pub fan_out: FanOut,
    /// Where each fan-out setting comes from: `fan_out` or
    /// `pipelines.NAME.fan_out`, for messages.
    pub quorum_key: String,
    pub grace_key: String,
    pub reserve_key: String,
    pub ceiling: Option<Ceiling>,
    /// A dry run (`chorus ask --dry-run`): no model is called; each call
    /// gets a placeholder answer, and its worst-case cost is recorded as
    /// an estimate.
    pub dry_run: bool,
    /// Fallback chains by model (see `fallback`): tried in order when a
    /// model fails for good.
    pub fallbacks: std::collections::HashMap<String, Vec<String>>,
}

pub struct RunContext {
    llm: Arc<Llm>,
    progress: Progress,
    deadline: Instant,
    limits: Limits,
    /// The call budget and the calls' ids.
    calls: calls::Calls,
    budget: Budget,
    /// The merge has begun: calls may use the time kept for it.
    merging: AtomicBool,
    records: Mutex<Vec<Arc<CallRecord>>>,
    /// What the policies did, for the result's notes.
    notes: Mutex<Vec<String>>,
    /// A follow-up's earlier conversation, sent ahead of every request.
    history: Vec<Message>,
    /// When the run started, among all runs: older runs' calls get the
    /// providers' permits first (see `llm::Priority`).
    run_seq: u64,
    /// The stage rank of the run's next batch of calls: one more per batch,
    /// so a run further along gets the providers' permits first.
    next_rank: AtomicU32,
    /// The run's attachments, placed on every request (see `attachments`).
    attachments: Option<Arc<RunAttachments>>,
    /// Their descriptions, written once, by the first batch that needs them.
    descriptions: tokio::sync::OnceCell<Arc<Descriptions>>,
    /// The text of its PDFs, extracted once, by the first batch that needs it.
    extracted: tokio::sync::OnceCell<Arc<Extracted>>,
    /// The run's web search, when it asked for one.
    search: Option<crate::llm::WebSearch>,
    /// Providers already named in a note for not searching.
    unsearched: Mutex<Vec<String>>,
    /// The response cache, when it is on (see `cached`).
    cache: Option<Box<dyn super::RunCallCache>>,
    /// What the caller asked beyond its question (a format, tools).
    caller: caller::Caller,
}

impl RunContext {
    pub fn new(llm: Arc<Llm>, progress: Progress, limits: Limits) -> Self {
        Self {
            llm,
            progress,
            deadline: Instant::now() + limits.run_timeout,
            calls: calls::Calls::new(limits.call_budget),
            budget: Budget::new(limits.ceiling.clone()),
            merging: AtomicBool::new(false),
            records: Mutex::new(Vec::new()),
            notes: Mutex::new(Vec::new()),
            limits,
            history: Vec::new(),
            run_seq: next_run_seq(),
            next_rank: AtomicU32::new(0),
            attachments: None,
            descriptions: tokio::sync::OnceCell::new(),
            extracted: tokio::sync::OnceCell::new(),
            search: None,
            unsearched: Mutex::new(Vec::new()),
            cache: None,
            caller: caller::Caller::default(),
        }
    }

    /// The run's calls check `cache` before they are sent, and keep their
    /// answers in it.
    pub fn with_cache(mut self, cache: Option<Box<dyn super::RunCallCache>>) -> Self {
        self.cache = cache;
        self
    }

    /// Every call of the run searches the web as `search` says (models
    /// configured to search do anyway).
    pub fn with_search(mut self, search: Option<crate::llm::WebSearch>) -> Self {
        self.search = search;
        self
    }

    /// Every request of the run will carry `history` (a follow-up's
    /// conversation) ahead of its own messages.
    pub fn with_history(mut self, history: Vec<Message>) -> Self {
        self.history = history;
        self
    }

    /// Starts the record with calls made by an earlier run (a
    /// re-synthesis); they keep their ids, and new calls number after them.
    /// They were not made by this run, so they take nothing from its budget;
    /// they are its first stage, so its own calls queue as a later one.
    pub fn with_reused(self, calls: Vec<CallRecord>) -> Self {
        if !calls.is_empty() {
            self.next_rank.store(1, Ordering::Relaxed);
        }
        let next = calls.iter().map(|c| c.id + 1).max().unwrap_or(0);
        self.calls.number_after(next);
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(calls.into_iter().map(Arc::new));
        self
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The run's `run_timeout`, which set its deadline.
    pub fn run_timeout(&self) -> std::time::Duration {
        self.limits.run_timeout
    }

    pub fn emit(&self, event: Event) {
        if matches!(event, Event::Stage(Stage::Synthesize)) {
            self.merging.store(true, Ordering::Relaxed);
        }
        (self.progress)(event);
    }

    /// How the next batch gathers: before the merge, it must end
    /// `merge_reserve` ahead of the run's deadline.
    fn policy(&self) -> Policy {
        let limits = &self.limits;
        let cut_at = (!self.merging.load(Ordering::Relaxed)).then(|| {
            let reserve = limits.fan_out.merge_reserve.of(limits.run_timeout);
            (
                self.deadline - reserve,
                format!(
                    "calls before the merge must end {} before the run's deadline of {} \
                     (merge_reserve = {}, {}.merge_reserve), so the answers that arrived can still be merged",
                    show_duration(reserve),
                    show_duration(limits.run_timeout),
                    limits.fan_out.merge_reserve,
                    limits.reserve_key
                ),
            )
        });
        Policy {
            quorum: limits.fan_out.quorum,
            grace: limits.fan_out.straggler_grace,
            quorum_key: limits.quorum_key.clone(),
            grace_key: limits.grace_key.clone(),
            cut_at,
        }
    }

    /// Runs `requests` all at once (each provider's concurrency cap still
    /// applies) under the fan-out policy and the budgets, and returns their
    /// outcomes in request order.
    ///
    /// The calls that put the caller's question get its answer format and
    /// tools, and their JSON answers come back canonical (see `caller`).
    pub async fn fan_out(&self, stage: &str, requests: Vec<ChatRequest>) -> Vec<Completion> {
        let (requests, asked) = self.formatted_calls(requests);
        let completions = self.gather(stage, requests, false).await;
        self.canonical_answers(completions, &asked)
    }

    /// One call whose reply is the run's answer as its model writes it (a
    /// synthesizer's `host.complete-answer`): a batch of one under the
    /// same policy and budgets, whose text goes out as it streams — once
    /// the merge has begun: a selector or prompter that asks for one gets
    /// an ordinary call, as the contract says, so nothing before the
    /// synthesizer can write into the answer. With an answer format, it is
    /// asked for the format, and its text is not streamed: the answer is
    /// checked (and perhaps repaired) before any of it goes out.
    pub async fn answer_call(&self, stage: &str, request: ChatRequest) -> Completion {
        let (label, model) = (request.label.clone(), request.model.clone());
        let streams = self.merging.load(Ordering::Relaxed) && self.format().is_none();
        let request = if self.merging.load(Ordering::Relaxed) {
            self.formatted_answer(request)
        } else {
            request
        };
        let mut outcomes = self.gather(stage, vec![request], streams).await;
        outcomes
            .pop()
            .unwrap_or_else(|| crate::plugins::no_outcome(label, model))
    }

    async fn call(
        &self,
        id: u32,
        stage: &Arc<str>,
        request: &Arc<ChatRequest>,
        reservation: Reservation,
        live: &Live,
    ) -> Completion {
        self.emit(Event::CallStarted {
            id,
            stage: stage.clone(),
            request: request.clone(),
        });
        let on_tokens = |tokens: u32| {
            live.tokens.store(tokens, Ordering::Relaxed);
            let now = u64::try_from(live.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let last = live.last_event_ms.load(Ordering::Relaxed);
            let due =
                last == u64::MAX || now.saturating_sub(last) >= TOKENS_EVERY.as_millis() as u64;
            if due {
                live.last_event_ms.store(now, Ordering::Relaxed);
                self.emit(Event::CallTokens { id, tokens });
            }
        };
        let on_text = |attempt: u32, text: &str| {
            self.emit(Event::AnswerText {
                id,
                attempt,
                text: Arc::from(text),
            });
        };
        if self.limits.dry_run {
            return self.pretend(id, stage, request, reservation);
        }
        let cache_key = self.cache_key(stage, request);
        if let Some(hit) = self.cached(cache_key.as_deref()).await {
            return self.answer_from_cache(id, stage, request, reservation, hit);
        }
        let on_queued = |behind: Option<usize>| {
            let ahead = behind.map_or(0, |n| {
                u32::try_from(n).unwrap_or(u32::MAX).saturating_add(1)
            });
            live.queued.store(ahead, Ordering::Relaxed);
            self.emit(Event::CallQueued {
                id,
                behind: behind.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            });
        };
        let on_retry = |model: &str, attempt: u32, failure: &Failure, wait| {
            self.emit(Event::CallRetrying {
                id,
                model: Arc::from(model),
                attempt,
                wait,
                error: failure.to_string(),
            });
        };
        let hooks = CallHooks {
            priority: live.priority,
            on_tokens: &on_tokens,
            on_text: live.answer.then_some(&on_text as _),
            on_queued: &on_queued,
            on_retry: &on_retry,
            attempts: &live.attempts,
            search: self.search_for(stage),
        };
        let (mut completion, request, reservation, tried) = self
            .send_with_fallbacks(id, request.clone(), reservation, live, &hooks)
            .await;
        completion.id = Some(id);
        let spent = match &completion.outcome {
            Ok(reply) => reply.usage.and_then(|u| u.cost),
            Err(f) if f.kind == FailureKind::TokenLimit => None,
            Err(_) => self.streamed_cost(&request, live).or(Some(0.0)),
        };
        self.budget.settle(reservation, spent);
        let failed_cost = match &completion.outcome {
            Err(_) => self.streamed_cost(&request, live),
            Ok(_) => None,
        };
        let fresh = completion.outcome.is_ok() && tried.is_empty();
        self.record_tried(id, stage, &completion, failed_cost, tried);
        if let (true, Some(key)) = (fresh, cache_key) {
            self.keep_in_cache(key, id).await;
        }
        completion
    }

    /// Sends `request` once (its retries included), within the run's
    /// deadline — which counts the wait for the provider's permits.
    async fn send(&self, request: &ChatRequest, hooks: &CallHooks<'_>, live: &Live) -> Completion {
        match tokio::time::timeout_at(self.deadline, self.llm.complete_watched(request, hooks))
            .await
        {
            Ok(completion) => completion,
            Err(_) => {
                let failure = Failure::new(
                    FailureKind::Timeout,
                    format!(
                        "the run's deadline ({}) passed before this call finished{}",
                        show_duration(self.limits.run_timeout),
                        self.still_queued(request, live)
                    ),
                );
                let mut completion = self.failed(request, failure, live.started.elapsed());
                completion.attempts = live.attempts.started();
                completion.queued_ms = live.attempts.queued_ms();
                completion
            }
        }
    }

    /// How many calls the budget refused.
    pub fn refused(&self) -> u32 {
        self.calls.refused()
    }

    /// What the fan-out policy and the cost ceiling did, for the result.
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn note(&self, note: String) {
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(note);
    }

    /// Calls the run may still make (`limits.max_calls_per_run` less those
    /// made, by the selector's or prompter's own calls too).
    pub fn calls_left(&self) -> u32 {
        self.calls.left()
    }
}
