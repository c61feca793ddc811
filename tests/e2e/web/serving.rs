//! `chorus serve --http` against hostile or careless clients: bodies that
//! are no JSON-RPC message, clients that share an address and reuse ids,
//! connections that never send a request.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN, messages, tool_call};
use crate::support::*;

fn list_tools(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

/// POSTs `body` as an MCP client would, but as raw text.
async fn post_raw(server: &HttpServer, body: &str) -> (u16, String, Value) {
    let response = reqwest::Client::new()
        .post(&server.url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .bearer_auth(TOKEN)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, content_type, json)
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_that_are_no_json_rpc_message_get_json_rpc_errors_with_400() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    for (body, code) in [
        ("{not json", -32700),
        ("", -32700),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, -32600),
        ("{}", -32600),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":5}"#,
            -32600,
        ),
    ] {
        let (status, content_type, error) = post_raw(&server, body).await;
        assert_eq!(status, 400, "{body}: {error}");
        assert_eq!(content_type, "application/json", "{body}");
        assert_eq!(error["jsonrpc"], "2.0", "{body}: {error}");
        assert_eq!(error["error"]["code"], code, "{body}: {error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(!message.is_empty(), "{body}");
    }
    // The server goes on serving.
    let right = server
        .post(Some(TOKEN), &list_tools(9))
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
}

/// The panel never answers.
fn hanging(mock: &Mock) -> ConfigFile {
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    write_config(&config(mock, "").replace(
        "[providers.mock]\n",
        "[providers.mock]\nmax_concurrency = 16\n",
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clients_late_cancellation_does_not_stop_another_clients_call_with_the_same_id() {
    let mock = Mock::start().await;
    let config = hanging(&mock);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    // Client B's id 1 is answered at once.
    let b = server
        .post(Some(TOKEN), &list_tools(1))
        .send()
        .await
        .unwrap();
    assert_eq!(b.status(), 200);
    messages(b).await;
    // Client A, from the same address with the same token, calls with id 1.
    let a = server
        .post(Some(TOKEN), &tool_call(1, "ask", "client A's question"))
        .send()
        .await
        .unwrap();
    assert!(
        mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 5)
            .await,
        "A's panel was asked"
    );
    // B's cancellation for its own, answered id 1 arrives late.
    let cancel = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "B gave up"},
    });
    let accepted = server.post(Some(TOKEN), &cancel).send().await.unwrap();
    assert_eq!(accepted.status(), 202);
    // Wait for the cancellation to be handled: a later request is served
    // after it.
    let later = server
        .post(Some(TOKEN), &list_tools(2))
        .send()
        .await
        .unwrap();
    messages(later).await;
    assert_eq!(mock.in_flight(), 5, "A's call goes on");
    drop(a);
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 0)
            .await
    );
}

/// A server that closes silent connections after `header_timeout` and
/// holds at most 40 connections, 20 per address before it has seen a
/// request.
async fn bounded_server(mock: &Mock, header_timeout: &str) -> (ConfigFile, HttpServer) {
    let config = write_config(&config(
        mock,
        &format!(
            "\n[http]\nheader_timeout = \"{header_timeout}\"\nmax_connections = 40\nmax_connections_per_peer = 20\n"
        ),
    ));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    (config, server)
}

