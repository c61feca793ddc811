//! Fault injection for chorus's own tests: a synthesizer that returns
//! nonsense the way its settings say. Not embedded in the chorus binary.
//!
//! `mode`: "bad-index" (cites a completion that does not exist),
//! "fake-synthesis" (calls one answer a synthesis), "bad-details"
//! (details that are not JSON).

wit_bindgen::generate!({ world: "synthesizer-plugin", path: "../../wit" });

use chorus::strategy::types::{Answer, AnswerKind, Completion, Plan, Request};
use exports::chorus::strategy::synthesizer::Guest;
use serde::Deserialize;

#[derive(Deserialize)]
struct Settings {
    mode: String,
}

struct ChaosSynthesizer;

impl Guest for ChaosSynthesizer {
    fn synthesize(
        _request: Request,
        _plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let settings: Settings = serde_json::from_str(&settings).map_err(|e| e.to_string())?;
        let first = completions
            .first()
            .and_then(|c| c.outcome.as_ref().ok())
            .map(|r| r.content.clone());
        let answer = |kind, sources, details: &str| Answer {
            kind,
            text: first.clone().unwrap_or_default(),
            sources,
            notes: Vec::new(),
            details: details.to_owned(),
        };
        match settings.mode.as_str() {
            "bad-index" => Ok(answer(AnswerKind::Synthesis, vec![0, 99], "")),
            "fake-synthesis" => Ok(answer(AnswerKind::Synthesis, vec![0], "")),
            "bad-details" => Ok(answer(AnswerKind::Pick, vec![0], "{not json")),
            other => Err(format!("unknown chaos mode `{other}`")),
        }
    }
}

export!(ChaosSynthesizer);
