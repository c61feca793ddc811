//! Re-synthesis: merging a kept run's fan-out answers again — with the same
//! synthesizer, another one, or another pipeline's — without asking the
//! panel again. The new run's record starts with the reused answers (marked
//! `reused_from`, costing it nothing) and links to its source.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::follow_up::Conversation;
use super::run::{Setup, ceiling};
use super::{RunError, Runner, WRAP_UP, options};
use crate::events::{Event, Progress, Stage};
use crate::llm::{Completion, Failure, FailureKind, FormatSent, Reply};
use crate::plugins::{Kind, Plugin, Request, plan_from_value};
use crate::record::{CallRecord, CallRef, RunRecord, RunStatus, StoredRun};

/// What merges the answers again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merger {
    /// The source run's own pipeline and synthesizer.
    AsBefore,
    /// A synthesizer plugin, by name.
    Synthesizer(String),
    /// Another pipeline's synthesizer and options.
    Pipeline(String),
}

/// The merge a re-synthesis will do.
struct Merge<'a> {
    pipeline: String,
    synthesizer: &'a Plugin,
    options: Value,
    notes: Vec<String>,
}

impl Runner {
    /// Merges `source`'s fan-out answers again with `merger`. The panel is
    /// not asked again; a synthesizer's own model calls are made as usual.
    /// `conversation` is the source's, when it was a follow-up;
    /// `attachments` the source's, as kept (the synthesizer's own calls
    /// carry them, as in the source run).
    pub async fn resynthesize(
        &self,
        source: &StoredRun,
        merger: &Merger,
        conversation: Option<Conversation>,
        attachments: crate::attach::Attachments,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        let unusable = |problem: String| RunError::UnusableRun {
            id: source.run_id.clone(),
            problem,
        };
        if source.status == RunStatus::Running {
            return Err(unusable(
                "is still running: merge its answers once it has finished".into(),
            ));
        }
        let plan = source.plan.as_ref().map(plan_from_value).ok_or_else(|| {
            unusable("stopped before choosing its models: it has no answers to merge".into())
        })?;
        let (reused, completions) = reuse(source);
        if reused.is_empty() {
            return Err(unusable(
                "never asked its panel: it has no answers to merge".into(),
            ));
        }
        // The synthesizer may not be loaded yet (in `serve`: a shipped
        // built-in loads on first use, and just after a first start it may
        // still be compiling): wait for it (past the wait, `merge` says it
        // is not there yet).
        let names: Vec<&str> = self.merging_plugin(source, merger).into_iter().collect();
        let settled = self.registry.settled(&names);
        let _ = tokio::time::timeout(self.loaded.config.limits.run_timeout, settled).await;
        let merge = self.merge(source, merger)?;
        for model in &plan.synthesizers {
            if self.llm.model(model).is_none() {
                return Err(unusable(format!(
                    "planned synthesizer model `{model}`, which this configuration's [models] does not have"
                )));
            }
        }

        let limits = &self.loaded.config.limits;
        let ceiling =
            ceiling(limits.max_cost_usd, &merge.options).map_err(RunError::InvalidOptions)?;
        let request = Arc::new(Request {
            run_id: uuid::Uuid::now_v7().to_string(),
            pipeline: merge.pipeline.clone(),
            prompt: source.prompt.clone(),
            options: merge.options,
            attachments: crate::plugins::AttachmentInfo::list(&attachments.infos()),
            tools: None,
        });
        let mut lead_notes: Vec<String> = conversation
            .as_ref()
            .and_then(Conversation::note)
            .into_iter()
            .collect();
        lead_notes.push(format!(
            "Re-synthesis of run {} by `{}`: its {} fan-out answer(s) were reused; no panel model was asked again.",
            source.run_id,
            merge.synthesizer.name,
            completions.len()
        ));
        lead_notes.extend(merge.notes);
        let infos = attachments.infos();
        let attachments = (!attachments.is_empty()).then(|| {
            let pipeline = self.loaded.config.pipelines.get(&merge.pipeline);
            Arc::new(super::RunAttachments::new(
                attachments,
                &merge.pipeline,
                pipeline
                    .map(|p| p.attachments_for_text_models)
                    .unwrap_or_default(),
                pipeline.and_then(|p| p.describer.clone()),
                &source.prompt,
            ))
        });
        let setup = Setup {
            request: request.clone(),
            run_timeout: self.time_limit(&merge.pipeline) - WRAP_UP,
            limits_of: merge.pipeline,
            ceiling,
            history: conversation
                .as_ref()
                .map(Conversation::messages)
                .unwrap_or_default(),
            reused,
            dry_run: false,
            answered_by: merge.synthesizer.name.clone(),
            lead_notes,
            attachments,
            search: None,
            format: None,
            tools: None,
        };
        let synthesizer = merge.synthesizer;
        let mut record = self
            .wrapped(setup, progress, |context| async move {
                let plan = Arc::new(plan);
                context.emit(Event::Planned(plan.clone()));
                context.emit(Event::Stage(Stage::Synthesize));
                let limit = self.copy_limit(synthesizer, &plan, &completions);
                let host = context.clone() as Arc<dyn crate::plugins::HostServices>;
                let merge = super::deadline::by_deadline(
                    context.deadline(),
                    context.run_timeout(),
                    &synthesizer.name,
                    super::handoff::synthesize(
                        synthesizer,
                        host,
                        &request,
                        &plan,
                        &completions,
                        limit,
                    ),
                );
                let emit = |event| context.emit(event);
                let answer =
                    crate::events::plugin_call(emit, &synthesizer.name, "synthesize", merge)
                        .await?;
                Ok((answer, completions))
            })
            .await?;
        record.resynthesis_of = Some(source.run_id.clone());
        record.attachments = infos;
        record.follow_up_of = source.follow_up_of.clone();
        Ok(record)
    }

