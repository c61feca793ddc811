//! Synthesizer for best-of-N: a judge model scores the candidates —
//! anonymised (letters, no model names) and in an order shuffled per run —
//! and the best is returned verbatim, with every score. The plan's
//! synthesizers are the judges, tried in order. When the candidates cite
//! web sources, each goes to the judge with its sources under it, numbered
//! as the run's `sources` list numbers them, and the judge is told to
//! weigh them.
//!
//! When the run's caller offered tools, a candidate that proposes tool
//! calls is judged like any other, its calls said in words; when it wins,
//! the run's answer is its call (`choose-tool-calls` answers `merge`: the
//! judge picks in `synthesize`, among calls and texts alike).
//!
//! ```toml
//! [plugins.judge.settings]
//! criteria = "correctness, completeness and clarity"   # optional
//! ```

kit::plugin!(synthesizer, Judge);

use kit::wit::types::{Answer, AnswerKind, Completion, Plan, Request};
use serde::Deserialize;
use serde_json::{Value, json};

/// Said before the scoring instruction when the candidates cite sources.
const GROUNDING: &str = "Under some candidates are the web sources they cite, numbered [1], [2], … \
the same for every candidate. Weigh whether a candidate's claims are backed by the sources it cites. ";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    criteria: Option<String>,
}

struct Judge;

impl Guest for Judge {
    /// A proposal is a candidate like any answer: the judge picks in
    /// `synthesize`.
    const DECIDES_CALLS_WHEN_MERGING: bool = true;

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
        let mut notes = kit::guest::failure_notes(&completions);
        let answer = |kind, text: String, sources, notes, details: String| Answer {
            kind,
            text,
            sources,
            notes,
            details,
            tool_calls: Vec::new(),
        };
        if let Some(answer) = kit::guest::too_few(&completions, "there was nothing to judge") {
            return Ok(answer);
        }
        // Position p in the prompt shows candidate order[p], named letter(p).
        let order = kit::shuffle(&request.run_id, answered.len());
        let criteria = settings
            .criteria
            .as_deref()
            .unwrap_or("correctness, completeness and clarity");
        let letters: Vec<String> = (0..order.len()).map(kit::letter).collect();
        // Web sources under each candidate, numbered as the run's list is.
        let numbering = kit::sources::Numbering::of(&completions);
        let cited: Vec<String> = order
            .iter()
            .map(|&c| numbering.under(answered[c].1))
            .collect();
        let sources = cited.concat();
        let grounding = if numbering.is_empty() { "" } else { GROUNDING };
        let instruction = format!(
            "{grounding}Score every candidate from 0 to 10 for {criteria}. Reply with only JSON of \
             the form {{\"scores\": {{\"A\": 7, \"B\": 4}}}} covering candidates {}.",
            letters.join(", ")
        );
        let system =
            "You are a strict, impartial judge of answers. You do not know who wrote them.";
        // Held to it where the judge's model takes structured outputs.
        let format = kit::formats::json_schema(
            "scores",
            &kit::formats::object(json!({
                "scores": kit::formats::object(Value::Object(
                    letters.iter().map(|l| (l.clone(), json!({"type": "number"}))).collect(),
                )),
            })),
        );
        let shown: Vec<&str> = order.iter().map(|&c| answered[c].2.trim()).collect();
        let mut scores = Vec::new();
        let mut cut_note = None;
        let (found, errors) = kit::first_success(&plan.synthesizers, |judge| {
            // Each judge's window decides how much of each candidate it reads.
            let fitted = kit::guest::fit_for(
                judge,
                &shown,
                &[system, &request.prompt, &instruction, &sources],
                None,
            )
            .map_err(|small| format!("too small for the candidates: {small}"))?;
            cut_note = fitted
                .cut
                .map(|c| format!("To fit {judge}'s context window, {c}."));
            let mut prompt = format!("Question:\n{}\n\n", request.prompt);
            for (position, text) in fitted.texts.iter().enumerate() {
                prompt.push_str(&format!(
                    "--- Candidate {} ---\n{text}{}\n\n",
                    kit::letter(position),
                    cited[position],
                ));
            }
            prompt.push_str(&instruction);
            let reply = kit::guest::ask_for(
                "judge",
                judge,
                system,
                &prompt,
                kit::guest::NO_SAMPLING,
                Some(format.clone()),
            )?;
            scores = parse_scores(&reply, &letters).ok_or_else(|| {
                format!("its verdict had no score for every candidate: {reply:.200}")
            })?;
            Ok(reply)
        });
        let Some((judge, _)) = found else {
            notes.insert(
                0,
                format!(
                    "Every judge failed, so the {} answers are shown side by side.",
                    answered.len()
                ),
            );
            notes.extend(kit::fallback_notes("Judge", &errors, None));
            let pairs: Vec<(&str, &str)> = answered
                .iter()
                .map(|(_, c, t)| (c.model.as_str(), *t))
                .collect();
            let sources = answered.iter().map(|(i, _, _)| *i).collect();
            return Ok(answer(
                AnswerKind::Unmerged,
                kit::side_by_side(&pairs),
                sources,
                notes,
                String::new(),
            ));
        };
        notes.extend(kit::fallback_notes("Judge", &errors, Some(&judge)));
        notes.extend(cut_note);
        // Highest score wins; ties go to the candidate that came first in the fan-out.
        let best_position = (0..order.len())
            .max_by(|&a, &b| {
                scores[a]
                    .total_cmp(&scores[b])
                    .then_with(|| order[b].cmp(&order[a]))
            })
            .expect("at least two candidates");
        let (index, winner, text) = answered[order[best_position]];
        notes.insert(
            0,
            format!(
                "Judge {judge} picked {}'s answer (score {} of 10).",
                winner.model, scores[best_position]
            ),
        );
        let table: Vec<Value> = order
            .iter()
            .enumerate()
            .map(|(p, &c)| json!({"candidate": kit::letter(p), "model": answered[c].1.model, "score": scores[p]}))
            .collect();
        let details = json!({"judge": judge, "scores": table}).to_string();
        let calls = kit::calls::of(winner);
        if !calls.is_empty() {
            let why = notes[0].clone();
            return Ok(kit::calls::answer(calls, why, vec![index], notes, details));
        }
        Ok(answer(
            AnswerKind::Pick,
            text.to_owned(),
            vec![index],
            notes,
            details,
        ))
    }
}

/// Scores in candidate-letter order, if the verdict gives one for each.
fn parse_scores(reply: &str, letters: &[String]) -> Option<Vec<f64>> {
    let verdict = kit::extract_json(reply)?;
    let table = verdict.get("scores").unwrap_or(&verdict);
    letters
        .iter()
        .map(|l| {
            table.get(l).and_then(|v| {
                v.as_f64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            })
        })
        .collect()
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "optional `criteria`")
}
