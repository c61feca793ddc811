//! A test fixture: a synthesizer built for `chorus:strategy@0.1.0`, from
//! the 0.1 contract kept in `wit/0.1.0` — proof that plugins built for an
//! older contract keep working. It returns the longest answer verbatim and
//! cites it by its 0.1 fan-out index, which the host maps to a call id.
//! Settings: `mode = "bad-index"` cites a completion that does not exist.
//! Built for the tests, never embedded in chorus.

wit_bindgen::generate!({ world: "synthesizer-plugin", path: "../../../wit/0.1.0" });

use chorus::strategy::host;
use chorus::strategy::types::{Answer, AnswerKind, Completion, LogLevel, Plan, Request};
use exports::chorus::strategy::synthesizer::Guest;

struct Longest;

impl Guest for Longest {
    fn synthesize(
        _request: Request,
        _plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let longest = completions
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.outcome.as_ref().ok().map(|r| (i, c, r)))
            .max_by_key(|(_, _, reply)| reply.content.len());
        let Some((index, completion, reply)) = longest else {
            return Ok(Answer {
                kind: AnswerKind::None,
                text: "No model answered.".into(),
                sources: Vec::new(),
                notes: Vec::new(),
                details: String::new(),
            });
        };
        host::log(LogLevel::Debug, &format!("longest: completion {index}"));
        let index = if settings.contains("bad-index") {
            99
        } else {
            index as u32
        };
        Ok(Answer {
            kind: AnswerKind::Pick,
            text: reply.content.clone(),
            sources: vec![index],
            notes: vec![format!("The longest answer, from {}.", completion.model)],
            details: String::new(),
        })
    }
}

export!(Longest);
