//! The protocol as a client meets it, driven by raw JSON lines: what comes
//! before `initialize`, ids reused, malformed requests, progress that is
//! honest and never late, and a client that goes away.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

fn call(id: Value, prompt: &str, token: Option<&str>) -> Value {
    let mut params = json!({"name": "ask", "arguments": {"prompt": prompt}});
    if let Some(token) = token {
        params["_meta"] = json!({"progressToken": token});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// The test config, with room for many requests in flight at once.
fn roomy(mock: &Mock) -> String {
    config(mock, "").replace(
        "read_timeout = \"10s\"",
        "read_timeout = \"10s\"\nmax_concurrency = 64",
    )
}

fn answer_all(mock: &Mock, delay_ms: u64) {
    for model in PANEL {
        mock.script(model, [Step::answer_after(delay_ms, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn notifications_before_initialize_do_not_end_the_session() {
    let mock = Mock::start().await;
    let mut raw = Raw::start(&config(&mock, "")).await;
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .await;
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}))
        .await;
    let init = raw.initialize(json!({})).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "chorus", "{init}");
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    let (tools, _) = raw.response(&json!(2)).await;
    assert_eq!(tools["result"]["tools"][0]["name"], "ask", "{tools}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_reusing_an_id_in_flight_is_refused_and_the_first_carries_on() {
    let mock = Mock::start().await;
    answer_all(&mock, 500);
    let mut raw = Raw::start(&config(&mock, "")).await;
    raw.initialize(json!({})).await;
    raw.send(call(json!(7), "first", None)).await;
    raw.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}))
        .await;
    let refusal = raw.recv().await;
    assert_eq!(refusal["id"], 7, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in flight")
    );
    let (first, _) = raw.response(&json!(7)).await;
    assert_eq!(
        first["result"]["structuredContent"]["answer"], "merged",
        "the first call was answered, untouched: {first}"
    );
    // Once answered, the id may be used again.
    raw.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}))
        .await;
    let (again, _) = raw.response(&json!(7)).await;
    assert!(again.get("result").is_some(), "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_requests_get_errors_with_their_id_and_bad_params_are_32602() {
    let mock = Mock::start().await;
    let mut raw = Raw::start(&config(&mock, "")).await;
    raw.initialize(json!({})).await;
    let cases = [
        (
            r#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"arguments": {}}}"#,
            json!(3),
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": "s", "method": "resources/read", "params": {"uri": 5}}"#,
            json!("s"),
            -32602,
        ),
        (
            r#"{"jsonrpc": "1.0", "id": 4, "method": "tools/list"}"#,
            json!(4),
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 5, "method": ["tools/list"]}"#,
            json!(5),
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 6, "method": "no/such/method"}"#,
            json!(6),
            -32601,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 8, "method": "tools"#,
            Value::Null,
            -32700,
        ),
        ("[]", Value::Null, -32600),
    ];
    for (line, id, code) in cases {
        raw.send_line(line).await;
        let error = raw.recv().await;
        assert_eq!(error["error"]["code"], code, "{line} -> {error}");
        assert_eq!(
            error.get("id").cloned().unwrap_or(Value::Null),
            id,
            "{line} -> {error}"
        );
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    raw.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .await;
    assert!(raw.response(&json!(9)).await.0.get("result").is_some());
}

