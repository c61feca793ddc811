//! Runs a pipeline: selector -> prompter -> fan-out -> synthesizer, and
//! produces the run's record. This module holds the `Runner` (what every
//! run shares) and the pipeline's own steps; `run` is the one wrapper every
//! kind of run goes through (slot, catalogs, deadline, budgets, record),
//! `checks` holds plugins to the contract, `summary` writes the result's
//! first line. Knows nothing about MCP, the terminal, or where records are
//! kept.

mod attachments;
mod budget;
pub mod cache;
mod checks;
mod context;
mod deadline;
mod describe;
pub mod follow_up;
mod handoff;
pub mod options;
pub mod resynthesize;
mod roles;
mod run;
mod single;
mod stragglers;
pub mod structured;
mod summary;
pub mod tool_calls;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use attachments::RunAttachments;
pub use budget::worst_case_usd;
pub use cache::{CallCache, Hit, RunCallCache};
pub use context::search_of_stage;
pub use follow_up::{Conversation, Turn};
pub use resynthesize::Merger;
pub use single::single_run_name;

use crate::config::{ConfigError, Loaded, Pipeline};
use crate::events::{self, Event, Progress, Stage};
use crate::llm::{Completion, Llm};
use crate::plugins::{Answer, Plan, Plugin, PluginError, Registry, Request, ToolDecision};
use crate::record::RunRecord;
use checks::{check_roles, side_by_side};
use context::RunContext;
use run::{Setup, ceiling};

/// The stage of the panel's calls: the requests the prompter made.
pub const FAN_OUT: &str = "fan-out";

/// Time a run gets past its deadline for the host's own wrap-up (checking
/// and recording what it has). No plugin computes in it: plugin stages
/// stop at the deadline (`deadline`).
const WRAP_UP: Duration = Duration::from_secs(5);

/// The longest a run waits for the providers' model lists.
const CATALOG_WAIT: Duration = Duration::from_secs(2);

/// Why a run produced no result at all. (Models failing is not one of
/// these: that is a result whose kind is `none`.)
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no pipeline named `{name}` (available: {available})")]
    UnknownPipeline { name: String, available: String },
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("the prompt is {size} bytes, over the limit of {limit} (limits.max_prompt_bytes)")]
    PromptTooLarge { size: usize, limit: usize },
    #[error("{0}")]
    InvalidOptions(String),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error("the run did not finish within its deadline of {0:?}")]
    Timeout(Duration),
    /// A follow-up or re-synthesis names a run that is not kept.
    #[error("no run `{id}`: {why}")]
    UnknownRun { id: String, why: String },
    /// The attachments cannot be sent to this run's models as its pipeline
    /// says (`attachments_for_text_models`), or could not be read.
    #[error("{0}")]
    Attachments(String),
    /// A follow-up or re-synthesis names a run it cannot build on.
    #[error("run `{id}` {problem}")]
    UnusableRun { id: String, problem: String },
    #[error(
        "the run waited its whole deadline of {waited:?} for a free slot: {limit} runs were in progress (limits.max_concurrent_runs); try again later, or raise the limit"
    )]
    Busy { waited: Duration, limit: u32 },
    /// The client's grants or limits do not allow the run (`budget`).
    #[error("{0}")]
    Refused(crate::client::Refusal),
    /// The answer does not match the format the caller asked for, even
    /// after a repair round (see `structured`).
    #[error("{0}")]
    AnswerFormat(structured::Unmatched),
    /// The panel's tool call does not match its tool, even after a repair
    /// round (see `tool_calls`).
    #[error("{0}")]
    ToolCall(tool_calls::BadCall),
}

/// What a run is asked: the prompt, and what it came with.
#[derive(Debug, Clone, Default)]
pub struct Question {
    pub text: String,
    pub attachments: crate::attach::Attachments,
    /// What the result should say of what the question came with (say,
    /// attachments carried over from the run a follow-up continues).
    pub notes: Vec<String>,
    /// The shape the answer must take (structured outputs); `None` for
    /// free text.
    pub format: Option<structured::AnswerFormat>,
    /// Tools the caller offers, and the exchange since the question: the
    /// answer may be a call of one (see `tool_calls`).
    pub tools: Option<Arc<crate::llm::tools::ToolUse>>,
}

impl From<&str> for Question {
    fn from(text: &str) -> Self {
        Self::text(text.to_owned())
    }
}

impl Question {
    /// A question of text alone.
    pub fn text(text: String) -> Self {
        Self {
            text,
            ..Self::default()
        }
    }
}

