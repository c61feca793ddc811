//! A test fixture: a synthesizer built for `chorus:strategy@0.2.0` (kept in
//! `wit/0.2.0`), without the kit — proof that a 0.2 plugin runs unchanged
//! (no response formats, no attachments, no citations in its types): it
//! picks the first answer verbatim and cites its call id. Built for the
//! tests, never embedded in chorus.

wit_bindgen::generate!({ world: "synthesizer-plugin", path: "../../../wit/0.2.0" });

use chorus::strategy::types::{Answer, AnswerKind, Completion, Plan, Request};
use exports::chorus::strategy::synthesizer::Guest;

struct First;

impl Guest for First {
    fn validate_settings(settings: String) -> Result<(), String> {
        match settings.trim() {
            "{}" | "" => Ok(()),
            other => Err(format!("this plugin takes no settings, got {other}")),
        }
    }

    fn synthesize(
        request: Request,
        _plan: Plan,
        completions: Vec<Completion>,
        _settings: String,
    ) -> Result<Answer, String> {
        let first = completions
            .iter()
            .find_map(|c| Some((c.id?, c.model.as_str(), c.outcome.as_ref().ok()?)));
        Ok(match first {
            Some((id, model, reply)) => Answer {
                kind: AnswerKind::Pick,
                text: reply.content.clone(),
                sources: vec![id],
                notes: vec![format!(
                    "The first answer, {model}'s, to a prompt of {} characters.",
                    request.prompt.chars().count()
                )],
                details: String::new(),
            },
            None => Answer {
                kind: AnswerKind::None,
                text: "No model answered.".to_owned(),
                sources: Vec::new(),
                notes: Vec::new(),
                details: String::new(),
            },
        })
    }
}

export!(First);
