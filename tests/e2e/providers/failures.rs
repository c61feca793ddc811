//! Partial and total failure, retries, and bad calls: every cause is named.

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn one_model_failing_gives_a_partial_result_naming_the_failure() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer(&format!("{model} says hi"))]);
    }
    mock.script("m3", [Step::status(503, "m3 is overloaded, try later")]);
    mock.script(SYNTH, [Step::answer("merged four")]);
    let server = Server::start(&config(&mock, "")).await;

    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(false));
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    assert_eq!(structured["summary"], "Synthesis of 4 of 5 answers.");
    let failed: Vec<_> = calls(structured, "fan-out")
        .into_iter()
        .filter(|c| c["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["model"], "m3");
    assert_eq!(failed[0]["error"]["kind"], "http-status");
    assert_eq!(failed[0]["error"]["status"], 503);
    assert_eq!(failed[0]["error"]["message"], "m3 is overloaded, try later");
    assert_eq!(
        failed[0]["attempts"], 3,
        "a 503 is retried up to max_attempts"
    );
    assert!(text(&result).contains("m3 (http-status): m3 is overloaded, try later"));
    // The synthesizer saw the four answers, not the failure.
    let prompt = mock.requests_for(SYNTH)[0].text();
    assert!(!prompt.contains("m3 says hi") && prompt.contains("m4 says hi"));
}

#[tokio::test(flavor = "multi_thread")]
async fn all_failing_is_an_error_that_names_every_cause() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::status(401, "No auth credentials found")]);
    mock.script("m2", [Step::status(402, "Insufficient credits")]);
    mock.script("m3", [Step::status(404, "No endpoints found for m3.")]);
    mock.script("m4", [Step::rate_limited("0")]);
    mock.script(
        "m5",
        [Step::Raw {
            body: "<html>bad gateway</html>".into(),
        }],
    );
    let server = Server::start(&config(&mock, "")).await;

    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(true));
    let structured = structured(&result);
    assert_eq!(structured["kind"], "none");
    let all = text(&result);
    for cause in [
        "No auth credentials found",
        "Insufficient credits",
        "No endpoints found for m3.",
        "rate-limited",
        "malformed-response",
    ] {
        assert!(all.contains(cause), "missing `{cause}` in: {all}");
    }
    let statuses: Vec<_> = calls(structured, "fan-out")
        .iter()
        .map(|c| c["error"]["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        [
            json!(401),
            json!(402),
            json!(404),
            json!(429),
            serde_json::Value::Null
        ]
    );
    assert!(mock.requests_for(SYNTH).is_empty(), "nothing to synthesize");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_is_retried_after_retry_after_and_then_succeeds() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("fine")]);
    }
    mock.script(
        "m1",
        [Step::rate_limited("0"), Step::answer("fine after waiting")],
    );
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock, "")).await;

    let result = server.ask("ask", "q").await;
    let structured = structured(&result);
    let m1 = calls(structured, "fan-out")
        .into_iter()
        .find(|c| c["model"] == "m1")
        .unwrap()
        .clone();
    assert_eq!(m1["status"], "ok");
    assert_eq!(m1["attempts"], 2);
    assert_eq!(mock.requests_for("m1").len(), 2);
    assert!(
        mock.requests_for(SYNTH)[0]
            .text()
            .contains("fine after waiting")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_synthesizer_falls_back_and_says_so() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("an answer")]);
    }
    mock.script(SYNTH, [Step::status(402, "Insufficient credits")]);
    mock.script(SYNTH2, [Step::answer("merged by the second")]);
    let server = Server::start(&config(&mock, "")).await;

    let result = server.ask("ask", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    assert_eq!(structured["answer"], "merged by the second");
    let notes = structured["notes"].to_string();
    assert!(
        notes.contains("Insufficient credits") && notes.contains("fell back to synth2"),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lone_survivor_is_returned_verbatim_and_never_called_a_synthesis() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::status(500, "upstream exploded")]);
    }
    mock.script("m2", [Step::answer("the only answer")]);
    let server = Server::start(&config(&mock, "")).await;

    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(false));
    let structured = structured(&result);
    assert_eq!(structured["kind"], "single");
    assert_eq!(structured["answer"], "the only answer");
    assert!(
        structured["summary"]
            .as_str()
            .unwrap()
            .contains("not a synthesis")
    );
    assert!(mock.requests_for(SYNTH).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_calls_get_clear_errors_and_the_server_carries_on() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock, "")).await;

    let no_prompt = server.call("ask", json!({})).await;
    assert_eq!(no_prompt.is_error, Some(true));
    assert!(text(&no_prompt).contains("missing `prompt`"));
    let wrong_type = server.call("ask", json!({"prompt": 42})).await;
    assert!(text(&wrong_type).contains("`prompt` must be a string, got a number"));
    let extra = server
        .call("ask", json!({"prompt": "q", "temperature": 2}))
        .await;
    assert!(text(&extra).contains("unknown argument `temperature`"));
    let empty = server.call("ask", json!({"prompt": "   "})).await;
    assert!(text(&empty).contains("the prompt is empty"));
    let huge = server
        .call("ask", json!({"prompt": "x".repeat(300 * 1024)}))
        .await;
    assert!(
        text(&huge).contains("over the limit of 262144"),
        "{}",
        text(&huge)
    );

    let unknown = server
        .client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("nope").with_arguments(Default::default()),
        )
        .await;
    let error = format!(
        "{:?}",
        unknown.expect_err("an unknown tool is a protocol error")
    );
    assert!(error.contains("no tool named `nope`"), "{error}");

    assert!(mock.requests().is_empty(), "no bad call reached a provider");
    let fine = server.ask("ask", "q").await;
    assert_eq!(fine.is_error, Some(false));
}

