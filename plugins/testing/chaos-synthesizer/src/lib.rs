//! Fault injection for chorus's own tests: a synthesizer that returns
//! nonsense the way its settings say. Built for the tests, never embedded in
//! the chorus binary.
//!
//! `mode`: "bad-id" (cites a call that does not exist), "failed-id" (cites
//! a call that failed), "fake-synthesis" (calls one answer a synthesis),
//! "bad-details" (details that are not JSON). On a run whose caller offered
//! tools, its `choose-tool-calls` answers: "unoffered-call" (a call of
//! `delete_everything`, which no caller offers), "call-of-wrong-kind"
//! (a call in an answer of kind `pick`), "bad-arguments" (a call of
//! `get_weather` with arguments that match no schema of a city); in any
//! other mode it leaves the decision to chorus.

kit::plugin!(synthesizer, ChaosSynthesizer);

use kit::wit::types::{Answer, AnswerKind, Completion, Plan, Request, ToolCall, ToolDecision};
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
            tool_calls: Vec::new(),
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
            // Its chaos is in `choose-tool-calls`: a merge is the first answer.
            "unoffered-call" | "call-of-wrong-kind" | "bad-arguments" => {
                Ok(answer(AnswerKind::Pick, vec![first_id], ""))
            }
            other => Err(format!("unknown chaos mode `{other}`")),
        }
    }

    fn choose_tool_calls(
        _request: Request,
        _plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<ToolDecision, String> {
        let settings: Settings = serde_json::from_str(&settings).map_err(|e| e.to_string())?;
        let sources: Vec<u32> = kit::guest::answered(&completions)
            .first()
            .map(|(id, _, _)| vec![*id])
            .unwrap_or_default();
        let call = |name: &str, arguments: &str| ToolCall {
            id: String::new(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        };
        let calling = |calls: &[ToolCall]| {
            ToolDecision::Answer(kit::calls::answer(
                calls,
                String::new(),
                sources.clone(),
                Vec::new(),
                String::new(),
            ))
        };
        Ok(match settings.mode.as_str() {
            "unoffered-call" => calling(&[call("delete_everything", r#"{"path": "/"}"#)]),
            "bad-arguments" => calling(&[call("get_weather", r#"{"town": 7}"#)]),
            "call-of-wrong-kind" => ToolDecision::Answer(Answer {
                kind: AnswerKind::Pick,
                ..kit::calls::answer(
                    &[call("get_weather", r#"{"city": "Oslo"}"#)],
                    String::new(),
                    sources.clone(),
                    Vec::new(),
                    String::new(),
                )
            }),
            _ => ToolDecision::ByHost,
        })
    }
}
