//! Properties of the checks the pipeline applies to what synthesizers return.

use proptest::prelude::*;

use super::*;
use crate::llm::{Failure, FailureKind, Reply};

fn completion(ok: bool) -> Completion {
    Completion {
        id: Some(0),
        label: "panel".into(),
        model: "m".into(),
        latency_ms: 1,
        attempts: 1,
        outcome: if ok {
            Ok(Reply {
                content: "x".into(),
                served_by: "m".into(),
                finish_reason: None,
                usage: None,
            })
        } else {
            Err(Failure::new(FailureKind::Timeout, "slow"))
        },
    }
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
    ) {
        let completions: Vec<Completion> = outcomes.iter().map(|&ok| completion(ok)).collect();
        let mut answer = Answer { kind, text: "t".into(), sources: sources.clone(), notes: vec![], details: None };
        match check_answer("p", &mut answer, &completions) {
            Err(PluginError::Invalid { plugin, .. }) => prop_assert_eq!(plugin, "p"),
            Err(other) => prop_assert!(false, "unexpected error {other}"),
            Ok(()) => {
                prop_assert!(answer.sources.iter().all(|&i| (i as usize) < completions.len()));
                let mut distinct = answer.sources.clone();
                distinct.sort_unstable();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), answer.sources.len(), "no source twice");
                if answer.kind == AnswerKind::Synthesis {
                    prop_assert!(answer.sources.len() >= 2, "a synthesis rests on two answers or more");
                }
                let line = summary(&answer, &completions, &[]);
                prop_assert!(!line.is_empty());
            }
        }
    }
}

#[test]
fn a_synthesis_of_one_answer_is_relabelled_single() {
    let completions = [completion(true), completion(false)];
    let mut answer = Answer {
        kind: AnswerKind::Synthesis,
        text: "t".into(),
        sources: vec![0, 0],
        notes: vec![],
        details: None,
    };
    check_answer("p", &mut answer, &completions).unwrap();
    assert_eq!(answer.kind, AnswerKind::Single);
    assert_eq!(answer.sources, [0]);
    assert_eq!(
        summary(&answer, &completions, &[]),
        "Single answer from m (1 of 2 failed); not a synthesis."
    );
}