#[tokio::test(flavor = "multi_thread")]
async fn when_every_synthesizer_fails_the_answers_come_back_with_the_real_errors() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer(&format!("{model}'s answer"))]);
    }
    mock.script(SYNTH, [Step::status(401, "User not found.")]);
    mock.script(SYNTH2, [Step::rate_limited("0")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(
        result.is_error,
        Some(false),
        "the panel's answers are a result"
    );
    let structured = structured(&result);
    assert_eq!(structured["kind"], "unmerged");
    for model in PANEL {
        assert!(
            structured["answer"]
                .as_str()
                .unwrap()
                .contains(&format!("## {model}\n\n{model}'s answer"))
        );
    }
    let headline = structured["notes"][0].as_str().unwrap();
    assert!(
        headline.contains("synth: HTTP error (HTTP 401): User not found."),
        "{headline}"
    );
    assert!(
        headline.contains("synth2: rate limited (HTTP 429)"),
        "{headline}"
    );
    assert!(!headline.to_lowercase().contains("unable to synthesize"));
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_too_long_for_the_synthesizer_are_cut_and_the_result_says_so() {
    let mock = Mock::start().await;
    let long = "word ".repeat(2_000);
    for model in PANEL {
        mock.script(model, [Step::answer(&long)]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    // 9000 tokens: a quarter kept for the reply, the instructions and the
    // question counted; ~19,000 characters of answers.
    let text = config(&mock, "").replace(
        "[models.synth]\ncontext_window = 100000",
        "[models.synth]\ncontext_window = 9000",
    );
    let server = Server::start(&text).await;
    let result = server.ask("ask", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    let notes = structured["notes"].to_string();
    assert!(
        notes.contains("To fit synth's context window, the answers were cut to ")
            && notes.contains(" of 50000 characters."),
        "{notes}"
    );
    let sent = mock.requests_for(SYNTH)[0].text();
    assert!(
        (15_000..9_000 * 3).contains(&sent.len()),
        "the synthesizer got {} characters",
        sent.len()
    );
    assert_eq!(sent.matches("[… cut to fit the context window]").count(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_call_budget_holds_and_refused_calls_are_counted_not_recorded() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("draft"), Step::answer("refined")]);
    }
    mock.script(SYNTH, [Step::answer("never asked")]);
    let extra = r#"
[plugins.mixture]
builtin = "mixture"
settings = { layers = 2 }

[plugins.heavy-planner]
builtin = "heavy-planner"

[pipelines.moa]
description = "moa"
selector = "panel"
prompter = "passthrough"
synthesizer = "mixture"

[pipelines.heavy]
description = "heavy"
selector = "panel"
prompter = "heavy-planner"
synthesizer = "synthesize"
options.agents = { type = "integer", description = "Agents.", minimum = 1, maximum = 16 }
"#;
    let limited = config(&mock, extra).replace(
        "run_timeout = \"20s\"",
        "run_timeout = \"20s\"\nmax_calls_per_run = 8",
    );
    let server = Server::start(&limited).await;

    // Five in the fan-out, three of five in layer 2, then nothing left.
    let result = server.ask("moa", "q").await;
    let result = structured(&result);
    assert_eq!(
        result["calls"].as_array().unwrap().len(),
        8,
        "only calls that were made are recorded"
    );
    assert_eq!(mock.requests().len(), 8);
    assert_eq!(result["kind"], "unmerged");
    let notes = result["notes"].to_string();
    assert!(
        notes.contains("4 chat completions were refused: the run's budget of 8"),
        "{notes}"
    );

    mock.script(
        SYNTH,
        [Step::answer(
            "[\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\"]",
        )],
    );
    // The planner's own call counts: 8 agents no longer fit in what is left.
    let before = mock.requests().len();
    let heavy = server
        .call("heavy", serde_json::json!({"prompt": "q", "agents": 8}))
        .await;
    assert_eq!(heavy.is_error, Some(true));
    assert!(
        text(&heavy).contains("plugin `heavy-planner` returned something unusable: it produced 8 requests, but the run may make only 7 more calls (limits.max_calls_per_run = 8, 1 made already)"),
        "{}",
        text(&heavy)
    );
    assert_eq!(
        mock.requests().len(),
        before + 1,
        "only the planner's call was made"
    );
}
