//! The graceful shutdown of `serve --http`, with a real process and a real
//! SIGTERM: new requests get a 503 saying the instance is shutting down,
//! runs going on finish within `[http] drain_seconds`, those still going
//! then are cancelled (tasks failed, saying why), the lease is given back,
//! and the process exits 0. On stdio, SIGTERM stops the runs at once and
//! records them before exiting 0.

use std::time::Duration;

use serde_json::json;

use crate::store::failover::{ended, hanging, instance, start_task};
use crate::support::http::{HttpServer, TOKEN, messages, tool_call};
use crate::support::*;

async fn exit_status(server: &mut HttpServer, within: Duration) -> std::process::ExitStatus {
    tokio::time::timeout(within, server.child.wait())
        .await
        .expect("chorus exits in time")
        .expect("wait for chorus")
}

#[tokio::test(flavor = "multi_thread")]
async fn on_sigterm_new_requests_get_503_and_runs_going_finish() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(2000, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let text = config(&mock, "[http]\ndrain_seconds = 20\n");
    let config = write_config(&text);
    let mut server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let call = server.post(Some(TOKEN), &tool_call(1, "ask", "q")).send();
    let call = tokio::spawn(async move { messages(call.await.unwrap()).await });
    assert!(
        mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == PANEL.len())
            .await
    );

    sigterm(&server.child);
    server.wait_for_stderr("new requests are refused", 1).await;
    let refused = server
        .post(
            Some(TOKEN),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.text().await.unwrap().contains("shutting down"));
    let health = reqwest::get(format!("{}/health", server.origin()))
        .await
        .unwrap();
    assert_eq!(health.status(), 503, "a load balancer stops sending here");

    let answered = call.await.unwrap();
    let last = answered.last().cloned().unwrap_or_default();
    assert_eq!(last["result"]["isError"], false, "{last}");
    assert!(last.to_string().contains("merged"), "{last}");
    let status = exit_status(&mut server, Duration::from_secs(15)).await;
    assert!(status.success(), "a clean exit: {status}");
}

/// Past the drain, a task still going fails saying why (read on another
/// instance), its run is recorded cancelled, and the lease is given back.
#[tokio::test(flavor = "multi_thread")]
async fn runs_going_past_the_drain_are_cancelled_and_the_lease_given_back() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    let url = cluster.database();
    let db = url.rsplit('/').next().unwrap().to_owned();
    let text = hanging(&mock, &url).replacen(
        "[[http.clients]]",
        "[http]\ndrain_seconds = 1\n\n[[http.clients]]",
        1,
    );
    let config = write_config(&text);
    let (mut a, b) = tokio::join!(instance(&config.path), instance(&config.path));
    let task = start_task(&a).await;
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == PANEL.len())
            .await
    );
    assert_eq!(cluster.psql(&db, "SELECT count(*) FROM instances"), "2");

    sigterm(&a.child);
    let status = exit_status(&mut a, Duration::from_secs(15)).await;
    assert!(status.success(), "a clean exit: {status}");
    assert_eq!(mock.in_flight(), 0, "every upstream request was closed");
    let state = ended(&b, &task, Duration::from_secs(5)).await;
    assert_eq!(state["status"], "failed", "{state}");
    let said = state["statusMessage"].as_str().unwrap_or_default();
    assert!(said.contains("shutting down"), "{state}");
    assert_eq!(cluster.psql(&db, "SELECT status FROM runs"), "cancelled");
    assert_eq!(
        cluster.psql(&db, "SELECT count(*) FROM instances"),
        "1",
        "A gave its lease back"
    );
}

/// On stdio, SIGTERM (what a client sends before SIGKILL) stops at once:
/// the run going is cancelled and its upstream requests closed, its end
/// is in the store, and the process exits 0 — nothing is left "running".
#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_server_told_to_stop_cancels_its_runs_records_them_and_exits_0() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs.db");
    let text = config(
        &mock,
        &format!("\n[store]\npath = \"{}\"\n", store.display()),
    );
    let mut raw = Raw::start(&text).await;
    raw.initialize(json!({})).await;
    raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "ask", "arguments": {"prompt": "a stopped question"}}}))
        .await;
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == PANEL.len())
            .await
    );

    sigterm(&raw.child);
    let status = tokio::time::timeout(Duration::from_secs(10), raw.child.wait())
        .await
        .expect("chorus exits in time")
        .expect("wait for chorus");
    assert!(status.success(), "a clean exit: {status}\n{}", raw.stderr());
    assert_eq!(mock.in_flight(), 0, "every upstream request was closed");

    let config = write_config(&text);
    let (code, stdout, stderr) = run_cli(&[
        "runs",
        "show",
        "last",
        "--json",
        "--config",
        config.path.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let run: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(run["prompt"], "a stopped question");
    assert_eq!(run["status"], "cancelled", "{run}");
}
