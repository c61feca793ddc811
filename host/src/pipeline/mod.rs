//! Runs a pipeline: selector -> prompter -> fan-out -> synthesizer, and
//! produces the run's record. Owns the run's deadline, call budget and
//! progress events, and checks every plugin output before using it. Knows
//! nothing about MCP, the terminal, or where records are kept.

mod budget;
mod context;
pub mod events;
pub mod follow_up;
mod handoff;
pub mod options;
pub mod resynthesize;
mod stragglers;
pub mod watch;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use budget::worst_case_usd;
pub use events::{Event, Progress, Stage};
pub use follow_up::{Conversation, Turn};
pub use resynthesize::Merger;

use crate::config::{ConfigError, Loaded, Pipeline};
use crate::llm::{Completion, Llm};
use crate::plugins::{
    Answer, AnswerKind, Kind, Plan, Plugin, PluginError, Prompts, Registry, Request,
};
use crate::record::{CallRecord, RunRecord, Totals, show_usd};
use budget::Ceiling;
use context::RunContext;

/// Time a run gets past its deadline to turn what it has into an answer.
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
    /// A follow-up or re-synthesis names a run it cannot build on.
    #[error("run `{id}` {problem}")]
    UnusableRun { id: String, problem: String },
    #[error(
        "the run waited its whole deadline of {waited:?} for a free slot: {limit} runs were in progress (limits.max_concurrent_runs); try again later, or raise the limit"
    )]
    Busy { waited: Duration, limit: u32 },
}

/// What running a pipeline needs: the checked config, the loaded plugins and
/// the providers. Shared by every run; nothing in it is mutated by one.
pub struct Runner {
    pub loaded: Loaded,
    pub registry: Registry,
    pub llm: Arc<Llm>,
    /// One permit per run in progress (limits.max_concurrent_runs).
    run_slots: Arc<tokio::sync::Semaphore>,
}

impl Runner {
    pub fn load(loaded: Loaded) -> Result<Self, ConfigError> {
        let llm = Arc::new(Llm::new(&loaded)?);
        let registry = Registry::load(&loaded)?;
        check_roles(&loaded, &registry)?;
        let run_slots = Arc::new(tokio::sync::Semaphore::new(
            loaded.config.limits.max_concurrent_runs as usize,
        ));
        Ok(Self {
            loaded,
            registry,
            llm,
            run_slots,
        })
    }

