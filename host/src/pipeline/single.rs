//! A run of one model asked directly, without plugins (`chorus eval`'s
//! `model:ID` targets): the same slot, deadline, budgets and record as any
//! run, so comparing a model with a pipeline compares like with like.
//! Attachments reach it as a pipeline's would by default: what it takes
//! as it is, the rest described (or a PDF's extracted text).

use std::sync::Arc;

use serde_json::json;

use super::run::{Setup, ceiling};
use super::{Event, RunError, Runner};
use crate::events::{Progress, Stage};
use crate::llm::{ChatRequest, Message, Role, Sampling};
use crate::plugins::{Answer, AnswerKind, Request};
use crate::record::RunRecord;

/// The name a single-model run is recorded under: `model:ID`.
pub fn single_run_name(model: &str) -> String {
    format!("model:{model}")
}

impl Runner {
    /// Asks `model` alone, once, with `question` (its notes lead the
    /// result's). Its record is a run like
    /// any other, named `model:ID`: kind `single` when it answered, `none`
    /// (with the reason in the summary) when it did not.
    pub async fn ask_model(
        &self,
        model: &str,
        super::Question {
            text: prompt,
            attachments,
            notes,
            format,
            tools,
        }: super::Question,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        if self.llm.model(model).is_none() {
            let known: Vec<String> = self.llm.models().keys().cloned().collect();
            return Err(RunError::InvalidOptions(format!(
                "no model `{model}` in [models] (known: {})",
                known.join(", ")
            )));
        }
        self.check_prompt(&prompt)?;
        let limits = &self.loaded.config.limits;
        let name = single_run_name(model);
        let attachments = crate::attach::shape::measured(attachments).await;
        let attachments = (!attachments.is_empty()).then(|| {
            Arc::new(super::RunAttachments::for_model(
                attachments,
                model,
                &prompt,
            ))
        });
        let request = Arc::new(Request {
            run_id: uuid::Uuid::now_v7().to_string(),
            pipeline: name.clone(),
            prompt,
            options: json!({}),
            attachments: Vec::new(),
            tools: tools.clone(),
        });
        let setup = Setup {
            request: request.clone(),
            limits_of: name,
            run_timeout: limits.run_timeout,
            ceiling: ceiling(limits.max_cost_usd, &json!({})).map_err(RunError::InvalidOptions)?,
            history: Vec::new(),
            reused: Vec::new(),
            dry_run: false,
            answered_by: "chorus".to_owned(),
            lead_notes: notes,
            attachments,
            search: None,
            format,
            tools,
        };
        let chat = ChatRequest {
            label: "panel".to_owned(),
            model: model.to_owned(),
            messages: vec![Message {
                role: Role::User,
                content: request.prompt.clone(),
            }],
            sampling: Sampling::default(),
            response_format: None,
            attachments: Default::default(),
            placed: Vec::new(),
            tools: None,
        };
        self.wrapped(setup, progress, |context| async move {
            context
                .plan_attachments(std::slice::from_ref(&chat))
                .await
                .map_err(RunError::Attachments)?;
            context.emit(Event::Stage(Stage::FanOut));
            context.emit(Event::FanOut { calls: 1 });
            let completions = context.fan_out(super::FAN_OUT, vec![chat]).await;
            if let Some(tools) = context.tools() {
                let deciding = super::tool_calls::Deciding {
                    context: &context,
                    tools,
                    chooser: None,
                    completions: &completions,
                    run_id: &request.run_id,
                };
                let called = deciding.decided().await?;
                if let Some(answer) = called {
                    return Ok((answer, completions));
                }
            }
            let answered = completions
                .iter()
                .find_map(|c| Some((c.id?, c.outcome.as_ref().ok()?.content.clone())));
            let answer = match answered {
                Some((id, text)) => Answer {
                    kind: AnswerKind::Single,
                    text: Arc::unwrap_or_clone(text),
                    sources: vec![id],
                    notes: Vec::new(),
                    details: None,
                    tool_calls: Vec::new(),
                },
                None => Answer {
                    kind: AnswerKind::None,
                    text: String::new(),
                    sources: Vec::new(),
                    notes: Vec::new(),
                    details: None,
                    tool_calls: Vec::new(),
                },
            };
            Ok((answer, completions))
        })
        .await
    }
}
