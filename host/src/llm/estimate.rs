//! Estimates where a provider says nothing: tokens from text (four bytes
//! a token), a request's prompt tokens with its attachments, and a reply's
//! usage and cost completed from prices — every estimate marked as one.

use super::{ChatRequest, ModelInfo, Reply, Usage};

/// What a request with no `max_tokens` (and a model with no known
/// `max_output_tokens`) reserves of its provider's `tokens_per_minute`
/// for its answer until its usage is known.
pub const UNBOUNDED_ANSWER_TOKENS: u32 = 4096;

/// Rough tokens of a text: four bytes a token, as OpenAI's rule of thumb.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Rough prompt tokens of a request: its messages (with a few each for
/// framing), the caller's tools and tool exchange it carries (counted
/// whether or not the model takes tools: it sees the exchange either
/// way), and every attachment part it sends (`attach::tokens`) — the
/// one estimate behind every worst case: the cost ceiling, the
/// `tokens_per_minute` reservation, and usage a provider did not report.
pub fn estimate_prompt_tokens(request: &ChatRequest) -> u64 {
    let text: u64 = request
        .messages
        .iter()
        .map(|m| estimate_tokens(&m.content) + 4)
        .sum();
    let tools = request
        .tools
        .as_deref()
        .map_or(0, super::tools::ToolUse::estimate_tokens);
    request
        .sent_attachments()
        .map(crate::attach::tokens::estimate)
        .fold(text.saturating_add(tools), u64::saturating_add)
}

/// Completes the usage: token counts estimated from the text when the
/// provider gave none, and the cost estimated from prices when it gave
/// no figure — both marked as estimates. What failed attempts streamed
/// before this one (`lost`: attempts, tokens) is added, as an estimate:
/// the provider billed it, and its usage never said so.
pub(super) fn with_cost(
    mut reply: Reply,
    model: &ModelInfo,
    request: &ChatRequest,
    (lost_attempts, lost_tokens): (u32, u32),
    search_usd: f64,
) -> Reply {
    let usage = reply.usage.get_or_insert_with(|| Usage {
        prompt_tokens: u32::try_from(estimate_prompt_tokens(request)).unwrap_or(u32::MAX),
        completion_tokens: u32::try_from(estimate_tokens(&reply.content)).unwrap_or(u32::MAX),
        tokens_estimated: true,
        ..Usage::default()
    });
    if usage.cost.is_none()
        && let Some(cost) = model.cost_cached(
            u64::from(usage.prompt_tokens),
            u64::from(usage.cached_tokens.unwrap_or(0)),
            u64::from(usage.cache_write_tokens.unwrap_or(0)),
            u64::from(usage.completion_tokens),
        )
    {
        // A provider that reports no cost reports no search charge either.
        usage.cost = Some(cost + search_usd);
        usage.cost_estimated = true;
    }
    if lost_tokens > 0 {
        let prompts = estimate_prompt_tokens(request).saturating_mul(u64::from(lost_attempts));
        let prompt = u32::try_from(prompts).unwrap_or(u32::MAX);
        usage.prompt_tokens = usage.prompt_tokens.saturating_add(prompt);
        usage.completion_tokens = usage.completion_tokens.saturating_add(lost_tokens);
        usage.tokens_estimated = true;
        let lost = model.cost(prompts, u64::from(lost_tokens));
        usage.cost = match (usage.cost, lost) {
            (Some(cost), Some(lost)) => Some(cost + lost),
            // Unpriced: the provider's figure stands, and says less
            // than was spent; the tokens say how much less.
            (cost, _) => cost,
        };
        usage.cost_estimated |= lost.is_some();
    }
    reply
}
