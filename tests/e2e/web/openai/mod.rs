//! chorus as a model (issue 40): `/v1/models`, `/v1/chat/completions`
//! (whole and streamed) and `/v1/responses` on `serve --http`, with plain
//! HTTP for what an SDK hides (statuses, headers, a dropped connection),
//! and real clients — the OpenAI SDKs, LiteLLM, the `llm` CLI, the Agents
//! SDK — in [`clients`].

pub(crate) mod clients;
mod hostile;
mod live;
mod structured;
mod tool_strategies;
mod tools;

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;
use crate::web::teams::{ALICE, BOB, answering, client, team_in};

fn post(
    server: &HttpServer,
    path: &str,
    token: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let request = reqwest::Client::new()
        .post(format!("{}{path}", server.origin()))
        .json(body);
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}

/// The answer to a chat completion request `body`, which must be a 200.
async fn completed(server: &HttpServer, body: &Value) -> Value {
    let response = post(server, "/v1/chat/completions", Some(TOKEN), body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn ask(question: &str) -> Value {
    json!({"model": "ask", "messages": [{"role": "user", "content": question}]})
}

/// The `data:` payloads of an event stream, `[DONE]` as a string.
fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.into())))
        .collect()
}

async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body: Value = response
        .json()
        .await
        .expect("an error in OpenAI's shape is JSON");
    assert!(
        body["error"]["message"].is_string() && body["error"]["type"].is_string(),
        "{body}"
    );
    (status, body["error"].clone())
}