    /// The plugin that `merger` merges `source` with, if it names one.
    fn merging_plugin<'a>(&'a self, source: &'a StoredRun, merger: &'a Merger) -> Option<&'a str> {
        let pipelines = &self.loaded.config.pipelines;
        match merger {
            Merger::AsBefore => pipelines
                .get(&source.pipeline)
                .map(|p| p.synthesizer.as_str()),
            Merger::Synthesizer(name) => Some(name),
            Merger::Pipeline(name) => pipelines.get(name).map(|p| p.synthesizer.as_str()),
        }
    }

    fn merge(&self, source: &StoredRun, merger: &Merger) -> Result<Merge<'_>, RunError> {
        let synthesizers = || self.synthesizer_names().join(", ");
        match merger {
            Merger::AsBefore => {
                let pipeline = self.pipeline(&source.pipeline).map_err(|_| RunError::UnusableRun {
                    id: source.run_id.clone(),
                    problem: format!(
                        "was made by pipeline `{}`, which this configuration does not define: name a synthesizer ({}) or a pipeline to merge with",
                        source.pipeline,
                        synthesizers()
                    ),
                })?;
                Ok(Merge {
                    pipeline: source.pipeline.clone(),
                    synthesizer: self.plugin(&pipeline.synthesizer)?,
                    options: source.options.clone(),
                    notes: Vec::new(),
                })
            }
            Merger::Synthesizer(name) => {
                if self.registry.availability(name).is_none() {
                    return Err(RunError::InvalidOptions(format!(
                        "no plugin named `{name}` (synthesizers: {})",
                        synthesizers()
                    )));
                }
                let plugin = self.plugin(name)?;
                if plugin.kind != Kind::Synthesizer {
                    return Err(RunError::InvalidOptions(format!(
                        "plugin `{name}` is a {}, not a synthesizer (synthesizers: {})",
                        plugin.kind,
                        synthesizers()
                    )));
                }
                Ok(Merge {
                    pipeline: source.pipeline.clone(),
                    synthesizer: plugin,
                    options: source.options.clone(),
                    notes: Vec::new(),
                })
            }
            Merger::Pipeline(name) => {
                let pipeline = self.pipeline(name)?;
                // The source's options that this pipeline takes carry over;
                // its own defaults fill the rest.
                let (kept, dropped): (Map<String, Value>, Map<String, Value>) = source
                    .options
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .partition(|(key, _)| pipeline.options.contains_key(key));
                let options =
                    options::resolve(&pipeline.options, kept).map_err(RunError::InvalidOptions)?;
                let notes = if dropped.is_empty() {
                    Vec::new()
                } else {
                    let names: Vec<&str> = dropped.keys().map(String::as_str).collect();
                    vec![format!(
                        "Options of run {} that pipeline `{name}` does not take were left out: {}.",
                        source.run_id,
                        names.join(", ")
                    )]
                };
                Ok(Merge {
                    pipeline: name.clone(),
                    synthesizer: self.plugin(&pipeline.synthesizer)?,
                    options,
                    notes,
                })
            }
        }
    }
}

/// The source's fan-out calls, renumbered from 0 in the order they were
/// sent, as records of the new run and as the completions its synthesizer
/// receives.
fn reuse(source: &StoredRun) -> (Vec<CallRecord>, Vec<Completion>) {
    let mut fan_out: Vec<&CallRecord> = source
        .calls
        .iter()
        .map(|c| &c.call)
        .filter(|c| c.stage == super::FAN_OUT)
        .collect();
    fan_out.sort_by_key(|c| c.id);
    fan_out
        .into_iter()
        .enumerate()
        .map(|(i, call)| {
            let id = u32::try_from(i).unwrap_or(u32::MAX);
            let outcome = outcome(call);
            let record = CallRecord {
                id,
                stage: call.stage.clone(),
                label: call.label.clone(),
                model: call.model.clone(),
                status: match (&outcome, call.status.as_str()) {
                    (Ok(_), _) => "ok",
                    (Err(_), kept @ ("cut" | "skipped")) => kept,
                    (Err(_), _) => "failed",
                }
                .to_owned(),
                latency_ms: call.latency_ms,
                attempts: call.attempts,
                queued_ms: call.queued_ms,
                ttft_ms: call.ttft_ms,
                // Nothing was asked: no tokens, no cost of its own.
                error: outcome.as_ref().err().map(|f| crate::record::CallError {
                    kind: f.kind.as_str().to_owned(),
                    status: f.status,
                    message: f.message.clone(),
                }),
                reply: outcome.as_ref().ok().map(|r| r.content.clone()),
                fallback_from: call.fallback_from.clone(),
                citations: call.citations.clone(),
                reused_from: Some(CallRef {
                    run_id: source.run_id.clone(),
                    call: call.id,
                }),
                format_sent: call.format_sent.clone(),
                ..CallRecord::default()
            };
            let completion = Completion {
                id: Some(id),
                label: call.label.clone(),
                model: call.model.clone(),
                latency_ms: call.latency_ms,
                attempts: call.attempts,
                queued_ms: call.queued_ms,
                ttft_ms: call.ttft_ms,
                outcome,
            };
            (record, completion)
        })
        .unzip()
}