/// What running a pipeline needs: the checked config, the loaded plugins and
/// the providers. Shared by every run; nothing in it is mutated by one.
pub struct Runner {
    pub loaded: Loaded,
    pub registry: Registry,
    pub llm: Arc<Llm>,
    /// One permit per run in progress (limits.max_concurrent_runs).
    run_slots: Arc<tokio::sync::Semaphore>,
    /// The response cache, when `[cache] responses` turns it on (set by
    /// whoever holds the store: see `with_responses`).
    responses: Option<Arc<dyn CallCache>>,
}

impl Runner {
    pub fn load(loaded: Loaded) -> Result<Self, ConfigError> {
        let registry = Registry::load(&loaded)?;
        Self::with_registry(loaded, registry)
    }

    /// As `load`, but a built-in with its shipped settings is loaded when
    /// a run first needs it (see `Registry::load_needed`).
    pub fn load_needed(loaded: Loaded) -> Result<Self, ConfigError> {
        let registry = Registry::load_needed(&loaded)?;
        Self::with_registry(loaded, registry)
    }

    /// As `load`, but the plugins that must be compiled compile in the
    /// background (see `Registry::load_deferred`): for a first start of
    /// `serve`, which answers its client at once. A run waits for the
    /// plugins it needs; one that fails to load fails only its pipelines'
    /// runs, with the error `load` would have returned.
    pub fn load_deferred(loaded: Loaded) -> Result<Self, ConfigError> {
        let registry = Registry::load_deferred(&loaded)?;
        Self::with_registry(loaded, registry)
    }

    fn with_registry(loaded: Loaded, registry: Registry) -> Result<Self, ConfigError> {
        let llm = Arc::new(Llm::new(&loaded)?);
        check_roles(&loaded, &registry)?;
        let run_slots = Arc::new(tokio::sync::Semaphore::new(
            loaded.config.limits.max_concurrent_runs as usize,
        ));
        Ok(Self {
            loaded,
            registry,
            llm,
            run_slots,
            responses: None,
        })
    }

    /// The runner, answering identical requests from `responses` (see
    /// `respcache`); `None` asks every model every time.
    pub fn with_responses(mut self, responses: Option<Arc<dyn CallCache>>) -> Self {
        self.responses = responses;
        self
    }

    /// The runner for a changed configuration, built beside `previous`
    /// (which keeps serving the runs it started): unchanged plugins and
    /// provider clients are taken over as they are, and so are the run
    /// slots, so `limits.max_concurrent_runs` holds across the change
    /// (the caller keeps that limit as it was: it cannot change live).
    pub fn reload(loaded: Loaded, previous: &Runner) -> Result<Self, ConfigError> {
        let (old, new) = (&previous.loaded.config, &loaded.config);
        let llm = if old.providers == new.providers
            && old.models == new.models
            && old.cache == new.cache
            && old.limits.fetch_private_urls == new.limits.fetch_private_urls
        {
            previous.llm.clone()
        } else {
            let unchanged: Vec<&str> = new
                .providers
                .iter()
                .filter(|(name, p)| old.providers.get(*name) == Some(p))
                .map(|(name, _)| name.as_str())
                .collect();
            Arc::new(Llm::reusing(&loaded, Some(&previous.llm), &unchanged)?)
        };
        let registry = Registry::load_reusing(&loaded, Some(&previous.registry))?;
        check_roles(&loaded, &registry)?;
        Ok(Self {
            loaded,
            registry,
            llm,
            run_slots: previous.run_slots.clone(),
            responses: None,
        })
    }

    pub fn pipelines(&self) -> impl Iterator<Item = (&String, &Pipeline)> {
        self.loaded.config.pipelines.iter()
    }

    /// Runs `pipeline` on `prompt`. Cancel by dropping the future: every
    /// in-flight request is dropped with it.
    pub async fn run(
        &self,
        pipeline_name: &str,
        prompt: String,
        options: serde_json::Map<String, Value>,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        self.run_continuing(
            pipeline_name,
            Question::text(prompt),
            options,
            None,
            progress,
        )
        .await
    }

    /// Runs `pipeline` on `prompt` as the next turn of `conversation` (a
    /// follow-up), or afresh when there is none.
    pub async fn run_continuing(
        &self,
        pipeline_name: &str,
        question: Question,
        options: serde_json::Map<String, Value>,
        conversation: Option<Conversation>,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        self.run_as(
            pipeline_name,
            question,
            options,
            conversation,
            progress,
            false,
        )
        .await
    }

