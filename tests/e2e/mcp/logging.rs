//! MCP logging as a client meets it: `logging` is declared,
//! `logging/setLevel` answers `{}`, and a run's trouble (a model's attempt
//! failing and retried) arrives as `notifications/message` before the
//! call's response — at the level the client set, never below it, never
//! with the API key. Over stdio per session (a reload is logged too); over
//! HTTP per client, or per request with `_meta`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN, messages, tool_call};
use crate::support::*;

/// m1 fails its first attempt (503, retried), then everyone answers.
fn one_retry(mock: &Mock) {
    mock.script(
        "m1",
        [Step::status(503, "upstream overloaded"), Step::answer("ok")],
    );
    for model in &PANEL[1..] {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
}

fn set_level(id: u64, level: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "logging/setLevel", "params": {"level": level}})
}

fn log_messages(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| {
            let level = m["params"]["level"].as_str().unwrap_or_default().to_owned();
            (level, m["params"]["data"].to_string())
        })
        .collect()
}

fn retried(log: &[(String, String)]) -> bool {
    log.iter()
        .any(|(level, text)| level == "warning" && text.contains("m1") && text.contains("retrying"))
}

fn no_key(log: &[(String, String)]) {
    for (_, text) in log {
        assert!(!text.contains(CANARY), "the key in a log message: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn over_stdio_a_retry_is_logged_at_warning_and_not_at_error() {
    let mock = Mock::start().await;
    one_retry(&mock);
    let mut raw = Raw::start(&config(&mock, "")).await;
    let init = raw.initialize(json!({})).await;
    assert!(
        init["result"]["capabilities"]["logging"].is_object(),
        "{init}"
    );

    raw.send(set_level(1, "warning")).await;
    let (set, _) = raw.response(&json!(1)).await;
    assert_eq!(set["result"], json!({}), "{set}");
    raw.send(tool_call(2, "ask", "one retry, please")).await;
    let (result, before) = raw.response(&json!(2)).await;
    assert_eq!(
        result["result"]["structuredContent"]["answer"], "merged",
        "{result}"
    );
    let log = log_messages(&before);
    assert!(retried(&log), "{log:?}");
    assert!(
        log.iter()
            .all(|(level, _)| level != "debug" && level != "info"),
        "below the level set: {log:?}"
    );
    no_key(&log);

    one_retry(&mock);
    raw.send(set_level(3, "error")).await;
    let (set, _) = raw.response(&json!(3)).await;
    assert_eq!(set["result"], json!({}), "{set}");
    raw.send(tool_call(4, "ask", "one retry again")).await;
    let (result, before) = raw.response(&json!(4)).await;
    assert_eq!(result["result"]["structuredContent"]["answer"], "merged");
    let log = log_messages(&before);
    assert!(log.is_empty(), "nothing at error happened: {log:?}");
    assert_eq!(mock.requests_for("m1").len(), 4, "each run retried m1");

    // A reload is logged too (at info when it changed nothing).
    raw.send(set_level(5, "info")).await;
    raw.response(&json!(5)).await;
    let pid = raw.child.id().unwrap().to_string();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(hup.success());
    let message = tokio::time::timeout(Duration::from_secs(30), raw.recv())
        .await
        .expect("the reload is logged");
    assert_eq!(message["method"], "notifications/message", "{message}");
    assert_eq!(message["params"]["level"], "info", "{message}");
    let text = message["params"]["data"].as_str().unwrap();
    assert!(
        text.contains("reloaded") && text.contains("nothing changed"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_the_level_is_the_clients_and_a_request_may_name_its_own() {
    let mock = Mock::start().await;
    one_retry(&mock);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let set = messages(
        server
            .post(Some(TOKEN), &set_level(1, "warning"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(set[0]["result"], json!({}), "{set:?}");
    let call = messages(
        server
            .post(Some(TOKEN), &tool_call(2, "ask", "one retry, please"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let (last, before) = call.split_last().unwrap();
    assert_eq!(last["id"], 2, "the response comes after the log: {call:?}");
    let log = log_messages(before);
    assert!(retried(&log), "{log:?}");
    no_key(&log);

    one_retry(&mock);
    messages(
        server
            .post(Some(TOKEN), &set_level(3, "error"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let call = messages(
        server
            .post(Some(TOKEN), &tool_call(4, "ask", "one retry again"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(log_messages(&call).is_empty(), "{call:?}");

    // The request's own level (`_meta`, as 2026-07-28 clients send it)
    // wins for that request.
    one_retry(&mock);
    let mut debug = tool_call(5, "ask", "tell me everything");
    debug["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
    let call = messages(server.post(Some(TOKEN), &debug).send().await.unwrap()).await;
    let log = log_messages(&call);
    assert!(retried(&log), "{log:?}");
    assert!(
        log.iter()
            .any(|(level, text)| level == "debug" && text.contains("answered")),
        "{log:?}"
    );
}
