//! `chorus serve --http`: who gets in (the token, the Host, a browser's
//! Origin), when chorus refuses to start, how a call is cancelled over HTTP
//! (the client drops its request, or a pre-2026 client sends
//! `notifications/cancelled`), and the shutdown on SIGTERM. The official
//! Python SDK's Streamable HTTP client is in `clients.rs`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN, messages, tool_call};
use crate::support::*;

fn list_tools(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

/// The panel never answers; room for two runs' requests at once.
fn hanging(mock: &Mock) -> ConfigFile {
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    // No drain: a SIGTERM stops the hanging runs at once.
    let text = config(mock, "[http]\ndrain_seconds = 0\n").replace(
        "[providers.mock]\n",
        "[providers.mock]\nmax_concurrency = 16\n",
    );
    write_config(&text)
}

fn answering(mock: &Mock) {
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
}

fn tool_names(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m["result"]["tools"].as_array())
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_without_the_token_or_with_a_wrong_one_gets_401() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let missing = server.post(None, &list_tools(1)).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    let challenge = missing.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    assert!(
        !challenge.contains("error="),
        "no token sent: no error code (RFC 6750 §3.1): {challenge}"
    );
    let body = missing.text().await.unwrap();
    assert!(body.contains("Authorization: Bearer"), "{body}");

    let wrong = server
        .post(Some("not-the-token"), &list_tools(2))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let challenge = wrong.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.contains("invalid_token"), "{challenge}");
    let almost = format!("{TOKEN}x");
    let longer = server
        .post(Some(&almost), &list_tools(3))
        .send()
        .await
        .unwrap();
    assert_eq!(longer.status(), 401);
    let other_scheme = server
        .post(None, &list_tools(4))
        .header("authorization", format!("Basic {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(other_scheme.status(), 401);

    let right = server
        .post(Some(TOKEN), &list_tools(5))
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    assert!(tool_names(&messages(right).await).contains(&"ask".to_owned()));

    // The health check is for load balancers: no token, nothing revealed.
    let health = reqwest::get(format!("{}/health", server.origin()))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert!(
        !server.stderr().contains(TOKEN),
        "the token is never logged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_origin_not_allowed_is_refused_and_an_allowed_one_gets_cors() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let allowed = "http://localhost:6274";
    let server = HttpServer::start(&config.path, Some(TOKEN), &["--allow-origin", allowed]).await;

    let refused = server
        .post(Some(TOKEN), &list_tools(1))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let body = refused.text().await.unwrap();
    assert!(body.contains("--allow-origin"), "{body}");

    let from_app = server
        .post(Some(TOKEN), &list_tools(2))
        .header("origin", allowed)
        .send()
        .await
        .unwrap();
    assert_eq!(from_app.status(), 200);
    assert_eq!(from_app.headers()["access-control-allow-origin"], allowed);
    assert!(tool_names(&messages(from_app).await).contains(&"ask".to_owned()));

    // The browser's preflight carries no token, and must pass.
    let preflight = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, &server.url)
        .header("origin", allowed)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, mcp-protocol-version",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(headers.contains("authorization"), "{headers}");

    // Clients that are not browsers send no Origin.
    let plain = server
        .post(Some(TOKEN), &list_tools(3))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
}

/// The conformance suite's DNS-rebinding check: a page at the server's own
/// origin is no attack (a rebound name fails the Host check); every other
/// origin not allowed still is refused.
#[tokio::test(flavor = "multi_thread")]
async fn the_servers_own_origin_is_accepted_and_no_other() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let own = server.origin();
    let port = own.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    let same = server
        .post(None, &list_tools(1))
        .header("origin", &own)
        .send()
        .await
        .unwrap();
    assert_eq!(same.status(), 200, "{}", same.text().await.unwrap());
    assert!(tool_names(&messages(same).await).contains(&"ask".to_owned()));

    for (i, (host, origin)) in [
        (None, "http://evil.example.com".to_owned()),
        (
            Some("evil.example.com"),
            "http://evil.example.com".to_owned(),
        ),
        (None, format!("http://127.0.0.1:{}", port.wrapping_add(1))),
        (None, format!("http://localhost:{port}")),
    ]
    .into_iter()
    .enumerate()
    {
        let mut request = server
            .post(None, &list_tools(2 + i as u64))
            .header("origin", &origin);
        if let Some(host) = host {
            request = request.header("host", host);
        }
        let refused = request.send().await.unwrap();
        assert_eq!(refused.status(), 403, "{host:?} {origin}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_name_is_accepted_only_when_it_is_the_servers() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let rebound = server
        .post(Some(TOKEN), &list_tools(1))
        .header("host", "chorus.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let body = rebound.text().await.unwrap();
    assert!(body.contains("--allow-host chorus.example.com"), "{body}");

    let named = HttpServer::start(
        &config.path,
        Some(TOKEN),
        &["--allow-host", "chorus.example.com"],
    )
    .await;
    let reached = named
        .post(Some(TOKEN), &list_tools(2))
        .header("host", "chorus.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(reached.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_interface_needs_a_token_and_then_serves() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let refused = command(&[
        "serve",
        "--http",
        "0.0.0.0:0",
        "--config",
        config.path.to_str().unwrap(),
    ])
    .env_remove("CHORUS_TOKEN")
    .output()
    .await
    .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("refusing to serve on 0.0.0.0:0 without a token")
            && stderr.contains("CHORUS_TOKEN"),
        "{stderr}"
    );

    let server = HttpServer::start_at("0.0.0.0:0", &config.path, Some(TOKEN), &[]).await;
    let response = server
        .post(Some(TOKEN), &list_tools(1))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let denied = server.post(None, &list_tools(2)).send().await.unwrap();
    assert_eq!(denied.status(), 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_answers_over_http_with_progress_before_its_result() {
    let mock = Mock::start().await;
    answering(&mock);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let response = server
        .post(Some(TOKEN), &tool_call(9, "ask", "What is 2 + 2?"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let messages = messages(response).await;
    let (last, before) = messages.split_last().expect("messages");
    assert_eq!(last["id"], 9, "{messages:?}");
    assert_eq!(last["result"]["structuredContent"]["answer"], "merged");
    let progress: Vec<f64> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .filter_map(|m| m["params"]["progress"].as_f64())
        .collect();
    assert!(progress.len() >= 3, "{messages:?}");
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_drops_its_request_cancels_the_run_upstream() {
    let mock = Mock::start().await;
    let config = hanging(&mock);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let response = server
        .post(Some(TOKEN), &tool_call(1, "ask", "nobody answers"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 5)
            .await,
        "the panel was asked"
    );
    drop(response);
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 0)
            .await,
        "{} upstream requests still open after the client hung up",
        mock.in_flight()
    );
    assert!(
        !server.stderr().contains("ERROR"),
        "a client's cancellation is not an error: {}",
        server.stderr()
    );

    // The server carries on.
    answering(&mock);
    let again = server
        .post(Some(TOKEN), &tool_call(2, "ask", "again"))
        .send()
        .await
        .unwrap();
    let messages = messages(again).await;
    assert_eq!(
        messages.last().unwrap()["result"]["structuredContent"]["answer"],
        "merged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn notifications_cancelled_stops_the_call_it_names_and_only_that_one() {
    let mock = Mock::start().await;
    let config = hanging(&mock);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let first = server
        .post(Some(TOKEN), &tool_call(7, "ask", "first"))
        .send()
        .await
        .unwrap();
    let second = server
        .post(Some(TOKEN), &tool_call(8, "ask", "second"))
        .send()
        .await
        .unwrap();
    assert!(
        mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 10)
            .await,
        "both panels were asked"
    );

    let cancel = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "the user gave up"},
    });
    let accepted = server.post(Some(TOKEN), &cancel).send().await.unwrap();
    assert_eq!(accepted.status(), 202);
    // The first call's stream is still held open by this client, yet its
    // upstream requests close; the second call's stay.
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 5)
            .await,
        "{} upstream requests open; expected the 5 of the second call",
        mock.in_flight()
    );
    let ended = tokio::time::timeout(Duration::from_secs(5), messages(first))
        .await
        .expect("the cancelled call's stream ended");
    assert!(
        ended.iter().all(|m| m.get("result").is_none()),
        "a cancelled call gets no result: {ended:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(mock.in_flight(), 5, "the other call goes on");
    drop(second);
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 0)
            .await
    );
    assert!(
        !server.stderr().contains("ERROR"),
        "a client's cancellation is not an error: {}",
        server.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_every_run_closes_the_listener_and_exits() {
    let mock = Mock::start().await;
    let config = hanging(&mock);
    let mut server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let call = server
        .post(Some(TOKEN), &tool_call(1, "ask", "a long one"))
        .send()
        .await
        .unwrap();
    assert!(
        mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 5)
            .await
    );

    let status = server.terminate().await;
    assert!(status.success(), "a clean exit: {status}");
    assert!(
        mock.wait_until(Duration::from_secs(2), |m| m.in_flight() == 0)
            .await,
        "every upstream request was closed"
    );
    let _ = tokio::time::timeout(Duration::from_secs(5), messages(call))
        .await
        .expect("the open stream ended");
    let after = server.post(Some(TOKEN), &list_tools(2)).send().await;
    assert!(after.is_err(), "nothing listens any more");
    let stderr = server.stderr();
    assert!(stderr.contains("shutting down"), "{stderr}");
}

