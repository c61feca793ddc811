//! What a plugin may ask of the host, provided by the run that calls it.
//! The pipeline implements `HostServices`; the plugin layer adapts it to
//! each contract version's `host` interface.

use std::time::Duration;

use futures::future::BoxFuture;

use crate::llm::{ChatRequest, Completion, ModelInfo};

pub trait HostServices: Send + Sync {
    /// Runs chat completions at once; outcomes in request order.
    fn complete(&self, plugin: &str, requests: Vec<ChatRequest>) -> BoxFuture<'_, Vec<Completion>>;
    /// Runs one chat completion whose reply is meant to be the run's
    /// answer (contract 0.5's `complete-answer`): as `complete`, and where
    /// the run is streamed to its caller, its text goes out as it comes.
    fn complete_answer(&self, plugin: &str, request: ChatRequest) -> BoxFuture<'_, Completion> {
        let plugin = plugin.to_owned();
        Box::pin(async move {
            let (label, model) = (request.label.clone(), request.model.clone());
            let mut outcomes = self.complete(&plugin, vec![request]).await;
            outcomes.pop().unwrap_or_else(|| no_outcome(label, model))
        })
    }
    /// Progress for the user.
    fn progress(&self, plugin: &str, message: String);
    /// The model catalog.
    fn models(&self) -> Vec<ModelInfo>;
    /// What the run has left.
    fn budget(&self) -> Budget;
}

/// The outcome of a call a batch lost: never expected (a batch gives one
/// outcome per request), but a plugin gets a failure, not a trap.
pub fn no_outcome(label: String, model: String) -> Completion {
    Completion {
        id: None,
        label,
        model,
        latency_ms: 0,
        attempts: 0,
        queued_ms: None,
        ttft_ms: None,
        outcome: Err(crate::llm::Failure::new(
            crate::llm::FailureKind::Cancelled,
            "the host returned no outcome for this call (a bug in chorus: please report it)",
        )),
    }
}

/// What a run has left: `host.budget()` in the contract.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Chat completions the run may still make.
    pub calls_left: u32,
    /// USD the run may still spend; `None` when it has no cost ceiling.
    pub cost_left: Option<f64>,
    /// Time to the run's deadline.
    pub time_left: Duration,
}

/// The host a plugin sees outside any run — while chorus validates its
/// settings at load: no models, no calls, nothing left to spend.
pub struct NoRun;

impl HostServices for NoRun {
    fn complete(
        &self,
        _plugin: &str,
        requests: Vec<ChatRequest>,
    ) -> BoxFuture<'_, Vec<Completion>> {
        let completions = requests
            .into_iter()
            .map(|request| Completion {
                id: None,
                label: request.label,
                model: request.model,
                latency_ms: 0,
                attempts: 0,
                queued_ms: None,
                ttft_ms: None,
                outcome: Err(crate::llm::Failure::new(
                    crate::llm::FailureKind::OverBudget,
                    "no model calls while settings are validated",
                )),
            })
            .collect();
        Box::pin(std::future::ready(completions))
    }

    fn progress(&self, _plugin: &str, _message: String) {}

    fn models(&self) -> Vec<ModelInfo> {
        Vec::new()
    }

    fn budget(&self) -> Budget {
        Budget {
            calls_left: 0,
            cost_left: Some(0.0),
            time_left: Duration::ZERO,
        }
    }
}