    /// The runner for a changed configuration, built beside `previous`
    /// (which keeps serving the runs it started): unchanged plugins and
    /// provider clients are taken over as they are, and so are the run
    /// slots, so `limits.max_concurrent_runs` holds across the change
    /// (the caller keeps that limit as it was: it cannot change live).
    pub fn reload(loaded: Loaded, previous: &Runner) -> Result<Self, ConfigError> {
        let (old, new) = (&previous.loaded.config, &loaded.config);
        let llm =
            if old.providers == new.providers && old.models == new.models && old.cache == new.cache
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
        })
    }

    /// The catalogs complete prices and context windows. They load once
    /// (then from memory or disk) in a task of their own: a run waits for
    /// them at most `CATALOG_WAIT`, and a slow or unreachable provider list
    /// never holds a run longer than that.
    async fn wait_for_catalogs(&self) {
        let llm = self.llm.clone();
        let load = tokio::spawn(async move {
            llm.load_catalogs(false).await;
        });
        let _ = tokio::time::timeout(CATALOG_WAIT, load).await;
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
        self.run_continuing(pipeline_name, prompt, options, None, progress)
            .await
    }

    /// Runs `pipeline` on `prompt` as the next turn of `conversation` (a
    /// follow-up), or afresh when there is none.
    pub async fn run_continuing(
        &self,
        pipeline_name: &str,
        prompt: String,
        options: serde_json::Map<String, Value>,
        conversation: Option<Conversation>,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        self.run_as(
            pipeline_name,
            prompt,
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
        prompt: String,
        options: serde_json::Map<String, Value>,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        self.run_as(pipeline_name, prompt, options, None, progress, true)
            .await
    }

    async fn run_as(
        &self,
        pipeline_name: &str,
        prompt: String,
        options: serde_json::Map<String, Value>,
        conversation: Option<Conversation>,
        progress: Progress,
        dry_run: bool,
    ) -> Result<RunRecord, RunError> {
        let pipeline = self.pipeline(pipeline_name)?;
        let limits = &self.loaded.config.limits;
        if prompt.trim().is_empty() {
            return Err(RunError::EmptyPrompt);
        }
        if prompt.len() > limits.max_prompt_bytes {
            return Err(RunError::PromptTooLarge {
                size: prompt.len(),
                limit: limits.max_prompt_bytes,
            });
        }
        let options =
            options::resolve(&pipeline.options, options).map_err(RunError::InvalidOptions)?;
        let ceiling = ceiling(limits.max_cost_usd, &options).map_err(RunError::InvalidOptions)?;
        let started = Instant::now();
        let run_timeout = pipeline.run_timeout.unwrap_or(limits.run_timeout);
        self.wait_for_catalogs().await;
        let request = Arc::new(Request {
            run_id: uuid::Uuid::now_v7().to_string(),
            pipeline: pipeline_name.to_owned(),
            prompt,
            options,
        });
        progress(Event::Started(request.clone()));
        let history = conversation
            .as_ref()
            .map(Conversation::messages)
            .unwrap_or_default();
        let mut limits = self.context_limits(pipeline_name, run_timeout, ceiling);
        limits.dry_run = dry_run;
        let context =
            Arc::new(RunContext::new(self.llm.clone(), progress, limits).with_history(history));
        let _slot = self.run_slot(&context, run_timeout).await?;
        let steps = self.steps(pipeline, &request, &context);
        let (answer, fan_out) = tokio::time::timeout_at(context.deadline() + WRAP_UP, steps)
            .await
            .map_err(|_| RunError::Timeout(run_timeout))??;
        let synthesizer = &self.plugin(&pipeline.synthesizer).name;
        let mut answer = checked(synthesizer, answer, &fan_out, &context.records())?;
        if let Some(note) = conversation.as_ref().and_then(Conversation::note) {
            answer.notes.insert(0, note);
        }
        let mut record = self.record(&request, answer, &fan_out, &context, started);
        record.follow_up_of = conversation.map(|c| c.of);
        Ok(record)
    }

    /// What bounds a run of `pipeline_name`: its deadline, call and cost
    /// budgets, and fan-out policy (naming the config keys it came from).
    fn context_limits(
        &self,
        pipeline_name: &str,
        run_timeout: Duration,
        ceiling: Option<budget::Ceiling>,
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
        RunRecord {
            run_id: request.run_id.clone(),
            pipeline: request.pipeline.clone(),
            kind: answer.kind,
            summary: summary(&answer, fan_out, &calls),
            answer: answer.text,
            notes,
            usage: Totals::of(&calls),
            calls,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            details: answer.details,
            follow_up_of: None,
            resynthesis_of: None,
        }
    }

    async fn steps(
        &self,
        pipeline: &Pipeline,
        request: &Request,
        context: &Arc<RunContext>,
    ) -> Result<(Answer, Vec<Completion>), RunError> {
        let host = || context.clone() as Arc<dyn crate::plugins::HostServices>;
        let [selector, prompter, synthesizer] =
            roles(pipeline).map(|(_, _, name)| self.plugin(name));

        context.emit(Event::Stage(Stage::Select));
        let plan = selector.select(host(), request).await?;
        self.check_plan(selector, &plan)?;
        let plan = Arc::new(plan);
        context.emit(Event::Planned(plan.clone()));

        context.emit(Event::Stage(Stage::Prompt));
        let prompts = prompter.prompt(host(), request, &plan).await?;
        self.check_prompts(prompter, &prompts, context.calls_left())?;

        context.emit(Event::Stage(Stage::FanOut));
        context.emit(Event::FanOut {
            calls: prompts.requests.len(),
        });
        let completions = context.fan_out("fan-out", prompts.requests).await;

        context.emit(Event::Stage(Stage::Synthesize));
        let limit = self.copy_limit(synthesizer, &plan, &completions);
        let mut answer =
            match handoff::synthesize(synthesizer, host(), request, &plan, &completions, limit)
                .await
            {
                Ok(answer) => answer,
                // The answers are paid for: a merge that fails returns them.
                Err(error) => side_by_side(&completions, &error).ok_or(error)?,
            };

        let mut notes = plan.notes.clone();
        notes.extend(prompts.notes);
        notes.append(&mut answer.notes);
        answer.notes = notes;
        Ok((answer, completions))
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

    fn plugin(&self, name: &str) -> &Plugin {
        self.registry
            .get(name)
            .expect("validated at load: pipelines name loaded plugins")
    }

    fn check_plan(&self, selector: &Plugin, plan: &Plan) -> Result<(), PluginError> {
        let invalid = |message: String| PluginError::Invalid {
            plugin: selector.name.clone(),
            message,
        };
        if plan.panel.is_empty() {
            return Err(invalid("its plan has an empty panel".into()));
        }
        let budget = self.loaded.config.limits.max_calls_per_run as usize;
        if plan.panel.len() > budget {
            return Err(invalid(format!(
                "its panel has {} seats, more than limits.max_calls_per_run ({budget})",
                plan.panel.len()
            )));
        }
        for model in plan
            .panel
            .iter()
            .map(|s| &s.model)
            .chain(&plan.synthesizers)
        {
            self.check_model(model).map_err(invalid)?;
        }
        Ok(())
    }

    fn check_prompts(
        &self,
        prompter: &Plugin,
        prompts: &Prompts,
        calls_left: u32,
    ) -> Result<(), PluginError> {
        let invalid = |message: String| PluginError::Invalid {
            plugin: prompter.name.clone(),
            message,
        };
        if prompts.requests.is_empty() {
            return Err(invalid("it produced no requests".into()));
        }
        let budget = self.loaded.config.limits.max_calls_per_run;
        if prompts.requests.len() > calls_left as usize {
            let spent = budget.saturating_sub(calls_left);
            return Err(invalid(format!(
                "it produced {} requests, but the run may make only {calls_left} more calls \
                 (limits.max_calls_per_run = {budget}, {spent} made already)",
                prompts.requests.len()
            )));
        }
        for request in &prompts.requests {
            self.check_model(&request.model).map_err(invalid)?;
            if request.messages.is_empty() {
                return Err(invalid(format!(
                    "its request to {} has no messages",
                    request.model
                )));
            }
        }
        Ok(())
    }

    fn check_model(&self, model: &str) -> Result<(), String> {
        if self.llm.model(model).is_some() {
            return Ok(());
        }
        let models = self.llm.models();
        let known: Vec<&str> = models.keys().map(String::as_str).collect();
        Err(format!(
            "it chose model `{model}`, which is not in [models] (known: {})",
            known.join(", ")
        ))
    }
}

/// Every pipeline's plugins are of the kind their role needs.
fn check_roles(loaded: &Loaded, registry: &Registry) -> Result<(), ConfigError> {
    for (name, pipeline) in &loaded.config.pipelines {
        for (role, kind, plugin) in roles(pipeline) {
            let found = registry
                .get(plugin)
                .expect("validated: pipelines name defined plugins");
            if found.kind != kind {
                return Err(loaded.error(
                    format!("pipelines.{name}.{role}"),
                    format!("plugin `{plugin}` is a {}, not a {kind}", found.kind),
                ));
            }
        }
    }
    Ok(())
}

/// A pipeline's plugins by role.
fn roles(pipeline: &Pipeline) -> [(&'static str, Kind, &str); 3] {
    [
        ("selector", Kind::Selector, &pipeline.selector),
        ("prompter", Kind::Prompter, &pipeline.prompter),
        ("synthesizer", Kind::Synthesizer, &pipeline.synthesizer),
    ]
}

/// The synthesizer's answer held to the contract (see `check_answer`); an
/// answer that cannot be used gives way to the answers that arrived, side
/// by side, so what was paid for is never dropped.
fn checked(
    plugin: &str,
    mut answer: Answer,
    fan_out: &[Completion],
    calls: &[CallRecord],
) -> Result<Answer, PluginError> {
    match check_answer(plugin, &mut answer, calls) {
        Ok(()) => Ok(answer),
        Err(error) => side_by_side(fan_out, &error).ok_or(error),
    }
}

/// Holds the synthesizer to the contract: sources must be calls of this
/// run; those that gave no answer are not counted (said in a note), and a
/// "synthesis" of fewer than two answers is relabelled — degradation is
/// said out loud, never dressed up.
fn check_answer(
    plugin: &str,
    answer: &mut Answer,
    calls: &[CallRecord],
) -> Result<(), PluginError> {
    let invalid = |message: String| PluginError::Invalid {
        plugin: plugin.to_owned(),
        message,
    };
    let call = |id: u32| calls.iter().find(|c| c.id == id);
    if let Some(bad) = answer.sources.iter().find(|&&id| call(id).is_none()) {
        return Err(invalid(format!(
            "its answer cites call {bad}, but the run made {} calls",
            calls.len()
        )));
    }
    // A call cited twice is still one answer.
    let mut seen = std::collections::HashSet::new();
    answer.sources.retain(|source| seen.insert(*source));
    // Only answers that arrived can be built on; "k of n" counts those.
    let failed: Vec<&str> = answer
        .sources
        .iter()
        .filter_map(|&id| call(id))
        .filter(|c| c.error.is_some())
        .map(|c| c.model.as_str())
        .collect();
    if !failed.is_empty() {
        answer.notes.push(format!(
            "The synthesizer `{plugin}` cited calls that gave no answer ({}); they are not counted.",
            failed.join(", ")
        ));
        answer
            .sources
            .retain(|&id| call(id).is_some_and(|c| c.error.is_none()));
    }
    if answer.kind == AnswerKind::Synthesis && answer.sources.len() < 2 {
        if answer.sources.is_empty() {
            return Err(invalid(
                "its answer is labelled a synthesis but cites no answer that arrived".to_owned(),
            ));
        }
        answer.kind = AnswerKind::Single;
        answer.notes.push(format!(
            "The synthesizer `{plugin}` labelled this a synthesis, but it rests on 1 answer(s); relabelled."
        ));
    }
    Ok(())
}

/// The answers that arrived, side by side, when the synthesizer failed
/// outright (a trap, its memory cap, an answer that cannot be used);
/// `None` when no answer arrived.
fn side_by_side(completions: &[Completion], error: &PluginError) -> Option<Answer> {
    let answered: Vec<(u32, &Completion, &str)> = completions
        .iter()
        .filter_map(|c| Some((c.id?, c, c.outcome.as_ref().ok()?.content.as_str())))
        .collect();
    if answered.is_empty() {
        return None;
    }
    let text = answered
        .iter()
        .map(|(_, c, content)| format!("### {}\n\n{}", c.model, content.trim()))
        .collect::<Vec<_>>()
        .join("\n\n");
    Some(Answer {
        kind: AnswerKind::Unmerged,
        text,
        sources: answered.iter().map(|(id, ..)| *id).collect(),
        notes: vec![format!(
            "Merging failed: {error}. The {} answers that arrived are given side by side.",
            answered.len()
        )],
        details: None,
    })
}

/// The run's cost ceiling: the configured one, lowered by the call's
/// `max_cost_usd` option (which may not raise it).
fn ceiling(configured: Option<f64>, options: &Value) -> Result<Option<Ceiling>, String> {
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

fn summary(answer: &Answer, fan_out: &[Completion], calls: &[CallRecord]) -> String {
    let text = summary_line(answer, fan_out, calls);
    let cut: Vec<&str> = fan_out
        .iter()
        .filter(|c| matches!(&c.outcome, Err(f) if f.kind == crate::llm::FailureKind::Cut))
        .map(|c| c.model.as_str())
        .collect();
    let text = if cut.is_empty() {
        text
    } else {
        format!("{text} Cut as stragglers: {}.", cut.join(", "))
    };
    if answer.kind != AnswerKind::None {
        return text;
    }
    // When nothing answered, say why once per distinct cause, not once
    // per model: a missing key or a dead host reads as one line.
    let mut causes: Vec<(String, Vec<&str>)> = Vec::new();
    for call in calls.iter().filter(|c| c.stage == "fan-out") {
        let Some(error) = &call.error else { continue };
        let cause = error.to_string();
        match causes.iter_mut().find(|(c, _)| *c == cause) {
            Some((_, models)) => models.push(&call.model),
            None => causes.push((cause, vec![&call.model])),
        }
    }
    match causes.as_slice() {
        [(cause, models)] if models.len() > 1 => format!("{text} Every one: {cause}"),
        _ => text,
    }
}

fn summary_line(answer: &Answer, fan_out: &[Completion], calls: &[CallRecord]) -> String {
    // A synthesizer that asks the panel for more answers itself (a vote's
    // later waves, a cascade's escalation) labels those calls as prompters
    // label a panel's; they count among the answers.
    let later: Vec<&CallRecord> = calls
        .iter()
        .filter(|c| c.stage != "fan-out" && is_panel_label(&c.label))
        .collect();
    let n = fan_out.len() + later.len();
    let answered = fan_out.iter().filter(|c| c.outcome.is_ok()).count()
        + later.iter().filter(|c| c.error.is_none()).count();
    let k = answer.sources.len();
    let models = |sources: &[u32]| -> String {
        sources
            .iter()
            .filter_map(|&id| calls.iter().find(|c| c.id == id))
            .map(|c| c.model.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match answer.kind {
        AnswerKind::Synthesis => format!("Synthesis of {k} of {n} answers."),
        AnswerKind::Single => format!(
            "Single answer from {} ({} of {n} failed); not a synthesis.",
            models(&answer.sources),
            n - answered
        ),
        AnswerKind::Vote => {
            let share = if k * 2 > answered {
                "a majority"
            } else {
                "a plurality"
            };
            format!("Vote: {k} of {answered} answers agree, {share} ({n} asked).")
        }
        AnswerKind::Pick => format!("One of {answered} answers, picked verbatim."),
        AnswerKind::Unmerged => format!("{k} of {n} answers, side by side: merging them failed."),
        AnswerKind::None => format!("No answer: all {n} model calls failed."),
    }
}

/// The labels prompters give the panel's own answers: `panel`, `sample N`.
fn is_panel_label(label: &str) -> bool {
    label == "panel" || label.starts_with("sample ")
}

#[cfg(test)]
mod tests;
