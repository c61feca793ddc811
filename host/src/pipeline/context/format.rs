//! The run's share of structured outputs (see `pipeline::structured`):
//! which of its calls are asked for the caller's answer format, and the
//! panel's answers made canonical JSON before a plugin reads them.
//!
//! The format is asked of the call that writes the answer (a
//! synthesizer's `complete-answer`, whatever format its plugin asked for)
//! and of each panel call that puts the caller's question — its last user
//! message holds the question as asked. A panel call that asks something
//! else (a sub-question of a heavy plan, a critique) is left as its
//! plugin wrote it: the caller's schema is the answer's, not every step's.

use std::sync::Arc;

use super::RunContext;
use crate::llm::{ChatRequest, Completion, Role};
use crate::pipeline::structured::{AnswerFormat, canonical};

/// The format, and the question that marks the panel calls it is asked of.
pub(super) struct Format {
    format: AnswerFormat,
    question: String,
}

impl RunContext {
    /// The run's answer must take `format` (structured outputs); the panel
    /// calls that put `question` are asked for it too.
    pub fn with_format(mut self, format: Option<AnswerFormat>, question: &str) -> Self {
        self.format = format.map(|format| Format {
            format,
            question: question.to_owned(),
        });
        self
    }

    /// The format the run's answer must take, if any.
    pub fn format(&self) -> Option<&AnswerFormat> {
        self.format.as_ref().map(|f| &f.format)
    }

    /// `requests` of the panel, those that put the question asked for the
    /// format.
    pub(super) fn formatted_panel(&self, mut requests: Vec<ChatRequest>) -> Vec<ChatRequest> {
        if let Some(Format { format, question }) = &self.format {
            for request in &mut requests {
                let asks_it = request
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::User)
                    .is_some_and(|m| m.content.contains(question.trim()));
                if asks_it {
                    format.ask(request);
                }
            }
        }
        requests
    }

    /// The call that writes the answer, asked for the format.
    pub(super) fn formatted_answer(&self, mut request: ChatRequest) -> ChatRequest {
        if let Some(Format { format, .. }) = &self.format {
            format.ask(&mut request);
        }
        request
    }

    /// The panel's answers, each that is JSON made canonical (keys sorted,
    /// no spaces), so equal answers are equal text.
    pub(super) fn canonical_panel(&self, mut completions: Vec<Completion>) -> Vec<Completion> {
        if self.format.is_none() {
            return completions;
        }
        for completion in &mut completions {
            if let Ok(reply) = &mut completion.outcome
                && let Some(json) = canonical(&reply.content)
            {
                reply.content = Arc::new(json);
            }
        }
        completions
    }
}
