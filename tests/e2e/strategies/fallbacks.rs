//! Fallback models: a seat whose model fails for good is filled by the
//! next model of its chain, said in the call's record and the notes.

use serde_json::Value;

use crate::support::*;

fn with_fallbacks(mock: &Mock, chains: &[(&str, &str)], extra: &str) -> String {
    let mut text = config(mock, extra);
    for (model, chain) in chains {
        let table = format!("[models.{model}]\ncontext_window = 100000\n");
        text = text.replace(&table, &format!("{table}fallbacks = {chain}\n"));
    }
    text
}

fn seat(result: &Value, id: u64) -> &Value {
    calls(result, "fan-out")
        .into_iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no call {id} in {result}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_seat_whose_model_fails_for_good_is_filled_by_its_fallback() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::status(402, "Insufficient credits")]);
    mock.script("m2", [Step::status(404, "No endpoints found for m2")]);
    mock.script("m3", [Step::answer("three")]);
    mock.script("m4", [Step::status(400, "bad request")]);
    mock.script("m5", [Step::answer("five")]);
    mock.script(
        SYNTH2,
        [Step::answer("from synth2"), Step::answer("again synth2")],
    );
    mock.script(SYNTH, [Step::answer("merged")]);
    let toml = with_fallbacks(
        &mock,
        &[
            ("m1", r#"["synth2"]"#),
            ("m2", r#"["synth2"]"#),
            ("m4", r#"["synth2"]"#),
        ],
        "",
    );
    let server = Server::start(&toml).await;
    let result = server.ask("ask", "What is six times seven?").await;
    assert_eq!(
        result.is_error,
        Some(false),
        "{}\n{}",
        text(&result),
        structured(&result)
    );
    let result = structured(&result);

    let m1 = seat(result, 0);
    assert_eq!(m1["model"], SYNTH2, "{m1}");
    assert_eq!(m1["status"], "ok");
    let from = m1["fallback_from"][0].as_str().unwrap();
    assert!(
        from.starts_with("m1: HTTP 402: the account is out of credit at mock"),
        "{from}"
    );
    let m2 = seat(result, 1);
    assert_eq!(m2["model"], SYNTH2);
    assert!(m2["fallback_from"][0].as_str().unwrap().starts_with("m2: "));
    // A 400 is the request's fault, not the model's: no fallback.
    let m4 = seat(result, 3);
    assert_eq!(m4["model"], "m4");
    assert_eq!(m4["status"], "failed");
    assert!(m4.get("fallback_from").is_none(), "{m4}");

    assert_eq!(result["summary"], "Synthesis of 4 of 5 answers.");
    let notes = result["notes"].to_string();
    assert!(
        notes.contains("m1 failed for good; tried its fallbacks")
            && notes.contains("its seat was filled by synth2"),
        "{notes}"
    );
    assert_eq!(mock.requests_for(SYNTH2).len(), 2);
    assert_eq!(mock.requests_for("m4").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_may_change_a_chain_and_a_bad_chain_is_refused() {
    let mock = Mock::start().await;
    mock.script("m1", (0..3).map(|_| Step::status(503, "down")));
    for model in ["m2", "m3", "m4", "m5"] {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let toml = with_fallbacks(
        &mock,
        &[("m1", r#"["synth2"]"#)],
        "fallbacks = { \"m1\" = [] }\n",
    );
    let server = Server::start(&toml).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    assert_eq!(
        seat(result, 0)["model"],
        "m1",
        "the pipeline turned the chain off"
    );
    assert_eq!(mock.requests_for(SYNTH2).len(), 0);
    drop(server);

    for (chain, expected) in [
        (r#"["nope"]"#, "`nope` is not a model of [models]"),
        (r#"["m1"]"#, "cannot be its own fallback"),
        (r#"["m2", "m2"]"#, "is listed twice"),
    ] {
        let file = write_config(&with_fallbacks(&mock, &[("m1", chain)], ""));
        let output = command(&["check", "--config", file.path.to_str().unwrap()])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("models.\"m1\".fallbacks") && stderr.contains(expected),
            "{chain}: {stderr}"
        );
    }
}
