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
        AnswerKind::None => format!("No answer: all {n} model calls failed."),
    }
}

/// The labels prompters give the panel's own answers: `panel`, `sample N`.
fn is_panel_label(label: &str) -> bool {
    label == "panel" || label.starts_with("sample ")
}
