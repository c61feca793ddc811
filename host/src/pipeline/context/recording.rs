//! How a call becomes part of the run's record: answered, cut by the
//! fan-out policy, pretended (a dry run), refused by the call budget, or
//! failed — with what it cost, streamed tokens of unfinished calls included.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::batch::plural;
use super::{Live, RunContext};
use crate::events::Event;
use crate::llm::{
    ChatRequest, Completion, Failure, FailureKind, FormatSent, Reply, estimate_prompt_tokens,
};
use crate::pipeline::budget::Reservation;
use crate::record::{CallError, CallRecord};

impl RunContext {
    /// A dry run's call: a placeholder answer that says what it is, and
    /// the call's worst case held against the budget and recorded as its
    /// estimated cost (none when unknown).
    pub(super) fn pretend(
        &self,
        id: u32,
        stage: &str,
        request: &ChatRequest,
        reservation: Reservation,
    ) -> Completion {
        let search = self.llm.search_plan(&request.model, self.search_for(stage));
        let worst = crate::pipeline::budget::worst_case_usd(&self.llm, request)
            .ok()
            .map(|usd| usd + search.usd());
        self.budget.settle(reservation, worst);
        let completion = Completion {
            id: Some(id),
            label: request.label.clone(),
            model: request.model.clone(),
            latency_ms: 0,
            attempts: 0,
            queued_ms: None,
            ttft_ms: None,
            outcome: Ok(Reply {
                content: Arc::new(format!(
                    "[dry run: {}'s answer to call {id} would be here]",
                    request.model
                )),
                served_by: request.model.clone(),
                finish_reason: Some("dry-run".to_owned()),
                usage: None,
                format_sent: Default::default(),
                citations: Vec::new(),
                tool_calls: Vec::new(),
            }),
        };
        self.record(id, stage, &completion, worst);
        completion
    }

    /// A call the policy stopped: recorded as `cut`, with what its
    /// streamed tokens probably cost.
    pub(super) fn cut(
        &self,
        id: u32,
        stage: &str,
        request: &ChatRequest,
        reservation: Reservation,
        live: &Live,
        why: &str,
    ) -> Completion {
        let serving = live
            .serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let (request, tried) = match &serving {
            Some((fallback, tried)) => (&**fallback, tried.clone()),
            None => (request, Vec::new()),
        };
        let cost = self.streamed_cost(request, live);
        self.budget.settle(reservation, cost.or(Some(0.0)));
        let failure = Failure::new(
            FailureKind::Cut,
            format!("{why}{}", self.still_queued(request, live)),
        );
        let mut completion = self.failed(request, failure, live.started.elapsed());
        completion.id = Some(id);
        completion.attempts = live.attempts.started();
        completion.queued_ms = live.attempts.queued_ms();
        self.record_tried(id, stage, &completion, cost, tried);
        completion
    }

    /// The estimated cost of what a call streamed, over all its attempts,
    /// before it ended without a reply (nothing streamed: nothing billed,
    /// we assume). Each attempt that streamed paid for its prompt.
    pub(super) fn streamed_cost(&self, request: &ChatRequest, live: &Live) -> Option<f64> {
        let tokens = live.tokens.load(Ordering::Relaxed);
        if tokens == 0 {
            return None;
        }
        let (lost_attempts, lost_tokens) = live.attempts.lost();
        // Dropped midway (a deadline, a cut): the attempt in flight counts too.
        let in_flight = u64::from(tokens > lost_tokens);
        let prompts = (u64::from(lost_attempts) + in_flight).max(1);
        self.llm.model(&request.model)?.cost(
            estimate_prompt_tokens(request).saturating_mul(prompts),
            u64::from(tokens),
        )
    }

    pub(super) fn record(
        &self,
        id: u32,
        stage: &str,
        completion: &Completion,
        failed_cost: Option<f64>,
    ) {
        self.record_tried(id, stage, completion, failed_cost, Vec::new());
    }