/// The response to a POST that declares `length` bytes of body and sends
/// none of them.
async fn declared_only(server: &HttpServer, token: &str, length: usize) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = server.origin().trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut reply))
        .await
        .expect("answered without the body")
        .unwrap();
    let reply = String::from_utf8_lossy(&reply);
    let status = reply[9..12].parse().unwrap();
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
    let body: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{reply}"));
    (status, body["error"].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_answers_as_a_model_with_its_conversation_usage_and_run_id() {
    let mock = Mock::start().await;
    answering(&mock);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let models: Value = reqwest::Client::new()
        .get(format!("{}/v1/models", server.origin()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "ask", "{models}");
    assert_eq!(models["data"][0]["owned_by"], "chorus");
    let alias = reqwest::Client::new()
        .get(format!("{}/v1/models/chorus/ask", server.origin()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(alias.status(), 200);

    let body = json!({
        "model": "chorus/ask",
        "messages": [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "What is the capital of Italy?"},
            {"role": "assistant", "content": "Rome."},
            {"role": "user", "content": [{"type": "text", "text": "And of Spain?"}]}
        ],
        "temperature": 0.3,
        "user": "end-user-7",
    });
    let response = post(&server, "/v1/chat/completions", Some(TOKEN), &body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let run_id = response.headers()["x-chorus-run-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let completion: Value = response.json().await.unwrap();
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["id"], format!("chatcmpl-{run_id}"));
    assert_eq!(completion["model"], "ask");
    assert_eq!(completion["choices"][0]["message"]["content"], "merged");
    assert_eq!(completion["choices"][0]["finish_reason"], "stop");
    assert_eq!(completion["chorus"]["kind"], "synthesis");
    assert_eq!(completion["chorus"]["panel"]["answered"], 5);
    assert_eq!(completion["chorus"]["not_applied"], json!(["temperature"]));
    let usage = &completion["usage"];
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(
            usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
        )
    );
    assert!(
        completion["chorus"]["notes"]
            .to_string()
            .contains("end-user-7")
    );

    // Every panel call saw the instructions and the earlier turn, then the question.
    for model in PANEL {
        let request = &mock.requests_for(model)[0].body;
        let messages: Vec<(&str, &str)> = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap(),
                    m["content"].as_str().unwrap_or(""),
                )
            })
            .collect();
        let at = |text: &str| {
            messages
                .iter()
                .position(|(_, c)| c.contains(text))
                .unwrap_or_else(|| panic!("{text} not in {messages:?}"))
        };
        assert!(at("Answer in French.") < at("capital of Italy"));
        assert!(at("capital of Italy") < at("Rome.") && at("Rome.") < at("And of Spain?"));
        assert_eq!(messages[at("Answer in French.")].0, "system");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_answer_says_the_panel_progress_then_the_answer_and_its_usage() {
    let mock = Mock::start().await;
    for (i, model) in PANEL.iter().enumerate() {
        mock.script(model, [Step::answer_after(100 * i as u64, "ok")]);
    }
    mock.script(SYNTH, [Step::stream("The merged answer.")]);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let mut body = ask("q");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let response = post(&server, "/v1/chat/completions", Some(TOKEN), &body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let run_id = response.headers()["x-chorus-run-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let events = events(&response.text().await.unwrap());
    assert_eq!(events.last().unwrap(), "[DONE]");
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        events
            .iter()
            .filter(|e| e.is_object())
            .all(|e| e["id"] == format!("chatcmpl-{run_id}"))
    );
    let reasoning: Vec<&str> = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["reasoning"].as_str())
        .collect();
    assert!(
        reasoning.iter().any(|r| r.contains("5 of 5 answered")),
        "{reasoning:?}"
    );
    let content: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "The merged answer.");
    let finish = events
        .iter()
        .find(|e| e["choices"][0]["finish_reason"] == "stop")
        .unwrap();
    assert_eq!(finish["chorus"]["kind"], "synthesis");
    assert_eq!(finish["chorus"]["streamed"], "live");
    let usage = &events[events.len() - 2];
    assert_eq!(usage["choices"], json!([]));
    assert!(
        usage["usage"]["completion_tokens"].as_u64().unwrap() > 0,
        "{usage}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn what_chorus_cannot_do_or_will_not_allow_is_refused_in_openais_shape() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let clients = client(
        "alice",
        ALICE,
        "max_runs_per_minute = 1\npipelines = [\"ask\"]",
    ) + &client("bob", BOB, "max_usd_per_day = 0.000001");
    let store = format!("path = \"{}\"", dir.path().join("runs.sqlite3").display());
    // Attachments of 1 MiB at most: a request body of more than 4 MiB is refused unread.
    let config = team_in(&mock, &clients, &store).replace(
        "max_concurrent_runs = 64",
        "max_concurrent_runs = 64\nmax_attachment_bytes = 1048576\nmax_attachments_bytes = 1048576",
    );
    let config = write_config(&config);
    let server = HttpServer::start(&config.path, None, &[]).await;
    let chat = "/v1/chat/completions";

    let (status, error) = error_of(
        post(&server, chat, Some("wrong-token"), &ask("q"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("wrong or revoked"),
        "{error}"
    );
    let (status, _) = error_of(post(&server, chat, None, &ask("q")).send().await.unwrap()).await;
    assert_eq!(status, 401);

    for (key, value) in [
        ("n", json!(3)),
        ("functions", json!([{"name": "f", "parameters": {}}])),
        ("logprobs", json!(true)),
    ] {
        let mut body = ask("q");
        body[key] = value;
        let (status, error) = error_of(
            post(&server, chat, Some(ALICE), &body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 400, "{key}");
        assert_eq!(error["param"], key);
    }
    let mut unknown = ask("q");
    unknown["model"] = json!("gpt-4o");
    let (status, error) = error_of(
        post(&server, chat, Some(ALICE), &unknown)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (404, Some("model_not_found"))
    );
    let mut not_granted = ask("q");
    not_granted["model"] = json!("cheap");
    let (status, error) = error_of(
        post(&server, chat, Some(ALICE), &not_granted)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("may not run pipeline `cheap`")
    );
    // Asked whether it exists, a pipeline the client may not run is one it
    // does not see: the same 404 as for one that does not exist.
    for model in ["cheap", "gpt-4o"] {
        let (status, error) = error_of(
            reqwest::Client::new()
                .get(format!("{}/v1/models/{model}", server.origin()))
                .bearer_auth(ALICE)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status, error["code"].as_str()),
            (404, Some("model_not_found")),
            "{model}"
        );
        assert!(
            !error["message"].as_str().unwrap().contains("cheap,"),
            "{error}"
        );
    }

    // A body over the bound is refused from its length, before it is sent.
    let (status, error) = declared_only(&server, ALICE, 8 << 20).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (413, Some("request_too_large")),
        "{error}"
    );
    assert!(
        mock.requests_for(SYNTH).is_empty(),
        "nothing refused reached a model"
    );

    let first = post(&server, chat, Some(ALICE), &ask("q"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let second = post(&server, chat, Some(ALICE), &ask("q"))
        .send()
        .await
        .unwrap();
    let retry_after: u64 = second.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after));
    let (status, error) = error_of(second).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (429, Some("rate_limit_exceeded"))
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("max_runs_per_minute"),
        "the gate's own words: {error}"
    );

    let broke = post(&server, chat, Some(BOB), &ask("q"))
        .send()
        .await
        .unwrap();
    assert_eq!(broke.headers()["x-should-retry"], "false");
    let (status, error) = error_of(broke).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (429, Some("insufficient_quota")),
        "{error}"
    );
    assert_eq!(
        mock.requests_for(SYNTH).len(),
        1,
        "only alice's one run asked a model"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_with_no_answer_is_a_503_naming_each_models_failure() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::status(400, &format!("{model} refuses"))]);
    }
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let response = post(&server, "/v1/chat/completions", None, &ask("q"))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (503, Some("all_models_failed"))
    );
    let message = error["message"].as_str().unwrap();
    for model in PANEL {
        assert!(message.contains(&format!("{model} refuses")), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_hangs_up_stops_the_run_and_its_upstream_requests() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, None, &[]).await;
    for stream in [true, false] {
        let mut body = ask("q");
        body["stream"] = json!(stream);
        let request = post(&server, "/v1/chat/completions", None, &body).send();
        // The client reads until it hangs up: a streamed answer's headers come
        // at once, so the hang-up must drop the body being read, not only the
        // request being sent.
        let pending = tokio::spawn(async move { request.await?.bytes().await });
        assert!(
            mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == PANEL.len())
                .await,
            "the panel was asked"
        );
        pending.abort();
        assert!(
            pending.await.unwrap_err().is_cancelled(),
            "the client hung up"
        );
        assert!(
            mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 0)
                .await,
            "every upstream request was dropped with the client (stream: {stream}); {} still open",
            mock.in_flight()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_responses_api_answers_whole_and_streamed() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok"), Step::answer("ok")]);
    }
    mock.script(
        SYNTH,
        [Step::answer("merged"), Step::answer("merged again")],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let body = json!({"model": "ask", "instructions": "Be brief.", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Why is the sky blue?"}]}]});
    let response: Value = post(&server, "/v1/responses", None, &body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["output"][0]["content"][0]["text"], "merged");
    assert!(response["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let text = post(&server, "/v1/responses", None, &streamed)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(names.first(), Some(&"response.created"));
    assert_eq!(names.last(), Some(&"response.completed"));
    let deltas: String = events(&text)
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(deltas, "merged again");
}
