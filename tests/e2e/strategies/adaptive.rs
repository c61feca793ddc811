//! Adaptive compute end to end: the vote sampling in waves (stopping once
//! the leader cannot be overtaken, and saying what it saved), "plurality"
//! when nobody has a majority, and the cascade escalating to the panel
//! only on disagreement or low confidence — with the spend in every result.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

/// Three models, `samples_per_model` (default 3) each: a ceiling of 9, a
/// first wave of 5.
fn vote_config(mock: &Mock, extra: &str) -> String {
    config(
        mock,
        &format!(
            r#"
[plugins.three]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3"], synthesizers = ["{SYNTH}"] }}

[plugins.sample-waves]
builtin = "passthrough"
settings = {{ waves = true }}

[plugins.vote]
builtin = "vote"

[pipelines.vote]
description = "vote in waves"
selector = "three"
prompter = "sample-waves"
synthesizer = "vote"
options.samples_per_model = {{ type = "integer", description = "Most answers per model.", minimum = 1, maximum = 8, default = 3 }}

[pipelines.vote5]
description = "vote in waves over five models"
selector = "panel"
prompter = "sample-waves"
synthesizer = "vote"
{extra}
"#
        ),
    )
}

fn sent(mock: &Mock) -> [usize; 3] {
    ["m1", "m2", "m3"].map(|m| mock.requests_for(m).len())
}

