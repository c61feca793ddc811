//! Synthesizer: merges the panel's answers into one with a synthesizer model.
//!
//! Honest about what it returns:
//! - two or more answers -> `synthesis` (the plan's synthesizers are tried in
//!   order; if every one fails -> `unmerged`: the answers side by side, with
//!   each synthesizer's real error);
//! - exactly one answer  -> `single`, verbatim, never "synthesized";
//! - no answer           -> `none`, with every model's failure.
//!
//! When the answers cite web sources, each answer goes to the merge with
//! its sources under it, numbered as the run's `sources` list numbers them,
//! and the merger is asked to cite them as `[n]`.
//!
//! ```toml
//! [plugins.synthesize.settings]
//! instructions = "..."   # replaces the default synthesis instructions
//! show_labels = true     # head each answer with its request's label (heavy:
//!                        # the sub-question) and list the inputs in details
//! max_tokens = 4096
//! temperature = 0.3
//! ```

kit::plugin!(synthesizer, Synthesize);

use kit::wit::types::{Answer, Completion, Plan, Request, Sampling};
use serde::Deserialize;
use serde_json::json;

const DEFAULT_INSTRUCTIONS: &str = "You are given a question and several independent answers to it \
from different AI models. Write the single best answer to the question: keep what the answers agree \
on, resolve their disagreements by reasoning about which is right, add anything important that only \
one of them noticed, and drop what is wrong. Answer the question directly; do not mention the other \
answers or that you are synthesizing.";

const LABELLED_INSTRUCTIONS: &str = "You are given a question and answers to parts of it, each \
written by a different agent for the sub-question in its heading. Combine them into one complete, \
well-organised answer to the original question: use every part, reconcile overlaps and conflicts, \
and fill any gap you can. Answer directly; do not mention the agents.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    instructions: Option<String>,
    #[serde(default)]
    show_labels: bool,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
}

struct Synthesize;

impl Guest for Synthesize {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn synthesize(
        request: Request,
        plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let settings = parse(&settings)?;
        let answered = kit::guest::answered(&completions);
        let notes = kit::guest::failure_notes(&completions);
        let details = if settings.show_labels {
            let inputs: Vec<_> = completions
                .iter()
                .map(|c| {
                    json!({"label": c.label, "model": c.model, "status": if c.outcome.is_ok() { "ok" } else { "failed" }})
                })
                .collect();
            json!({ "inputs": inputs }).to_string()
        } else {
            String::new()
        };

        if let Some(mut answer) =
            kit::guest::too_few(&completions, "this is its answer verbatim, not a synthesis")
        {
            answer.details = details;
            return Ok(answer);
        }
        let sources: Vec<u32> = answered.iter().map(|(i, _, _)| *i).collect();
        let numbering = kit::sources::Numbering::of(&completions);
        let inputs: Vec<(String, String)> = answered
            .iter()
            .enumerate()
            .map(|(n, (_, c, text))| {
                let heading = if settings.show_labels {
                    c.label.clone()
                } else {
                    format!("Answer {}", n + 1)
                };
                (heading, format!("{text}{}", numbering.under(c)))
            })
            .collect();
        let default = if settings.show_labels {
            LABELLED_INSTRUCTIONS
        } else {
            DEFAULT_INSTRUCTIONS
        };
        let instructions =
            numbering.instructions(settings.instructions.as_deref().unwrap_or(default));
        let sampling = Sampling {
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            ..kit::guest::NO_SAMPLING
        };
        let merge = kit::guest::merge(
            &request.prompt,
            &inputs,
            &plan.synthesizers,
            &instructions,
            sampling,
        );
        let count = answered.len();
        let headline = |model: &str| Some(format!("Synthesis of {count} answers by {model}."));
        let pairs: Vec<(&str, &str)> = answered
            .iter()
            .map(|(_, c, t)| (c.model.as_str(), *t))
            .collect();
        Ok(kit::guest::settle(
            merge,
            headline,
            kit::guest::Ending {
                role: "synthesizer",
                answers: &pairs,
                sources,
                notes,
                details,
            },
        ))
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(
        settings,
        "instructions, show_labels, max_tokens, temperature",
    )
}
