//! What a run tells whoever watches it: the MCP progress notifications, the
//! terminal, the run store. The pipeline emits; it never waits on a watcher.
//!
//! The events are complete enough to rebuild the run as it goes: the request,
//! the plan, every chat request sent and every outcome — so a store can write
//! a run while it happens, and a crash loses at most the calls in flight.

pub mod live;

use std::sync::Arc;
use std::time::Duration;

use crate::llm::ChatRequest;
use crate::plugins::{Plan, PluginError, Request};
use crate::record::CallRecord;

#[derive(Debug, Clone)]
pub enum Event {
    /// The run began: what was asked, with the options resolved.
    Started(Arc<Request>),
    /// A stage began.
    Stage(Stage),
    /// The selector's plan, checked.
    Planned(Arc<Plan>),
    /// The fan-out is about to send this many requests.
    FanOut { calls: usize },
    /// A chat completion was sent (the fan-out's or a plugin's own). `id`
    /// numbers the run's calls from 0 in the order they were sent; it is
    /// the call's position in the record.
    CallStarted {
        id: u32,
        /// `fan-out`, or the plugin that made the call.
        stage: Arc<str>,
        request: Arc<ChatRequest>,
    },
    /// Tokens of a call's answer or reasoning are arriving (streaming
    /// providers): `tokens` deltas so far. At most one event per call every
    /// `TOKENS_EVERY`; a call that is not streamed has none.
    CallTokens { id: u32, tokens: u32 },
    /// A call (or its retry) waits for one of its provider's permits
    /// (`providers.NAME.max_concurrency`) behind `Some(n)` requests — in
    /// flight or ahead in the queue; `None` once it may go.
    CallQueued { id: u32, behind: Option<u32> },
    /// A piece of the run's answer as its model writes it: the reply of
    /// call `id`, attempt `attempt` (from 1, fallbacks included), for a
    /// call a synthesizer made with `host.complete-answer` (contract 0.5)
    /// to a provider that streams. An attempt that fails leaves what it
    /// sent; the next starts from the beginning. A watcher that streams the
    /// answer (the OpenAI endpoint) passes these on; the answer itself
    /// still comes with the run's result, which may differ (a fallback, a
    /// strategy that edits it) — see `openai::stream`.
    AnswerText {
        id: u32,
        attempt: u32,
        text: Arc<str>,
    },
    /// An attempt of a call failed in a way worth another (429, 5xx, a
    /// broken connection): attempt `attempt` of `model` failed with
    /// `error` (scrubbed of the key, as a record is), and the next is
    /// sent after `wait`.
    CallRetrying {
        id: u32,
        model: Arc<str>,
        attempt: u32,
        wait: Duration,
        error: String,
    },
    /// A call's model failed for good (`why`), and its seat's next
    /// fallback model `to` is asked the same request.
    Fallback {
        id: u32,
        from: String,
        to: String,
        why: String,
    },
    /// A chat completion finished, well or not — or was cut, or skipped
    /// (a call skipped for its cost was never sent: it has no
    /// `CallStarted`).
    CallFinished(Arc<CallRecord>),
    /// A plugin said what it is doing.
    Note { plugin: String, message: String },
    /// A plugin is called: `export` is the function (`select`, `prompt`,
    /// `synthesize`).
    PluginCalled {
        plugin: Arc<str>,
        export: &'static str,
    },
    /// That call returned after `took` (its model calls through the host
    /// included); `error` is how it failed (`PluginError::kind`).
    PluginReturned {
        plugin: Arc<str>,
        export: &'static str,
        error: Option<&'static str>,
        took: Duration,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Select,
    Prompt,
    FanOut,
    Synthesize,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Select => "selecting models",
            Stage::Prompt => "building prompts",
            Stage::FanOut => "asking the panel",
            Stage::Synthesize => "synthesizing",
        }
    }
}

/// Runs `call`, a call of `plugin`'s `export`, announced to `emit` before
/// and after.
///
/// The plugin's future is boxed before anything awaits it. A plugin call's
/// state (the guest call on its fiber, its time bound) is several KiB, and
/// a run's future reserves room for its largest await point for the run's
/// whole life — while it waits on the panel too. Boxed, that room is taken
/// only while a plugin runs: about 6 KiB less per run in flight.
pub(super) fn plugin_call<'a, T: 'a>(
    emit: impl Fn(Event) + 'a,
    plugin: &'a str,
    export: &'static str,
    call: impl Future<Output = Result<T, PluginError>> + 'a,
) -> impl Future<Output = Result<T, PluginError>> + 'a {
    let call = Box::pin(call);
    async move {
        let plugin: Arc<str> = Arc::from(plugin);
        emit(Event::PluginCalled {
            plugin: plugin.clone(),
            export,
        });
        let started = std::time::Instant::now();
        let result = call.await;
        emit(Event::PluginReturned {
            plugin,
            export,
            error: result.as_ref().err().map(PluginError::kind),
            took: started.elapsed(),
        });
        result
    }
}

/// The least time between two `CallTokens` events of one call.
pub const TOKENS_EVERY: Duration = Duration::from_millis(250);

/// Receives a run's events. Must not block.
pub type Progress = Arc<dyn Fn(Event) + Send + Sync>;

/// A `Progress` that drops everything.
pub fn ignore() -> Progress {
    Arc::new(|_| {})
}

/// A `Progress` that hands every event to each of `watchers` in turn.
pub fn fan(watchers: Vec<Progress>) -> Progress {
    Arc::new(move |event: Event| {
        for watcher in &watchers {
            watcher(event.clone());
        }
    })
}
