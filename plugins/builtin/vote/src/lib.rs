//! Synthesizer for self-consistency: answers are normalised (the text after
//! a final "Answer:" if any, case, punctuation, spacing) and the majority
//! wins. The winning answer is returned verbatim; the result carries the
//! vote counts and says when there was a tie. No extra model calls.

wit_bindgen::generate!({
    world: "synthesizer-plugin",
    path: "../../../wit/0.2.0",
    with: {
        "chorus:strategy/types@0.2.0": kit::wit::types,
        "chorus:strategy/host@0.2.0": kit::wit::host,
    },
});

use exports::chorus::strategy::synthesizer::Guest;
use kit::wit::types::{Answer, AnswerKind, Completion, Plan, Request};
use serde_json::json;

struct Vote;

struct Group<'a> {
    key: String,
    members: Vec<(u32, &'a Completion, &'a str)>,
}

impl Guest for Vote {
    fn validate_settings(settings: String) -> Result<(), String> {
        kit::no_settings(&settings)
    }

    fn synthesize(
        _request: Request,
        _plan: Plan,
        completions: Vec<Completion>,
        _settings: String,
    ) -> Result<Answer, String> {
        let answered = kit::guest::answered(&completions);
        let mut notes = kit::guest::failure_notes(&completions);
        let mut groups: Vec<Group> = Vec::new();
        for (index, completion, text) in &answered {
            let key = kit::normalise(text);
            match groups.iter_mut().find(|g| g.key == key) {
                Some(group) => group.members.push((*index, completion, text)),
                None => groups.push(Group {
                    key,
                    members: vec![(*index, completion, text)],
                }),
            }
        }
        // Most votes first; among equals, the one answered first (stable sort).
        groups.sort_by_key(|g| std::cmp::Reverse(g.members.len()));
        let Some(winner) = groups.first() else {
            return Ok(Answer {
                kind: AnswerKind::None,
                text: format!("No model answered ({} tried).", completions.len()),
                sources: vec![],
                notes,
                details: String::new(),
            });
        };
        let votes = winner.members.len();
        let tied: Vec<&Group> = groups.iter().filter(|g| g.members.len() == votes).collect();
        let tie = tied.len() > 1;
        let kind = if answered.len() == 1 {
            AnswerKind::Single
        } else {
            AnswerKind::Vote
        };
        notes.insert(
            0,
            if answered.len() == 1 {
                "Only one answer arrived, so there was nothing to vote on.".to_owned()
            } else if tie {
                let options: Vec<String> = tied.iter().map(|g| format!("\"{}\"", shorten(&g.key))).collect();
                format!(
                    "Tie: {} answers got {votes} of {} votes each ({}); took the one that answered first.",
                    tied.len(),
                    answered.len(),
                    options.join(", ")
                )
            } else {
                format!("Majority: {votes} of {} answers agree.", answered.len())
            },
        );
        let counts: Vec<_> = groups
            .iter()
            .map(|g| {
                json!({
                    "answer": shorten(&g.key),
                    "votes": g.members.len(),
                    "models": g.members.iter().map(|(_, c, _)| c.model.clone()).collect::<Vec<_>>(),
                })
            })
            .collect();
        Ok(Answer {
            kind,
            text: winner.members[0].2.to_owned(),
            sources: winner.members.iter().map(|(i, _, _)| *i).collect(),
            notes,
            details: json!({ "votes": counts, "tie": tie }).to_string(),
        })
    }
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

export!(Vote);
