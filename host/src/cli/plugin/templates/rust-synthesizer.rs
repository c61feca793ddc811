//! {{name}}: a chorus synthesizer. It merges the answers with the plan's
//! synthesizers (tried in order), and is honest about what it returns:
//! `synthesis` of two or more answers, the lone survivor verbatim as
//! `single`, `none` when nobody answered, `unmerged` (the answers side by
//! side) when every synthesizer failed. Its sources are the call ids of the
//! answers it merged. With web search on, each answer goes to the merge with
//! the web sources it cites, numbered as the list chorus ends the answer
//! with, and the merger is asked to cite them by those numbers.
//!
//! ```toml
//! [plugins.{{name}}.settings]
//! instructions = "Merge these answers into the best one."   # optional
//! ```

wit_bindgen::generate!({ world: "synthesizer-plugin", path: "wit" });

use chorus::strategy::host;
use chorus::strategy::types::{
    Answer, AnswerKind, ChatRequest, Completion, ContentPart, Message, Plan, Reply, Request, Role, Sampling,
    ToolDecision,
};
use exports::chorus::strategy::synthesizer::Guest;
use serde::Deserialize;

const DEFAULT_INSTRUCTIONS: &str = "You are given a question and several answers to it. Write the single best \
answer: keep what they agree on, resolve their disagreements, drop what is wrong. Do not mention the other answers.";
const CITE: &str = "The answers cite web sources, numbered under each answer. Cite the sources you rely on with \
their numbers in brackets, like [1], exactly as numbered there; cite no others and do not list them at the end.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    instructions: Option<String>,
}

/// The settings, or what is wrong with them: `Err` is shown to the user by
/// `chorus check` and at startup.
fn parse(settings: &str) -> Result<Settings, String> {
    serde_json::from_str(settings)
        .map_err(|e| format!("bad settings: {e} (expected optional `instructions`)"))
}

fn message(role: Role, text: &str) -> Message {
    Message { role, content: vec![ContentPart::Text(text.to_owned())] }
}

fn answer(kind: AnswerKind, text: String, sources: Vec<u32>, notes: Vec<String>) -> Answer {
    Answer { kind, text, sources, notes, details: String::new(), tool_calls: Vec::new() }
}

/// A URL as chorus compares sources: scheme and host in lower case, no
/// fragment, no `utm_*` parameters, no trailing `/`.
fn url_key(url: &str) -> String {
    let url = url.split('#').next().unwrap_or_default();
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let host_end = base.match_indices('/').nth(2).map_or(base.len(), |(i, _)| i);
    let key = base[..host_end].to_lowercase() + base[host_end..].trim_end_matches('/');
    let kept: Vec<&str> = query.split('&').filter(|p| !p.is_empty() && !p.starts_with("utm_")).collect();
    if kept.is_empty() { key } else { format!("{key}?{}", kept.join("&")) }
}