/// Many calls at once on one connection, each with a progress token: in
/// wire order, no progress notification for a call follows its response,
/// each call's progress rises strictly on a fixed total, and none says
/// "done" (100/100): the response says it. (Claude Code dropped the
/// connection over a 100/100 sent in the same millisecond as the result:
/// it handled the result first, and then had no call for the token.)
#[tokio::test(flavor = "multi_thread")]
async fn progress_rises_on_a_fixed_total_and_stops_before_the_response() {
    let mock = Mock::start().await;
    for (i, model) in PANEL.iter().enumerate() {
        mock.script(model, [Step::answer_after(5 * i as u64, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let mut raw = Raw::start(&config(&mock, "")).await;
    raw.initialize(json!({})).await;
    const CALLS: usize = 100;
    for i in 0..CALLS {
        raw.send(call(json!(i), &format!("q{i}"), Some(&format!("t{i}"))))
            .await;
    }
    let mut answered = std::collections::BTreeSet::new();
    let mut progress: Vec<Vec<(f64, Option<f64>)>> = vec![Vec::new(); CALLS];
    while answered.len() < CALLS {
        let message = raw.recv().await;
        if message["method"] == "notifications/progress" {
            let token = message["params"]["progressToken"].as_str().unwrap();
            let i: usize = token[1..].parse().unwrap();
            assert!(
                !answered.contains(&i),
                "progress for call {i} after its response: {message}"
            );
            progress[i].push((
                message["params"]["progress"].as_f64().unwrap(),
                message["params"]["total"].as_f64(),
            ));
        } else if let Some(i) = message["id"].as_u64() {
            assert!(message.get("result").is_some(), "{message}");
            answered.insert(i as usize);
        }
    }
    for (i, steps) in progress.iter().enumerate() {
        // How many arrive depends on the machine's load: lines still queued
        // when the result exists are dropped, never sent after it.
        assert!(!steps.is_empty(), "call {i}: {steps:?}");
        assert!(steps.iter().all(|(_, total)| *total == Some(100.0)));
        assert!(
            steps.windows(2).all(|w| w[0].0 < w[1].0),
            "call {i} rises strictly: {steps:?}"
        );
        assert!(
            steps.iter().all(|(p, _)| *p < 100.0),
            "call {i}: no notification of the finished call: {steps:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn heartbeats_say_who_is_awaited_and_for_how_long() {
    let mock = Mock::start().await;
    answer_all(&mock, 0);
    mock.script("m3", [Step::answer_after(11_500, "slow but sure")]);
    // Nobody is cut as a straggler: the point is the wait itself.
    let config = config(&mock, "[fan_out]\nquorum = \"all\"")
        .replace("request_timeout = \"10s\"", "request_timeout = \"30s\"")
        .replace("read_timeout = \"10s\"", "read_timeout = \"30s\"");
    let mut raw = Raw::start(&config).await;
    raw.initialize(json!({})).await;
    raw.send(call(json!(1), "q", Some("hb"))).await;
    let (response, before) = raw.response(&json!(1)).await;
    assert!(response.get("result").is_some(), "{response}");
    let messages: Vec<String> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["message"].as_str().unwrap().to_owned())
        .collect();
    let heartbeats: Vec<&String> = messages
        .iter()
        .filter(|m| m.starts_with("4/5 answered; waiting on m3 for "))
        .collect();
    assert!(heartbeats.len() >= 2, "{messages:#?}");
    let waited: Vec<u64> = heartbeats
        .iter()
        .map(|m| {
            m.rsplit("for ")
                .next()
                .unwrap()
                .trim_end_matches(" s")
                .parse()
                .unwrap()
        })
        .collect();
    assert!(
        waited.windows(2).all(|w| w[0] < w[1]),
        "each heartbeat says how long now: {messages:#?}"
    );
    assert!(
        messages.iter().any(|m| m.starts_with("m3 answered in 11.")),
        "{messages:#?}"
    );
    assert!(
        messages.iter().all(|m| !m.contains("still working")),
        "{messages:#?}"
    );
}

/// The client closes stdin while runs wait on upstream calls: every
/// connection closes and the process exits at once — not after rmcp's 5 s
/// drain. (Measured precisely by hand for the report; the bounds here only
/// tell "at once" from "after a drain".)
#[tokio::test(flavor = "multi_thread")]
async fn closing_stdin_stops_every_run_and_exits_at_once() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let mut raw = Raw::start(&roomy(&mock)).await;
    raw.initialize(json!({})).await;
    for i in 0..3 {
        raw.send(call(json!(i), "q", Some(&format!("t{i}")))).await;
    }
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == 15)
            .await
    );
    let closed = Instant::now();
    raw.close_stdin();
    assert!(
        mock.wait_until(Duration::from_secs(3), |m| m.in_flight() == 0)
            .await,
        "{} upstream requests still open",
        mock.in_flight()
    );
    let upstream = closed.elapsed();
    let status = tokio::time::timeout(Duration::from_secs(4), raw.child.wait())
        .await
        .expect("chorus exits at once")
        .unwrap();
    assert!(status.success());
    assert!(upstream < Duration::from_secs(3), "{upstream:?}");
    assert!(
        !raw.stderr().contains("ERROR"),
        "a client going away is not an error: {}",
        raw.stderr()
    );
}

/// The client closes its end of our stdout (and nothing is being written:
/// no progress was asked for): runs stop, and chorus exits.
#[tokio::test(flavor = "multi_thread")]
async fn closing_stdout_stops_every_run_and_exits() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let mut raw = Raw::start(&roomy(&mock)).await;
    raw.initialize(json!({})).await;
    raw.send(call(json!(1), "q", None)).await;
    raw.send(call(json!(2), "q", None)).await;
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == 10)
            .await
    );
    raw.close_stdout();
    assert!(
        mock.wait_until(Duration::from_secs(3), |m| m.in_flight() == 0)
            .await,
        "{} upstream requests still open",
        mock.in_flight()
    );
    tokio::time::timeout(Duration::from_secs(4), raw.child.wait())
        .await
        .expect("chorus exits though stdin is still open")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn integer_options_take_integral_floats_and_null_leaves_them_unset() {
    let mock = Mock::start().await;
    answer_all(&mock, 0);
    let extra = r#"
[pipelines.opts]
description = "With an option."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
options.agents = { type = "integer", description = "Agents.", minimum = 1, maximum = 16, default = 4 }
"#;
    let server = Server::start(&config(&mock, extra)).await;
    for agents in [json!(2.0), Value::Null, json!(3)] {
        let result = server
            .call("opts", json!({"prompt": "q", "agents": agents}))
            .await;
        assert_eq!(result.is_error, Some(false), "{agents}: {}", text(&result));
    }
    let result = server
        .call("opts", json!({"prompt": "q", "agents": 2.5}))
        .await;
    assert_eq!(result.is_error, Some(true));
    let error = &structured(&result)["error"];
    assert_eq!(error["kind"], "invalid-arguments");
    assert_eq!(error["message"], "`agents` must be an integer, got 2.5");
}

