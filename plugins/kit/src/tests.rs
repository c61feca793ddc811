use super::*;
use serde_json::Value;

#[test]
fn lists_come_from_json_anywhere_or_from_numbered_lines() {
    assert_eq!(extract_list(r#"["a?", "b?"]"#), ["a?", "b?"]);
    assert_eq!(
        extract_list("Sure! Here you go:\n```json\n[\"a?\", \"b?\"]\n```\nGood luck."),
        ["a?", "b?"]
    );
    assert_eq!(
        extract_list(r#"{"questions": [{"question": "a?"}, {"question": "b?"}]}"#),
        ["a?", "b?"]
    );
    assert_eq!(
        extract_list("1. first\n2) second\n- third\n* **fourth**\nnot an item"),
        ["first", "second", "third", "fourth"]
    );
    assert!(extract_list("I cannot help with that.").is_empty());
    assert!(extract_list("").is_empty());
}

#[test]
fn json_is_found_inside_prose() {
    assert_eq!(
        extract_json(r#"The scores: {"A": 3, "B": 9}. Done."#),
        Some(serde_json::json!({"A": 3, "B": 9}))
    );
    assert_eq!(extract_json("no json {here"), None);
}

#[test]
fn objects_are_read_leniently_or_not_at_all() {
    let fenced = "Here you go:\n```json\n{\"consensus\": [\"x\"]}\n```\nHope it helps.";
    assert_eq!(extract_object(fenced).unwrap()["consensus"][0], "x");
    let loose = "{'consensus': ['it\\'s \"fine\"', 'b',], 'sure': True, 'none': None,}";
    let object = extract_object(loose).unwrap();
    assert_eq!(object["consensus"][0], "it's \"fine\"");
    assert_eq!(object["consensus"].as_array().unwrap().len(), 2);
    assert_eq!(
        (object["sure"].clone(), object["none"].clone()),
        (true.into(), Value::Null)
    );
    // An array before the object is not the object.
    assert_eq!(extract_object("[1, 2] then {\"a\": 1}").unwrap()["a"], 1);
    assert_eq!(extract_object("The answers mostly agree."), None);
    assert_eq!(extract_object("{'cut off': ['a', "), None);
}

#[test]
fn normalising_compares_what_matters() {
    assert_eq!(normalise("The answer is 42."), "the answer is 42");
    assert_eq!(normalise("Let me think... so.\nFinal answer: **42**"), "42");
    assert_eq!(normalise("Answer: 42!"), normalise("answer:   42"));
}

#[test]
fn json_answers_are_compared_as_json() {
    assert_eq!(
        normalise("{\"b\": [1, 2], \"a\": \"X\"}"),
        normalise(" {\"a\":\"X\",\"b\":[1,2]}\n")
    );
    assert_ne!(normalise("{\"a\": \"X\"}"), normalise("{\"a\": \"x\"}"));
    assert_ne!(normalise("{\"a\": 1}"), normalise("{\"a\": \"1\"}"));
    assert_eq!(
        normalise("[1, {\"d\": 1, \"c\": 2}]"),
        "[1,{\"c\":2,\"d\":1}]"
    );
}

#[test]
fn equal_proposals_are_one_ballot_and_never_a_text() {
    use crate::wit::types::ToolCall;
    let call = |name: &str, arguments: &str, id: &str| ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    };
    let oslo = calls::ballot(&[call("get_weather", r#"{"city": "Oslo", "days": 2}"#, "a")]);
    // Keys in another order, other spacing, another id: the same ballot.
    assert_eq!(
        oslo,
        calls::ballot(&[call("get_weather", "{\"days\":2,\n\"city\":\"Oslo\"}", "b")])
    );
    // Another value, case, function or order of calls: another ballot.
    for other in [
        vec![call("get_weather", r#"{"city": "oslo", "days": 2}"#, "a")],
        vec![call("get_forecast", r#"{"city": "Oslo", "days": 2}"#, "a")],
        vec![
            call("get_weather", r#"{"city": "Oslo", "days": 2}"#, "a"),
            call("get_weather", r#"{"city": "Oslo", "days": 2}"#, "a"),
        ],
    ] {
        assert_ne!(oslo, calls::ballot(&other), "{other:?}");
    }
    // Arguments that are not JSON are a ballot of their own text.
    assert_ne!(
        calls::ballot(&[call("f", "{oops", "a")]),
        calls::ballot(&[call("f", "{}", "a")])
    );
    // No text normalises to a ballot.
    assert_ne!(normalise(&oslo), oslo);
}

#[test]
fn shuffles_are_permutations_and_depend_on_the_seed() {
    let a = shuffle("run-1", 10);
    let mut sorted = a.clone();
    sorted.sort();
    assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    assert_eq!(a, shuffle("run-1", 10), "deterministic");
    assert_ne!(a, shuffle("run-2", 10), "seeded");
    assert!(shuffle("x", 0).is_empty());
}

#[test]
fn letters_name_candidates() {
    assert_eq!(
        [letter(0), letter(25), letter(26), letter(27)],
        ["A", "Z", "AA", "AB"]
    );
}

#[test]
fn numbers_are_what_an_answer_states_whatever_the_punctuation() {
    assert_eq!(numbers("About 70 C at 8,849 m."), ["70", "8849"]);
    assert_eq!(numbers("It is 70.0 degrees, not 3.5"), ["3.5", "70"]);
    assert_eq!(numbers("No numbers here."), Vec::<String>::new());
    assert_ne!(
        numbers("Water boils at about 70 C on Everest."),
        numbers("Water boils at about 90 C on Everest.")
    );
}

#[test]
fn similarity_is_one_for_the_same_words() {
    assert_eq!(
        similarity("Paris is the capital.", "paris is THE capital"),
        1.0
    );
    assert!(similarity("Paris", "Lyon") < 0.1);
}

#[test]
fn fitting_cuts_only_when_needed_and_says_so() {
    let room = |window| Room::new(Some(window), &["instructions", "question"], None);
    let fitted = fit(&["short", "also short"], room(100_000)).unwrap();
    assert_eq!((fitted.texts.len(), fitted.cut), (2, None));
    let long = "x".repeat(100_000);
    let fitted = fit(&[&long, "tiny"], room(20_000)).unwrap();
    assert!(fitted.texts[0].len() < 60_000 && fitted.texts[1] == "tiny");
    assert!(fitted.texts[0].ends_with(CUT_MARKER));
    assert!(fitted.cut.unwrap().contains("of 100004 characters"));
}

#[test]
fn small_windows_keep_room_for_answers() {
    // 8,192 tokens used to leave nothing: now a quarter is kept for the reply.
    let room = Room::new(Some(8_192), &["instructions", "question"], None);
    let budget = room.budget(5).unwrap();
    assert!(budget > 15_000, "{budget}");
    let long = "z".repeat(10_000);
    let fitted = fit(&[&long, &long, &long, &long, &long], room).unwrap();
    let kept = fitted.texts[0].chars().count() - CUT_MARKER.chars().count();
    assert!(kept > 2_900, "each answer keeps {kept} characters");
}

#[test]
fn the_question_and_the_reply_count_against_the_window() {
    let question = "q".repeat(20_000);
    let without = Room::new(Some(16_000), &[], None).budget(2).unwrap();
    let with = Room::new(Some(16_000), &[&question], None)
        .budget(2)
        .unwrap();
    assert_eq!(without - with, 20_000);
    let capped = Room::new(Some(16_000), &[], Some(12_000))
        .budget(2)
        .unwrap();
    assert_eq!(capped, 4_000 * 3 - 80, "max_tokens is reserved as asked");
}

#[test]
fn a_window_that_would_leave_stubs_is_refused_not_filled() {
    let long = "w".repeat(50_000);
    let texts = [long.as_str(); 5];
    let room = Room::new(Some(1_000), &["instructions"], None);
    let error = fit(&texts, room).unwrap_err();
    assert_eq!(error.window, 1_000);
    assert!(error.share < MIN_SHARE_CHARS);
    assert!(
        error.to_string().contains("context window of 1000 tokens"),
        "{error}"
    );
    // Short answers fit the same window whole.
    let fitted = fit(&["4", "four", "IV"], room);
    assert_eq!(fitted.unwrap().cut, None);
}

#[test]
fn failures_read_like_sentences() {
    assert_eq!(
        describe_failure("FailureKind::RateLimited", Some(429), "slow down"),
        "rate limited (HTTP 429): slow down"
    );
    assert_eq!(describe_failure("Timeout", None, "30s"), "timeout: 30s");
    assert_eq!(
        describe_failure("HttpStatus", Some(401), "no"),
        "HTTP error (HTTP 401): no"
    );
    assert_eq!(
        describe_failure("SomethingNew", None, "x"),
        "something new: x"
    );
}

#[test]
fn the_fallback_chain_keeps_every_error() {
    let models = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
    let (found, errors) = first_success(&models, |m| {
        if m == "c" {
            Ok("done".into())
        } else {
            Err(format!("{m} broke"))
        }
    });
    assert_eq!(found, Some(("c".to_owned(), "done".to_owned())));
    assert_eq!(errors.len(), 2);
    let (found, errors) = first_success(&models, |_| Ok("  ".into()));
    assert!(found.is_none() && errors.iter().all(|(_, e)| e == "empty reply"));
}

mod properties {
    use proptest::prelude::*;

    use super::super::*;

    proptest! {
        #[test]
        fn reply_parsers_take_any_text(text in "\\PC{0,300}") {
            let _ = extract_json(&text);
            let items = extract_list(&text);
            prop_assert!(items.iter().all(|i| !i.trim().is_empty()));
            let _ = normalise(&text);
            let s = similarity(&text, "some reference answer");
            prop_assert!((0.0..=1.0).contains(&s));
        }

        #[test]
        fn lenient_objects_take_any_text(text in "[{}\\[\\]'\",:a-zA-Z0-9 \\\\]{0,400}") {
            let _ = extract_object(&text);
        }

        #[test]
        fn strict_objects_read_the_same_leniently(keys in prop::collection::vec("[a-z' ]{1,8}", 0..5)) {
            let object: serde_json::Map<String, serde_json::Value> =
                keys.iter().map(|k| (k.clone(), serde_json::Value::String(format!("{k}'s"))) ).collect();
            let text = format!("Prose with an apostrophe's quote. {}", serde_json::Value::Object(object.clone()));
            prop_assert_eq!(extract_object(&text), Some(object));
        }

        #[test]
        fn bracket_storms_stay_cheap(text in "[\\[\\]{}\"a:,0-9 ]{0,2000}") {
            let _ = extract_json(&text);
            let _ = extract_list(&text);
        }

        #[test]
        fn json_lists_survive_any_surrounding_prose(
            items in prop::collection::vec("[a-zA-Z0-9 ?]{1,30}", 1..6),
            before in "[a-zA-Z .:!]{0,40}",
            after in "[a-zA-Z .!]{0,40}",
        ) {
            let reply = format!("{before}\n{}\n{after}", serde_json::to_string(&items).unwrap());
            let expected: Vec<String> = items.iter().map(|i| i.trim().to_owned()).filter(|i| !i.is_empty()).collect();
            if !expected.is_empty() {
                prop_assert_eq!(extract_list(&reply), expected);
            }
        }

        #[test]
        fn shuffles_are_permutations(seed in "\\PC{0,40}", n in 0usize..200) {
            let mut order = shuffle(&seed, n);
            order.sort_unstable();
            prop_assert_eq!(order, (0..n).collect::<Vec<_>>());
        }

        #[test]
        fn fitting_never_grows_past_the_budget_nor_cuts_to_stubs(
            lengths in prop::collection::vec(0usize..50_000, 1..8),
            window in 1_000u32..300_000,
            overhead in 0usize..20_000,
            reply in prop::option::of(0u32..20_000),
        ) {
            let texts: Vec<String> = lengths.iter().map(|&n| "y".repeat(n)).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let room = Room { window: Some(window), overhead_chars: overhead, reply_tokens: reply };
            let budget = room.budget(refs.len()).unwrap();
            let fits_whole = lengths.iter().sum::<usize>() <= budget;
            match fit(&refs, room) {
                Ok(fitted) => {
                    let total: usize = fitted.texts.iter().map(|t| t.chars().count()).sum();
                    prop_assert_eq!(fitted.cut.is_none(), fits_whole);
                    prop_assert!(fits_whole || total <= budget);
                    let marker = CUT_MARKER.chars().count();
                    for (text, &len) in fitted.texts.iter().zip(&lengths) {
                        let n = text.chars().count();
                        if text.ends_with(CUT_MARKER) && n - marker < len {
                            prop_assert!(n - marker >= MIN_SHARE_CHARS);
                        } else {
                            prop_assert_eq!(n, len);
                        }
                    }
                }
                Err(small) => {
                    prop_assert!(!fits_whole);
                    prop_assert!(small.share < MIN_SHARE_CHARS);
                }
            }
        }

        #[test]
        fn the_reply_reserve_grows_with_the_window(window in 1u32..2_000_000) {
            let reserve = Room::reply_reserve(window, None);
            prop_assert!(reserve <= u64::from(window) / 4 + 1);
            prop_assert!(reserve == 8_192 || reserve == u64::from(window) / 4);
        }
    }
}

#[test]
fn counts_come_from_the_call_then_the_settings_then_the_default() {
    assert_eq!(
        count(r#"{"agents": 8}"#, "agents", Some(3), 4, 1..=16),
        Ok(8)
    );
    assert_eq!(count("{}", "agents", Some(3), 4, 1..=16), Ok(3));
    assert_eq!(count("{}", "agents", None, 4, 1..=16), Ok(4));
    assert_eq!(
        count(r#"{"agents": 99}"#, "agents", None, 4, 1..=16),
        Err("agents must be between 1 and 16, got 99".into())
    );
    assert_eq!(count("not json", "agents", None, 4, 1..=16), Ok(4));
}

mod guest_helpers {
    use crate::guest::{self, Ending, Merged};
    use crate::wit::types::{
        AnswerKind, Completion, ContentPart, Failure, FailureKind, FormatSent, Reply, Role,
    };

    fn completion(id: Option<u32>, model: &str, outcome: Result<&str, &str>) -> Completion {
        Completion {
            id,
            label: "panel".into(),
            model: model.into(),
            latency_ms: 1,
            attempts: 1,
            outcome: match outcome {
                Ok(text) => Ok(Reply {
                    content: text.into(),
                    served_by: model.into(),
                    finish_reason: None,
                    usage: None,
                    format_sent: FormatSent::None,
                    citations: Vec::new(),
                    tool_calls: Vec::new(),
                }),
                Err(message) => Err(Failure {
                    kind: FailureKind::RateLimited,
                    status: Some(429),
                    message: message.into(),
                }),
            },
        }
    }

    #[test]
    fn messages_are_text_parts() {
        let message = guest::message(Role::User, "hello");
        assert!(matches!(message.content.as_slice(), [ContentPart::Text(t)] if t == "hello"));
        assert_eq!(guest::text(&message), "hello");
    }

    #[test]
    fn answered_completions_are_cited_by_call_id() {
        let completions = [
            completion(Some(7), "a", Ok("yes")),
            completion(Some(8), "b", Err("slow down")),
            completion(Some(9), "c", Ok("   ")),
            completion(None, "d", Err("over budget")),
            completion(Some(11), "e", Ok("no")),
        ];
        let ids: Vec<u32> = guest::answered(&completions).iter().map(|a| a.0).collect();
        assert_eq!(ids, [7, 11]);
        assert_eq!(
            guest::failure_notes(&completions),
            [
                "b failed: rate limited (HTTP 429): slow down",
                "c failed: empty answer",
                "d failed: rate limited (HTTP 429): over budget",
            ]
        );
    }

    #[test]
    fn too_few_answers_are_none_or_a_single_never_a_synthesis() {
        let none = guest::too_few(&[completion(Some(0), "a", Err("x"))], "why").unwrap();
        assert_eq!(none.kind, AnswerKind::None);
        assert!(none.sources.is_empty());
        let single = guest::too_few(
            &[
                completion(Some(3), "a", Ok("only")),
                completion(Some(4), "b", Err("x")),
            ],
            "this is its answer",
        )
        .unwrap();
        assert_eq!(single.kind, AnswerKind::Single);
        assert_eq!(single.sources, [3]);
        assert_eq!(single.notes[0], "Only a answered, so this is its answer.");
        let two = [
            completion(Some(0), "a", Ok("1")),
            completion(Some(1), "b", Ok("2")),
        ];
        assert!(guest::too_few(&two, "why").is_none());
    }

    #[test]
    fn a_merge_falls_back_in_order_and_says_what_it_cut() {
        let answers = vec![
            ("A".to_owned(), "x".repeat(40_000)),
            ("B".to_owned(), "y".into()),
        ];
        let synthesizers = vec!["first".to_owned(), "second".to_owned()];
        let mut asked = Vec::new();
        let merge = |synthesizers| guest::Merge {
            question: "q?",
            answers: &answers,
            synthesizers,
            instructions: "merge",
            context: "",
            reply_tokens: None,
        };
        let merged = guest::merge_with(
            merge(&synthesizers),
            |_| Some(16_000),
            |model, prompt| {
                asked.push((model.to_owned(), prompt.len()));
                if model == "first" {
                    Err("down".into())
                } else {
                    Ok("merged".into())
                }
            },
        )
        .unwrap();
        assert_eq!(merged.model, "second");
        assert_eq!(merged.text, "merged");
        assert_eq!(
            merged.notes[0],
            "Synthesizer first failed (down); fell back to second."
        );
        assert!(
            merged.notes[1].starts_with("To fit second's context window, the answers were cut")
        );
        assert_eq!(asked.len(), 2);
        assert!(asked[1].1 < 40_000, "the prompt was cut to fit");

        let failed = guest::merge_with(merge(&synthesizers), |_| None, |_, _| Err("no".into()));
        assert_eq!(failed.unwrap_err().len(), 2, "every error is kept");
    }

    #[test]
    fn a_window_too_small_for_the_answers_falls_over_to_a_bigger_one() {
        let answers = vec![
            ("A".to_owned(), "x".repeat(30_000)),
            ("B".to_owned(), "y".repeat(30_000)),
        ];
        let synthesizers = vec!["small".to_owned(), "big".to_owned()];
        let windows = |model: &str| Some(if model == "small" { 400 } else { 64_000 });
        let mut asked = Vec::new();
        let merge = guest::Merge {
            question: "q?",
            answers: &answers,
            synthesizers: &synthesizers,
            instructions: "merge",
            context: "",
            reply_tokens: None,
        };
        let merged = guest::merge_with(merge, windows, |model, prompt| {
            asked.push(model.to_owned());
            assert!(prompt.contains(&"x".repeat(29_000)), "big reads nearly all");
            Ok("merged".into())
        })
        .unwrap();
        assert_eq!(asked, ["big"], "the small window is never sent stubs");
        assert!(
            merged.notes[0].starts_with(
                "Synthesizer small failed (too small for the answers: its context window of 400 tokens"
            ),
            "{:?}",
            merged.notes
        );

        // No window big enough: no merge at all, and every reason kept.
        let only_small = vec!["small".to_owned()];
        let failed = guest::merge_with(
            guest::Merge {
                synthesizers: &only_small,
                ..merge
            },
            windows,
            |_, _| panic!("never asked"),
        )
        .unwrap_err();
        assert!(
            failed[0].1.contains("under the 600 a merge needs"),
            "{failed:?}"
        );
    }

    #[test]
    fn settling_a_failed_merge_shows_the_answers_side_by_side() {
        let pairs = [("a", "one"), ("b", "two")];
        let ending = || Ending {
            role: "chairman",
            answers: &pairs,
            sources: vec![4, 5],
            notes: vec!["kept".into()],
            details: String::new(),
        };
        let merged = Merged {
            model: "m".into(),
            text: "best".into(),
            notes: vec!["cut".into()],
        };
        let ok = guest::settle(Ok(merged), |m| Some(format!("by {m}")), ending());
        assert_eq!(ok.kind, AnswerKind::Synthesis);
        assert_eq!(ok.notes, ["by m", "kept", "cut"]);
        assert_eq!(ok.sources, [4, 5]);

        let failed = guest::settle(Err(vec![("m".into(), "down".into())]), |_| None, ending());
        assert_eq!(failed.kind, AnswerKind::Unmerged);
        assert!(failed.notes[0].starts_with(
            "Every chairman failed, so the 2 answers are shown side by side. m: down"
        ));
        assert!(failed.text.contains("## a\n\none") && failed.text.contains("## b\n\ntwo"));
    }

    #[test]
    fn plugins_without_settings_refuse_any() {
        assert!(crate::no_settings("{}").is_ok());
        assert!(crate::no_settings("").is_ok());
        let error = crate::no_settings(r#"{"x": 1}"#).unwrap_err();
        assert!(error.contains("unknown field `x`"), "{error}");
    }
}

mod analysis_replies {
    use crate::analysis::{self, Holder, Reading};

    fn labels() -> Vec<String> {
        ["A", "B", "C"].map(String::from).to_vec()
    }

    fn holders() -> Vec<Holder> {
        ["m1", "m2", "m3"]
            .iter()
            .enumerate()
            .map(|(i, m)| Holder {
                label: crate::letter(i),
                model: (*m).to_owned(),
                call: Some(i as u32 + 1),
            })
            .collect()
    }

    /// Every object in `schema` is strict: all its properties required,
    /// none other allowed (what OpenAI's strict mode refuses otherwise).
    fn assert_strict(schema: &serde_json::Value, path: &str) {
        if schema["type"] == "object" {
            let properties = schema["properties"].as_object().expect(path);
            let mut required: Vec<&str> = schema["required"]
                .as_array()
                .expect(path)
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            required.sort_unstable();
            let mut keys: Vec<&str> = properties.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(required, keys, "{path}");
            assert_eq!(schema["additionalProperties"], false, "{path}");
            for (key, property) in properties {
                assert_strict(property, &format!("{path}.{key}"));
            }
        }
        if schema["type"] == "array" {
            assert_strict(&schema["items"], &format!("{path}[]"));
        }
    }

    #[test]
    fn the_schema_is_strict_names_only_the_labels_and_its_replies_read_whole() {
        let schema = analysis::schema(&labels());
        assert_strict(&schema, "$");
        let held_by = &schema["properties"]["disagreements"]["items"]["properties"]["sides"]["items"]
            ["properties"]["held_by"];
        assert_eq!(held_by["items"]["enum"], serde_json::json!(["A", "B", "C"]));
        // A reply that fills the schema exactly is read with nothing missing.
        let reply = r#"{"consensus": ["c"], "disagreements": [{"point": "p",
            "sides": [{"position": "x", "held_by": ["A"]}, {"position": "y", "held_by": ["B", "C"]}]}],
            "unique_insights": [{"insight": "i", "held_by": ["C"]}],
            "likely_errors": [{"error": "e", "held_by": ["B"]}], "blind_spots": ["b"],
            "confidence": {"level": "medium", "score": 0.5, "why": "w"}}"#;
        let Reading::Parsed(a) = analysis::read(reply, &labels()) else {
            panic!("not parsed")
        };
        assert!(a.missing.is_empty(), "{:?}", a.missing);
        assert_eq!(a.disagreements[0].sides[1].held_by, [1, 2]);
    }

    #[test]
    fn a_full_analysis_names_who_holds_each_side() {
        let reply = r#"Sure. ```json
{"consensus": ["water boils at 100 C at sea level"],
 "disagreements": [{"point": "boiling point on Everest",
   "sides": [{"position": "about 70 C", "held_by": ["A", "C"]}, {"position": "about 90 C", "held_by": "B"}]}],
 "unique_insights": [{"insight": "pressure cookers raise it", "held_by": ["Answer C"]}],
 "likely_errors": [{"error": "90 C is too high for 8,849 m", "held_by": ["B"]}],
 "blind_spots": ["humidity"],
 "confidence": {"level": "high", "score": 0.8, "why": "physics is settled"}}
```"#;
        let Reading::Parsed(a) = analysis::read(reply, &labels()) else {
            panic!("parsed")
        };
        assert_eq!(a.disagreements[0].sides[0].held_by, [0, 2]);
        assert_eq!(a.disagreements[0].sides[1].held_by, [1]);
        assert_eq!(a.unique_insights[0].held_by, [2]);
        assert!(a.missing.is_empty());
        let reading = Reading::Parsed(a);
        let notes = reading.notes("judge", &holders());
        assert_eq!(notes[0], "Confidence: high (0.80) — physics is settled.");
        assert!(notes.contains(
            &"Disagreement: boiling point on Everest — \"about 70 C\" (m1, m3) vs \"about 90 C\" (m2)"
                .to_owned()
        ), "{notes:?}");
        let details = reading.details(&holders());
        assert_eq!(
            details["disagreements"][0]["sides"][1]["held_by"][0],
            serde_json::json!({"answer": "B", "model": "m2", "call": 2})
        );
        assert!(
            reading
                .brief(&labels())
                .contains("\"about 70 C\" (A, C) vs")
        );
    }

    #[test]
    fn loose_replies_default_what_they_lack() {
        let reply = "{'Consensus': 'all say 4', 'confidence': 'Medium - they agree', 'contradictions': [],}";
        let Reading::Parsed(a) = analysis::read(reply, &labels()) else {
            panic!("parsed")
        };
        assert_eq!(a.consensus, ["all say 4"]);
        assert_eq!(a.confidence.as_ref().unwrap().level, "medium");
        assert_eq!(
            a.missing,
            ["unique_insights", "likely_errors", "blind_spots"]
        );
        let notes = Reading::Parsed(a).notes("x", &holders());
        assert!(
            notes
                .last()
                .unwrap()
                .contains("left out unique insights, likely errors, blind spots")
        );
        // A percentage, and a bare number.
        let Reading::Parsed(p) = analysis::read(r#"{"confidence": 85}"#, &labels()) else {
            panic!()
        };
        assert_eq!(p.confidence.unwrap().level, "high");
    }

    #[test]
    fn a_reply_without_an_analysis_is_free_text() {
        let prose = "The answers mostly agree; B is off.";
        assert_eq!(
            analysis::read(prose, &labels()),
            Reading::FreeText(prose.to_owned())
        );
        // JSON, but not an analysis.
        assert!(matches!(
            analysis::read(r#"{"answer": 4}"#, &labels()),
            Reading::FreeText(_)
        ));
        let notes = analysis::read(prose, &labels()).notes("x", &holders());
        assert!(notes[0].contains("used as free text"), "{notes:?}");
    }

    proptest::proptest! {
        #[test]
        fn any_reply_reads_without_panicking(reply in "\\PC{0,400}") {
            let reading = analysis::read(&reply, &labels());
            let _ = (reading.brief(&labels()), reading.notes("x", &holders()), reading.details(&holders()));
        }
    }
}
