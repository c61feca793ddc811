//! What one call brings besides its request: its place in the provider's
//! queue and who hears of it as it goes — tokens, the answer's text,
//! waits for a permit, retries — and where its attempts are counted.

use std::time::Duration;

use crate::llm::queue::Priority;
use crate::llm::types::{Attempts, Failure};

/// Told the tokens (estimated) of answer and reasoning streamed so far by
/// all of a call's attempts, as they arrive.
pub type OnTokens<'a> = &'a (dyn Fn(u32) + Send + Sync);

/// Told the reply's text as it streams, for a call whose reply is the run's
/// answer (a synthesizer's `host.complete-answer`): which attempt it is
/// (from 1, counted over the call's fallbacks too) and the next piece,
/// scrubbed of the key. An attempt that fails has sent what it sent; the
/// next one starts again from the beginning.
pub type OnText<'a> = &'a (dyn Fn(u32, &str) + Send + Sync);

/// Told when an attempt must wait for one of the provider's permits
/// (`Some`: how many requests are ahead of it) and when its wait ends
/// (`None`).
pub type OnQueued<'a> = &'a (dyn Fn(Option<usize>) + Send + Sync);

/// Told when an attempt of `model` failed and another follows after the
/// wait: which attempt it was (from 1), how it failed, and the wait.
pub type OnRetry<'a> = &'a (dyn Fn(&str, u32, &Failure, Duration) + Send + Sync);

/// What one call brings besides its request: its place in the provider's
/// queue, who hears of its progress, and where its attempts are counted.
pub struct CallHooks<'a> {
    pub priority: Priority,
    pub on_tokens: OnTokens<'a>,
    pub on_queued: OnQueued<'a>,
    pub on_retry: OnRetry<'a>,
    /// Set only for a call whose reply is the run's answer.
    pub on_text: Option<OnText<'a>>,
    pub attempts: &'a Attempts,
    /// The run's web search, if it asked for one (a model configured to
    /// search does so without it).
    pub search: Option<&'a crate::llm::search::WebSearch>,
}
