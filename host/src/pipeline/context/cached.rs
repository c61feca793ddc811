//! A call answered from the response cache (the `CallCache` port): looked up
//! before the request queues for a provider's permit, recorded with
//! `cached_from`, costing 0 and taking no time; and a fresh answer kept for
//! the next identical request.

use std::sync::Arc;

use super::RunContext;
use crate::llm::{ChatRequest, Completion, FormatSent, Reply, Usage};
use crate::pipeline::Hit;
use crate::pipeline::budget::Reservation;

impl RunContext {
    /// The key of `request` in the response cache; `None` when the cache
    /// is off (no work at all) or the request may not be cached — one
    /// offered tools is not: the cache keeps text, and its calls' results
    /// are the caller's.
    pub(super) fn cache_key(&self, stage: &str, request: &ChatRequest) -> Option<String> {
        let cache = self.cache.as_ref()?;
        if request.tools.is_some() {
            return None;
        }
        let model = self.llm.model(&request.model)?;
        cache.key(&model.provider, request, self.search_for(stage))
    }

    pub(super) async fn cached(&self, key: Option<&str>) -> Option<Hit> {
        self.cache.as_ref()?.lookup(key?).await
    }

    pub(super) async fn keep_in_cache(&self, key: String, id: u32) {
        if let Some(cache) = &self.cache {
            cache.remember(key, id).await;
        }
    }

    /// The call `id`, answered by `hit`: as if the answer arrived at once,
    /// at no cost. Its tokens are the earlier call's, shown for what they
    /// are (`cached_from`), and left out of the run's totals.
    pub(super) fn answer_from_cache(
        &self,
        id: u32,
        stage: &str,
        request: &ChatRequest,
        reservation: Reservation,
        hit: Hit,
    ) -> Completion {
        self.budget.settle(reservation, Some(0.0));
        let earlier = hit.call;
        let usage = match (earlier.prompt_tokens, earlier.completion_tokens) {
            (Some(prompt_tokens), Some(completion_tokens)) => Some(Usage {
                prompt_tokens,
                completion_tokens,
                reasoning_tokens: earlier.reasoning_tokens,
                cost: Some(0.0),
                ..Usage::default()
            }),
            _ => None,
        };
        let completion = Completion {
            id: Some(id),
            label: request.label.clone(),
            model: request.model.clone(),
            latency_ms: 0,
            attempts: 0,
            // Nothing was asked: no first token, no wait for a permit.
            ttft_ms: None,
            queued_ms: None,
            outcome: Ok(Reply {
                content: earlier.reply.unwrap_or_else(|| Arc::new(String::new())),
                served_by: earlier.model,
                finish_reason: None,
                usage,
                format_sent: earlier
                    .format_sent
                    .as_deref()
                    .and_then(FormatSent::parse)
                    .unwrap_or_default(),
                citations: earlier.citations,
                tool_calls: Vec::new(),
            }),
        };
        let mut record = super::recording::call_record(id, stage, &completion);
        record.cost_usd = Some(0.0);
        record.cached_from = Some(hit.from);
        self.keep_record(record);
        completion
    }
}