/// The numbers behind "at once", for the record (run by hand):
/// `cargo test --test e2e measure_disconnect -- --ignored --nocapture`.
/// Ten runs of: 3 calls waiting on 15 upstream requests, then stdin closes.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement, not a check; run by hand"]
async fn measure_disconnect() {
    let mut upstream = Vec::new();
    let mut exit = Vec::new();
    for _ in 0..10 {
        let mock = Mock::start().await;
        for model in PANEL {
            mock.script(model, [Step::Hang]);
        }
        let mut raw = Raw::start(&roomy(&mock)).await;
        raw.initialize(json!({})).await;
        for i in 0..3 {
            raw.send(call(json!(i), "q", Some(&format!("t{i}")))).await;
        }
        assert!(
            mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == 15)
                .await
        );
        let closed = Instant::now();
        raw.close_stdin();
        let mut closed_all = None;
        let exited = loop {
            if closed_all.is_none() && mock.in_flight() == 0 {
                closed_all = Some(closed.elapsed());
            }
            if let Ok(Some(_)) = raw.child.try_wait() {
                break closed.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        while mock.in_flight() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        upstream.push(closed_all.unwrap_or_else(|| closed.elapsed()));
        exit.push(exited);
    }
    let ms = |d: &Vec<Duration>| {
        let mut v: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        v.sort_by(f64::total_cmp);
        format!(
            "median {:.1} ms, max {:.1} ms",
            v[v.len() / 2],
            v[v.len() - 1]
        )
    };
    println!(
        "stdin EOF -> last upstream connection closed: {}",
        ms(&upstream)
    );
    println!("stdin EOF -> process exit: {}", ms(&exit));
}