    /// Records a call that filled its seat after the models in `tried`
    /// failed for good (see `fallback`).
    pub(super) fn record_tried(
        &self,
        id: u32,
        stage: &str,
        completion: &Completion,
        failed_cost: Option<f64>,
        tried: Vec<String>,
    ) {
        let mut record = call_record(id, stage, completion);
        record.fallback_from = tried;
        if record.cost_usd.is_none()
            && let Some(cost) = failed_cost
        {
            record.cost_usd = Some(cost);
            record.cost_estimated = true;
        }
        self.keep_record(record);
    }

    /// Adds `record` to the run's and announces it.
    pub(super) fn keep_record(&self, record: CallRecord) {
        let record = Arc::new(record);
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.clone());
        self.emit(Event::CallFinished(record));
    }

    /// A call over the budget: counted, not recorded, so a plugin that keeps
    /// asking cannot grow the record.
    pub(super) fn refuse(&self, request: &ChatRequest) -> Completion {
        let failure = Failure::new(
            FailureKind::OverBudget,
            format!(
                "the run already made its {} chat completions (limits.max_calls_per_run)",
                self.calls.budget()
            ),
        );
        self.calls.refuse();
        self.failed(request, failure, Duration::ZERO)
    }

    /// What a call ended early was still doing, if it had not been sent
    /// yet: waiting for one of its provider's permits.
    pub(super) fn still_queued(&self, request: &ChatRequest, live: &Live) -> String {
        let provider = self
            .llm
            .model(&request.model)
            .map_or_else(|| "NAME".to_owned(), |m| m.provider.clone());
        match live.queued.load(Ordering::Relaxed) {
            0 => String::new(),
            n => format!(
                " (it was still waiting for one of the provider's permits, queued behind {}: \
                 providers.{provider}.max_concurrency)",
                plural((n - 1) as usize, "request", "requests")
            ),
        }
    }

    pub(super) fn failed(
        &self,
        request: &ChatRequest,
        failure: Failure,
        elapsed: Duration,
    ) -> Completion {
        Completion {
            id: None,
            label: request.label.clone(),
            model: request.model.clone(),
            latency_ms: u32::try_from(elapsed.as_millis()).unwrap_or(u32::MAX),
            attempts: 0,
            queued_ms: None,
            ttft_ms: None,
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
    let (usage, error, status, reply, format_sent) = match &completion.outcome {
        Ok(reply) => (
            reply.usage,
            None,
            "ok",
            Some(reply.content.clone()),
            (reply.format_sent != FormatSent::None).then(|| reply.format_sent.as_str().to_owned()),
        ),
        Err(failure) => {
            let status = match failure.kind {
                FailureKind::Cut => "cut",
                FailureKind::OverBudget | FailureKind::UnsupportedInput => "skipped",
                _ => "failed",
            };
            (None, Some(call_error(failure)), status, None, None)
        }
    };
    CallRecord {
        id,
        stage: stage.to_owned(),
        label: completion.label.clone(),
        model: completion.model.clone(),
        status: status.to_owned(),
        latency_ms: completion.latency_ms,
        attempts: completion.attempts,
        queued_ms: completion.queued_ms,
        ttft_ms: completion.ttft_ms,
        prompt_tokens: usage.map(|u| u.prompt_tokens),
        completion_tokens: usage.map(|u| u.completion_tokens),
        reasoning_tokens: usage.and_then(|u| u.reasoning_tokens),
        cached_tokens: usage.and_then(|u| u.cached_tokens),
        cache_write_tokens: usage.and_then(|u| u.cache_write_tokens),
        cost_usd: usage.and_then(|u| u.cost),
        cost_estimated: usage.is_some_and(|u| u.cost_estimated),
        tokens_estimated: usage.is_some_and(|u| u.tokens_estimated),
        error,
        reply,
        reused_from: None,
        cached_from: None,
        format_sent,
        fallback_from: Vec::new(),
        citations: match &completion.outcome {
            Ok(reply) => reply.citations.clone(),
            Err(_) => Vec::new(),
        },
    }
}

fn call_error(failure: &Failure) -> CallError {
    CallError {
        kind: failure.kind.as_str().to_owned(),
        status: failure.status,
        message: failure.message.clone(),
    }
}
