//! Time to first token and the wait for provider permits, as each call's
//! record says them: a stream whose first token comes late (keep-alives
//! before it do not count), a whole body that starts late, and calls that
//! queue behind `max_concurrency = 1`.

use std::time::Duration;

use serde_json::Value;

use crate::support::mock::finish_events;
use crate::support::*;

fn call<'a>(result: &'a Value, model: &str) -> &'a Value {
    calls(result, "fan-out")
        .into_iter()
        .find(|c| c["model"] == model)
        .unwrap()
}

fn ms(call: &Value, key: &str) -> u64 {
    call[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {call}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_first_token_is_timed_from_the_request_not_from_keep_alives() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("fine")]);
    }
    let mut events = vec![
        Sse::Comment("OPENROUTER PROCESSING".into()),
        Sse::Wait(Duration::from_millis(400)),
        Sse::Content("Blue light ".into()),
        Sse::Wait(Duration::from_millis(300)),
        Sse::Content("scatters most.".into()),
    ];
    events.extend(finish_events());
    mock.script(
        "m1",
        [Step::Sse {
            events,
            crlf: false,
        }],
    );
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "Why is the sky blue?").await;
    let m1 = call(structured(&result), "m1");
    let (ttft, latency) = (ms(m1, "ttft_ms"), ms(m1, "latency_ms"));
    assert!(ttft >= 400, "the first token came after 400 ms: {m1}");
    assert!(latency >= ttft + 300, "the rest came 300 ms after it: {m1}");
    assert!(m1.get("queued_ms").is_none(), "nothing waited: {m1}");
    let m2 = call(structured(&result), "m2");
    assert!(ms(m2, "ttft_ms") <= ms(m2, "latency_ms"), "{m2}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_whole_body_has_its_first_token_when_it_begins_to_arrive() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("fine")]);
    }
    mock.script("m1", [Step::answer_after(400, "late but whole")]);
    mock.script("m2", [Step::status(400, "bad request")]);
    mock.script(SYNTH, [Step::answer("merged")]);
    let no_stream = config(&mock, "").replace(
        "connect_timeout = \"2s\"",
        "connect_timeout = \"2s\"\nstream = false",
    );
    let server = Server::start(&no_stream).await;
    let result = server.ask("ask", "q").await;
    let m1 = call(structured(&result), "m1");
    let (ttft, latency) = (ms(m1, "ttft_ms"), ms(m1, "latency_ms"));
    assert!(ttft >= 400, "{m1}");
    assert!(ttft <= latency, "{m1}");
    let m2 = call(structured(&result), "m2");
    assert_eq!(m2["status"], "failed");
    assert!(
        m2.get("ttft_ms").is_none(),
        "no answer, no first token: {m2}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_queued_behind_max_concurrency_say_how_long_they_waited() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(150, "in turn")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let one_at_a_time = config(&mock, "").replace(
        "connect_timeout = \"2s\"",
        "connect_timeout = \"2s\"\nmax_concurrency = 1",
    );
    let server = Server::start(&one_at_a_time).await;
    let result = server.ask("ask", "q").await;
    let panel = calls(structured(&result), "fan-out");
    assert_eq!(panel.len(), 5);
    let queued: Vec<u64> = panel
        .iter()
        .filter_map(|c| c["queued_ms"].as_u64())
        .collect();
    assert!(
        queued.iter().filter(|&&q| q >= 100).count() >= 3,
        "five calls, one at a time, 150 ms each: most waited {queued:?}"
    );
    for call in panel {
        let waited = call["queued_ms"].as_u64().unwrap_or(0);
        assert!(
            waited + ms(call, "ttft_ms") <= ms(call, "latency_ms"),
            "queued, then sent, then the first token, within the latency: {call}"
        );
    }
}
