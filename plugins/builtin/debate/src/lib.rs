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

kit::plugin!(synthesizer, Debate);

use kit::wit::types::{Answer, Completion, Plan, Request, Role};
use serde::Deserialize;
use serde_json::json;

const DEBATER: &str = "You are one participant in a debate between AI models about a question. \
Consider the other participants' answers carefully: adopt what is right in them, point out and drop \
what is wrong, and give your best revised answer. Reply with the answer only.";

const REVISE: &str = "Give your revised answer.";

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
            // Each participant reads its own answer and the others', fitted
            // to its window; one whose window would leave stubs sits the
            // round out and keeps its answer.
            let mut speakers = Vec::new();
            let mut requests = Vec::new();
            for me in 0..latest.len() {
                let mut texts = vec![latest[me].trim()];
                texts.extend(
                    (0..latest.len())
                        .filter(|&o| o != me)
                        .map(|o| latest[o].trim()),
                );
                let fitted = match kit::guest::fit_for(
                    &models[me],
                    &texts,
                    &[DEBATER, &request.prompt, REVISE],
                    None,
                ) {
                    Ok(fitted) => fitted,
                    Err(small) => {
                        notes.push(format!(
                            "{} sat out round {rounds}: {small}; kept its previous answer.",
                            models[me]
                        ));
                        continue;
                    }
                };
                if let Some(cut) = fitted.cut {
                    notes.push(format!(
                        "To fit {}'s context window in round {rounds}, {cut}.",
                        models[me]
                    ));
                }
                let mut prompt = format!(
                    "Question:\n{}\n\nYour previous answer:\n{}\n\n",
                    request.prompt, fitted.texts[0]
                );
                for (p, other) in fitted.texts[1..].iter().enumerate() {
                    prompt.push_str(&format!(
                        "--- Participant {} ---\n{other}\n\n",
                        kit::letter(p)
                    ));
                }
                prompt.push_str(REVISE);
                speakers.push(me);
                requests.push(kit::guest::request(
                    &format!("round {rounds}"),
                    &models[me],
                    vec![
                        kit::guest::message(Role::System, DEBATER),
                        kit::guest::message(Role::User, prompt),
                    ],
                    kit::guest::NO_SAMPLING,
                ));
            }
            if requests.is_empty() {
                notes.push(format!("No participant could read the others' answers in round {rounds}, so the debate stopped."));
                break;
            }
            for (&me, said) in speakers.iter().zip(kit::guest::complete_cited(&requests)) {
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
