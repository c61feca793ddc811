//! The one-line summary a run's result opens with: what kind of answer it
//! is, how many of the answers asked for it rests on, which were cut as
//! stragglers, and — when nothing answered — why, once per cause.

use crate::llm::{Completion, FailureKind};
use crate::plugins::{Answer, AnswerKind};
use crate::record::CallRecord;

pub(super) fn summary(answer: &Answer, fan_out: &[Completion], calls: &[CallRecord]) -> String {
    let text = summary_line(answer, fan_out, calls);
    let cut: Vec<&str> = fan_out
        .iter()
        .filter(|c| matches!(&c.outcome, Err(f) if f.kind == FailureKind::Cut))
        .map(|c| c.model.as_str())
        .collect();
    let text = if cut.is_empty() {
        text
    } else {
        format!("{text} Cut as stragglers: {}.", cut.join(", "))
    };
    if answer.kind != AnswerKind::None {
        return text;
    }
    // When nothing answered, say why once per distinct cause, not once
    // per model: a missing key or a dead host reads as one line.
    let mut causes: Vec<(String, Vec<&str>)> = Vec::new();
    for call in calls.iter().filter(|c| c.stage == super::FAN_OUT) {
        let Some(error) = &call.error else { continue };
        let cause = error.to_string();
        match causes.iter_mut().find(|(c, _)| *c == cause) {
            Some((_, models)) => models.push(&call.model),
            None => causes.push((cause, vec![&call.model])),
        }
    }
    match causes.as_slice() {
        [(cause, models)] if models.len() > 1 => format!("{text} Every one: {cause}"),
        // Skips name each model's own worst case, so no two read alike:
        // the first says why.
        [(cause, models), ..] if fan_out.iter().any(skipped) => {
            format!("{text} {}: {cause}", models[0])
        }
        _ => text,
    }
}

fn summary_line(answer: &Answer, fan_out: &[Completion], calls: &[CallRecord]) -> String {
    // A synthesizer that asks the panel for more answers itself (a vote's
    // later waves, a cascade's escalation) labels those calls as prompters
    // label a panel's; they count among the answers.
    let later: Vec<&CallRecord> = calls
        .iter()
        .filter(|c| c.stage != super::FAN_OUT && is_panel_label(&c.label))
        .collect();
    let n = fan_out.len() + later.len();
    let answered = fan_out.iter().filter(|c| c.outcome.is_ok()).count()
        + later.iter().filter(|c| c.error.is_none()).count();
    let k = answer.sources.len();
    let models = |sources: &[u32]| -> String {
        sources
            .iter()
            .filter_map(|&id| calls.iter().find(|c| c.id == id))
            .map(|c| c.model.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match answer.kind {
        AnswerKind::Synthesis => format!("Synthesis of {k} of {n} answers."),
        AnswerKind::Single => format!(
            "Single answer from {} ({} of {n} failed); not a synthesis.",
            models(&answer.sources),
            n - answered
        ),
        AnswerKind::Vote => {
            let share = if k * 2 > answered {
                "a majority"
            } else {
                "a plurality"
            };
            format!("Vote: {k} of {answered} answers agree, {share} ({n} asked).")
        }
        AnswerKind::Pick => format!("One of {answered} answers, picked verbatim."),
        AnswerKind::Unmerged => format!("{k} of {n} answers, side by side: merging them failed."),
        AnswerKind::None => none_made(fan_out, n),
        AnswerKind::ToolCall => format!(
            "A tool call, proposed by {} of {answered} answers ({n} asked).",
            answer
                .sources
                .iter()
                .filter(|id| fan_out.iter().any(|c| c.id == Some(**id)))
                .count()
        ),
    }
}

/// Never sent: over `max_cost_usd`, or unable to take the attachments.
fn skipped(call: &Completion) -> bool {
    matches!(&call.outcome, Err(f)
        if matches!(f.kind, FailureKind::OverBudget | FailureKind::UnsupportedInput))
}

/// Why nothing answered, counting only what was made: calls never sent
/// (over `max_cost_usd`, or unable to take the attachments) are skipped,
/// not failed.
fn none_made(fan_out: &[Completion], n: usize) -> String {
    let skipped = fan_out.iter().filter(|c| skipped(c)).count();
    match skipped {
        0 => format!("No answer: all {n} model calls failed."),
        s if s == n => {
            format!("No answer: none of the {n} model calls was made; all were skipped.")
        }
        s => format!(
            "No answer: {} model calls failed and {s} were skipped (never made).",
            n - s
        ),
    }
}

/// The labels prompters give the panel's own answers: `panel`, `sample N`.
fn is_panel_label(label: &str) -> bool {
    label == "panel" || label.starts_with("sample ")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::llm::{Failure, Reply};

    fn call(model: &str, kind: Option<FailureKind>) -> Completion {
        Completion {
            id: Some(0),
            label: "panel".into(),
            model: model.into(),
            latency_ms: 0,
            attempts: 0,
            queued_ms: None,
            ttft_ms: None,
            outcome: match kind {
                Some(kind) => Err(Failure::new(kind, format!("{model}: over the ceiling"))),
                None => Ok(Reply {
                    content: Arc::new("x".into()),
                    served_by: model.into(),
                    finish_reason: None,
                    usage: None,
                    format_sent: Default::default(),
                    citations: Vec::new(),
                    tool_calls: Vec::new(),
                }),
            },
        }
    }

    fn none() -> Answer {
        Answer {
            kind: AnswerKind::None,
            text: String::new(),
            sources: vec![],
            notes: vec![],
            details: None,
            tool_calls: Vec::new(),
        }
    }

    #[test]
    fn calls_never_made_are_said_to_be_skipped_not_failed() {
        let skipped = [
            call("a", Some(FailureKind::OverBudget)),
            call("b", Some(FailureKind::OverBudget)),
        ];
        let line = summary(&none(), &skipped, &[]);
        assert!(
            line.starts_with("No answer: none of the 2 model calls was made; all were skipped."),
            "{line}"
        );
        assert!(!line.contains("failed"), "{line}");
        let mixed = [
            call("a", Some(FailureKind::OverBudget)),
            call("b", Some(FailureKind::Timeout)),
        ];
        assert_eq!(
            summary(&none(), &mixed, &[]),
            "No answer: 1 model calls failed and 1 were skipped (never made)."
        );
    }
}
