//! Assembles a streamed chat completion from its events: answer deltas are
//! joined, reasoning deltas are counted (progress) but never enter the
//! answer, usage and cost come from whichever chunk carries them (the last
//! one, usually), and an `error` object inside the 200 stream is a typed
//! failure carrying the provider's words. The result goes through the same
//! `wire::conclude` as a whole body, so both paths agree on every answer.

use std::borrow::Cow;

use serde::Deserialize;

use super::estimate_tokens;
use super::secret::Scrubber;
use super::types::{Failure, FailureKind, Reply};
use super::wire::lenient::{Content, First, Seen, Text, WireError, WireUsage};
use super::wire::{self, Parts, excerpt};

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    model: Text<'a>,
    #[serde(default, borrow)]
    choices: First<DeltaChoice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct DeltaChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// Some servers put a whole message in a stream chunk.
    #[serde(default, borrow)]
    message: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Text<'a>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default)]
    content: Content,
    #[serde(default, borrow)]
    refusal: Text<'a>,
    #[serde(default)]
    reasoning: Seen,
    #[serde(default)]
    reasoning_content: Seen,
    #[serde(default)]
    reasoning_details: Seen,
    #[serde(default)]
    annotations: wire::search::Annotations,
    #[serde(default)]
    tool_calls: super::tools::WireToolCalls,
}

/// What one event changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Step {
    /// A token of the answer or of its reasoning arrived.
    pub token: bool,
    /// `[DONE]`: nothing more will come.
    pub done: bool,
}

/// A stream being assembled.
#[derive(Debug, Default)]
pub struct Assembler {
    content: String,
    /// Some server sent content (even empty): the answer is not "null".
    has_content: bool,
    refusal: String,
    finish_reason: Option<String>,
    served_by: Option<String>,
    usage: Option<WireUsage>,
    /// The deltas' `url_citation` annotations so far.
    citations: Vec<crate::llm::Citation>,
    /// The tool calls the deltas proposed so far.
    tool_calls: super::tools::CallsAssembler,
    /// Tokens of answer or reasoning so far, estimated (see `tokens`).
    tokens: u32,
    done: bool,
    /// The provider's key, scrubbed from error text before it is cut.
    scrubber: Scrubber,
}

impl Assembler {
    pub fn new(scrubber: Scrubber) -> Self {
        Self {
            scrubber,
            ..Self::default()
        }
    }

    /// Tokens of the answer and its reasoning received so far, estimated
    /// as they stream (the usage, if any, comes at the end): a delta is at
    /// least one token, and answer text four bytes a token. Reasoning text
    /// is never kept, so a reasoning delta counts one.
    pub fn tokens(&self) -> u32 {
        self.tokens
    }

    /// The answer's text so far.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// A choice said why it finished: the answer is complete, whatever
    /// follows (usage, `[DONE]`, or nothing at all).
    pub fn is_finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Finished, and the usage is in: nothing the reply needs is still to come.
    pub fn has_all_it_needs(&self) -> bool {
        self.done || (self.finish_reason.is_some() && self.usage.is_some())
    }

    /// Takes one event's data.
    pub fn event(&mut self, data: &str) -> Result<Step, Failure> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Step {
                token: false,
                done: true,
            });
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            Failure::new(
                FailureKind::MalformedResponse,
                format!(
                    "a stream event is not a completion chunk ({e}): {}",
                    excerpt(data.as_bytes(), &self.scrubber)
                ),
            )
        })?;
        if let Some(error) = chunk.error {
            return Err(wire::provider_error(&error, &self.scrubber));
        }
        if self.served_by.is_none() {
            self.served_by = chunk.model.into_string().filter(|m| !m.is_empty());
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(merge_usage(self.usage, usage));
        }
        let mut step = Step::default();
        let mut tokens = 0u64;
        let Some(choice) = chunk.choices.0 else {
            return Ok(step);
        };
        if let Some(error) = choice.error {
            return Err(wire::provider_error(&error, &self.scrubber));
        }
        for delta in [choice.delta, choice.message].into_iter().flatten() {
            if let Content::Text(text) = delta.content {
                self.has_content = true;
                if !text.is_empty() {
                    self.content.push_str(&text);
                    step.token = true;
                    tokens += estimate_tokens(&text);
                }
            }
            if let Some(refusal) = delta.refusal.0.as_deref() {
                self.refusal.push_str(refusal);
                step.token |= !refusal.is_empty();
                tokens += estimate_tokens(refusal);
            }
            // Some providers repeat the whole list on later chunks.
            for citation in delta.annotations.0 {
                if self.citations.len() < wire::search::MAX_CITATIONS
                    && !self.citations.contains(&citation)
                {
                    self.citations.push(citation);
                }
            }
            if !delta.tool_calls.0.is_empty() {
                step.token = true;
                tokens += 1;
                self.tool_calls.add(delta.tool_calls);
            }
            if delta.reasoning.0 || delta.reasoning_content.0 || delta.reasoning_details.0 {
                step.token = true;
                tokens += 1;
            }
        }
        if let Some(reason) = choice.finish_reason.0.map(Cow::into_owned) {
            if reason == "error" {
                return Err(Failure::new(
                    FailureKind::HttpStatus,
                    "the provider ended the stream with finish_reason = error and no message",
                ));
            }
            self.finish_reason = Some(reason);
        }
        if step.token {
            let tokens = u32::try_from(tokens.max(1)).unwrap_or(u32::MAX);
            self.tokens = self.tokens.saturating_add(tokens);
        }
        Ok(step)
    }

    /// The stream ended (with `[DONE]` or not): the reply it amounts to.
    pub fn finish(mut self, requested_model: &str) -> Result<Reply, Failure> {
        if !self.done && self.finish_reason.is_none() {
            return Err(Failure::new(
                FailureKind::Connection,
                format!(
                    "the stream ended before the answer was complete ({} characters in, no finish_reason, no [DONE])",
                    self.content.chars().count()
                ),
            ));
        }
        self.content.shrink_to_fit();
        let content = if self.has_content || !self.content.is_empty() {
            Content::Text(self.content)
        } else {
            Content::Null
        };
        wire::conclude(
            Parts {
                content,
                refusal: Some(self.refusal).filter(|r| !r.is_empty()),
                finish_reason: self.finish_reason,
                served_by: self.served_by,
                usage: self.usage,
                citations: self.citations,
                tool_calls: self.tool_calls.finish(),
            },
            requested_model,
        )
    }
}

/// Later chunks may repeat or complete earlier usage: keep what is known.
fn merge_usage(old: Option<WireUsage>, new: WireUsage) -> WireUsage {
    let old = old.unwrap_or_default();
    WireUsage {
        prompt_tokens: new.prompt_tokens.or(old.prompt_tokens),
        completion_tokens: new.completion_tokens.or(old.completion_tokens),
        reasoning_tokens: new.reasoning_tokens.or(old.reasoning_tokens),
        cost: new.cost.or(old.cost),
        cached_tokens: new.cached_tokens.or(old.cached_tokens),
        cache_write_tokens: new.cache_write_tokens.or(old.cache_write_tokens),
    }
}

#[cfg(test)]
mod tests;