    /// Runs the pipeline's plugins without calling any model: every chat
    /// completion (the fan-out's and the plugins' own) is announced with
    /// `Event::CallStarted` as usual, then answered with a placeholder, and
    /// recorded with its worst-case cost as an estimate. What a run would
    /// send, for `chorus ask --dry-run`.
    pub async fn dry_run(
        &self,
        pipeline_name: &str,
        question: Question,
        options: serde_json::Map<String, Value>,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        self.run_as(pipeline_name, question, options, None, progress, true)
            .await
    }

    async fn run_as(
        &self,
        pipeline_name: &str,
        Question {
            text: prompt,
            attachments,
            notes: question_notes,
            format,
            tools,
        }: Question,
        options: serde_json::Map<String, Value>,
        conversation: Option<Conversation>,
        progress: Progress,
        dry_run: bool,
    ) -> Result<RunRecord, RunError> {
        let pipeline = self.pipeline(pipeline_name)?;
        self.check_prompt(&prompt)?;
        let limits = &self.loaded.config.limits;
        let options =
            options::resolve(&pipeline.options, options).map_err(RunError::InvalidOptions)?;
        let ceiling = ceiling(limits.max_cost_usd, &options).map_err(RunError::InvalidOptions)?;
        let attachments = crate::attach::shape::measured(attachments).await;
        let infos = attachments.infos();
        let attachments = (!attachments.is_empty()).then(|| {
            Arc::new(RunAttachments::new(
                attachments,
                pipeline_name,
                pipeline.attachments_for_text_models,
                pipeline.describer.clone(),
                &prompt,
            ))
        });
        let request = Arc::new(Request {
            run_id: uuid::Uuid::now_v7().to_string(),
            pipeline: pipeline_name.to_owned(),
            prompt,
            options,
            attachments: crate::plugins::AttachmentInfo::list(&infos),
            tools: tools.clone(),
        });
        let setup = Setup {
            request: request.clone(),
            limits_of: pipeline_name.to_owned(),
            run_timeout: pipeline.run_timeout.unwrap_or(limits.run_timeout),
            ceiling,
            history: conversation
                .as_ref()
                .map(Conversation::messages)
                .unwrap_or_default(),
            reused: Vec::new(),
            dry_run,
            answered_by: pipeline.synthesizer.clone(),
            lead_notes: conversation
                .as_ref()
                .and_then(Conversation::note)
                .into_iter()
                .chain(question_notes)
                .collect(),
            attachments,
            search: options::web_search(pipeline, &request.options),
            format,
            tools,
        };
        let mut record = self
            .wrapped(setup, progress, |context| async move {
                self.steps(pipeline, &request, &context).await
            })
            .await?;
        record.follow_up_of = conversation.and_then(|c| c.of);
        record.attachments = infos;
        Ok(record)
    }

    /// `question` with its URL attachments fetched, for a provider that
    /// cannot fetch them (see `llm::fetch`), and notes saying so: done by
    /// whoever records the run before it starts, so the store keeps the
    /// bytes and follow-ups reuse them. `Err` before any model is called.
    pub async fn fetched(&self, mut question: Question) -> Result<Question, RunError> {
        let limits = self.loaded.config.limits.attachments();
        let (attachments, notes) = self
            .llm
            .fetch_urls(std::mem::take(&mut question.attachments), &limits)
            .await
            .map_err(RunError::Attachments)?;
        question.attachments = attachments;
        question.notes.extend(notes);
        Ok(question)
    }

