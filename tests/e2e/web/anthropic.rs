//! Anthropic's Messages API on `serve --http` (issue 52): `/v1/messages`
//! whole and streamed, tools through the panel, `count_tokens`, errors in
//! Anthropic's shape — with plain HTTP for what an SDK hides (the event
//! names, `x-api-key`), and the Anthropic Python SDK, installed at a
//! pinned version by tests/clients/setup.sh.

use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

fn messages_post(server: &HttpServer, key: &str, body: &Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}/v1/messages", server.origin()))
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .json(body)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_answers_as_a_messages_model_with_anthropics_events_and_errors() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::stream("Rayleigh scattering.")]);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let body = json!({
        "model": "ask", "max_tokens": 100, "stream": true,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Why is the sky blue?"}]
    });
    let response = messages_post(&server, TOKEN, &body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(names.first(), Some(&"message_start"), "{text}");
    assert_eq!(names.last(), Some(&"message_stop"), "{text}");
    for name in [
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
    ] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    let deltas: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|e| e["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(deltas, "Rayleigh scattering.");
    // The system prompt reached the panel.
    assert!(mock.requests_for("m1")[0].text().contains("Be brief."));

    // A wrong key and an unknown pipeline: Anthropic's shape and types.
    let refused = messages_post(&server, "wrong", &body).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "authentication_error", "{error}");
    let mut unknown = body.clone();
    unknown["model"] = json!("claude-sonnet-4");
    let missing = messages_post(&server, TOKEN, &unknown)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let error: Value = missing.json().await.unwrap();
    assert_eq!(error["error"]["type"], "not_found_error", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("claude-sonnet-4")
    );
    let mut server_tool = body.clone();
    server_tool["tools"] = json!([{"type": "web_search_20250305", "name": "web_search"}]);
    let refused = messages_post(&server, TOKEN, &server_tool)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("server tool"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_sdk_is_a_client_tools_included() {
    let clients = crate::mcp::clients::clients();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let mock = Mock::start().await;
    let taking: Vec<(&str, &[&str])> = PANEL
        .iter()
        .chain([&SYNTH])
        .map(|m| (*m, &["tools"][..]))
        .collect();
    catalog_taking(&mock, &taking);
    for model in PANEL {
        mock.script(
            model,
            [
                Step::answer("ok"),
                Step::answer("ok"),
                Step::tool_call("get_weather", r#"{"city": "Oslo"}"#),
                Step::answer("Sunny."),
            ],
        );
    }
    mock.script(
        SYNTH,
        [
            Step::stream("Rayleigh scattering."),
            Step::stream("Longer paths through air."),
            Step::stream("It is sunny in Oslo."),
        ],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let seen = crate::web::openai::clients::client_output(
        &clients.join("venv/bin/python"),
        &[
            root.join("tests/clients/anthropic_client.py")
                .to_str()
                .unwrap(),
            &server.origin(),
            TOKEN,
        ],
        &[],
    )
    .await;
    eprintln!("anthropic: {seen}");
    assert_eq!(seen["whole"]["text"], "Rayleigh scattering.");
    assert_eq!(seen["whole"]["stop"], "end_turn");
    assert!(seen["whole"]["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(seen["stream"]["text"], "Longer paths through air.");
    assert_eq!(seen["stream"]["final"], "Longer paths through air.");
    assert!(seen["stream"]["pieces"].as_u64().unwrap() > 1, "{seen}");
    assert_eq!(seen["tools"]["stop"], "tool_use");
    assert_eq!(
        seen["tools"]["uses"],
        json!([{"name": "get_weather", "input": {"city": "Oslo"}}])
    );
    assert_eq!(seen["tools"]["answer"], "It is sunny in Oslo.");
    assert!(seen["count"].as_u64().unwrap() >= 100, "{seen}");
    assert_eq!(
        seen["not_found"],
        json!({"status": 404, "type": "not_found_error"})
    );
    assert_eq!(
        seen["wrong_key"],
        json!({"status": 401, "type": "authentication_error"})
    );
    // The tool result reached every panel member.
    for model in PANEL {
        let last = mock.requests_for(model).pop().unwrap();
        assert!(last.text().contains("sunny in Oslo"), "{model}");
    }
}
