//! Synthesizer: merges the panel's answers into one with a synthesizer model.
//!
//! Honest about what it returns:
//! - two or more answers -> `synthesis` (the synthesizer models are tried in
//!   the plan's order; if every one fails -> `unmerged`, the answers side by
//!   side with each synthesizer's real error);
//! - exactly one answer  -> `single`, returned verbatim, never "synthesized";
//! - no answer           -> `none`, with every model's failure.
//!
//! ```toml
//! [plugins.synthesize.settings]
//! instructions = "..."   # replaces the default synthesis instructions
//! max_tokens = 4096      # for the synthesizer's reply
//! temperature = 0.3
//! ```

wit_bindgen::generate!({ world: "synthesizer-plugin", path: "../../wit" });

use chorus::strategy::host;
use chorus::strategy::types::{
    Answer, AnswerKind, ChatRequest, Completion, Failure, FailureKind, Message, Plan, Request,
    Role, Sampling,
};
use exports::chorus::strategy::synthesizer::Guest;
use serde::Deserialize;

const DEFAULT_INSTRUCTIONS: &str = "You are given a question and several independent answers to it \
from different AI models. Write the single best answer to the question: keep what the answers agree \
on, resolve their disagreements by reasoning about which is right, add anything important that only \
one of them noticed, and drop what is wrong. Answer the question directly; do not mention the other \
answers or that you are synthesizing.";

/// Share of the synthesizer's context window the answers may fill, in
/// characters per token: deliberately low, since we cannot tokenize here.
const CHARS_PER_TOKEN: u64 = 3;
/// Tokens kept free for the instructions, the question and the reply.
const RESERVED_TOKENS: u64 = 8_192;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    instructions: Option<String>,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
}

struct Synthesize;

impl Guest for Synthesize {
    fn synthesize(
        request: Request,
        plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let settings: Settings = serde_json::from_str(&settings).map_err(|e| {
            format!("bad settings: {e} (expected instructions, max_tokens, temperature)")
        })?;
        let answered: Vec<(u32, &Completion, &str)> = completions
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match &c.outcome {
                Ok(reply) if !reply.content.trim().is_empty() => {
                    Some((i as u32, c, reply.content.as_str()))
                }
                _ => None,
            })
            .collect();
        let mut notes = failure_notes(&completions);

        match answered.as_slice() {
            [] => Ok(Answer {
                kind: AnswerKind::None,
                text: format!("No model answered ({} tried).", completions.len()),
                sources: Vec::new(),
                notes,
                details: String::new(),
            }),
            [(index, completion, text)] => {
                notes.insert(
                    0,
                    format!(
                        "Only {} answered, so this is its answer verbatim, not a synthesis.",
                        completion.model
                    ),
                );
                Ok(Answer {
                    kind: AnswerKind::Single,
                    text: (*text).to_owned(),
                    sources: vec![*index],
                    notes,
                    details: String::new(),
                })
            }
            _ => Ok(merge(&request, &plan, &settings, &answered, notes)),
        }
    }
}

