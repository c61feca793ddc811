//! Progress events of a run, for whoever is watching (MCP progress
//! notifications, the terminal). The pipeline emits; it never waits on them.

use std::sync::Arc;

use crate::llm::{Completion, Failure};

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A stage began.
    Stage(Stage),
    /// The fan-out is about to send this many requests.
    FanOut { calls: usize },
    /// A chat completion finished (fan-out or a plugin's own call).
    Call(CallSummary),
    /// A plugin said what it is doing.
    Note { plugin: String, message: String },
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

#[derive(Debug, Clone, PartialEq)]
pub struct CallSummary {
    /// `fan-out`, or the plugin that made the call.
    pub stage: String,
    pub label: String,
    pub model: String,
    pub latency_ms: u32,
    pub outcome: Result<u32, Failure>,
}

impl CallSummary {
    pub fn new(stage: &str, completion: &Completion) -> Self {
        Self {
            stage: stage.to_owned(),
            label: completion.label.clone(),
            model: completion.model.clone(),
            latency_ms: completion.latency_ms,
            outcome: completion
                .outcome
                .as_ref()
                .map(|r| r.usage.map_or(0, |u| u.completion_tokens))
                .map_err(Clone::clone),
        }
    }
}

/// Receives a run's events. Must not block.
pub type Progress = Arc<dyn Fn(Event) + Send + Sync>;

/// A `Progress` that drops everything.
pub fn ignore() -> Progress {
    Arc::new(|_| {})
}
