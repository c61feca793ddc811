//! The one way a run is made, whatever makes its answer (a pipeline's
//! plugins, a re-synthesis of kept answers, one model asked directly):
//! the providers' catalogs, a slot among the runs in progress
//! (`limits.max_concurrent_runs`), a context holding the run's deadline and
//! budgets, the wrap-up time past the deadline, the answer held to the
//! contract, and the run's record. Every kind of run goes through
//! [`Runner::wrapped`], so a new kind cannot skip a limit.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::budget::Ceiling;
use super::checks::checked;
use super::context::{self, RunContext};
use super::structured;
use super::summary::summary;
use super::{CATALOG_WAIT, RunError, Runner, WRAP_UP, options};
use crate::events::{Event, Progress};
use crate::llm::{Completion, Message};
use crate::plugins::{Answer, Request};
use crate::record::{CallRecord, RunRecord, Totals, show_usd};

/// What a run is, before anything makes its answer.
pub(super) struct Setup {
    pub request: Arc<Request>,
    /// Whose limits apply: a pipeline's name (or a name no pipeline has,
    /// for the configuration's own limits).
    pub limits_of: String,
    pub run_timeout: Duration,
    pub ceiling: Option<Ceiling>,
    /// A follow-up's earlier conversation, sent ahead of every request.
    pub history: Vec<Message>,
    /// Calls an earlier run made, on record from the start (a re-synthesis).
    pub reused: Vec<CallRecord>,
    pub dry_run: bool,
    /// Who made the answer, for the contract's messages.
    pub answered_by: String,
    /// Notes that open the result, ahead of the answer's own.
    pub lead_notes: Vec<String>,
    /// What the question came with, and what the pipeline does with it.
    pub attachments: Option<Arc<super::attachments::RunAttachments>>,
    /// The run's web search, if it asked for one.
    pub search: Option<crate::llm::WebSearch>,
    /// The shape its answer must take (structured outputs).
    pub format: Option<super::structured::AnswerFormat>,
    /// The tools its caller offered (see `tool_calls`).
    pub tools: Option<Arc<crate::llm::tools::ToolUse>>,
}

impl Runner {
    /// Runs `make` as a run described by `setup`: within the run's slot,
    /// deadline and budgets, and records what it did. `make` gets the run's
    /// context (every model call goes through it) and returns the answer and
    /// the completions it rests on.
    pub(super) async fn wrapped<F, Fut>(
        &self,
        setup: Setup,
        progress: Progress,
        make: F,
    ) -> Result<RunRecord, RunError>
    where
        F: FnOnce(Arc<RunContext>) -> Fut,
        Fut: Future<Output = Result<(Answer, Vec<Completion>), RunError>>,
    {
        let started = Instant::now();
        self.wait_for_catalogs().await;
        progress(Event::Started(setup.request.clone()));
        let mut limits = self.context_limits(&setup.limits_of, setup.run_timeout, setup.ceiling);
        limits.dry_run = setup.dry_run;
        let context = Arc::new(
            RunContext::new(self.llm.clone(), progress, limits)
                .with_history(setup.history)
                .with_reused(setup.reused)
                .with_attachments(setup.attachments)
                .with_search(setup.search)
                .with_caller(
                    &setup.request.prompt,
                    setup.format.clone(),
                    setup.tools.clone(),
                )
                .with_cache(
                    self.responses
                        .as_ref()
                        .map(|c| c.for_run(&setup.limits_of, &setup.request.run_id)),
                ),
        );
        let _slot = self.run_slot(&context, setup.run_timeout).await?;
        let (answer, fan_out) =
            tokio::time::timeout_at(context.deadline() + WRAP_UP, make(context.clone()))
                .await
                .map_err(|_| RunError::Timeout(setup.run_timeout))??;
        let answer = checked(&setup.answered_by, answer, &fan_out, &context.records())?;
        let mut answer = match &setup.format {
            // A tool call is held to its tool's schema instead.
            Some(_) if answer.kind == crate::plugins::AnswerKind::ToolCall => answer,
            Some(format) => {
                structured::held_to(format, answer, &context, &setup.request.run_id).await?
            }
            None => answer,
        };
        let mut notes = setup.lead_notes;
        notes.append(&mut answer.notes);
        answer.notes = notes;
        Ok(self.record(&setup.request, answer, &fan_out, &context, started))
    }

    /// A prompt a run may be made of: not empty, within
    /// `limits.max_prompt_bytes`.
    pub(super) fn check_prompt(&self, prompt: &str) -> Result<(), RunError> {
        let limit = self.loaded.config.limits.max_prompt_bytes;
        if prompt.trim().is_empty() {
            return Err(RunError::EmptyPrompt);
        }
        if prompt.len() > limit {
            return Err(RunError::PromptTooLarge {
                size: prompt.len(),
                limit,
            });
        }
        Ok(())
    }

