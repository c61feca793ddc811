//! `subscriptions/listen` over stdio, as Claude Code sends it: the
//! acknowledgement, every notification on the subscription and its
//! cancellation carry the client's own id, as the client wrote it. (Claude
//! Code matches the acknowledgement by its id, `"listen:0"`; given chorus's
//! own, it waited out a 27 s timeout on every start.)

use serde_json::{Value, json};

use crate::support::*;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

const SECOND: &str = r#"
[pipelines.second]
description = "The same, by another name."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#;

fn modern(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The next message with `method`, skipping any other.
async fn next(raw: &mut Raw, method: &str) -> Value {
    loop {
        let message = raw.recv().await;
        if message["method"] == method {
            return message;
        }
    }
}

/// Listens under `id` (after a request of another id, so chorus's own
/// count and the client's differ), hears a tool change on it, cancels it,
/// and uses the id again.
async fn listen_under(id: Value) {
    let mock = Mock::start().await;
    let mut raw = Raw::start(&config(&mock, SECOND)).await;
    raw.send(modern(json!("discover"), "server/discover", json!({})))
        .await;
    raw.response(&json!("discover")).await;
    raw.send(modern(
        id.clone(),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ))
    .await;
    let acknowledged = next(&mut raw, "notifications/subscriptions/acknowledged").await;
    assert_eq!(
        acknowledged["params"]["_meta"][SUBSCRIPTION_ID], id,
        "{acknowledged}"
    );

    let path = raw.config_path().to_owned();
    let temporary = path.with_extension("toml.swp");
    std::fs::write(&temporary, config(&mock, "")).unwrap();
    std::fs::rename(&temporary, &path).unwrap();
    let changed = next(&mut raw, "notifications/tools/list_changed").await;
    assert_eq!(changed["params"]["_meta"][SUBSCRIPTION_ID], id, "{changed}");

    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "done listening"}}),
    )
    .await;
    raw.send(modern(id.clone(), "tools/list", json!({}))).await;
    let (listed, before) = raw.response(&id).await;
    assert!(
        listed["result"]["tools"].is_array(),
        "the id is free again once cancelled: {listed}"
    );
    assert!(
        before.iter().all(|m| m["result"].is_null()),
        "the cancelled listen is not answered: {before:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_is_acknowledged_and_served_under_the_clients_string_id() {
    listen_under(json!("listen:0")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_is_acknowledged_and_served_under_the_clients_numeric_id() {
    listen_under(json!(5)).await;
}
