//! Tool calls through a panel at `/v1/chat/completions` (issue 52): the
//! panel gets the caller's tools (as far as each model takes them), its
//! majority's call is the answer, a split is decided by the synthesizer
//! model, arguments that do not match are repaired once (else a 422
//! naming the tool), and the results sent back reach every member.

use serde_json::{Value, json};

use super::{completed, error_of, events, post};
use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "The weather in a city today.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": false
        }
    }})
}

fn asking(messages: Value, stream: bool) -> Value {
    json!({"model": "ask", "stream": stream, "messages": messages, "tools": [weather_tool()]})
}

/// A panel split three ways: m1, m2 and m3 each call `get_weather` for
/// one of `cities`, m4 and m5 answer in text.
fn split_panel(mock: &Mock, cities: [&str; 3]) {
    taking_tools(mock);
    for (model, city) in ["m1", "m2", "m3"].into_iter().zip(cities) {
        mock.script(
            model,
            [Step::tool_call(
                "get_weather",
                &format!(r#"{{"city": "{city}"}}"#),
            )],
        );
    }
    for model in ["m4", "m5"] {
        mock.script(model, [Step::answer("No idea.")]);
    }
}

fn question() -> Value {
    json!([{"role": "user", "content": "What is the weather in Oslo?"}])
}

fn taking_tools(mock: &Mock) {
    catalog_taking(
        mock,
        &[
            ("m1", &["tools"]),
            ("m2", &["tools"]),
            ("m3", &["tools"]),
            ("m4", &["tools"]),
            (SYNTH, &["tools"]),
        ],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_panels_majority_call_is_the_answer_and_its_result_reaches_every_member() {
    let mock = Mock::start().await;
    taking_tools(&mock);
    // Three equal calls written three ways, one other call, one text.
    let oslo = [
        r#"{"city": "Oslo"}"#,
        r#"{"city":"Oslo"}"#,
        "{\n \"city\": \"Oslo\"\n}",
    ];
    for (model, arguments) in ["m1", "m2", "m3"].iter().zip(oslo) {
        mock.script(
            model,
            [
                Step::tool_call("get_weather", arguments),
                Step::tool_call("get_weather", arguments),
                Step::answer("Sunny in Oslo."),
            ],
        );
    }
    mock.script(
        "m4",
        [
            Step::tool_call("get_weather", r#"{"city": "Bergen"}"#),
            Step::tool_call("get_weather", r#"{"city": "Bergen"}"#),
            Step::answer("Sunny."),
        ],
    );
    mock.script("m5", [Step::answer("I cannot look the weather up.")]);
    mock.script(SYNTH, [Step::answer("It is sunny in Oslo, 21 °C.")]);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let completion = completed(&server, &asking(question(), false)).await;
    let choice = &completion["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{completion}");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Oslo"}));
    assert_eq!(completion["chorus"]["kind"], "tool-call");
    let notes = completion["chorus"]["notes"].to_string();
    assert!(
        notes.contains("3 of 4 proposals agree (m1, m2, m3)"),
        "{notes}"
    );
    assert!(
        notes.contains("The synthesizer `synthesize` left the choice of call to chorus."),
        "{notes}"
    );
    assert!(
        notes.contains("m5 takes no tools (its catalog lists none)"),
        "{notes}"
    );
    // Each model that takes tools got them; the one that does not, none.
    let sent = |model: &str, i: usize| mock.requests_for(model)[i].body.clone();
    assert_eq!(sent("m1", 0)["tools"][0]["function"]["name"], "get_weather");
    assert!(sent("m5", 0).get("tools").is_none());
    assert!(mock.requests_for(SYNTH).is_empty(), "nothing to merge");

    // Streamed: the same call, as a delta, then `tool_calls`.
    let response = post(
        &server,
        "/v1/chat/completions",
        Some(TOKEN),
        &asking(question(), true),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let events = events(&response.text().await.unwrap());
    let delta = events
        .iter()
        .find_map(|e| e["choices"][0]["delta"]["tool_calls"].as_array())
        .expect("a tool_calls delta");
    assert_eq!(delta[0]["index"], 0);
    assert_eq!(delta[0]["function"]["name"], "get_weather");
    assert!(
        events
            .iter()
            .any(|e| e["choices"][0]["finish_reason"] == "tool_calls")
    );

    // The result goes back; every member sees it, and the panel answers.
    let messages = json!([
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21 °C"}
    ]);
    let completion = completed(&server, &asking(messages, false)).await;
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        "It is sunny in Oslo, 21 °C."
    );
    assert_eq!(completion["choices"][0]["finish_reason"], "stop");
    let m1 = sent("m1", 2);
    let last = m1["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool", "{m1}");
    assert_eq!(last["tool_call_id"], call["id"]);
    assert_eq!(last["content"], "sunny, 21 °C");
    let m5 = mock.requests_for("m5").pop().unwrap();
    assert!(
        m5.text().contains("sunny, 21 °C") && m5.body.get("tools").is_none(),
        "a model that takes no tools sees the result in words: {}",
        m5.body
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_split_panel_is_decided_by_the_synthesizer_and_bad_arguments_are_repaired_once() {
    let mock = Mock::start().await;
    split_panel(&mock, ["Oslo", "Bergen", "Oslo, Norway"]);
    mock.script(
        SYNTH,
        [
            // Run 1: a choice whose arguments do not match, then a repair.
            Step::tool_call("get_weather", r#"{"town": "Oslo"}"#),
            Step::tool_call("get_weather", r#"{"city": "Oslo"}"#),
            // Run 2: a choice that does not match, and a repair that
            // does not either.
            Step::tool_call("get_weather", r#"{"town": "Oslo"}"#),
            Step::tool_call("get_weather", "{\"city\": 7"),
        ],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let completion = completed(&server, &asking(question(), false)).await;
    let call = &completion["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], r#"{"city": "Oslo"}"#);
    let notes = completion["chorus"]["notes"].to_string();
    assert!(notes.contains("synth chose among them"), "{notes}");
    assert!(notes.contains("synth corrected them"), "{notes}");
    // The synthesizer saw every proposal, and had to call.
    let choosing = &mock.requests_for(SYNTH)[0];
    for city in ["Oslo", "Bergen", "Oslo, Norway"] {
        assert!(choosing.text().contains(city), "{}", choosing.text());
    }
    assert_eq!(choosing.body["tool_choice"], "required");
    let repair = &mock.requests_for(SYNTH)[1];
    assert_eq!(
        repair.body["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert!(repair.text().contains("town"), "{}", repair.text());

    let response = post(
        &server,
        "/v1/chat/completions",
        Some(TOKEN),
        &asking(question(), false),
    )
    .send()
    .await
    .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["code"], "tool_call_mismatch");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("`get_weather`") && message.contains("not JSON"),
        "{message}"
    );
    assert_eq!(mock.requests_for(SYNTH).len(), 4, "one repair per run");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_exchange_that_does_not_add_up_is_refused() {
    let mock = Mock::start().await;
    crate::web::teams::answering(&mock);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let refused = [
        (
            json!([{"role": "user", "content": "q"},
                   {"role": "tool", "tool_call_id": "call_never_made", "content": "x"}]),
            "messages[1]",
            "no assistant message before it made",
        ),
        (
            json!([{"role": "user", "content": "q"},
                   {"role": "assistant", "content": null, "tool_calls": [
                       {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}]),
            "messages[1]",
            "results of the tool calls",
        ),
    ];
    for (messages, param, says) in refused {
        let response = post(
            &server,
            "/v1/chat/completions",
            Some(TOKEN),
            &asking(messages, false),
        )
        .send()
        .await
        .unwrap();
        let (status, error) = error_of(response).await;
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["param"], param, "{error}");
        assert!(error["message"].as_str().unwrap().contains(says), "{error}");
    }
    let mut named = asking(question(), false);
    named["tool_choice"] = json!({"type": "function", "function": {"name": "send_email"}});
    let response = post(&server, "/v1/chat/completions", Some(TOKEN), &named)
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(
        (status, error["param"].as_str()),
        (400, Some("tool_choice"))
    );
    assert!(mock.requests().is_empty(), "no model was asked");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_of_a_tool_not_offered_is_no_vote() {
    let mock = Mock::start().await;
    taking_tools(&mock);
    // Two models call a tool the caller never offered (a model's output
    // is not the caller's word); the two that call what was offered win.
    for model in ["m1", "m2"] {
        mock.script(model, [Step::tool_call("delete_everything", "{}")]);
    }
    for model in ["m3", "m4"] {
        mock.script(
            model,
            [Step::tool_call("get_weather", r#"{"city": "Oslo"}"#)],
        );
    }
    mock.script(
        "m5",
        [Step::tool_call("get_weather", r#"{"city": "Oslo"}"#)],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let completion = completed(&server, &asking(question(), false)).await;
    let calls = completion["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let notes = completion["chorus"]["notes"].to_string();
    assert!(
        notes.contains("Not counted: m1 called `delete_everything`, which was not offered"),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_responses_api_answers_with_function_calls_whole_and_streamed() {
    let mock = Mock::start().await;
    taking_tools(&mock);
    for model in PANEL {
        mock.script(
            model,
            [
                Step::tool_call("get_weather", r#"{"city": "Oslo"}"#),
                Step::tool_call("get_weather", r#"{"city": "Oslo"}"#),
                Step::answer("Sunny."),
            ],
        );
    }
    mock.script(SYNTH, [Step::answer("Sunny in Oslo.")]);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let tool = json!({"type": "function", "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}});
    let body = |stream: bool, input: Value| json!({"model": "ask", "stream": stream, "input": input, "tools": [tool]});
    let ask = json!("What is the weather in Oslo?");
    let response: Value = post(
        &server,
        "/v1/responses",
        Some(TOKEN),
        &body(false, ask.clone()),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let call = response["output"][0].clone();
    assert_eq!(call["type"], "function_call", "{response}");
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["arguments"], r#"{"city": "Oslo"}"#);

    let streamed = post(&server, "/v1/responses", Some(TOKEN), &body(true, ask))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = events(&streamed);
    let done = events
        .iter()
        .find(|e| e["type"] == "response.function_call_arguments.done")
        .expect("the arguments, done");
    assert_eq!(done["arguments"], r#"{"city": "Oslo"}"#);
    let completed = events
        .iter()
        .find(|e| e["type"] == "response.completed")
        .unwrap();
    assert_eq!(completed["response"]["output"][0]["type"], "function_call");

    // The output goes back as input items; the panel answers in text.
    let input = json!([
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"type": "function_call", "call_id": call["call_id"], "name": "get_weather", "arguments": call["arguments"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 21 C"}
    ]);
    let response: Value = post(&server, "/v1/responses", Some(TOKEN), &body(false, input))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(response["output_text"], "Sunny in Oslo.", "{response}");
    let last = mock.requests_for("m1").pop().unwrap().body;
    let last = last["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["content"], "sunny, 21 C");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chooser_that_calls_a_tool_not_offered_gives_way_to_the_first_proposal() {
    let mock = Mock::start().await;
    split_panel(&mock, ["Oslo", "Bergen", "Tromso"]);
    mock.script(SYNTH, [Step::tool_call("delete_everything", "{}")]);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let completion = completed(&server, &asking(question(), false)).await;
    let call = &completion["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], r#"{"city": "Oslo"}"#);
    let notes = completion["chorus"]["notes"].to_string();
    assert!(
        notes.contains("could not (it called `delete_everything`, which was not offered)"),
        "{notes}"
    );
}
