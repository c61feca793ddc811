//! Timeouts that mean what they say: a model may think as long as
//! first_token_timeout allows, keep-alives keep idle_timeout away but never
//! count as a first token, silence after the body started is idle_timeout,
//! and every failure names the setting, its value and the provider.

use std::time::Duration;

use crate::support::*;

/// The test config with the given provider timeouts.
fn with_timeouts(mock: &Mock, timeouts: &str) -> String {
    config(mock, "").replace(
        "request_timeout = \"10s\"\nread_timeout = \"10s\"",
        &format!("request_timeout = \"10s\"\n{timeouts}"),
    )
}

fn call<'a>(result: &'a serde_json::Value, model: &str) -> &'a serde_json::Value {
    calls(result, "fan-out")
        .into_iter()
        .find(|c| c["model"] == model)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn keep_alives_for_longer_than_idle_timeout_before_the_first_token_succeed() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("quick")]);
    }
    // Three seconds of `: OPENROUTER PROCESSING`, one every 300 ms, with
    // idle_timeout = 1s: the model is thinking, and says so.
    mock.script(
        "m1",
        [Step::keep_alive_then(
            Duration::from_millis(300),
            Duration::from_secs(3),
            "worth the wait",
        )],
    );
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start(&with_timeouts(
        &mock,
        "idle_timeout = \"1s\"\nfirst_token_timeout = \"8s\"",
    ))
    .await;
    let result = server.ask("ask", "q").await;
    let m1 = call(structured(&result), "m1");
    assert_eq!(m1["status"], "ok", "{m1}");
    assert!(m1["latency_ms"].as_u64().unwrap() >= 3000, "{m1}");
    assert!(
        mock.requests_for(SYNTH)[0]
            .text()
            .contains("worth the wait")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_first_answer_is_not_a_read_timeout_anymore() {
    // The reproduction: read_timeout = "2s" and a model answering
    // after 3 s failed as "timed out: operation timed out". The old key
    // still loads (as idle_timeout), and the wait for the head is
    // first_token_timeout's.
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(3000, "slow but fine")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&with_timeouts(&mock, "read_timeout = \"2s\"")).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    assert_eq!(result["kind"], "synthesis", "{result}");
    assert_eq!(result["summary"], "Synthesis of 5 of 5 answers.");
}

#[tokio::test(flavor = "multi_thread")]
async fn each_timeout_names_its_setting_its_value_and_its_provider() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("fine")]);
    }
    // Keep-alives forever: alive, but never a token.
    mock.script(
        "m1",
        [Step::Sse {
            events: (0..1000)
                .flat_map(|_| {
                    [
                        Sse::Comment("OPENROUTER PROCESSING".into()),
                        Sse::Wait(Duration::from_millis(200)),
                    ]
                })
                .collect(),
            crlf: false,
        }],
    );
    // Two tokens, then silence.
    mock.script(
        "m2",
        [Step::Sse {
            events: vec![Sse::Content("I was saying".into()), Sse::Hang],
            crlf: false,
        }],
    );
    // No head at all.
    mock.script("m3", [Step::Hang]);
    // Tokens that never stop, each within idle_timeout.
    mock.script(
        "m4",
        [Step::Sse {
            events: (0..1000)
                .flat_map(|_| {
                    [
                        Sse::Content("la ".into()),
                        Sse::Wait(Duration::from_millis(200)),
                    ]
                })
                .collect(),
            crlf: false,
        }],
    );
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start(
        &with_timeouts(&mock, "idle_timeout = \"1s\"\nfirst_token_timeout = \"2s\"")
            .replace("request_timeout = \"10s\"", "request_timeout = \"4s\""),
    )
    .await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    for (model, says) in [
        (
            "m1",
            "no token within first_token_timeout = 2s (providers.mock)",
        ),
        (
            "m2",
            "the response went silent for idle_timeout = 1s (providers.mock)",
        ),
        (
            "m3",
            "no token within first_token_timeout = 2s (providers.mock)",
        ),
        (
            "m4",
            "the attempt did not finish within request_timeout = 4s (providers.mock)",
        ),
    ] {
        let c = call(result, model);
        assert_eq!(c["error"]["kind"], "timeout", "{model}: {c}");
        assert_eq!(c["error"]["message"], says, "{model}");
        assert_eq!(c["attempts"], 1, "{model}: a timeout is not retried");
    }
    assert_eq!(
        result["summary"],
        "Single answer from m5 (4 of 5 failed); not a synthesis."
    );
}
