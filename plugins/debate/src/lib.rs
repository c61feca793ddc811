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

wit_bindgen::generate!({ world: "synthesizer-plugin", path: "../../wit" });
kit::guest_helpers!();

use chorus::strategy::types::{Answer, Completion, Plan, Request, Role};
use exports::chorus::strategy::synthesizer::Guest;
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
    fn synthesize(
        request: Request,
        plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let settings: Settings = kit::settings(&settings, "rounds, threshold")?;
        let max_rounds = kit::count(&request.options, "rounds", settings.rounds, 3, 1..=5)?;
        let threshold = settings.threshold.unwrap_or(0.85);
        let answered = guest::answered(&completions);
        let mut notes = guest::failure_notes(&completions);
        if let Some(answer) = guest::too_few(&completions, "there was no debate") {
            return Ok(answer);
        }
        let models: Vec<String> = answered.iter().map(|(_, c, _)| c.model.clone()).collect();
        let mut latest: Vec<String> = answered.iter().map(|(_, _, t)| (*t).to_owned()).collect();
        let mut rounds = 0;
        let mut converged = agreement(&latest) >= threshold;
        while !converged && rounds < max_rounds {
            rounds += 1;
            crate::chorus::strategy::host::progress(&format!(
                "debate round {rounds} of at most {max_rounds}"
            ));
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
                    guest::request(
                        &format!("round {rounds}"),
                        &models[me],
                        vec![
                            guest::message(Role::System, DEBATER),
                            guest::message(Role::User, prompt),
                        ],
                        guest::NO_SAMPLING,
                    )
                })
                .collect();
            for (me, reply) in guest::complete(&requests).into_iter().enumerate() {
                match reply {
                    Ok(text) => latest[me] = text,
                    Err(error) => notes.push(format!("{} could not revise in round {rounds} ({error}); kept its previous answer.", models[me])),
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
        let sources: Vec<u32> = answered.iter().map(|(i, _, _)| *i).collect();
        let inputs: Vec<(String, String)> = latest
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("Final answer {}", i + 1), t.clone()))
            .collect();
        let merge = guest::merge(
            &request.prompt,
            &inputs,
            &plan.synthesizers,
            MERGE,
            guest::NO_SAMPLING,
        );
        let pairs: Vec<(&str, &str)> = models
            .iter()
            .map(String::as_str)
            .zip(latest.iter().map(String::as_str))
            .collect();
        Ok(guest::settle(
            merge,
            "synthesizer",
            |_| None,
            &pairs,
            sources,
            notes,
            details,
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

export!(Debate);
