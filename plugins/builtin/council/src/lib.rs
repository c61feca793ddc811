//! Synthesizer for a council (LLM-council style): every model that answered
//! ranks the *others'* answers — anonymised, shuffled, never its own — the
//! ballots are combined into one ranking (Borda count), and a chairman (the
//! plan's synthesizers, in order) writes the final answer knowing the
//! ranking. The ranking and every ballot are in the result.

kit::plugin!(synthesizer, Council);

use kit::wit::types::{Answer, Completion, Plan, Request, Role};
use serde_json::{Value, json};

const CHAIRMAN: &str = "You chair a council of AI models. You are given a question and the council's \
answers, ordered from the best-ranked by the council's peer review. Write the single best answer to \
the question, weighing the higher-ranked answers more but keeping anything correct from the others. \
Answer directly; do not mention the council.";

struct Council;

impl Guest for Council {
    fn validate_settings(settings: String) -> Result<(), String> {
        kit::no_settings(&settings)
    }

    fn synthesize(
        request: Request,
        plan: Plan,
        completions: Vec<Completion>,
        _settings: String,
    ) -> Result<Answer, String> {
        let answered = kit::guest::answered(&completions);
        let mut notes = kit::guest::failure_notes(&completions);
        if let Some(answer) = kit::guest::too_few(&completions, "there was no council") {
            return Ok(answer);
        }

        // Each ranker sees everyone else's answer, in its own shuffled order.
        let ballots_asked: Vec<Vec<usize>> = (0..answered.len())
            .map(|ranker| {
                let others: Vec<usize> = (0..answered.len()).filter(|&o| o != ranker).collect();
                let seed = format!("{}/{ranker}", request.run_id);
                kit::shuffle(&seed, others.len())
                    .into_iter()
                    .map(|p| others[p])
                    .collect()
            })
            .collect();
        // Each ranker reads the others' answers fitted to its own window; a
        // window that would leave stubs casts no ballot.
        let system = "You are a fair reviewer on a council of AI models. You do not know who wrote each answer.";
        let mut rankers = Vec::new();
        let mut requests = Vec::new();
        for (ranker, shown) in ballots_asked.iter().enumerate() {
            let model = &answered[ranker].1.model;
            let letters: Vec<String> = (0..shown.len()).map(kit::letter).collect();
            let instruction = format!(
                "Rank these answers from best to worst for accuracy and insight. Reply with only JSON: \
                 {{\"ranking\": [{}]}} using every letter once.",
                letters
                    .iter()
                    .map(|l| format!("\"{l}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let texts: Vec<&str> = shown
                .iter()
                .map(|&other| answered[other].2.trim())
                .collect();
            let fitted = match kit::guest::fit_for(
                model,
                &texts,
                &[system, &request.prompt, &instruction],
                None,
            ) {
                Ok(fitted) => fitted,
                Err(small) => {
                    notes.push(format!(
                        "{model} did not rank: {small}; its ballot was not counted."
                    ));
                    continue;
                }
            };
            if let Some(cut) = fitted.cut {
                notes.push(format!(
                    "To fit {model}'s context window for its ranking, {cut}."
                ));
            }
            let mut prompt = format!(
                "Question:\n{}\n\nAnswers from other council members:\n\n",
                request.prompt
            );
            for (p, text) in fitted.texts.iter().enumerate() {
                prompt.push_str(&format!("--- Answer {} ---\n{text}\n\n", kit::letter(p)));
            }
            prompt.push_str(&instruction);
            rankers.push(ranker);
            let mut ballot = kit::guest::request(
                "peer ranking",
                model,
                vec![
                    kit::guest::message(Role::System, system),
                    kit::guest::message(Role::User, prompt),
                ],
                kit::guest::NO_SAMPLING,
            );
            // Held to it where the ranker's model takes structured outputs.
            ballot.response_format = Some(kit::formats::json_schema(
                "ranking",
                &kit::formats::object(json!({
                    "ranking": {"type": "array", "items": {"type": "string", "enum": letters}},
                })),
            ));
            requests.push(ballot);
        }
        let replies = if requests.is_empty() {
            Vec::new()
        } else {
            kit::wit::host::progress(&format!(
                "{} council members are ranking each other",
                requests.len()
            ));
            kit::guest::complete(&requests)
        };

        let mut points = vec![0.0f64; answered.len()];
        let mut appearances = vec![0u32; answered.len()];
        let mut ballots = Vec::new();
        for (&ranker, reply) in rankers.iter().zip(&replies) {
            let shown = &ballots_asked[ranker];
            let ranker_model = &answered[ranker].1.model;
            let ranking = match reply.as_ref().map(|text| parse_ranking(text, shown.len())) {
                Ok(Some(ranking)) => ranking,
                Ok(None) => {
                    notes.push(format!(
                        "{ranker_model}'s ranking could not be read; its ballot was not counted."
                    ));
                    continue;
                }
                Err(error) => {
                    notes.push(format!(
                        "{ranker_model} could not rank ({error}); its ballot was not counted."
                    ));
                    continue;
                }
            };
            let m = ranking.len() as f64;
            for (place, &position) in ranking.iter().enumerate() {
                let candidate = shown[position];
                points[candidate] += (m - 1.0 - place as f64) / (m - 1.0).max(1.0);
                appearances[candidate] += 1;
            }
            let ranked: Vec<String> = ranking
                .iter()
                .map(|&p| answered[shown[p]].1.model.clone())
                .collect();
            ballots.push(json!({"ranker": ranker_model, "ranking": ranked}));
        }
        let score = |c: usize| {
            if appearances[c] == 0 {
                0.0
            } else {
                points[c] / f64::from(appearances[c])
            }
        };
        let mut order: Vec<usize> = (0..answered.len()).collect();
        order.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
        let ranking: Vec<Value> = order
            .iter()
            .enumerate()
            .map(|(rank, &c)| json!({"rank": rank + 1, "model": answered[c].1.model, "score": (score(c) * 1000.0).round() / 1000.0, "ballots": appearances[c]}))
            .collect();
        let details = json!({"ranking": ranking, "ballots": ballots}).to_string();
        let sources: Vec<u32> = order.iter().map(|&c| answered[c].0).collect();

        // Web sources under each answer, numbered as the run's list is.
        let numbering = kit::sources::Numbering::of(&completions);
        let inputs: Vec<(String, String)> = order
            .iter()
            .enumerate()
            .map(|(rank, &c)| {
                (
                    format!("Answer ranked {} of {}", rank + 1, order.len()),
                    format!("{}{}", answered[c].2, numbering.under(answered[c].1)),
                )
            })
            .collect();
        let merge = kit::guest::merge(
            &request.prompt,
            &inputs,
            &plan.synthesizers,
            &numbering.instructions(CHAIRMAN),
            kit::guest::NO_SAMPLING,
        );
        let headline = |chair: &str| {
            Some(format!(
                "Council of {}: {} ballots; top-ranked {}; chaired by {chair}.",
                answered.len(),
                ballots.len(),
                answered[order[0]].1.model
            ))
        };
        let pairs: Vec<(&str, &str)> = order
            .iter()
            .map(|&c| (answered[c].1.model.as_str(), answered[c].2))
            .collect();
        Ok(kit::guest::settle(
            merge,
            headline,
            kit::guest::Ending {
                role: "chairman",
                answers: &pairs,
                sources,
                notes,
                details,
            },
        ))
    }
}

/// Positions (0-based, into the answers shown) from best to worst, if the
/// ballot names each shown answer exactly once.
fn parse_ranking(reply: &str, shown: usize) -> Option<Vec<usize>> {
    let letters: Vec<String> = match kit::extract_json(reply) {
        Some(value) => value
            .get("ranking")
            .unwrap_or(&value)
            .as_array()?
            .iter()
            .filter_map(|v| {
                v.as_str()
                    .map(|s| s.trim().trim_start_matches("Answer ").to_owned())
            })
            .collect(),
        None => kit::extract_list(reply)
            .into_iter()
            .map(|s| s.trim_start_matches("Answer ").to_owned())
            .collect(),
    };
    let mut positions = Vec::new();
    for letter in letters {
        let position = (0..shown).find(|&p| kit::letter(p) == letter.to_uppercase())?;
        if positions.contains(&position) {
            return None;
        }
        positions.push(position);
    }
    (positions.len() == shown).then_some(positions)
}
