use super::*;

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
fn normalising_compares_what_matters() {
    assert_eq!(normalise("The answer is 42."), "the answer is 42");
    assert_eq!(normalise("Let me think... so.\nFinal answer: **42**"), "42");
    assert_eq!(normalise("Answer: 42!"), normalise("answer:   42"));
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
fn similarity_is_one_for_the_same_words() {
    assert_eq!(
        similarity("Paris is the capital.", "paris is THE capital"),
        1.0
    );
    assert!(similarity("Paris", "Lyon") < 0.1);
}

#[test]
fn fitting_cuts_only_when_needed_and_says_so() {
    let (texts, cut) = fit(&["short", "also short"], Some(100_000));
    assert_eq!((texts.len(), cut), (2, None));
    let long = "x".repeat(100_000);
    let (texts, cut) = fit(&[&long, "tiny"], Some(20_000));
    assert!(texts[0].len() < 40_000 && texts[1] == "tiny");
    assert!(cut.unwrap().contains("of 100004 characters"));
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
        fn fitting_never_grows_past_the_budget(lengths in prop::collection::vec(0usize..50_000, 1..8), window in 9_000u32..40_000) {
            let texts: Vec<String> = lengths.iter().map(|&n| "y".repeat(n)).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let (fitted, cut) = fit(&refs, Some(window));
            let budget = (u64::from(window) - 8_192) as usize * 3;
            let marker = "\n[… cut to fit the context window]".chars().count();
            let total: usize = fitted.iter().map(|t| t.chars().count()).sum();
            prop_assert!(cut.is_none() || total <= budget + marker * texts.len());
            prop_assert_eq!(cut.is_none(), lengths.iter().sum::<usize>() <= budget);
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
