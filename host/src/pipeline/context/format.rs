//! The run's share of structured outputs (see `pipeline::structured`):
//! which of its calls are asked for the caller's answer format, and the
//! panel's answers made canonical JSON before a plugin reads them.
//!
//! The format is asked of the call that writes the answer (a
//! synthesizer's `complete-answer`, whatever format its plugin asked for)
//! and of every call that puts the caller's question as it was asked —
//! its last user message is the question: the panel's, and a plugin's
//! own (a vote's further samples). A call that asks something else (a
//! sub-question of a heavy plan, a judge's ballot, a critique) is left as
//! its plugin wrote it: the caller's schema is the answer's, not every
//! step's.

use std::sync::Arc;

use super::RunContext;
use crate::llm::{ChatRequest, Completion, Role};
use crate::pipeline::structured::{AnswerFormat, canonical};

/// The format, and the question that marks the panel calls it is asked of.
pub(super) struct Format {
    format: AnswerFormat,
    question: String,
    /// The model of the latest call that wrote the answer.
    writer: std::sync::Mutex<Option<String>>,
}

impl RunContext {
    /// The run's answer must take `format` (structured outputs); the panel
    /// calls that put `question` are asked for it too.
    pub fn with_format(mut self, format: Option<AnswerFormat>, question: &str) -> Self {
        self.format = format.map(|format| Format {
            format,
            question: question.to_owned(),
            writer: std::sync::Mutex::new(None),
        });
        self
    }

    /// The format the run's answer must take, if any.
    pub fn format(&self) -> Option<&AnswerFormat> {
        self.format.as_ref().map(|f| &f.format)
    }

    /// `requests`, those that put the question asked for the format;
    /// which those are, in request order.
    pub(super) fn formatted_calls(
        &self,
        mut requests: Vec<ChatRequest>,
    ) -> (Vec<ChatRequest>, Vec<bool>) {
        let Some(Format {
            format, question, ..
        }) = &self.format
        else {
            let asked = vec![false; requests.len()];
            return (requests, asked);
        };
        let asked = requests
            .iter_mut()
            .map(|request| {
                let puts_it = request
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::User)
                    .is_some_and(|m| m.content.trim() == question.trim());
                if puts_it {
                    format.ask(request);
                }
                puts_it
            })
            .collect();
        (requests, asked)
    }

    /// The call that writes the answer, asked for the format.
    pub(super) fn formatted_answer(&self, mut request: ChatRequest) -> ChatRequest {
        if let Some(Format { format, writer, .. }) = &self.format {
            format.ask(&mut request);
            *writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.model.clone());
        }
        request
    }

    /// The model of the latest call made to write the answer (a
    /// synthesizer's `complete-answer`), when the run has a format.
    pub fn answer_writer(&self) -> Option<String> {
        let format = self.format.as_ref()?;
        format
            .writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The answers to the calls `asked` for the format, each that is JSON
    /// made canonical (keys sorted, no spaces), so equal answers are
    /// equal text.
    pub(super) fn canonical_answers(
        &self,
        mut completions: Vec<Completion>,
        asked: &[bool],
    ) -> Vec<Completion> {
        for (completion, _) in completions.iter_mut().zip(asked).filter(|(_, a)| **a) {
            if let Ok(reply) = &mut completion.outcome
                && let Some(json) = canonical(&reply.content)
            {
                reply.content = Arc::new(json);
            }
        }
        completions
    }
}
