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

fn chaos_synthesizer_pipeline(name: &str, mode: &str) -> String {
    format!(
        r#"
[plugins.chaos-{name}]
path = "{dir}/chaos_synthesizer.wasm"
settings = {{ mode = "{mode}" }}

[pipelines.{name}]
description = "Fault injection: {mode}."
selector = "panel"
prompter = "passthrough"
synthesizer = "chaos-{name}"
"#,
        dir = plugin_dir().display(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn nonsense_answers_are_refused_or_relabelled_never_passed_on() {
    let mock = Mock::start().await;
    let extra = [
        chaos_synthesizer_pipeline("bad-index", "bad-index"),
        chaos_synthesizer_pipeline("fake", "fake-synthesis"),
        chaos_synthesizer_pipeline("bad-details", "bad-details"),
    ]
    .concat();
    let server = serving_server(&mock, &extra).await;

    let bad_index = text(&server.ask("bad-index", "q").await);
    assert!(
        bad_index.contains("plugin `chaos-bad-index` returned something unusable: its answer cites completion 99, but the fan-out has 5"),
        "{bad_index}"
    );
    let bad_details = text(&server.ask("bad-details", "q").await);
    assert!(
        bad_details.contains("answer.details is not JSON"),
        "{bad_details}"
    );

    let fake = server.ask("fake", "q").await;
    let fake = structured(&fake);
    assert_eq!(fake["kind"], "single", "one answer is never a synthesis");
    assert!(
        fake["notes"]
            .to_string()
            .contains("labelled this a synthesis, but it rests on 1 answer(s); relabelled")
    );
    assert_still_serving(&server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_built_for_another_contract_is_refused_at_load_naming_both_versions() {
    let mock = Mock::start().await;
    let extra = format!(
        "\n[plugins.future]\npath = \"{}/future_contract.wasm\"\n",
        plugin_dir().display()
    );
    let file = write_config(&config(&mock, &extra));
    let output = command(&["check", "--config", file.path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`plugins.future.path`"), "{stderr}");
    assert!(
        stderr.contains(
            "was built for chorus:strategy@0.2.0, but this chorus speaks chorus:strategy@0.1.0"
        ),
        "{stderr}"
    );
}