/// The web sources the answers cite (`reply.citations`), numbered as chorus
/// numbers the list it ends the answer with: in call order, each URL once.
fn web_sources(completions: &[Completion]) -> Vec<String> {
    let mut ordered: Vec<&Completion> = completions.iter().collect();
    ordered.sort_by_key(|c| c.id);
    let mut keys = Vec::new();
    for citation in ordered.iter().filter_map(|c| c.outcome.as_ref().ok()).flat_map(|r| &r.citations) {
        let key = url_key(&citation.url);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// What goes under an answer in the merge prompt: the sources it cites, by number.
fn cited(reply: &Reply, sources: &[String]) -> String {
    let mut lines = String::new();
    for citation in &reply.citations {
        let n = sources.iter().position(|k| *k == url_key(&citation.url)).map_or(0, |i| i + 1);
        let title = citation.title.as_deref().map(|t| format!("{t} ")).unwrap_or_default();
        let line = format!("\n[{n}] {title}<{}>", citation.url);
        if !lines.contains(&format!("\n[{n}] ")) {
            lines.push_str(&line);
        }
    }
    if lines.is_empty() { lines } else { format!("\n\nSources this answer cites:{lines}") }
}

struct Plugin;

impl Guest for Plugin {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    /// When the run's caller offered tools and the panel proposed calls:
    /// leave the choice of call to chorus (the majority's call, else the
    /// pipeline's synthesizer model chooses). Return `ToolDecision::Merge`
    /// to merge the answers into text instead, or `ToolDecision::Answer`
    /// with `tool_calls` to make a call yourself.
    fn choose_tool_calls(_: Request, _: Plan, _: Vec<Completion>, _: String) -> Result<ToolDecision, String> {
        Ok(ToolDecision::ByHost)
    }

    fn synthesize(request: Request, plan: Plan, completions: Vec<Completion>, settings: String) -> Result<Answer, String> {
        let settings = parse(&settings)?;
        let mut notes = Vec::new();
        let mut answered = Vec::new();
        for c in &completions {
            match (&c.outcome, c.id) {
                (Ok(reply), Some(id)) if !reply.content.trim().is_empty() => answered.push((id, c.model.as_str(), reply)),
                (Ok(_), _) => notes.push(format!("{} gave an empty answer.", c.model)),
                (Err(failure), _) => notes.push(format!("{} failed: {}", c.model, failure.message)),
            }
        }
        match answered.as_slice() {
            [] => return Ok(answer(AnswerKind::None, format!("No model answered ({} tried).", completions.len()), vec![], notes)),
            [(id, model, reply)] => {
                notes.insert(0, format!("Only {model} answered, so this is its answer verbatim."));
                return Ok(answer(AnswerKind::Single, reply.content.clone(), vec![*id], notes));
            }
            _ => {}
        }
        let sources: Vec<u32> = answered.iter().map(|(id, _, _)| *id).collect();
        let web = web_sources(&completions);
        let mut prompt = format!("Question:\n{}\n\n", request.prompt);
        for (n, (_, _, reply)) in answered.iter().enumerate() {
            prompt.push_str(&format!("--- Answer {} ---\n{}{}\n\n", n + 1, reply.content.trim(), cited(reply, &web)));
        }
        let mut instructions = settings.instructions.unwrap_or_else(|| DEFAULT_INSTRUCTIONS.to_owned());
        if !web.is_empty() {
            instructions = format!("{instructions}\n\n{CITE}");
        }
        let sampling = Sampling { temperature: None, top_p: None, max_tokens: None, seed: None };
        for model in &plan.synthesizers {
            host::progress(&format!("merging {} answers with {model}", answered.len()));
            let merge = ChatRequest {
                label: "synthesis".into(),
                model: model.clone(),
                messages: vec![message(Role::System, &instructions), message(Role::User, &prompt)],
                sampling,
                response_format: None,
                tools: None,
            };
            // The merge is the answer, returned word for word: asked with
            // `complete_answer`, its text streams to callers that stream.
            let outcome = Some(host::complete_answer(&merge).outcome);
            match outcome {
                Some(Ok(reply)) if !reply.content.trim().is_empty() => {
                    notes.insert(0, format!("{} answers merged by {model}.", answered.len()));
                    return Ok(answer(AnswerKind::Synthesis, reply.content, sources, notes));
                }
                Some(Ok(_)) => notes.push(format!("Synthesizer {model} gave an empty answer.")),
                Some(Err(failure)) => notes.push(format!("Synthesizer {model} failed: {}", failure.message)),
                None => notes.push(format!("Synthesizer {model} was not called.")),
            }
        }
        notes.insert(0, "No synthesizer could merge the answers, so they are shown side by side.".into());
        let side_by_side: Vec<String> = answered.iter().map(|(_, model, reply)| format!("## {model}\n\n{}", reply.content.trim())).collect();
        Ok(answer(AnswerKind::Unmerged, side_by_side.join("\n\n"), sources, notes))
    }
}

export!(Plugin);
