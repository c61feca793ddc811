//! What the run's caller asked beyond its question, and which calls it
//! reaches: its answer format (structured outputs, see
//! `pipeline::structured`), and its tools with the exchange since the
//! question (see `pipeline::tool_calls`).
//!
//! Both go to every call that puts the caller's question as it was asked
//! (its last user message is the question). The format is asked of the call that writes the answer (a
//! synthesizer's `complete-answer`, whatever format its plugin asked for)
//! and of every call that puts the caller's question as it was asked —
//! its last user message is the question: the panel's, and a plugin's
//! own (a vote's further samples). A call that asks something else (a
//! sub-question of a heavy plan, a judge's ballot, a critique) is left as
//! its plugin wrote it: the caller's schema and tools are the answer's,
//! not every step's. The panel's JSON answers are made canonical before a
//! plugin reads them.

use std::sync::Arc;

use super::RunContext;
use crate::llm::tools::ToolUse;
use crate::llm::{ChatRequest, Completion, Role};
use crate::pipeline::structured::{AnswerFormat, canonical};

/// What the caller asked, and the question that marks the calls it goes to.
pub(super) struct Caller {
    question: String,
    format: Option<AnswerFormat>,
    tools: Option<Arc<ToolUse>>,
    /// The model of the latest call that wrote the answer.
    writer: std::sync::Mutex<Option<String>>,
    /// What the run's notes already say of models that take no tools or
    /// format.
    noted: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl RunContext {
    /// The caller asked `question`, its answer in `format` (structured
    /// outputs), with `tools` it may be asked to call: the calls that put
    /// the question get them.
    pub fn with_caller(
        mut self,
        question: &str,
        format: Option<AnswerFormat>,
        tools: Option<Arc<ToolUse>>,
    ) -> Self {
        self.caller = Caller {
            question: question.to_owned(),
            format,
            tools,
            writer: std::sync::Mutex::new(None),
            noted: Default::default(),
        };
        self
    }

    /// The format the run's answer must take, if any.
    pub fn format(&self) -> Option<&AnswerFormat> {
        self.caller.format.as_ref()
    }

    /// The tools the caller offered, if any.
    pub fn tools(&self) -> Option<&ToolUse> {
        self.caller.tools.as_deref()
    }

    /// The caller's question.
    pub fn question(&self) -> Option<&str> {
        Some(self.caller.question.as_str()).filter(|q| !q.is_empty())
    }

    /// `requests`, those that put the question given the caller's format
    /// and tools; which those are, in request order.
    pub(super) fn formatted_calls(
        &self,
        mut requests: Vec<ChatRequest>,
    ) -> (Vec<ChatRequest>, Vec<bool>) {
        let caller = &self.caller;
        if caller.format.is_none() && caller.tools.is_none() {
            let asked = vec![false; requests.len()];
            return (requests, asked);
        }
        let asked = requests
            .iter_mut()
            .map(|request| {
                let puts_it = request
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::User)
                    .is_some_and(|m| m.content.trim() == caller.question.trim());
                if puts_it {
                    if let Some(format) = &caller.format {
                        format.ask(request);
                    }
                    if request.tools.is_none() {
                        request.tools.clone_from(&caller.tools);
                    }
                    self.note_what_is_not_taken(request);
                }
                puts_it && caller.format.is_some()
            })
            .collect();
        (requests, asked)
    }

    /// Says once per model, in the run's notes, when a model asked the
    /// question takes no tools (it answers in text and sees results in
    /// words) or no response format (it is asked for it in words only).
    fn note_what_is_not_taken(&self, request: &ChatRequest) {
        let Some(model) = self.llm.model(&request.model) else {
            return;
        };
        let offered = request
            .tools
            .as_deref()
            .is_some_and(|t| !t.tools.is_empty());
        let mut notes = Vec::new();
        if offered && !model.takes_tools() {
            notes.push(format!(
                "{} takes no tools (its catalog lists none): it answered in text, and sees tool results in words.",
                request.model
            ));
        }
        if self.caller.format.is_some()
            && model.format_for(request.response_format.as_ref()) == crate::llm::FormatSent::None
        {
            notes.push(format!(
                "{} takes no response format (its catalog lists none): it was asked for the format in words only.",
                request.model
            ));
        }
        let mut noted = self.caller.noted.lock().unwrap_or_else(|e| e.into_inner());
        for note in notes {
            if noted.insert(note.clone()) {
                self.note(note);
            }
        }
    }

    /// The call that writes the answer, asked for the format.
    pub(super) fn formatted_answer(&self, mut request: ChatRequest) -> ChatRequest {
        if let Some(format) = &self.caller.format {
            format.ask(&mut request);
            *self.caller.writer.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(request.model.clone());
        }
        request
    }

    /// The model of the latest call made to write the answer (a
    /// synthesizer's `complete-answer`), when the run has a format.
    pub fn answer_writer(&self) -> Option<String> {
        self.caller.format.as_ref()?;
        self.caller
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

impl Default for Caller {
    fn default() -> Self {
        Self {
            question: String::new(),
            format: None,
            tools: None,
            writer: std::sync::Mutex::new(None),
            noted: Default::default(),
        }
    }
}
