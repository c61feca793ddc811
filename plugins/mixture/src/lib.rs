//! Synthesizer for mixture-of-agents: the fan-out is layer 1; in each next
//! layer every panel model answers again having seen all of the previous
//! layer's answers; a final aggregator (the plan's synthesizers, in order)
//! merges the last layer.
//!
//! ```toml
//! [plugins.mixture.settings]
//! layers = 2     # proposer layers, the fan-out included; the call's `layers` option wins (1-4)
//! ```

wit_bindgen::generate!({ world: "synthesizer-plugin", path: "../../wit" });
kit::guest_helpers!();

use chorus::strategy::types::{Answer, AnswerKind, Completion, Plan, Request, Role};
use exports::chorus::strategy::synthesizer::Guest;
use serde::Deserialize;
use serde_json::json;

const AGGREGATE: &str = "You have been given a set of responses from various AI models to the \
user's question. Critically evaluate them — some may be wrong or biased — and write a single, \
refined, accurate and complete answer of your own. Do not just copy them; do not mention them.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    layers: Option<u32>,
}

struct Mixture;

impl Guest for Mixture {
    fn synthesize(
        request: Request,
        plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let settings: Settings = kit::settings(&settings, "layers")?;
        let layers = kit::count(&request.options, "layers", settings.layers, 2, 1..=4)?;
        let answered = guest::answered(&completions);
        let mut notes = guest::failure_notes(&completions);
        let sources: Vec<u32> = answered.iter().map(|(i, _, _)| *i).collect();
        if answered.is_empty() {
            return Ok(Answer {
                kind: AnswerKind::None,
                text: format!("No model answered ({} tried).", completions.len()),
                sources,
                notes,
                details: String::new(),
            });
        }
        let mut layer_log =
            vec![json!({"layer": 1, "answered": answered.len(), "of": completions.len()})];
        let mut current: Vec<(String, String)> = answered
            .iter()
            .map(|(_, c, t)| (c.model.clone(), (*t).to_owned()))
            .collect();
        for layer in 2..=layers {
            crate::chorus::strategy::host::progress(&format!("mixture layer {layer} of {layers}"));
            let mut context = String::from("Responses from the previous layer:\n\n");
            for (n, (_, text)) in current.iter().enumerate() {
                context.push_str(&format!("{}. {}\n\n", n + 1, text.trim()));
            }
            let requests: Vec<_> = plan
                .panel
                .iter()
                .map(|seat| {
                    guest::request(
                        &format!("layer {layer}"),
                        &seat.model,
                        vec![
                            guest::message(Role::System, format!("{AGGREGATE}\n\n{context}")),
                            guest::message(Role::User, request.prompt.clone()),
                        ],
                        seat.sampling,
                    )
                })
                .collect();
            let mut next = Vec::new();
            for (seat, reply) in plan.panel.iter().zip(guest::complete(&requests)) {
                match reply {
                    Ok(text) => next.push((seat.model.clone(), text)),
                    Err(error) => {
                        notes.push(format!("{} failed in layer {layer}: {error}", seat.model))
                    }
                }
            }
            layer_log.push(json!({"layer": layer, "answered": next.len(), "of": plan.panel.len()}));
            if next.is_empty() {
                notes.push(format!(
                    "Layer {layer} produced no answers, so the final aggregation used layer {}.",
                    layer - 1
                ));
                break;
            }
            current = next;
        }
        let details = json!({ "layers": layer_log }).to_string();
        if current.len() == 1 && layers == 1 {
            notes.insert(
                0,
                format!(
                    "Only {} answered, so this is its answer verbatim, not a synthesis.",
                    current[0].0
                ),
            );
            return Ok(Answer {
                kind: AnswerKind::Single,
                text: current.remove(0).1,
                sources,
                notes,
                details,
            });
        }
        let inputs: Vec<(String, String)> = current
            .iter()
            .enumerate()
            .map(|(n, (_, t))| (format!("Response {}", n + 1), t.clone()))
            .collect();
        let merge = guest::merge(
            &request.prompt,
            &inputs,
            &plan.synthesizers,
            AGGREGATE,
            guest::NO_SAMPLING,
        );
        let layer_count = layer_log.len();
        let headline = |model: &str| {
            Some(format!(
                "Mixture of agents: {layer_count} layers, aggregated by {model}."
            ))
        };
        let pairs: Vec<(&str, &str)> = current
            .iter()
            .map(|(m, t)| (m.as_str(), t.as_str()))
            .collect();
        Ok(guest::settle(
            merge,
            "aggregator",
            headline,
            &pairs,
            sources,
            notes,
            details,
        ))
    }
}

export!(Mixture);
