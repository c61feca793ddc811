//! {{name}}: a chorus synthesizer. It merges the answers with the plan's
//! synthesizers (tried in order), and is honest about what it returns:
//! `synthesis` of two or more answers, the lone survivor verbatim as
//! `single`, `none` when nobody answered, `unmerged` (the answers side by
//! side) when every synthesizer failed. Its sources are the call ids of the
//! answers it merged.
//!
//! ```toml
//! [plugins.{{name}}.settings]
//! instructions = "Merge these answers into the best one."   # optional
//! ```

wit_bindgen::generate!({ world: "synthesizer-plugin", path: "wit" });

use chorus::strategy::host;
use chorus::strategy::types::{
    Answer, AnswerKind, ChatRequest, Completion, ContentPart, Message, Plan, Request, Role, Sampling,
};
use exports::chorus::strategy::synthesizer::Guest;
use serde::Deserialize;

const DEFAULT_INSTRUCTIONS: &str = "You are given a question and several answers to it. Write the single best \
answer: keep what they agree on, resolve their disagreements, drop what is wrong. Do not mention the other answers.";

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
    Answer { kind, text, sources, notes, details: String::new() }
}

struct Plugin;

impl Guest for Plugin {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn synthesize(request: Request, plan: Plan, completions: Vec<Completion>, settings: String) -> Result<Answer, String> {
        let settings = parse(&settings)?;
        let mut notes = Vec::new();
        let mut answered = Vec::new();
        for c in &completions {
            match (&c.outcome, c.id) {
                (Ok(reply), Some(id)) if !reply.content.trim().is_empty() => answered.push((id, c.model.as_str(), reply.content.as_str())),
                (Ok(_), _) => notes.push(format!("{} gave an empty answer.", c.model)),
                (Err(failure), _) => notes.push(format!("{} failed: {}", c.model, failure.message)),
            }
        }
        match answered.as_slice() {
            [] => return Ok(answer(AnswerKind::None, format!("No model answered ({} tried).", completions.len()), vec![], notes)),
            [(id, model, text)] => {
                notes.insert(0, format!("Only {model} answered, so this is its answer verbatim."));
                return Ok(answer(AnswerKind::Single, text.to_string(), vec![*id], notes));
            }
            _ => {}
        }
        let sources: Vec<u32> = answered.iter().map(|(id, _, _)| *id).collect();
        let mut prompt = format!("Question:\n{}\n\n", request.prompt);
        for (n, (_, _, text)) in answered.iter().enumerate() {
            prompt.push_str(&format!("--- Answer {} ---\n{}\n\n", n + 1, text.trim()));
        }
        let instructions = settings.instructions.as_deref().unwrap_or(DEFAULT_INSTRUCTIONS);
        let sampling = Sampling { temperature: None, top_p: None, max_tokens: None, seed: None };
        for model in &plan.synthesizers {
            host::progress(&format!("merging {} answers with {model}", answered.len()));
            let merge = ChatRequest {
                label: "synthesis".into(),
                model: model.clone(),
                messages: vec![message(Role::System, instructions), message(Role::User, &prompt)],
                sampling,
                response_format: None,
            };
            let outcome = host::complete(&[merge]).pop().map(|c| c.outcome);
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
        let side_by_side: Vec<String> = answered.iter().map(|(_, model, text)| format!("## {model}\n\n{}", text.trim())).collect();
        Ok(answer(AnswerKind::Unmerged, side_by_side.join("\n\n"), sources, notes))
    }
}

export!(Plugin);