    /// The catalogs complete prices and context windows. They load once
    /// (then from memory or disk) in a task of their own: a run waits for
    /// them at most `CATALOG_WAIT`, and a slow or unreachable provider list
    /// never holds a run longer than that.
    async fn wait_for_catalogs(&self) {
        if self.llm.catalogs_fresh() {
            return;
        }
        let llm = self.llm.clone();
        let load = tokio::spawn(async move {
            llm.load_catalogs(false).await;
        });
        let _ = tokio::time::timeout(CATALOG_WAIT, load).await;
    }

    /// What bounds a run of `pipeline_name`: its deadline, call and cost
    /// budgets, and fan-out policy (naming the config keys it came from).
    fn context_limits(
        &self,
        pipeline_name: &str,
        run_timeout: Duration,
        ceiling: Option<Ceiling>,
    ) -> context::Limits {
        let config = &self.loaded.config;
        let overrides = config
            .pipelines
            .get(pipeline_name)
            .map(|p| p.fan_out.clone())
            .unwrap_or_default();
        let key = |set: bool| {
            if set {
                format!("pipelines.{pipeline_name}.fan_out")
            } else {
                "fan_out".to_owned()
            }
        };
        context::Limits {
            run_timeout,
            call_budget: config.limits.max_calls_per_run,
            fan_out: config.fan_out.with(&overrides),
            quorum_key: key(overrides.quorum.is_some()),
            grace_key: key(overrides.straggler_grace.is_some()),
            reserve_key: key(overrides.merge_reserve.is_some()),
            ceiling,
            dry_run: false,
            fallbacks: crate::config::fallback_chains(config, pipeline_name),
        }
    }

    /// A slot among the runs in progress: at once if one is free, else
    /// after waiting (said in the progress) within the run's deadline.
    async fn run_slot(
        &self,
        context: &RunContext,
        run_timeout: Duration,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, RunError> {
        if let Ok(permit) = self.run_slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let limit = self.loaded.config.limits.max_concurrent_runs;
        context.emit(Event::Note {
            plugin: "chorus".to_owned(),
            message: format!(
                "waiting for a free slot: {limit} runs are in progress (limits.max_concurrent_runs)"
            ),
        });
        let waiting = self.run_slots.clone().acquire_owned();
        match tokio::time::timeout_at(context.deadline(), waiting).await {
            Ok(permit) => Ok(permit.expect("the run semaphore is never closed")),
            Err(_) => Err(RunError::Busy {
                waited: run_timeout,
                limit,
            }),
        }
    }

    /// The run's record, from its answer and what its context saw.
    fn record(
        &self,
        request: &Request,
        mut answer: Answer,
        fan_out: &[Completion],
        context: &RunContext,
        started: Instant,
    ) -> RunRecord {
        let calls = context.records();
        let mut notes = std::mem::take(&mut answer.notes);
        notes.extend(context.notes());
        if context.refused() > 0 {
            notes.push(format!(
                "{} chat completions were refused: the run's budget of {} (limits.max_calls_per_run) was spent.",
                context.refused(),
                self.loaded.config.limits.max_calls_per_run
            ));
        }
        let sources = crate::record::sources::merged(&calls);
        let summary = summary(&answer, fan_out, &calls);
        let mut text = answer.text;
        // An answer in a format is that format alone: its web sources
        // are in the record, not written after it.
        if !sources.is_empty() && !text.trim().is_empty() && context.format().is_none() {
            text = format!(
                "{}\n\n{}",
                text.trim_end(),
                crate::record::sources::markdown(&sources)
            );
        }
        RunRecord {
            run_id: request.run_id.clone(),
            pipeline: request.pipeline.clone(),
            kind: answer.kind,
            summary,
            answer: text,
            sources,
            notes,
            usage: Totals::of(&calls),
            calls,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            details: answer.details,
            follow_up_of: None,
            resynthesis_of: None,
            attachments: Vec::new(),
            experiment: None,
        }
    }
}

/// The run's cost ceiling: the configured one, lowered by the call's
/// `max_cost_usd` option (which may not raise it).
pub(super) fn ceiling(configured: Option<f64>, options: &Value) -> Result<Option<Ceiling>, String> {
    let asked = options.get(options::MAX_COST_USD).and_then(Value::as_f64);
    match (configured, asked) {
        (Some(limit), Some(asked)) if asked > limit => Err(format!(
            "`max_cost_usd` can lower the configured ceiling of {} (limits.max_cost_usd), not raise it; got {}",
            show_usd(limit),
            show_usd(asked)
        )),
        (_, Some(asked)) => Ok(Some(Ceiling {
            usd: asked,
            source: "the call's max_cost_usd option".to_owned(),
        })),
        (Some(limit), None) => Ok(Some(Ceiling {
            usd: limit,
            source: "limits.max_cost_usd".to_owned(),
        })),
        (None, None) => Ok(None),
    }
}
