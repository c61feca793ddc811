//! The upstream fault matrix: every way a provider misbehaves ends as a
//! typed outcome carrying the provider's own message, retries stay bounded
//! in count and time, and the run's deadline holds.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// The test config with tight limits, so faults show quickly.
fn tight(mock: &Mock, run_timeout: &str) -> String {
    config(mock, "")
        .replace(
            "run_timeout = \"20s\"",
            &format!("run_timeout = \"{run_timeout}\""),
        )
        .replace(
            "request_timeout = \"10s\"",
            "request_timeout = \"2s\"\nmax_response_bytes = 20000",
        )
        .replace("read_timeout = \"10s\"", "read_timeout = \"500ms\"")
        .replace("max_attempts = 3", "max_attempts = 2")
}

fn outcome<'a>(result: &'a Value, model: &str) -> &'a Value {
    calls(result, "fan-out")
        .into_iter()
        .find(|c| c["model"] == model)
        .unwrap()
}

fn assert_failure(result: &Value, model: &str, kind: &str, attempts: u64, message: &str) {
    let call = outcome(result, model);
    assert_eq!(call["status"], "failed", "{model}: {call}");
    assert_eq!(call["error"]["kind"], kind, "{model}: {call}");
    assert_eq!(call["attempts"], attempts, "{model}: {call}");
    let said = call["error"]["message"].as_str().unwrap();
    assert!(
        said.contains(message),
        "{model}: expected `{message}` in `{said}`"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_bodies_end_as_typed_failures() {
    let mock = Mock::start().await;
    mock.script(
        "m1",
        [Step::Drip {
            every: Duration::from_millis(200),
            chunks: 50,
        }],
    );
    mock.script("m2", [Step::Stall]);
    mock.script("m3", [Step::Reset]);
    mock.script("m4", [Step::Big { bytes: 50_000 }]);
    mock.script(
        "m5",
        [Step::Raw {
            body: json!({"choices": []}).to_string(),
        }],
    );
    let server = Server::start(&tight(&mock, "20s")).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(true));
    let result = structured(&result);
    assert_failure(
        result,
        "m1",
        "timeout",
        1,
        "the attempt did not finish within request_timeout = 2s (providers.mock)",
    );
    assert_failure(
        result,
        "m2",
        "timeout",
        1,
        "the response went silent for idle_timeout = 500ms (providers.mock)",
    );
    assert_failure(
        result,
        "m3",
        "connection",
        2,
        "connection closed before message completed",
    );
    assert_failure(
        result,
        "m4",
        "response-too-large",
        1,
        "max_response_bytes (20000 bytes)",
    );
    assert_failure(result, "m5", "malformed-response", 1, "no choices");
}

#[tokio::test(flavor = "multi_thread")]
async fn statuses_are_retried_a_bounded_number_of_times_with_the_providers_words() {
    let mock = Mock::start().await;
    mock.script(
        "m1",
        [Step::Raw {
            body: json!({"choices": [{"message": {"content": null}}]}).to_string(),
        }],
    );
    mock.script("m2", [Step::status(502, "Bad gateway from upstream")]);
    mock.script("m3", [Step::status(504, "Gateway timeout")]);
    mock.script("m4", [Step::status(500, "Internal error")]);
    mock.script("m5", [Step::status(429, "Too many requests")]);
    let server = Server::start(&tight(&mock, "20s")).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    assert_failure(result, "m1", "malformed-response", 1, "content is null");
    assert_failure(result, "m2", "http-status", 2, "Bad gateway from upstream");
    assert_failure(result, "m3", "http-status", 2, "Gateway timeout");
    assert_failure(result, "m4", "http-status", 2, "Internal error");
    assert_failure(result, "m5", "rate-limited", 2, "Too many requests");
    for model in PANEL {
        let expected = if model == "m1" { 1 } else { 2 };
        assert_eq!(
            mock.requests_for(model).len(),
            expected,
            "{model}: max_attempts bounds the retries"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_after_is_honoured_only_up_to_max_backoff() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(
        "m1",
        [Step::rate_limited("3600"), Step::answer("came back")],
    );
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&tight(&mock, "20s")).await;
    let started = Instant::now();
    let result = server.ask("ask", "q").await;
    // An hour's Retry-After would hang the call; max_backoff (200 ms) bounds it.
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(outcome(structured(&result), "m1")["attempts"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_a_connection_failure() {
    let mock = Mock::start().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let text = tight(&mock, "20s").replace(&mock.base_url, &format!("http://127.0.0.1:{port}/v1"));
    let server = Server::start(&text).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(true));
    for model in PANEL {
        assert_failure(
            structured(&result),
            model,
            "connection",
            2,
            "cannot connect",
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_run_deadline_keeps_time_for_the_merge_and_names_itself() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let server = Server::start(
        &tight(&mock, "1s")
            .replace("request_timeout = \"2s\"", "request_timeout = \"60s\"")
            .replace("read_timeout = \"500ms\"", "read_timeout = \"60s\""),
    )
    .await;
    let started = Instant::now();
    let result = server.ask("ask", "q").await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the run ended at its deadline"
    );
    // The fan-out ends a quarter of the deadline early (merge_reserve =
    // "25%" by default), so a merge would still have time.
    for model in PANEL {
        let call = outcome(structured(&result), model);
        assert_eq!(call["status"], "cut", "{call}");
        assert_eq!(call["error"]["kind"], "cut", "{call}");
        let said = call["error"]["message"].as_str().unwrap();
        assert!(
            said.contains(
                "before the run's deadline of 1s (merge_reserve = 25%, fan_out.merge_reserve)"
            ),
            "{said}"
        );
        let latency = call["latency_ms"].as_u64().unwrap();
        assert!((700..2000).contains(&latency), "cut at 750 ms: {latency}");
        assert_eq!(call["attempts"], 1, "{call}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_the_deadline_ends_records_its_real_latency_and_attempts() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("yes")]);
    }
    // The merge's model fails once, is retried, then never answers.
    mock.script(SYNTH, [Step::status(500, "busy"), Step::Hang]);
    let server = Server::start(
        &tight(&mock, "2s")
            .replace("request_timeout = \"2s\"", "request_timeout = \"60s\"")
            .replace("read_timeout = \"500ms\"", "read_timeout = \"60s\""),
    )
    .await;
    let result = server.ask("ask", "q").await;
    let synth = calls(structured(&result), "synthesize")
        .into_iter()
        .find(|c| c["model"] == SYNTH)
        .expect("the merge's call");
    assert_eq!(synth["error"]["kind"], "timeout", "{synth}");
    assert_eq!(
        synth["attempts"], 2,
        "the failed attempt and the one cut off: {synth}"
    );
    let latency = synth["latency_ms"].as_u64().unwrap();
    assert!(
        latency < 2000,
        "the time the call took, not the run's whole deadline: {latency}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_api_key_is_named_at_startup_and_in_every_failure() {
    let mock = Mock::start().await;
    let text = config(&mock, "").replace(KEY_VAR, "CHORUS_TEST_UNSET_KEY");
    let server = Server::start(&text).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(true));
    for model in PANEL {
        assert_failure(
            structured(&result),
            model,
            "missing-api-key",
            0,
            "environment variable CHORUS_TEST_UNSET_KEY, which is not set",
        );
    }
    assert!(mock.requests().is_empty(), "nothing was sent without a key");
    assert!(server.stderr().contains(
        "needs an API key in the environment variable CHORUS_TEST_UNSET_KEY, which is not set"
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connect_timeout_is_a_retried_timeout() {
    let mock = Mock::start().await;
    // A listener that never accepts, with its queue already full: the
    // kernel drops further handshakes, so connecting hangs.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    let _listener = socket.listen(0).unwrap();
    let _queued = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let text = tight(&mock, "20s")
        .replace(&mock.base_url, &format!("http://127.0.0.1:{port}/v1"))
        .replace("connect_timeout = \"2s\"", "connect_timeout = \"300ms\"");
    let server = Server::start(&text).await;
    let result = server.ask("ask", "q").await;
    for model in PANEL {
        assert_failure(
            structured(&result),
            model,
            "timeout",
            2,
            "within connect_timeout = 300ms (providers.mock)",
        );
    }
}
