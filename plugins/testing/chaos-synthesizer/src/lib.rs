//! Fault injection for chorus's own tests: a synthesizer that returns
//! nonsense the way its settings say. Built for the tests, never embedded in
//! the chorus binary.
//!
//! `mode`: "bad-id" (cites a call that does not exist), "failed-id" (cites
//! a call that failed), "fake-synthesis" (calls one answer a synthesis),
//! "bad-details" (details that are not JSON).

kit::plugin!(synthesizer, ChaosSynthesizer);

use kit::wit::types::{Answer, AnswerKind, Completion, Plan, Request};
use serde::Deserialize;

#[derive(Deserialize)]
struct Settings {
    mode: String,
}

struct ChaosSynthesizer;

impl Guest for ChaosSynthesizer {
    fn validate_settings(settings: String) -> Result<(), String> {
        serde_json::from_str::<Settings>(&settings)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn synthesize(
        _request: Request,
        _plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let settings: Settings = serde_json::from_str(&settings).map_err(|e| e.to_string())?;
        let answered = kit::guest::answered(&completions);
        let (first_id, first_text) = answered
            .first()
            .map(|(id, _, text)| (*id, text.to_string()))
            .unwrap_or_default();
        let failed = completions
            .iter()
            .find(|c| c.outcome.is_err())
            .and_then(|c| c.id);
        let answer = |kind, sources, details: &str| Answer {
            kind,
            text: first_text.clone(),
            sources,
            notes: Vec::new(),
            details: details.to_owned(),
        };
        match settings.mode.as_str() {
            "bad-id" => Ok(answer(AnswerKind::Synthesis, vec![first_id, 99], "")),
            "failed-id" => Ok(answer(
                AnswerKind::Synthesis,
                vec![first_id, failed.ok_or("no call failed")?],
                "",
            )),
            "fake-synthesis" => Ok(answer(AnswerKind::Synthesis, vec![first_id], "")),
            "bad-details" => Ok(answer(AnswerKind::Pick, vec![first_id], "{not json")),
            other => Err(format!("unknown chaos mode `{other}`")),
        }
    }
}
