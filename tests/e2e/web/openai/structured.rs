//! Structured outputs at `/v1` (issue 52): a `response_format` (or the
//! Responses API's `text.format`) is asked of the panel calls that put the
//! question and of the merge, the answer that comes back always parses and
//! matches, a vote counts equal JSON as one answer, and an answer that
//! cannot be made to match is a 422 naming the path.

use serde_json::{Value, json};

use super::{completed, error_of, events, post};
use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

fn weather_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "array", "items": {"type": "integer", "minimum": 0}}
        },
        "required": ["city", "days"],
        "additionalProperties": false
    })
}

fn asking_weather(stream: bool) -> Value {
    json!({
        "model": "ask",
        "stream": stream,
        "messages": [{"role": "user", "content": "Which days will be dry in Oslo?"}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "weather", "strict": true, "schema": weather_schema()}
        }
    })
}

fn matches_weather(text: &str) {
    let answer: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(
        answer["city"].is_string() && answer["days"].is_array(),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_is_asked_of_the_panel_and_the_merge_and_the_answer_parses() {
    let mock = Mock::start().await;
    // Three panel models take structured outputs, two take nothing; the
    // merge's model takes them.
    catalog_taking(
        &mock,
        &[
            ("m1", &["structured_outputs"]),
            ("m2", &["structured_outputs"]),
            ("m3", &["response_format"]),
            (SYNTH, &["structured_outputs"]),
        ],
    );
    for model in PANEL {
        mock.script(model, [Step::answer(r#"{"days": [1, 2], "city": "Oslo"}"#)]);
    }
    // A merge in a code fence, whole then streamed: the fence is taken off.
    mock.script(
        SYNTH,
        [
            Step::answer("```json\n{\"city\": \"Oslo\", \"days\": [1, 2]}\n```"),
            Step::stream("{\"city\": \"Oslo\", \"days\": [1, 2, 3]}"),
        ],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let completion = completed(&server, &asking_weather(false)).await;
    let content = completion["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    assert_eq!(content, "{\"city\": \"Oslo\", \"days\": [1, 2]}");
    assert!(
        completion["chorus"].get("not_applied").is_none(),
        "response_format is applied: {completion}"
    );
    let notes = completion["chorus"]["notes"].to_string();
    assert!(
        notes.contains("m4 takes no response format") && !notes.contains("m3 takes no"),
        "{notes}"
    );

    // What each call was asked: the schema itself where the model takes
    // it, JSON mode where it takes only that, and always in words.
    let sent = |model: &str| mock.requests_for(model)[0].body.clone();
    for model in ["m1", "m2"] {
        assert_eq!(
            sent(model)["response_format"]["type"],
            "json_schema",
            "{model}"
        );
        assert_eq!(
            sent(model)["response_format"]["json_schema"]["name"],
            "weather"
        );
    }
    assert_eq!(
        sent("m3")["response_format"],
        json!({"type": "json_object"})
    );
    for model in ["m4", "m5"] {
        assert!(sent(model).get("response_format").is_none(), "{model}");
    }
    for model in PANEL.iter().chain([&SYNTH]) {
        let system = &sent(model)["messages"][0];
        assert_eq!(system["role"], "system", "{model}");
        assert!(
            system["content"]
                .as_str()
                .unwrap()
                .contains("JSON Schema `weather`"),
            "{model}: {system}"
        );
    }
    assert_eq!(sent(SYNTH)["response_format"]["type"], "json_schema");
    // The merge saw the panel's answers as canonical JSON.
    assert!(
        mock.requests_for(SYNTH)[0]
            .text()
            .contains(r#"{"city":"Oslo","days":[1,2]}"#)
    );

    // Streamed: the answer is checked before it goes out, then sent whole.
    let response = post(
        &server,
        "/v1/chat/completions",
        Some(TOKEN),
        &asking_weather(true),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let events = events(&response.text().await.unwrap());
    let content: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    matches_weather(&content);
    assert_eq!(content, "{\"city\": \"Oslo\", \"days\": [1, 2, 3]}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_that_does_not_match_is_repaired_once_else_a_422_names_the_path() {
    let mock = Mock::start().await;
    // Answers that differ, so the synthesizer merges them.
    for (i, model) in PANEL.iter().enumerate() {
        mock.script(model, [Step::answer(&format!("Dry on day {i}."))]);
    }
    mock.script(
        SYNTH,
        [
            // Run 1: prose, then a repair that matches.
            Step::answer("Oslo will be dry on days 1 and 2."),
            Step::answer(r#"{"city": "Oslo", "days": [1, 2]}"#),
            // Run 2: prose, then a repair that still does not match.
            Step::answer("Oslo will be dry on days 1 and 2."),
            Step::answer(r#"{"city": "Oslo", "days": [1, -2]}"#),
        ],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let repaired = post(
        &server,
        "/v1/chat/completions",
        Some(TOKEN),
        &asking_weather(false),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(repaired.status(), 200);
    let repaired: Value = repaired.json().await.unwrap();
    let content = repaired["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    matches_weather(content);
    let notes = repaired["chorus"]["notes"].to_string();
    assert!(
        notes.contains("did not match the JSON Schema `weather`") && notes.contains("repaired it"),
        "{notes}"
    );
    // The repair was shown the answer, what does not match, and the schema.
    let repair = mock.requests_for(SYNTH)[1].clone();
    assert!(repair.text().contains("Oslo will be dry on days 1 and 2."));
    assert!(
        repair.text().contains("it is not JSON"),
        "{}",
        repair.text()
    );
    // No catalog says the model takes structured outputs: the schema is
    // asked in words only.
    assert!(repair.body.get("response_format").is_none());
    assert!(
        repair.body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON Schema `weather`")
    );

    let failed = post(
        &server,
        "/v1/chat/completions",
        Some(TOKEN),
        &asking_weather(false),
    )
    .send()
    .await
    .unwrap();
    let (status, error) = error_of(failed).await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["code"], "answer_format_mismatch");
    assert_eq!(error["param"], "response_format");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("at `/days/1`") && message.contains("minimum"),
        "{message}"
    );
    assert!(message.contains("asked once to repair it"), "{message}");
    assert_eq!(mock.requests_for(SYNTH).len(), 4, "one repair per run");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vote_counts_equal_json_as_one_answer() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer(r#"{"city": "Oslo", "days": [1]}"#)]);
    mock.script(
        "m2",
        [Step::answer(
            "```json\n{\"days\":[1],\"city\":\"Oslo\"}\n```",
        )],
    );
    mock.script(
        "m3",
        [Step::answer("{\n  \"days\": [1],\n  \"city\": \"Oslo\"\n}")],
    );
    mock.script("m4", [Step::answer(r#"{"city": "oslo", "days": [1]}"#)]);
    mock.script("m5", [Step::answer(r#"{"city": "Bergen", "days": [1]}"#)]);
    let extra = "\n[plugins.vote]\nbuiltin = \"vote\"\n\n[pipelines.vote]\ndescription = \"vote\"\nselector = \"panel\"\nprompter = \"passthrough\"\nsynthesizer = \"vote\"\n";
    let config = write_config(&config(&mock, extra));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let mut body = asking_weather(false);
    body["model"] = json!("vote");
    let completion = completed(&server, &body).await;
    assert_eq!(completion["chorus"]["kind"], "vote");
    assert_eq!(
        completion["choices"][0]["message"]["content"], r#"{"city":"Oslo","days":[1]}"#,
        "three equal answers, written three ways, are one; a city's case is not a spelling"
    );
    let notes = completion["chorus"]["notes"].to_string();
    assert!(notes.contains("3 of 5"), "{notes}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_responses_api_takes_text_format_and_json_mode_takes_any_object() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer(r#"{"ok": true}"#)]);
    }
    mock.script(
        SYNTH,
        [
            Step::answer(r#"{"city": "Oslo", "days": []}"#),
            Step::answer(r#"{"anything": ["goes"]}"#),
        ],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let body = json!({
        "model": "ask",
        "input": "Which days will be dry in Oslo?",
        "text": {"format": {"type": "json_schema", "name": "weather", "strict": true, "schema": weather_schema()}}
    });
    let response = post(&server, "/v1/responses", Some(TOKEN), &body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response: Value = response.json().await.unwrap();
    let text = response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    matches_weather(text);
    assert_eq!(
        mock.requests_for(SYNTH)[0].body["messages"][0]["role"],
        "system"
    );

    let mut json_mode = super::ask("Anything, as JSON.");
    json_mode["response_format"] = json!({"type": "json_object"});
    let completion = completed(&server, &json_mode).await;
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        r#"{"anything": ["goes"]}"#
    );
    let system = mock.requests_for(SYNTH)[1].body["messages"][0]["content"].clone();
    assert!(
        system.as_str().unwrap().contains("one JSON object"),
        "JSON mode needs the word JSON in the messages: {system}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_chorus_cannot_check_is_refused_before_any_model_is_asked() {
    let mock = Mock::start().await;
    crate::web::teams::answering(&mock);
    // Anything that connects here would be chorus fetching a `$ref`.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let fetched = format!("http://{}/schema.json", listener.local_addr().unwrap());
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let with_format = |format: Value| {
        let mut body = super::ask("q");
        body["response_format"] = format;
        body
    };
    let refused = [
        (
            with_format(
                json!({"type": "json_schema", "json_schema": {"name": "r", "schema": {"$ref": fetched}}}),
            ),
            "response_format.json_schema.schema",
            "chorus fetches none",
        ),
        (
            with_format(
                json!({"type": "json_schema", "json_schema": {"name": "big", "schema": {
                    "type": "object", "description": "x".repeat(200 * 1024)
                }}}),
            ),
            "response_format.json_schema.schema",
            "over chorus's limit",
        ),
        (
            with_format(
                json!({"type": "json_schema", "json_schema": {"name": "has space", "schema": {}}}),
            ),
            "response_format.json_schema",
            "letters, digits",
        ),
        (
            with_format(json!({"type": "regex", "pattern": ".*"})),
            "response_format",
            "\"regex\"",
        ),
    ];
    for (body, param, says) in refused {
        let response = post(&server, "/v1/chat/completions", Some(TOKEN), &body)
            .send()
            .await
            .unwrap();
        let (status, error) = error_of(response).await;
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["param"], param, "{error}");
        assert!(error["message"].as_str().unwrap().contains(says), "{error}");
    }
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a $ref was fetched"
    );
    assert!(mock.requests().is_empty(), "no model was asked");
}
