//! Properties of the checks the pipeline applies to what synthesizers return.

use proptest::prelude::*;

use super::*;
use crate::llm::{Failure, FailureKind, Reply};
use crate::plugins::AnswerKind;
use crate::record::CallRecord;
use checks::{check_answer, checked};
use summary::summary;

fn completion(id: u32, ok: bool) -> Completion {
    Completion {
        id: Some(id),
        label: "panel".into(),
        model: "m".into(),
        latency_ms: 1,
        attempts: 1,
        queued_ms: None,
        ttft_ms: None,
        outcome: if ok {
            Ok(Reply {
                content: Arc::new("x".into()),
                served_by: "m".into(),
                finish_reason: None,
                usage: None,
                format_sent: Default::default(),
                citations: Vec::new(),
                tool_calls: Vec::new(),
            })
        } else {
            Err(Failure::new(FailureKind::Timeout, "slow"))
        },
    }
}

fn records(completions: &[Completion]) -> Vec<CallRecord> {
    completions
        .iter()
        .map(|c| context::call_record(c.id.unwrap(), "fan-out", c))
        .collect()
}

#[test]
fn an_answer_may_cite_any_call_of_the_run_that_answered_but_no_other() {
    let completions = [
        completion(0, true),
        completion(1, false),
        completion(2, true),
    ];
    let calls = records(&completions);
    let answer = |sources: Vec<u32>| Answer {
        kind: AnswerKind::Synthesis,
        text: "t".into(),
        sources,
        notes: vec![],
        details: None,
        tool_calls: Vec::new(),
    };
    // Call 2 was a plugin's own (a later round): citable.
    check_answer("p", &mut answer(vec![0, 2]), &calls).unwrap();
    // A call that failed is not counted, and the note says so.
    let mut cites_a_failure = answer(vec![0, 1]);
    check_answer("p", &mut cites_a_failure, &calls).unwrap();
    assert_eq!(cites_a_failure.sources, [0]);
    assert_eq!(cites_a_failure.kind, AnswerKind::Single);
    assert!(cites_a_failure.notes[0].contains("cited calls that gave no answer (m)"));
    let unknown = check_answer("p", &mut answer(vec![0, 7]), &calls).unwrap_err();
    assert!(
        unknown
            .to_string()
            .contains("cites call 7, but the run made 3 calls"),
        "{unknown}"
    );
}

fn kind() -> impl Strategy<Value = AnswerKind> {
    prop_oneof![
        Just(AnswerKind::Synthesis),
        Just(AnswerKind::Single),
        Just(AnswerKind::Vote),
        Just(AnswerKind::Pick),
        Just(AnswerKind::Unmerged),
        Just(AnswerKind::None),
    ]
}

proptest! {
    #[test]
    fn any_answer_is_refused_or_made_honest(
        kind in kind(),
        sources in prop::collection::vec(0u32..12, 0..10),
        outcomes in prop::collection::vec(any::<bool>(), 0..8),
        fan_out in 0usize..8,
    ) {
        let completions: Vec<Completion> = outcomes.iter().enumerate().map(|(id, &ok)| completion(id as u32, ok)).collect();
        let calls = records(&completions);
        let fan_out = &completions[..fan_out.min(completions.len())];
        let mut answer = Answer { kind, text: "t".into(), sources: sources.clone(), notes: vec![], details: None, tool_calls: Vec::new() };
        match check_answer("p", &mut answer, &calls) {
            Err(PluginError::Invalid { plugin, .. }) => prop_assert_eq!(plugin, "p"),
            Err(other) => prop_assert!(false, "unexpected error {other}"),
            Ok(()) => {
                prop_assert!(answer.sources.iter().all(|&id| completions[id as usize].outcome.is_ok()), "only calls that answered");
                let mut distinct = answer.sources.clone();
                distinct.sort_unstable();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), answer.sources.len(), "no source twice");
                if answer.kind == AnswerKind::Synthesis {
                    prop_assert!(answer.sources.len() >= 2, "a synthesis rests on two answers or more");
                }
                let line = summary(&answer, fan_out, &calls);
                prop_assert!(!line.is_empty());
            }
        }
    }
}

#[test]
fn a_synthesis_of_one_answer_is_relabelled_single() {
    let completions = [completion(0, true), completion(1, false)];
    let calls = records(&completions);
    let mut answer = Answer {
        kind: AnswerKind::Synthesis,
        text: "t".into(),
        sources: vec![0, 0],
        notes: vec![],
        details: None,
        tool_calls: Vec::new(),
    };
    check_answer("p", &mut answer, &calls).unwrap();
    assert_eq!(answer.kind, AnswerKind::Single);
    assert_eq!(answer.sources, [0]);
    assert_eq!(
        summary(&answer, &completions, &calls),
        "Single answer from m (1 of 2 failed); not a synthesis."
    );
}

#[test]
fn a_synthesis_counts_only_the_answers_that_arrived() {
    let completions = [
        completion(0, true),
        completion(1, false),
        completion(2, true),
    ];
    let calls = records(&completions);
    let mut answer = Answer {
        kind: AnswerKind::Synthesis,
        text: "t".into(),
        sources: vec![0, 1, 2],
        notes: vec![],
        details: None,
        tool_calls: Vec::new(),
    };
    check_answer("p", &mut answer, &calls).unwrap();
    assert_eq!(answer.sources, [0, 2]);
    assert_eq!(
        summary(&answer, &completions, &calls),
        "Synthesis of 2 of 3 answers."
    );
    let mut only_failed = Answer {
        kind: AnswerKind::Synthesis,
        text: "t".into(),
        sources: vec![1],
        notes: vec![],
        details: None,
        tool_calls: Vec::new(),
    };
    let error = check_answer("p", &mut only_failed, &calls).unwrap_err();
    // The run then returns the answers that arrived, side by side.
    let fallback = checked("p", only_failed.clone(), &completions, &calls).unwrap();
    assert_eq!(fallback.kind, AnswerKind::Unmerged);
    assert_eq!(fallback.sources, [0, 2]);
    assert!(fallback.notes[0].contains(&error.to_string()));
}

#[test]
fn a_vote_summary_counts_later_waves_and_says_plurality_without_a_majority() {
    let fan_out = [
        completion(0, true),
        completion(1, true),
        completion(2, false),
    ];
    let mut calls = records(&fan_out);
    // Two more samples the vote asked for itself, and a judge's call that is
    // not an answer to the question.
    for (id, label) in [(3, "sample 2"), (4, "panel"), (5, "judge")] {
        let mut call = context::call_record(id, "vote", &completion(id, true));
        call.label = label.into();
        calls.push(call);
    }
    let vote = |sources: Vec<u32>| Answer {
        kind: AnswerKind::Vote,
        text: "t".into(),
        sources,
        notes: vec![],
        details: None,
        tool_calls: Vec::new(),
    };
    assert_eq!(
        summary(&vote(vec![0, 3]), &fan_out, &calls),
        "Vote: 2 of 4 answers agree, a plurality (5 asked)."
    );
    assert_eq!(
        summary(&vote(vec![0, 3, 4]), &fan_out, &calls),
        "Vote: 3 of 4 answers agree, a majority (5 asked)."
    );
}