fn note_with<'a>(result: &'a Value, needle: &str) -> &'a str {
    result["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|n| n.contains(needle))
        .unwrap_or_else(|| panic!("no note with `{needle}` in {}", result["notes"]))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_unanimous_first_wave_ends_the_vote_and_says_what_it_saved() {
    let mock = Mock::start().await;
    for model in ["m1", "m2", "m3"] {
        mock.script(model, [Step::answer("Paris.")]);
    }
    let server = Server::start(&vote_config(&mock, "")).await;
    let result = server.ask("vote", "What is the capital of France?").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let structured = structured(&result);
    assert_eq!(structured["kind"], "vote");
    assert_eq!(structured["answer"], "Paris.");
    assert_eq!(sent(&mock), [2, 2, 1], "5 of 9 samples, round robin");
    assert_eq!(
        structured["summary"],
        "Vote: 5 of 5 answers agree, a majority (5 asked)."
    );
    let details = &structured["details"];
    assert_eq!(details["stopped"], "settled");
    assert_eq!(
        details["waves"],
        json!([{"wave": 1, "calls": 5, "answered": 5}])
    );
    assert_eq!(
        details["spend"],
        json!({"calls": 5, "cost_usd": 0.0025, "full_panel_calls": 9,
               "full_panel_cost_usd": 0.0045, "full_panel_cost_estimated": true, "calls_saved": 4})
    );
    let all = text(&result);
    for said in [
        "First wave: 5 of at most 9 samples",
        "Sampled in 1 wave: 5 of at most 9 calls; stopped because the leader could no longer be overtaken by the 4 samples still allowed.",
        "Spent 5 calls ($0.0025) against the full panel's 9 (about $0.0045, estimated): 4 calls saved.",
    ] {
        assert!(all.contains(said), "`{said}` not in:\n{all}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_split_vote_keeps_sampling_until_the_leader_is_safe() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("Paris")]);
    mock.script("m2", [Step::answer("Lyon")]);
    mock.script("m3", [Step::answer("paris!")]);
    let server = Server::start(&vote_config(&mock, "")).await;
    let result = server.ask("vote", "What is the capital of France?").await;
    let structured = structured(&result);
    // Wave 1: m1 P, m2 L, m3 P, m1 P, m2 L -> 3-2 with 4 left: 2 more could
    // settle it. Wave 2: m1 P, m2 L -> 4-3 with 2 left: 1 more could.
    // Wave 3: m3 P -> 5-3 with 1 left: settled.
    assert_eq!(sent(&mock), [3, 3, 2]);
    let details = &structured["details"];
    assert_eq!(
        details["waves"],
        json!([{"wave": 1, "calls": 5, "answered": 5}, {"wave": 2, "calls": 2, "answered": 2},
               {"wave": 3, "calls": 1, "answered": 1}])
    );
    assert_eq!(details["stopped"], "settled");
    assert_eq!(details["spend"]["calls"], 8);
    assert_eq!(details["spend"]["calls_saved"], 1);
    assert_eq!(
        details["votes"][0],
        json!({"answer": "paris", "votes": 5, "models": ["m1", "m3", "m1", "m1", "m3"]})
    );
    assert_eq!(structured["answer"], "Paris");
    assert_eq!(
        structured["summary"],
        "Vote: 5 of 8 answers agree, a majority (8 asked)."
    );
    // Later waves are labelled and seeded as the prompter's samples are.
    let third = &mock.requests_for("m1")[2].body;
    assert_eq!(third["seed"], 3, "{third}");
    let wave_calls: Vec<&Value> = calls(structured, "vote");
    assert_eq!(wave_calls.len(), 3);
    assert_eq!(wave_calls[0]["label"], "sample 3");
    assert!(note_with(structured, "Sampled in 3 waves").contains("8 of at most 9 calls"));
    assert!(text(&result).contains("1 call saved"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_winner_without_a_majority_is_called_a_plurality() {
    let mock = Mock::start().await;
    for (model, answer) in [
        ("m1", "Alpha"),
        ("m2", "Bravo"),
        ("m3", "Charlie"),
        ("m4", "alpha."),
        ("m5", "Delta"),
    ] {
        mock.script(model, [Step::answer(answer)]);
    }
    let server = Server::start(&vote_config(&mock, "")).await;
    let result = server.ask("vote5", "Pick one.").await;
    let structured = structured(&result);
    // One sample each: a first wave of 3 (all different), then the last 2.
    assert_eq!(structured["details"]["waves"][0]["calls"], 3);
    assert_eq!(structured["details"]["stopped"], "panel exhausted");
    assert_eq!(structured["answer"], "Alpha");
    assert_eq!(structured["details"]["majority"], false);
    assert_eq!(
        structured["summary"],
        "Vote: 2 of 5 answers agree, a plurality (5 asked)."
    );
    let all = text(&result);
    assert!(all.contains("2 of 5 votes, a plurality"), "{all}");
    assert!(!all.contains("Majority"), "{all}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_vote_stops_at_the_run_call_budget_and_says_the_result_could_change() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("Paris")]);
    mock.script("m2", [Step::answer("Lyon")]);
    mock.script("m3", [Step::answer("Lyon")]);
    let toml = vote_config(&mock, "").replace(
        "run_timeout = \"20s\"",
        "run_timeout = \"20s\"\nmax_calls_per_run = 6",
    );
    let server = Server::start(&toml).await;
    let result = server.ask("vote", "q").await;
    let structured = structured(&result);
    // Wave 1 (5 calls): P L L P L -> 3 Lyon, 2 Paris; one call left may not settle it.
    assert_eq!(mock.requests().len(), 6, "never past max_calls_per_run");
    assert_eq!(structured["details"]["stopped"], "budget");
    let note = note_with(structured, "Sampled in");
    assert!(
        note.contains("call budget (max_calls_per_run) left too few samples")
            && note.contains("more samples could have changed the winner"),
        "{note}"
    );
}

/// The three-model vote with prices that bound each call's worst case
/// (the mock reports $0.0005 a call) and `limits` added.
fn priced_vote_config(mock: &Mock, limits: &str) -> String {
    let mut toml = vote_config(mock, "").replace(
        "run_timeout = \"20s\"",
        &format!("run_timeout = \"20s\"\n{limits}"),
    );
    for model in ["m1", "m2", "m3"] {
        toml = toml.replace(
            &format!("[models.{model}]\ncontext_window = 100000\n"),
            &format!(
                "[models.{model}]\ncontext_window = 100000\ninput_price = 1.0\noutput_price = 1.0\nmax_output_tokens = 100\n"
            ),
        );
    }
    toml
}

#[tokio::test(flavor = "multi_thread")]
async fn the_vote_stops_when_the_cost_ceiling_cannot_pay_for_another_wave() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("Paris")]);
    mock.script("m2", [Step::answer("Lyon")]);
    mock.script("m3", [Step::answer("Lyon")]);
    // The first wave (5 calls, $0.0025) leaves $0.0005: one more sample,
    // which cannot settle 3 Lyon to 2 Paris with 4 samples still allowed.
    let server = Server::start(&priced_vote_config(&mock, "max_cost_usd = 0.003")).await;
    let result = server.ask("vote", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["details"]["stopped"], "budget", "{structured}");
    let sent = mock.requests().len();
    assert!(sent < 9, "stopped before the full panel: {sent} calls");
    let spent = structured["usage"]["cost_usd"].as_f64().unwrap();
    assert!(spent <= 0.003 + 1e-9, "within the ceiling: {spent}");
    assert!(
        (spent - 0.0005 * sent as f64).abs() < 1e-9,
        "every sent call is paid for: {spent}"
    );
    let note = note_with(structured, "Sampled in");
    assert!(
        note.contains("cost ceiling (max_cost_usd) left too few samples")
            && note.contains("more samples could have changed the winner"),
        "{note}"
    );
    assert_eq!(structured["kind"], "vote");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_vote_stops_when_the_deadline_leaves_no_time_for_another_wave() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer_after(3500, "Paris")]);
    mock.script("m2", [Step::answer_after(3500, "Lyon")]);
    mock.script("m3", [Step::answer_after(3500, "Lyon")]);
    // A wave takes 3.5 s of a 6 s run: after the first, about 2.4 s are
    // left, too little for another. The fan-out keeps 10% for the merge,
    // so the first wave (done by ~3.6 s) is never cut.
    let toml = vote_config(&mock, "")
        .replace("run_timeout = \"20s\"", "run_timeout = \"6s\"")
        .replace("[limits]", "[fan_out]\nmerge_reserve = \"10%\"\n\n[limits]");
    let server = Server::start(&toml).await;
    let started = std::time::Instant::now();
    let result = server.ask("vote", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["details"]["stopped"], "time", "{structured}");
    assert_eq!(mock.requests().len(), 5, "the first wave only");
    // The five requests say no second wave was started; the time says
    // none was waited for either, with all the margin a busy machine
    // needs (a second wave would have held the run to its deadline).
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "answered before the 6 s deadline: no second wave was waited for ({:?})",
        started.elapsed()
    );
    let note = note_with(structured, "Sampled in");
    assert!(
        note.contains("too little time was left before the run's deadline for another wave")
            && note.contains("more samples could have changed the winner"),
        "{note}"
    );
    assert_eq!(structured["kind"], "vote");
}

fn cascade_config(mock: &Mock, cascade_settings: &str) -> String {
    config(
        mock,
        &format!(
            r#"
[plugins.cascade-first]
builtin = "cascade-first"
settings = {{ check = "m5" }}

[plugins.cascade]
builtin = "cascade"
settings = {{ {cascade_settings} }}

[pipelines.cascade]
description = "cascade"
selector = "panel"
prompter = "cascade-first"
synthesizer = "cascade"
"#
        ),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cascade_does_not_escalate_when_the_check_agrees() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("Paris.\nConfidence: 90%")]);
    mock.script("m5", [Step::answer("paris\n\nConfidence: 80%")]);
    for model in ["m2", "m3", "m4", SYNTH] {
        mock.script(model, [Step::answer("should not be asked")]);
    }
    let server = Server::start(&cascade_config(&mock, "")).await;
    let result = server
        .ask("cascade", "What is the capital of France?")
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let structured = structured(&result);
    assert_eq!(structured["kind"], "pick");
    assert_eq!(
        structured["answer"], "Paris.",
        "the answer, without its confidence line"
    );
    for model in ["m2", "m3", "m4", SYNTH] {
        assert!(mock.requests_for(model).is_empty(), "{model} was asked");
    }
    let asked = mock.requests_for("m1")[0].text();
    assert!(asked.contains("Confidence: N%"), "{asked}");
    let details = &structured["details"];
    assert_eq!(details["escalated"], false);
    assert_eq!(details["first_stage"]["answer"]["confidence"], 0.9);
    assert_eq!(details["first_stage"]["check"]["model"], "m5");
    assert_eq!(details["first_stage"]["agreement"], 1.0);
    assert_eq!(
        details["spend"],
        json!({"calls": 2, "cost_usd": 0.001, "full_panel_calls": 6,
               "full_panel_cost_usd": 0.003, "full_panel_cost_estimated": true, "calls_saved": 4})
    );
    let all = text(&result);
    for said in [
        "m1 answers and m5 checks; the other 3 panel models are asked only if",
        "Cascade: not escalated — m5's check agreed with m1's answer, stated confidence 90%",
        "Spent 2 calls ($0.0010) against the full panel's 6 (about $0.0030, estimated): 4 calls saved.",
    ] {
        assert!(all.contains(said), "`{said}` not in:\n{all}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cascade_escalates_to_the_panel_when_the_check_disagrees() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("Paris\nConfidence: 95%")]);
    mock.script(
        "m5",
        [
            Step::answer("Lyon\nConfidence: 90%"),
            Step::answer(r#"{"same": false, "why": "Paris and Lyon are different cities"}"#),
        ],
    );
    for model in ["m2", "m3", "m4"] {
        mock.script(model, [Step::answer("Paris")]);
    }
    mock.script(SYNTH, [Step::answer("Paris is the capital of France.")]);
    let server = Server::start(&cascade_config(&mock, "")).await;
    let result = server
        .ask("cascade", "What is the capital of France?")
        .await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    assert_eq!(structured["answer"], "Paris is the capital of France.");
    assert_eq!(structured["summary"], "Synthesis of 5 of 5 answers.");
    let details = &structured["details"];
    assert_eq!(details["escalated"], true);
    assert_eq!(details["escalated_to"], json!(["m2", "m3", "m4"]));
    let reasons = details["reasons"].to_string();
    assert!(
        reasons.contains("m5 disagrees with m1 (Paris and Lyon are different cities)"),
        "{reasons}"
    );
    assert_eq!(details["first_stage"]["agreement_verdict"]["by"], "judge");
    assert_eq!(
        details["spend"]["calls"], 7,
        "2 + the agreement judge + 3 panel + 1 merge"
    );
    assert_eq!(details["spend"]["cost_usd"], 0.0035);
    assert_eq!(details["spend"]["calls_saved"], 0);
    let merge = mock.requests_for(SYNTH)[0].text();
    assert!(
        merge.contains("Lyon") && !merge.contains("Confidence:"),
        "{merge}"
    );
    let all = text(&result);
    assert!(
        all.contains("Cascade: escalated to the panel because m5 disagrees with m1"),
        "{all}"
    );
    assert!(all.contains("Spent 7 calls ($0.0035)"), "{all}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cascade_escalates_on_low_confidence_even_when_the_check_agrees() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("Paris\nConfidence: 40%")]);
    mock.script("m5", [Step::answer("Paris\nConfidence: 90%")]);
    for model in ["m2", "m3", "m4"] {
        mock.script(model, [Step::answer("Paris")]);
    }
    mock.script(SYNTH, [Step::answer("Paris.")]);
    let server = Server::start(&cascade_config(&mock, "min_confidence = 0.6")).await;
    let result = server.ask("cascade", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["details"]["escalated"], true);
    assert_eq!(
        structured["details"]["reasons"],
        json!(["m1 stated 40% confidence, below 60%"])
    );
    for model in ["m2", "m3", "m4", SYNTH] {
        assert_eq!(mock.requests_for(model).len(), 1, "{model}");
    }
    assert!(text(&result).contains("escalated to the panel because m1 stated 40% confidence"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cascade_escalates_when_its_first_model_fails_and_keeps_the_check() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::status(400, "bad request")]);
    mock.script("m5", [Step::answer("Paris")]);
    for model in ["m2", "m3", "m4"] {
        mock.script(model, [Step::answer_after(10, "Paris")]);
    }
    mock.script(SYNTH, [Step::answer("Paris.")]);
    let server = Server::start(&cascade_config(&mock, "")).await;
    let result = tokio::time::timeout(Duration::from_secs(30), server.ask("cascade", "q"))
        .await
        .unwrap();
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    assert!(
        structured["details"]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("m1 did not answer"),
        "{}",
        structured["details"]
    );
    assert_eq!(structured["summary"], "Synthesis of 4 of 5 answers.");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_cascade_and_vote_settings_are_refused_at_load() {
    let mock = Mock::start().await;
    for (extra, expected) in [
        (
            "\n[plugins.c]\nbuiltin = \"cascade\"\nsettings = { min_confidence = 70 }\n",
            "`min_confidence` is a fraction between 0 and 1 (0.7 means 70%), got 70",
        ),
        (
            "\n[plugins.c]\nbuiltin = \"cascade-first\"\nsettings = { model = \"m1\", check = \"m1\" }\n",
            "a model cannot check itself",
        ),
        (
            "\n[plugins.c]\nbuiltin = \"vote\"\nsettings = { samples_per_model = 0 }\n",
            "samples_per_model must be between 1 and 16, got 0",
        ),
        (
            "\n[plugins.c]\nbuiltin = \"passthrough\"\nsettings = { waves = \"yes\" }\n",
            "waves",
        ),
    ] {
        let file = write_config(&config(&mock, extra));
        let output = command(&["check", "--config", file.path.to_str().unwrap()])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{extra} was accepted");
        assert!(stderr.contains(expected), "`{expected}` not in:\n{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cascade_checks_with_the_panels_cheapest_other_model_by_default() {
    let mock = Mock::start().await;
    let priced = |id: &str, per_token: &str| {
        json!({"id": id, "context_length": 64000,
               "pricing": {"prompt": per_token, "completion": per_token}})
    };
    mock.catalog(json!([
        priced("m1", "0.000003"),
        priced("m2", "0.000003"),
        priced("m3", "0.0000002"),
        priced("m4", "0.0000001"),
        priced("m5", "0.000001"),
    ]));
    mock.script("m1", [Step::answer("42\nConfidence: 99%")]);
    mock.script("m4", [Step::answer("42\nConfidence: 99%")]);
    let toml = cascade_config(&mock, "").replace("settings = { check = \"m5\" }\n", "");
    let server = Server::start(&toml).await;
    let result = server.ask("cascade", "Six times seven?").await;
    let structured = structured(&result);
    let asked: Vec<(&str, &str)> = calls(structured, "fan-out")
        .iter()
        .map(|c| (c["model"].as_str().unwrap(), c["label"].as_str().unwrap()))
        .collect();
    assert_eq!(
        asked,
        [("m1", "cascade: answer"), ("m4", "cascade: check")],
        "{structured}"
    );
    assert_eq!(structured["details"]["escalated"], false);
    assert!(text(&result).contains("m4 (the panel's cheapest other model) checks"));
    // The full panel is priced model by model: m1 and m4 at what they
    // reported ($0.0005 each), m2, m3 and m5 at their list prices for this
    // run's call size (12 + 34 tokens), the merge by synth (no price) at
    // the run's mean cost per call.
    let listed = |per_million: f64| (12.0 + 34.0) * per_million / 1e6;
    let expected = 0.0005 + listed(3.0) + listed(0.2) + 0.0005 + listed(1.0) + 0.0005;
    let full = structured["details"]["spend"]["full_panel_cost_usd"]
        .as_f64()
        .unwrap();
    assert!((full - expected).abs() < 1e-8, "{full} vs {expected}");
}

#[tokio::test(flavor = "multi_thread")]
async fn differently_worded_answers_the_check_model_judges_the_same_are_not_escalated() {
    let mock = Mock::start().await;
    catalog_taking(&mock, &[("m5", &["structured_outputs"])]);
    mock.script(
        "m1",
        [Step::answer(
            "The capital of France is Paris, on the Seine.\nConfidence: 90%",
        )],
    );
    mock.script(
        "m5",
        [
            Step::answer("Paris\nConfidence: 85%"),
            Step::answer(r#"{"same": true, "why": "both say Paris"}"#),
        ],
    );
    for model in ["m2", "m3", "m4", SYNTH] {
        mock.script(model, [Step::answer("should not be asked")]);
    }
    let server = Server::start(&cascade_config(&mock, "")).await;
    let result = server
        .ask("cascade", "What is the capital of France?")
        .await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "pick", "{}", structured["notes"]);
    assert_eq!(
        structured["answer"],
        "The capital of France is Paris, on the Seine."
    );
    for model in ["m2", "m3", "m4", SYNTH] {
        assert!(mock.requests_for(model).is_empty(), "{model} was asked");
    }
    // The judge saw both answers and was held to the verdict's schema.
    let judged = &mock.requests_for("m5")[1];
    assert!(
        judged.text().contains("--- Answer 2 ---\nParis"),
        "{}",
        judged.text()
    );
    assert_eq!(
        judged.body["response_format"]["json_schema"]["name"],
        "agreement"
    );
    let verdict = &structured["details"]["first_stage"]["agreement_verdict"];
    assert_eq!(verdict["by"], "judge");
    assert_eq!(verdict["model"], "m5");
    assert_eq!(verdict["format"], "json-schema");
    assert_eq!(verdict["agree"], true);
    assert_eq!(structured["details"]["spend"]["calls"], 3);
    assert_eq!(structured["details"]["spend"]["calls_saved"], 3);
    assert!(
        text(&result).contains("m5 judged the two answers to agree: both say Paris"),
        "{}",
        text(&result)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_verdict_the_words_decide_and_a_changed_number_is_a_disagreement() {
    let mock = Mock::start().await;
    mock.script(
        "m1",
        [Step::answer(
            "Water boils at about 70 C on Everest.\nConfidence: 90%",
        )],
    );
    mock.script(
        "m5",
        [
            Step::answer("Water boils at about 90 C on Everest.\nConfidence: 90%"),
            Step::status(500, "judge is down"),
        ],
    );
    for model in ["m2", "m3", "m4"] {
        mock.script(model, [Step::answer("About 70 C.")]);
    }
    mock.script(SYNTH, [Step::answer("About 70 C.")]);
    let server = Server::start(&cascade_config(&mock, "")).await;
    let result = server.ask("cascade", "Boiling point on Everest?").await;
    let structured = structured(&result);
    let details = &structured["details"];
    assert_eq!(details["escalated"], true, "{details}");
    assert_eq!(
        details["reasons"],
        json!(["m5 disagrees with m1 (they state different numbers: 70 vs 90)"])
    );
    assert_eq!(details["first_stage"]["agreement_verdict"]["by"], "words");
    assert!(
        details["first_stage"]["agreement"].as_f64().unwrap() > 0.7,
        "the words alone overlap well: {details}"
    );
    let notes = structured["notes"].to_string();
    assert!(
        notes.contains("m5 could not judge whether the answers agree (")
            && notes.contains("judge is down")
            && notes.contains("so their words decided."),
        "{notes}"
    );

    // Judging turned off: no judge call, the same decision.
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("About 70 C.\nConfidence: 90%")]);
    mock.script("m5", [Step::answer("About 90 C.\nConfidence: 90%")]);
    for model in ["m2", "m3", "m4", SYNTH] {
        mock.script(model, [Step::answer("About 70 C.")]);
    }
    let server = Server::start(&cascade_config(&mock, "judge_agreement = false")).await;
    let result = server.ask("cascade", "Boiling point on Everest?").await;
    assert_eq!(
        crate::support::structured(&result)["details"]["escalated"],
        true
    );
    assert_eq!(mock.requests_for("m5").len(), 1, "no judge was asked");
}
