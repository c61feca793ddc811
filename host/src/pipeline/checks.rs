//! What the pipeline holds plugins to before it uses their output: a
//! pipeline's plugins fit their roles, a plan names known models within
//! the call budget, prompts are usable, and a synthesizer's answer cites
//! only this run's calls and is labelled for what it is. An answer that
//! cannot be used gives way to the answers that arrived, side by side.

use std::collections::HashSet;

use super::Runner;
use crate::config::{ConfigError, Loaded, Pipeline};
use crate::llm::Completion;
use crate::plugins::{Answer, AnswerKind, Kind, Plan, Plugin, PluginError, Prompts, Registry};
use crate::record::CallRecord;

impl Runner {
    pub(super) fn check_plan(&self, selector: &Plugin, plan: &Plan) -> Result<(), PluginError> {
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

    pub(super) fn check_prompts(
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

    pub(super) fn check_model(&self, model: &str) -> Result<(), String> {
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

/// Every pipeline's plugins are of the kind their role needs: checked at
/// load for every plugin whose kind is known then (all but one whose
/// component could not be read), loaded or still to load.
pub(super) fn check_roles(loaded: &Loaded, registry: &Registry) -> Result<(), ConfigError> {
    for (name, pipeline) in &loaded.config.pipelines {
        for (role, kind, plugin) in roles(pipeline) {
            if let Some(error) = registry
                .kind(plugin)
                .and_then(|found| role_error(loaded, name, role, kind, plugin, found))
            {
                return Err(error);
            }
        }
    }
    Ok(())
}

/// Why `plugin` (a `found`) cannot take `role`, which needs a `kind`, in
/// pipeline `name`, if it cannot.
pub(super) fn role_error(
    loaded: &Loaded,
    name: &str,
    role: &str,
    kind: Kind,
    plugin: &str,
    found: Kind,
) -> Option<ConfigError> {
    (found != kind).then(|| {
        loaded.error(
            format!("pipelines.{name}.{role}"),
            format!("plugin `{plugin}` is a {found}, not a {kind}"),
        )
    })
}

/// A pipeline's plugins by role.
pub(super) fn roles(pipeline: &Pipeline) -> [(&'static str, Kind, &str); 3] {
    [
        ("selector", Kind::Selector, &pipeline.selector),
        ("prompter", Kind::Prompter, &pipeline.prompter),
        ("synthesizer", Kind::Synthesizer, &pipeline.synthesizer),
    ]
}

/// The synthesizer's answer held to the contract (see `check_answer`); an
/// answer that cannot be used gives way to the answers that arrived, side
/// by side, so what was paid for is never dropped.
pub(super) fn checked(
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
pub(super) fn check_answer(
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
    let mut seen = HashSet::new();
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
pub(super) fn side_by_side(completions: &[Completion], error: &PluginError) -> Option<Answer> {
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
        tool_calls: Vec::new(),
    })
}
