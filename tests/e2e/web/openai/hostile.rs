//! The OpenAI endpoint against a tenant who attacks it (issue 51): a
//! stream whose reader stops reading, bodies past the bound or built to
//! cost memory (refused alike at `/mcp`), a client past its limits still
//! sending megabytes. Each with a real socket and the real binary.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{ask, error_of, post};
use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;
use crate::web::teams::{ALICE, answering, client, team_in};

/// A client held to one run a minute.
const CAROL: &str = "carol-token-7e2b4c9a1f0d3856";

/// A connection to `server` with a receive buffer of a few KiB, that has
/// sent `body` to `path` and will read nothing until the test says so.
async fn unread(server: &HttpServer, path: &str, body: &[u8]) -> tokio::net::TcpStream {
    let host = server.origin().trim_start_matches("http://").to_owned();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(host.parse().unwrap()).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    stream
}

/// A chat request that opens an array of tiny values in its options.
const CHAT_OPEN: &[u8] =
    br#"{"model":"ask","messages":[{"role":"user","content":"q"}],"chorus":{"x":["#;

/// `open`, then `0,` until about `size` bytes, then `close`: a body of
/// hundreds of thousands of tiny JSON values.
fn zeros(open: &[u8], size: usize, close: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(open);
    while body.len() + close.len() + 2 <= size {
        body.extend_from_slice(b"0,");
    }
    body.extend_from_slice(close);
    body
}

/// The peak resident memory of process `pid` so far, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/PID/status");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_stops_reading_a_stream_holds_neither_its_run_nor_its_connection() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    // The merge streams far more than the socket buffers hold, then its
    // model goes silent: only the run's deadline ends it.
    let held = Gate::default();
    let piece = "x".repeat(64 << 10);
    let mut events: Vec<Sse> = (0..256).map(|_| Sse::Content(piece.clone())).collect();
    events.push(Sse::Gate(held.clone()));
    mock.script(
        SYNTH,
        [Step::Sse {
            events,
            crlf: false,
        }],
    );
    mock.script(SYNTH2, [Step::Hang]);
    // The write timeout is longer than the run's deadline: the run must
    // end by its deadline alone, not because its connection was closed.
    let extra = "[http]\nwrite_timeout = \"20s\"\n";
    let text = config(&mock, extra)
        .replace(
            "run_timeout = \"20s\"",
            "run_timeout = \"5s\"\nmax_concurrent_runs = 1",
        )
        .replace(
            "read_timeout = \"10s\"",
            "read_timeout = \"60s\"\nmax_response_bytes = 67108864",
        );
    let config = write_config(&text);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let mut body = ask("q");
    body["stream"] = json!(true);
    let mut stalled = unread(&server, "/v1/chat/completions", body.to_string().as_bytes()).await;
    let stalled_at = tokio::time::Instant::now();
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| !m
            .requests_for(SYNTH)
            .is_empty())
            .await,
        "the merge was asked"
    );
    // The run ends at its deadline, its reader or not: the merge's
    // upstream request is dropped with it.
    assert!(
        mock.wait_until(Duration::from_secs(12), |m| m.in_flight() == 0)
            .await,
        "the run went on past its deadline while its reader read nothing: {} upstream requests still open",
        mock.in_flight()
    );
    // Its one run slot is free again: another request is answered.
    answering(&mock);
    let next = post(&server, "/v1/chat/completions", Some(TOKEN), &ask("q"))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    assert_eq!(next.status(), 200, "{}", next.text().await.unwrap());
    // And the connection that took nothing for the write timeout was
    // closed with its stream unfinished: what the kernel had buffered reads
    // out, then the end, never the stream's own end.
    tokio::time::sleep_until(stalled_at + Duration::from_secs(26)).await;
    let mut read = Vec::new();
    let mut sink = vec![0; 1 << 20];
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stalled.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&sink[..n]),
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the unread connection was never closed");
    let read = String::from_utf8_lossy(&read);
    assert!(
        read.starts_with("HTTP/1.1 200"),
        "{}",
        &read[..read.len().min(200)]
    );
    assert!(
        !read.contains("data: [DONE]"),
        "the stream went on to its end: the connection was not closed at its write timeout"
    );
    held.open();
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_are_bounded_as_on_mcp_and_refused_unread_past_a_limit() {
    let mock = Mock::start().await;
    answering(&mock);
    let clients = client("alice", ALICE, "") + &client("carol", CAROL, "max_runs_per_minute = 1");
    let dir = tempfile::tempdir().unwrap();
    let store = format!("path = \"{}\"", dir.path().join("runs.sqlite3").display());
    let config = write_config(&team_in(&mock, &clients, &store));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let pid = server.child.id().unwrap();
    let chat = "/v1/chat/completions";

    // Over the bound (4 × max_prompt_bytes, at least 4 MiB, as on /mcp):
    // a 64 MiB body of a million tiny values costs next to nothing.
    let before = peak_rss(pid);
    let flood = zeros(CHAT_OPEN, 64 << 20, b"0]}}");
    let response = reqwest::Client::new()
        .post(format!("{}{chat}", server.origin()))
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .body(flood)
        .send()
        .await;
    if let Ok(response) = response {
        let (status, error) = error_of(response).await;
        assert_eq!(
            (status, error["code"].as_str()),
            (413, Some("request_too_large"))
        );
        assert!(
            error["message"].as_str().unwrap().contains("4 MiB"),
            "{error}"
        );
    }
    // Under the bound, the same shape is refused before it is parsed.
    let tiny = zeros(CHAT_OPEN, 3 << 20, b"0]}}");
    let response = reqwest::Client::new()
        .post(format!("{}{chat}", server.origin()))
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .body(tiny)
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("JSON values"),
        "{error}"
    );
    // The same shape is refused at the MCP door too, before rmcp parses it.
    let call = zeros(
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"prompt":"q","x":["#,
        3 << 20,
        b"0]}}}",
    );
    let response = reqwest::Client::new()
        .post(&server.url)
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("JSON values"));
    let grown = peak_rss(pid).saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "the server's peak memory grew by {} MiB reading bodies it refused",
        grown >> 20
    );

    // Past its runs per minute, a client's body is not read at all: the
    // refusal comes while the body is still unsent.
    let first = post(&server, chat, Some(CAROL), &ask("q"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let (status, error) = super::declared_only(&server, CAROL, 3 << 20).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (429, Some("rate_limit_exceeded")),
        "{error}"
    );
}