    fn pipeline(&self, name: &str) -> Result<&Pipeline, RunError> {
        let pipelines = &self.loaded.config.pipelines;
        pipelines
            .get(name)
            .ok_or_else(|| RunError::UnknownPipeline {
                name: name.to_owned(),
                available: pipelines.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// The longest a run of `pipeline` can take: its deadline, and the time
    /// it gets past it to wrap up.
    pub fn time_limit(&self, pipeline: &str) -> Duration {
        let limits = &self.loaded.config.limits;
        let timeout = self
            .loaded
            .config
            .pipelines
            .get(pipeline)
            .and_then(|p| p.run_timeout)
            .unwrap_or(limits.run_timeout);
        timeout + WRAP_UP
    }

    async fn steps(
        &self,
        pipeline: &Pipeline,
        request: &Request,
        context: &Arc<RunContext>,
    ) -> Result<(Answer, Vec<Completion>), RunError> {
        let host = || context.clone() as Arc<dyn crate::plugins::HostServices>;
        let [selector, prompter, synthesizer] = self
            .plugins_of(&request.pipeline, pipeline, context)
            .await?;

        context.emit(Event::Stage(Stage::Select));
        let emit = |event| context.emit(event);
        let plan = events::plugin_call(
            emit,
            &selector.name,
            "select",
            deadline::by_deadline(
                context.deadline(),
                context.run_timeout(),
                &selector.name,
                selector.select(host(), request),
            ),
        )
        .await?;
        self.check_plan(selector, &plan)?;
        let plan = Arc::new(plan);
        context.emit(Event::Planned(plan.clone()));

        context.emit(Event::Stage(Stage::Prompt));
        let prompts = events::plugin_call(
            emit,
            &prompter.name,
            "prompt",
            deadline::by_deadline(
                context.deadline(),
                context.run_timeout(),
                &prompter.name,
                prompter.prompt(host(), request, &plan),
            ),
        )
        .await?;
        self.check_prompts(prompter, &prompts, context.calls_left())?;
        context
            .plan_attachments(&prompts.requests)
            .await
            .map_err(RunError::Attachments)?;

        context.emit(Event::Stage(Stage::FanOut));
        context.emit(Event::FanOut {
            calls: prompts.requests.len(),
        });
        let completions = context.fan_out(FAN_OUT, prompts.requests).await;

        context.emit(Event::Stage(Stage::Synthesize));
        let limit = self.copy_limit(synthesizer, &plan, &completions);
        let request = context.described(request);
        let deciding = context.tools().map(|tools| tool_calls::Deciding {
            context,
            tools,
            chooser: plan.synthesizers.first().map(String::as_str),
            completions: &completions,
            run_id: &request.run_id,
        });
        let (shown, settled) = match deciding {
            None => (completions.clone(), tool_calls::Settled::Merge(Vec::new())),
            Some(deciding) => {
                let shown = tool_calls::as_text(completions.clone());
                let decision = if deciding.proposed() {
                    let choose = deadline::by_deadline(
                        context.deadline(),
                        context.run_timeout(),
                        &synthesizer.name,
                        handoff::choose_tool_calls(
                            synthesizer,
                            host(),
                            &request,
                            &plan,
                            &shown,
                            limit,
                        ),
                    );
                    events::plugin_call(emit, &synthesizer.name, "choose-tool-calls", choose).await
                } else {
                    Ok(Some(ToolDecision::Merge))
                };
                let settled = deciding.settled(synthesizer, decision).await?;
                (shown, settled)
            }
        };
        let chorus_made = matches!(settled, tool_calls::Settled::ByChorus(_));
        let given = match settled {
            tool_calls::Settled::ByChorus(answer) | tool_calls::Settled::ByStrategy(answer) => {
                answer
            }
            tool_calls::Settled::Merge(mut said) => {
                let merge = deadline::by_deadline(
                    context.deadline(),
                    context.run_timeout(),
                    &synthesizer.name,
                    handoff::synthesize(synthesizer, host(), &request, &plan, &shown, limit),
                );
                let mut answer =
                    match events::plugin_call(emit, &synthesizer.name, "synthesize", merge).await {
                        Ok(answer) => answer,
                        // The answers are paid for: a merge that fails returns them.
                        Err(error) => side_by_side(&shown, &error).ok_or(error)?,
                    };
                said.append(&mut answer.notes);
                answer.notes = said;
                answer
            }
        };
        let mut answer = match deciding {
            // A call chorus made is held to its tool already.
            Some(deciding) if !chorus_made => deciding.held(&synthesizer.name, given).await?,
            _ => given,
        };

        let mut notes = plan.notes.clone();
        notes.extend(prompts.notes);
        notes.append(&mut answer.notes);
        answer.notes = notes;
        Ok((answer, shown))
    }

    /// The most of each answer `synthesizer` is handed (see `handoff`):
    /// what the largest window among the run's models could hold, within
    /// the plugin's memory cap.
    fn copy_limit(
        &self,
        synthesizer: &Plugin,
        plan: &Plan,
        completions: &[Completion],
    ) -> handoff::CopyLimit {
        let models: Vec<&str> = plan
            .panel
            .iter()
            .map(|s| s.model.as_str())
            .chain(plan.synthesizers.iter().map(String::as_str))
            .chain(completions.iter().map(|c| c.model.as_str()))
            .collect();
        let answers = completions.iter().filter(|c| c.outcome.is_ok()).count();
        handoff::CopyLimit::new(
            &models,
            |m| self.llm.model(m).and_then(|i| i.context_window),
            synthesizer.max_memory_mib(),
            answers,
        )
    }
}

#[cfg(test)]
mod tests;
