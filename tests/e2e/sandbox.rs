//! A plugin that loops, panics, hogs memory, floods its output or returns
//! nonsense fails its own call with a message naming it; the server keeps
//! serving everyone else.

use serde_json::Value;

use crate::support::*;

async fn serving_server(mock: &Mock, extra: &str) -> Server {
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    Server::start(&config(mock, extra)).await
}

async fn assert_still_serving(server: &Server) {
    let fine = server.ask("ask", "are you still there?").await;
    assert_eq!(fine.is_error, Some(false), "{}", text(&fine));
    assert_eq!(structured(&fine)["answer"], "merged");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_plugin_is_stopped_by_its_cpu_budget() {
    let mock = Mock::start().await;
    let server = serving_server(&mock, &chaos_pipeline("loops", "loop", "")).await;
    let result = server.ask("loops", "q").await;
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(
        message.contains("plugin `chaos-loops` used up its CPU time (2s)"),
        "{message}"
    );
    assert_still_serving(&server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_plugin_is_reported_with_its_last_words() {
    let mock = Mock::start().await;
    let server = serving_server(&mock, &chaos_pipeline("panics", "panic", "")).await;
    let result = server.ask("panics", "q").await;
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(
        message.contains("plugin `chaos-panics` crashed"),
        "{message}"
    );
    assert!(
        message.contains("chaos plugin panicked on purpose"),
        "{message}"
    );
    assert_still_serving(&server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_memory_hog_hits_its_cap() {
    let mock = Mock::start().await;
    let server = serving_server(&mock, &chaos_pipeline("hogs", "alloc", "")).await;
    let result = server.ask("hogs", "q").await;
    let message = text(&result);
    assert!(
        message.contains("plugin `chaos-hogs` hit its memory cap of 32 MiB"),
        "{message}"
    );
    assert_still_serving(&server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn nonsense_plans_are_refused_with_the_plugin_named() {
    let mock = Mock::start().await;
    let extra = format!(
        "{}{}",
        chaos_pipeline("empty", "empty", ""),
        chaos_pipeline("stranger", "ok", r#", panel = ["m1", "no-such-model"]"#)
    );
    let server = serving_server(&mock, &extra).await;

    let empty = text(&server.ask("empty", "q").await);
    assert!(
        empty.contains(
            "plugin `chaos-empty` returned something unusable: its plan has an empty panel"
        ),
        "{empty}"
    );
    let stranger = text(&server.ask("stranger", "q").await);
    assert!(
        stranger.contains(
            "plugin `chaos-stranger` returned something unusable: it chose model `no-such-model`"
        ),
        "{stranger}"
    );
    assert_still_serving(&server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_output_goes_to_the_log_bounded_never_to_stdout() {
    let mock = Mock::start().await;
    let server = serving_server(
        &mock,
        &chaos_pipeline("chatty", "print", ", bytes = 2000000"),
    )
    .await;
    let result = server.ask("chatty", "q").await;
    // MCP still works, so stdout carried nothing but JSON-RPC.
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let log = server.stderr();
    assert!(
        log.contains("plugin=chaos-chatty") && log.contains("stream=\"stdout\""),
        "guest output is logged"
    );
    assert!(log.contains("more bytes than the 16384 logged; they were dropped"));
    assert!(
        log.len() < 1_000_000,
        "the log is bounded, not 4 MB ({} bytes)",
        log.len()
    );
    assert_eq!(structured(&result)["kind"], Value::from("synthesis"));
}