/// A 2026-07-28 client that hangs up with its `subscriptions/listen`
/// stream open has only left: nothing about it is logged as an error. (Its
/// acknowledgement names the listen request by the client's own id: over
/// HTTP, rmcp sees the client's ids.)
#[tokio::test(flavor = "multi_thread")]
async fn a_client_leaving_with_a_listen_stream_open_logs_no_error() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    // rmcp's info line `serve finished` says the request's service has
    // ended (it notices the client left at its next keep-alive).
    let mut server = HttpServer::start_with_env(
        "127.0.0.1:0",
        &config.path,
        Some(TOKEN),
        &[],
        &[("CHORUS_LOG", "error,chorus=debug,rmcp::service=info")],
    )
    .await;
    let listen = json!({"jsonrpc": "2.0", "id": "listen:0", "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }});
    let mut stream = server
        .post(Some(TOKEN), &listen)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success(), "{}", stream.status());
    let first = tokio::time::timeout(Duration::from_secs(30), stream.chunk())
        .await
        .expect("the subscription is acknowledged")
        .unwrap()
        .unwrap();
    let first = String::from_utf8_lossy(&first);
    assert!(first.contains("acknowledged"), "{first}");
    assert!(
        first.contains(r#""io.modelcontextprotocol/subscriptionId":"listen:0""#),
        "{first}"
    );
    drop(stream);
    server.wait_for_stderr("serve finished", 1).await;
    assert!(server.terminate().await.success());
    let log = server.stderr();
    assert!(log.contains("chorus: stopped"), "{log}");
    assert!(!log.contains("ERROR"), "{log}");
}
