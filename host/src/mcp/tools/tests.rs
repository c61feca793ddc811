use super::*;

#[test]
fn the_output_schema_names_exactly_the_fields_of_a_result_and_of_a_failure() {
    let result = RunRecord {
        experiment: None,
        run_id: "r".into(),
        pipeline: "p".into(),
        kind: AnswerKind::Single,
        summary: "s".into(),
        answer: "a".into(),
        notes: vec![],
        calls: vec![],
        usage: Totals::default(),
        elapsed_ms: 1,
        details: None,
        follow_up_of: Some("r0".into()),
        resynthesis_of: Some("r1".into()),
        sources: Vec::new(),
        attachments: Vec::new(),
    };
    let declared: std::collections::BTreeSet<&String> = OUTPUT_SCHEMA["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    let success = structured(&result);
    let failure = refusal("p", "bad").structured_content.unwrap();
    for value in [&success, &failure] {
        let fields: std::collections::BTreeSet<&String> =
            value.as_object().unwrap().keys().collect();
        assert!(fields.is_subset(&declared), "{fields:?}");
        for required in OUTPUT_SCHEMA["required"].as_array().unwrap() {
            assert!(
                value.get(required.as_str().unwrap()).is_some(),
                "{required}"
            );
        }
        assert!(value["details"].is_object());
    }
    assert_eq!(success["kind"], "single");
    assert_eq!(failure["error"]["kind"], "invalid-arguments");
}

#[test]
fn an_answer_too_big_for_one_message_is_cut_and_says_where_it_is_whole() {
    let record = |answer: String| RunRecord {
        experiment: None,
        run_id: "r".into(),
        pipeline: "p".into(),
        kind: AnswerKind::Unmerged,
        summary: "s".into(),
        answer,
        notes: vec![],
        calls: vec![],
        usage: Totals::default(),
        elapsed_ms: 1,
        details: None,
        follow_up_of: None,
        resynthesis_of: None,
        sources: Vec::new(),
        attachments: Vec::new(),
    };
    assert_eq!(shown_answer(&record("ééé".into()), 6), None);
    let (text, note) = shown_answer(&record("éééé".into()), 5).unwrap();
    assert!(text.starts_with("éé\n\n[… cut to 4 of 8 bytes"), "{text}");
    assert!(note.contains("`chorus runs answer r`"), "{note}");
    assert!(note.contains("chorus://runs/r/calls/N/reply"), "{note}");

    let big = record("x".repeat(MAX_RESULT_ANSWER_BYTES + 1));
    let result = success(&big);
    let structured = result.structured_content.unwrap();
    let answer = structured["answer"].as_str().unwrap();
    assert!(answer.len() < MAX_RESULT_ANSWER_BYTES + 200);
    assert!(
        structured["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("The answer is")
    );
    assert_eq!(result.content[0].as_text().unwrap().text, answer);
}

#[test]
fn details_are_always_an_object() {
    let mut result = RunRecord {
        experiment: None,
        run_id: "r".into(),
        pipeline: "p".into(),
        kind: AnswerKind::Vote,
        summary: "s".into(),
        answer: "a".into(),
        notes: vec![],
        calls: vec![],
        usage: Totals::default(),
        elapsed_ms: 1,
        details: Some(json!([1, 2])),
        follow_up_of: None,
        resynthesis_of: None,
        sources: Vec::new(),
        attachments: Vec::new(),
    };
    assert_eq!(structured(&result)["details"], json!({"value": [1, 2]}));
    result.details = Some(json!({"votes": 3}));
    assert_eq!(structured(&result)["details"], json!({"votes": 3}));
}

#[test]
fn resynthesis_arguments_are_checked() {
    let parse = |v: Value| resynthesis_arguments(v.as_object().cloned());
    assert_eq!(
        parse(json!({"run_id": " r1 "})).unwrap(),
        ("r1".to_owned(), Merger::AsBefore)
    );
    assert_eq!(
        parse(json!({"run_id": "r1", "synthesizer": "vote", "pipeline": null})).unwrap(),
        ("r1".to_owned(), Merger::Synthesizer("vote".into()))
    );
    assert_eq!(
        parse(json!({"run_id": "r1", "pipeline": "heavy"}))
            .unwrap()
            .1,
        Merger::Pipeline("heavy".into())
    );
    for (arguments, message) in [
        (json!({}), "missing `run_id`"),
        (json!({"run_id": 3}), "`run_id` must be a non-empty string"),
        (
            json!({"run_id": "r", "synthesizer": "a", "pipeline": "b"}),
            "not both",
        ),
        (
            json!({"run_id": "r", "model": "x"}),
            "unknown argument `model`",
        ),
    ] {
        let error = parse(arguments).unwrap_err();
        assert!(error.contains(message), "{error}");
    }
    assert!(resynthesis_arguments(None).is_err());
}