fn merge(
    request: &Request,
    plan: &Plan,
    settings: &Settings,
    answered: &[(u32, &Completion, &str)],
    mut notes: Vec<String>,
) -> Answer {
    let sources: Vec<u32> = answered.iter().map(|(i, _, _)| *i).collect();
    let instructions = settings
        .instructions
        .as_deref()
        .unwrap_or(DEFAULT_INSTRUCTIONS);
    let catalog = host::models();
    let mut synthesizer_errors = Vec::new();

    for model in &plan.synthesizers {
        let window = catalog
            .iter()
            .find(|m| &m.id == model)
            .and_then(|m| m.context_window);
        let (texts, cut) = fit(answered.iter().map(|(_, _, t)| *t).collect(), window);
        host::progress(&format!(
            "synthesizing {} answers with {model}",
            texts.len()
        ));
        let call = ChatRequest {
            label: "synthesis".into(),
            model: model.clone(),
            messages: vec![
                Message {
                    role: Role::System,
                    content: instructions.to_owned(),
                },
                Message {
                    role: Role::User,
                    content: synthesis_prompt(&request.prompt, &texts),
                },
            ],
            sampling: Sampling {
                temperature: settings.temperature,
                top_p: None,
                max_tokens: settings.max_tokens,
                seed: None,
            },
        };
        let outcome = host::complete(&[call]).pop().map(|c| c.outcome);
        match outcome {
            Some(Ok(reply)) if !reply.content.trim().is_empty() => {
                if let Some(cut) = cut {
                    notes.push(format!("To fit {model}'s context window, {cut}."));
                }
                for (failed, error) in &synthesizer_errors {
                    notes.push(format!(
                        "Synthesizer {failed} failed ({error}); fell back to {model}."
                    ));
                }
                notes.insert(
                    0,
                    format!("Synthesis of {} answers by {model}.", answered.len()),
                );
                return Answer {
                    kind: AnswerKind::Synthesis,
                    text: reply.content,
                    sources,
                    notes,
                    details: String::new(),
                };
            }
            Some(Ok(_)) => synthesizer_errors.push((model.clone(), "empty reply".to_owned())),
            Some(Err(failure)) => synthesizer_errors.push((model.clone(), describe(&failure))),
            None => {
                synthesizer_errors.push((model.clone(), "the host returned no outcome".to_owned()))
            }
        }
    }

    if plan.synthesizers.is_empty() {
        notes.insert(
            0,
            "No synthesizer model in the plan, so the answers are shown side by side.".into(),
        );
    } else {
        let errors: Vec<String> = synthesizer_errors
            .iter()
            .map(|(m, e)| format!("{m}: {e}"))
            .collect();
        notes.insert(
            0,
            format!(
                "Every synthesizer failed, so the {} answers are shown side by side. {}",
                answered.len(),
                errors.join("; ")
            ),
        );
    }
    let text = answered
        .iter()
        .map(|(_, c, t)| format!("## {}\n\n{}", c.model, t.trim()))
        .collect::<Vec<_>>()
        .join("\n\n");
    Answer {
        kind: AnswerKind::Unmerged,
        text,
        sources,
        notes,
        details: String::new(),
    }
}

fn synthesis_prompt(question: &str, answers: &[String]) -> String {
    let mut prompt = format!("Question:\n{question}\n\n");
    for (i, answer) in answers.iter().enumerate() {
        prompt.push_str(&format!("--- Answer {} ---\n{}\n\n", i + 1, answer.trim()));
    }
    prompt.push_str("Write the best answer to the question.");
    prompt
}

/// Cuts the answers to a common length when together they would not fit the
/// synthesizer's context window. Returns the texts and, if anything was cut,
/// a sentence saying how much.
fn fit(texts: Vec<&str>, context_window: Option<u32>) -> (Vec<String>, Option<String>) {
    let Some(window) = context_window else {
        return (texts.into_iter().map(str::to_owned).collect(), None);
    };
    let budget = (u64::from(window).saturating_sub(RESERVED_TOKENS) * CHARS_PER_TOKEN) as usize;
    let total: usize = texts.iter().map(|t| t.chars().count()).sum();
    if total <= budget {
        return (texts.into_iter().map(str::to_owned).collect(), None);
    }
    let share = budget / texts.len().max(1);
    let fitted: Vec<String> = texts
        .iter()
        .map(|t| {
            if t.chars().count() <= share {
                (*t).to_owned()
            } else {
                let mut cut: String = t.chars().take(share).collect();
                cut.push_str("\n[… cut to fit the context window]");
                cut
            }
        })
        .collect();
    let kept: usize = texts.iter().map(|t| t.chars().count().min(share)).sum();
    (
        fitted,
        Some(format!(
            "the answers were cut to {kept} of {total} characters"
        )),
    )
}

fn failure_notes(completions: &[Completion]) -> Vec<String> {
    completions
        .iter()
        .filter_map(|c| match &c.outcome {
            Err(failure) => Some(format!("{} failed: {}", c.model, describe(failure))),
            Ok(reply) if reply.content.trim().is_empty() => {
                Some(format!("{} returned an empty answer", c.model))
            }
            Ok(_) => None,
        })
        .collect()
}

fn describe(failure: &Failure) -> String {
    let kind = match failure.kind {
        FailureKind::Timeout => "timeout",
        FailureKind::RateLimited => "rate limited",
        FailureKind::HttpStatus => "HTTP error",
        FailureKind::Connection => "connection failed",
        FailureKind::MalformedResponse => "malformed response",
        FailureKind::ResponseTooLarge => "response too large",
        FailureKind::Cancelled => "cancelled",
        FailureKind::OverBudget => "over budget",
        FailureKind::UnknownModel => "unknown model",
        FailureKind::MissingApiKey => "missing API key",
    };
    match failure.status {
        Some(status) => format!("{kind} (HTTP {status}): {}", failure.message),
        None => format!("{kind}: {}", failure.message),
    }
}

export!(Synthesize);
