//! Synthesizer for mixture-of-agents: the fan-out is layer 1; in each next
//! layer every panel model answers again having seen all of the previous
//! layer's answers; a final aggregator (the plan's synthesizers, in order)
//! merges the last layer.
//!
//! ```toml
//! [plugins.mixture.settings]
//! layers = 2     # proposer layers, the fan-out included; the call's `layers` option wins (1-4)
//! ```

kit::plugin!(synthesizer, Mixture);

use kit::wit::types::{Answer, AnswerKind, Completion, Plan, Request, Role};
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
        let layers = kit::count(&request.options, "layers", settings.layers, 2, 1..=4)?;
        let answered = kit::guest::answered(&completions);
        let mut notes = kit::guest::failure_notes(&completions);
        let sources: Vec<u32> = answered.iter().map(|(i, _, _)| *i).collect();
        if answered.is_empty() {
            return Ok(Answer {
                kind: AnswerKind::None,
                text: format!("No model answered ({} tried).", completions.len()),
                sources,
                notes,
                details: String::new(),
                tool_calls: Vec::new(),
            });
        }
        let mut layer_log =
            vec![json!({"layer": 1, "answered": answered.len(), "of": completions.len()})];
        // The current layer's answers as (model, text), and their call ids:
        // what the final aggregation cites.
        let mut current: Vec<(String, String)> = answered
            .iter()
            .map(|(_, c, t)| (c.model.clone(), (*t).to_owned()))
            .collect();
        let mut sources = sources;
        let mut later_layer = false;
        for layer in 2..=layers {
            kit::wit::host::progress(&format!("mixture layer {layer} of {layers}"));
            // Every proposer reads the previous layer fitted to its own
            // window; one whose window would leave stubs sits the layer out.
            let texts: Vec<&str> = current.iter().map(|(_, t)| t.trim()).collect();
            let mut seats = Vec::new();
            let mut requests = Vec::new();
            for seat in &plan.panel {
                let fitted = match kit::guest::fit_for(
                    &seat.model,
                    &texts,
                    &[AGGREGATE, &request.prompt],
                    seat.sampling.max_tokens,
                ) {
                    Ok(fitted) => fitted,
                    Err(small) => {
                        notes.push(format!("{} sat out layer {layer}: {small}.", seat.model));
                        continue;
                    }
                };
                if let Some(cut) = fitted.cut {
                    notes.push(format!(
                        "To fit {}'s context window in layer {layer}, {cut}.",
                        seat.model
                    ));
                }
                let mut context = String::from("Responses from the previous layer:\n\n");
                for (n, text) in fitted.texts.iter().enumerate() {
                    context.push_str(&format!("{}. {text}\n\n", n + 1));
                }
                seats.push(seat);
                requests.push(kit::guest::request(
                    &format!("layer {layer}"),
                    &seat.model,
                    vec![
                        kit::guest::message(Role::System, format!("{AGGREGATE}\n\n{context}")),
                        kit::guest::message(Role::User, request.prompt.clone()),
                    ],
                    seat.sampling,
                ));
            }
            let mut next = Vec::new();
            let mut next_sources = Vec::new();
            let said = if requests.is_empty() {
                Vec::new()
            } else {
                kit::guest::complete_cited(&requests)
            };
            for (seat, said) in seats.iter().zip(said) {
                match said.text {
                    Ok(text) => {
                        next.push((seat.model.clone(), text));
                        next_sources.extend(said.id);
                    }
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
            sources = next_sources;
            later_layer = true;
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
                tool_calls: Vec::new(),
            });
        }
        // Web sources under each answer, numbered as the run's list is,
        // when the fan-out's answers are what is merged (a later layer's
        // answers come back without their citations).
        let numbering = if later_layer {
            kit::sources::Numbering::default()
        } else {
            kit::sources::Numbering::of(&completions)
        };
        let inputs: Vec<(String, String)> = current
            .iter()
            .enumerate()
            .map(|(n, (_, t))| {
                let cited = answered
                    .get(n)
                    .filter(|_| !later_layer)
                    .map(|(_, c, _)| numbering.under(c))
                    .unwrap_or_default();
                (format!("Response {}", n + 1), format!("{t}{cited}"))
            })
            .collect();
        let merge = kit::guest::merge(
            &request.prompt,
            &inputs,
            &plan.synthesizers,
            &numbering.instructions(AGGREGATE),
            kit::guest::NO_SAMPLING,
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
        Ok(kit::guest::settle(
            merge,
            headline,
            kit::guest::Ending {
                role: "aggregator",
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
    kit::settings(settings, "layers")
}