/// A kept call's outcome as the synthesizer sees it.
fn outcome(call: &CallRecord) -> Result<Reply, Failure> {
    match (&call.error, &call.reply) {
        (None, Some(content)) if call.status == "ok" => Ok(Reply {
            content: content.clone(),
            served_by: call.model.clone(),
            finish_reason: None,
            usage: None,
            citations: call.citations.clone(),
            format_sent: call
                .format_sent
                .as_deref()
                .and_then(FormatSent::parse)
                .unwrap_or_default(),
            tool_calls: Vec::new(),
        }),
        (Some(error), _) => {
            let failure = match FailureKind::parse(&error.kind) {
                Some(kind) => Failure::new(kind, error.message.clone()),
                // A kind this chorus does not know (a newer one wrote it).
                None => Failure::new(
                    FailureKind::Cancelled,
                    format!("{}: {}", error.kind, error.message),
                ),
            };
            Err(match error.status {
                Some(status) => failure.with_status(status),
                None => failure,
            })
        }
        (None, _) if call.status == "ok" => Err(Failure::new(
            FailureKind::MalformedResponse,
            "the answer was not kept by the run store",
        )),
        (None, _) => Err(Failure::new(
            FailureKind::Cancelled,
            "the source run ended before this call finished",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{AnswerKind, CallError, StoredCall, Totals};
    use serde_json::json;

    fn call(
        id: u32,
        stage: &str,
        status: &str,
        reply: Option<&str>,
        error: Option<&str>,
    ) -> StoredCall {
        StoredCall {
            call: CallRecord {
                id,
                stage: stage.into(),
                label: "panel".into(),
                model: format!("m{id}"),
                status: status.into(),
                latency_ms: 10,
                attempts: 1,
                prompt_tokens: Some(5),
                completion_tokens: Some(5),
                cost_usd: Some(0.1),
                error: error.map(|kind| CallError {
                    kind: kind.into(),
                    status: Some(500),
                    message: "boom".into(),
                }),
                reply: reply.map(|r| Arc::new(r.to_owned())),
                ..CallRecord::default()
            },
            request: None,
        }
    }

    #[test]
    fn only_the_fan_out_is_reused_renumbered_and_free() {
        let source = StoredRun {
            experiment: None,
            run_id: "src".into(),
            pipeline: "ask".into(),
            status: RunStatus::Interrupted,
            started_at: 0,
            finished_at: None,
            prompt: "q".into(),
            options: json!({}),
            plan: None,
            follow_up_of: None,
            resynthesis_of: None,
            client: None,
            kind: Some(AnswerKind::Synthesis),
            summary: None,
            answer: None,
            notes: vec![],
            details: None,
            error: None,
            usage: Totals::default(),
            elapsed_ms: None,
            calls: vec![
                call(0, "planner", "ok", Some("plan"), None),
                call(3, "fan-out", "failed", None, Some("http-status")),
                call(1, "fan-out", "ok", Some("a1"), None),
                call(2, "fan-out", "running", None, None),
                call(4, "fan-out", "failed", None, Some("cut")),
            ],
            attachments: Vec::new(),
        };
        let (records, completions) = reuse(&source);
        let ids: Vec<u32> = records.iter().map(|r| r.id).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        let origins: Vec<u32> = records
            .iter()
            .map(|r| r.reused_from.as_ref().unwrap().call)
            .collect();
        assert_eq!(origins, [1, 2, 3, 4]);
        assert_eq!(Totals::of(&records).cost_usd, Some(0.0));
        assert_eq!(*completions[0].outcome.as_ref().unwrap().content, "a1");
        let failure = completions[1].outcome.as_ref().unwrap_err();
        assert_eq!(failure.kind, FailureKind::Cancelled);
        let failure = completions[2].outcome.as_ref().unwrap_err();
        assert_eq!(
            (failure.kind, failure.status),
            (FailureKind::HttpStatus, Some(500))
        );
        let failure = completions[3].outcome.as_ref().unwrap_err();
        assert_eq!(
            (failure.kind, failure.message.as_str()),
            (FailureKind::Cut, "boom")
        );
        assert_eq!(completions[2].id, Some(2));
    }
}
