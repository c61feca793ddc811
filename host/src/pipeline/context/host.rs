//! What a run offers the plugins it runs (the WIT contract's host
//! functions): model calls through the run's own fan-out, progress notes,
//! the model catalog, and what is left of the run's budget.

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::RunContext;
use crate::events::Event;
use crate::llm::{ChatRequest, Completion, ModelInfo};
use crate::plugins::{self, HostServices};

impl HostServices for RunContext {
    fn complete(&self, plugin: &str, requests: Vec<ChatRequest>) -> BoxFuture<'_, Vec<Completion>> {
        let stage = plugin.to_owned();
        Box::pin(async move { self.fan_out(&stage, requests).await })
    }

    fn complete_answer(&self, plugin: &str, request: ChatRequest) -> BoxFuture<'_, Completion> {
        let stage = plugin.to_owned();
        Box::pin(async move { self.answer_call(&stage, request).await })
    }

    fn progress(&self, plugin: &str, message: String) {
        self.emit(Event::Note {
            plugin: plugin.to_owned(),
            message,
        });
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.llm.catalog()
    }

    fn budget(&self) -> plugins::Budget {
        plugins::Budget {
            calls_left: self.calls.left(),
            cost_left: self.budget.left(),
            time_left: self.deadline.saturating_duration_since(Instant::now()),
        }
    }
}
