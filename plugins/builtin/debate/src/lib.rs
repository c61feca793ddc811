//! Synthesizer for a multi-round debate: in each round every participant
//! sees the others' latest answers and revises its own. It stops early when
//! the answers converge (every pair at least `threshold` similar), then the
//! plan's synthesizers merge the final answers.
//!
//! ```toml
//! [plugins.debate.settings]
//! rounds = 3          # at most; the call's `rounds` option wins (1-5)
//! threshold = 0.85    # word-overlap similarity that counts as agreement
//! ```

wit_bindgen::generate!({
    world: "synthesizer-plugin",
    path: "../../../wit/0.2.0",
    with: {
        "chorus:strategy/types@0.2.0": kit::wit::types,
        "chorus:strategy/host@0.2.0": kit::wit::host,
    },
});

use exports::chorus::strategy::synthesizer::Guest;
use kit::wit::types::{Answer, Completion, Plan, Request, Role};
use serde::Deserialize;
use serde_json::json;

const DEBATER: &str = "You are one participant in a debate between AI models about a question. \
Consider the other participants' answers carefully: adopt what is right in them, point out and drop \
what is wrong, and give your best revised answer. Reply with the answer only.";

const MERGE: &str = "You are given a question and the final answers of a debate between AI models. \
Write the single best answer, reflecting where they agree and settling any remaining disagreement. \
Answer directly; do not mention the debate.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    rounds: Option<u32>,
    threshold: Option<f64>,
}

struct Debate;

impl Guest for Debate {
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
        let max_rounds = kit::count(&request.options, "rounds", settings.rounds, 3, 1..=5)?;
        let threshold = settings.threshold.unwrap_or(0.85);
        let answered = kit::guest::answered(&completions);
        let mut notes = kit::guest::failure_notes(&completions);
        if let Some(answer) = kit::guest::too_few(&completions, "there was no debate") {
            return Ok(answer);
        }
        let models: Vec<String> = answered.iter().map(|(_, c, _)| c.model.clone()).collect();
        let mut latest: Vec<String> = answered.iter().map(|(_, _, t)| (*t).to_owned()).collect();
        // The calls whose answers are in `latest`: what the merge cites.
        let mut sources: Vec<u32> = answered.iter().map(|(id, _, _)| *id).collect();
        let mut rounds = 0;
        let mut converged = agreement(&latest) >= threshold;
        while !converged && rounds < max_rounds {
            rounds += 1;
            kit::wit::host::progress(&format!("debate round {rounds} of at most {max_rounds}"));
            let requests: Vec<_> = (0..latest.len())
                .map(|me| {
                    let mut prompt = format!(
                        "Question:\n{}\n\nYour previous answer:\n{}\n\n",
                        request.prompt,
                        latest[me].trim()
                    );
                    for (p, other) in (0..latest.len()).filter(|&o| o != me).enumerate() {
                        prompt.push_str(&format!(
                            "--- Participant {} ---\n{}\n\n",
                            kit::letter(p),
                            latest[other].trim()
                        ));
                    }
                    prompt.push_str("Give your revised answer.");
                    kit::guest::request(
                        &format!("round {rounds}"),
                        &models[me],
                        vec![
                            kit::guest::message(Role::System, DEBATER),
                            kit::guest::message(Role::User, prompt),
                        ],
                        kit::guest::NO_SAMPLING,
                    )
                })
                .collect();
            for (me, said) in kit::guest::complete_cited(&requests)
                .into_iter()
                .enumerate()
            {
                match (said.text, said.id) {
                    (Ok(text), id) => {
                        latest[me] = text;
                        sources[me] = id.unwrap_or(sources[me]);
                    }
                    (Err(error), _) => notes.push(format!("{} could not revise in round {rounds} ({error}); kept its previous answer.", models[me])),
                }
            }
            converged = agreement(&latest) >= threshold;
        }
        notes.insert(
            0,
            match (converged, rounds) {
                (true, 0) => {
                    "The answers agreed from the start, so no debate rounds were needed.".to_owned()
                }
                (true, n) => {
                    format!("The debate converged after {n} of at most {max_rounds} rounds.")
                }
                (false, n) => format!("The debate ran all {n} rounds without converging."),
            },
        );
        let details = json!({"rounds": rounds, "max_rounds": max_rounds, "converged": converged,
            "agreement": (agreement(&latest) * 1000.0).round() / 1000.0,
            "final": models.iter().zip(&latest).map(|(m, t)| json!({"model": m, "answer": t})).collect::<Vec<_>>()})
        .to_string();
        let inputs: Vec<(String, String)> = latest
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("Final answer {}", i + 1), t.clone()))
            .collect();
        let merge = kit::guest::merge(
            &request.prompt,
            &inputs,
            &plan.synthesizers,
            MERGE,
            kit::guest::NO_SAMPLING,
        );
        let pairs: Vec<(&str, &str)> = models
            .iter()
            .map(String::as_str)
            .zip(latest.iter().map(String::as_str))
            .collect();
        Ok(kit::guest::settle(
            merge,
            |_| None,
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

/// The lowest pairwise similarity: 1.0 when every answer says the same.
fn agreement(answers: &[String]) -> f64 {
    let mut lowest: f64 = 1.0;
    for a in 0..answers.len() {
        for b in a + 1..answers.len() {
            lowest = lowest.min(kit::similarity(&answers[a], &answers[b]));
        }
    }
    lowest
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "rounds, threshold")
}

export!(Debate);