/// Waits (up to 10 s) for the server to close `socket`; says whether it did.
async fn closed_by_server(socket: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_secs(10), socket.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_cannot_lock_out_an_authenticated_call() {
    let mock = Mock::start().await;
    // Long enough that only the connection limits can close anything here.
    let (_config, server) = bounded_server(&mock, "10min").await;
    let addr = server.origin().trim_start_matches("http://").to_owned();
    let mut idle = Vec::new();
    for _ in 0..120 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let answered = tokio::time::timeout(
        Duration::from_secs(10),
        server.post(Some(TOKEN), &list_tools(1)).send(),
    )
    .await
    .expect("an authenticated call answers while idle sockets are open")
    .unwrap();
    assert_eq!(answered.status(), 200);
    assert!(!messages(answered).await.is_empty());
    // All but the 40 newest were closed to stay within max_connections
    // (opened in one burst, none had outlived the grace its address's
    // share gives a connection to send its request).
    let mut closed = 0;
    for socket in &mut idle[..80] {
        closed += usize::from(closed_by_server(socket).await);
    }
    assert_eq!(closed, 80, "the oldest idle connections were closed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_that_sends_no_request_is_closed_after_the_header_timeout() {
    let mock = Mock::start().await;
    let (_config, server) = bounded_server(&mock, "1s").await;
    let addr = server.origin().trim_start_matches("http://").to_owned();
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    assert!(
        closed_by_server(&mut silent).await,
        "a silent connection is closed"
    );
    // One that stops halfway through its request head, too.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut slow, b"POST /mcp HTTP/1.1\r\nHost: 127")
        .await
        .unwrap();
    assert!(
        closed_by_server(&mut slow).await,
        "a slow connection is closed"
    );
}

/// A server that lets an address hold two unproven connections, with a
/// panel answering after `panel_ms` and room upstream for every call.
async fn two_per_address(mock: &Mock, panel_ms: u64) -> (ConfigFile, HttpServer) {
    for model in PANEL {
        mock.script(model, [Step::answer_after(panel_ms, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let text = config(
        mock,
        "\n[http]\nmax_connections = 40\nmax_connections_per_peer = 2\n",
    )
    .replace(
        "[providers.mock]\n",
        "[providers.mock]\nmax_concurrency = 64\n",
    );
    let config = write_config(&text);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    (config, server)
}

/// One `ask` on a connection of its own (`post` makes a new client): its
/// messages, the last of them the result.
fn ask_alone(server: &HttpServer, id: u64) -> impl Future<Output = Vec<Value>> + use<> {
    let request = server.post(Some(TOKEN), &tool_call(id, "ask", "What is 2 + 2?"));
    async move {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        messages(response).await
    }
}

fn assert_all_merged(answers: &[Vec<Value>]) {
    for (i, messages) in answers.iter().enumerate() {
        let last = messages.last().expect("messages");
        assert_eq!(
            last["result"]["structuredContent"]["answer"],
            "merged",
            "call {}: {messages:?}",
            i + 1
        );
    }
}

/// Runs in progress on more connections from one address than
/// `max_connections_per_peer` allows unproven: each was let in by the
/// token (its response begun), so none is closed to make room for the
/// next.
#[tokio::test(flavor = "multi_thread")]
async fn busy_connections_are_not_closed_for_new_ones_from_the_same_address() {
    let mock = Mock::start().await;
    let (_config, server) = two_per_address(&mock, 2000).await;
    // The next call opened once the last is asking its panel.
    let mut calls = Vec::new();
    for id in 1..=5u64 {
        calls.push(tokio::spawn(ask_alone(&server, id)));
        let asked = usize::try_from(id).unwrap() * PANEL.len();
        assert!(
            mock.wait_until(Duration::from_secs(10), |m| m.in_flight() >= asked)
                .await,
            "call {id} reached the panel"
        );
    }
    let mut answers = Vec::new();
    for call in calls {
        answers.push(call.await.unwrap());
    }
    assert_all_merged(&answers);
}

/// A burst of clients behind one address (a load balancer, a bench):
/// more connections at once than `max_connections_per_peer`, each with a
/// run. None is closed before it could send its request, so every run
/// answers (closed, they broke off or were reset).
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_calls_from_one_address_all_answer() {
    let mock = Mock::start().await;
    let (_config, server) = two_per_address(&mock, 500).await;
    let answers = futures::future::join_all((1..=8).map(|id| ask_alone(&server, id))).await;
    assert_all_merged(&answers);
}
