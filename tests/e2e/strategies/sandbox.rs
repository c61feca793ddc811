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
    // Its wall time is far beyond: on a slow or busy machine the loop takes
    // longer to spend its CPU, and must still be stopped for its CPU.
    let extra = chaos_pipeline("loops", "loop", "")
        .replace("cpu_time = \"2s\"", "cpu_time = \"2s\"\nwall_time = \"5m\"");
    let server = serving_server(&mock, &extra).await;
    let result = server.ask("loops", "q").await;
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(
        message.contains("plugin `chaos-loops` used up its CPU time (2s)"),
        "{message}"
    );
    // Stopped at the first yield past its budget: a few milliseconds of
    // work on any machine, stated as CPU (however long it took).
    let cpu = seconds_before(&message, " s of CPU");
    assert!((2.0..2.5).contains(&cpu), "{cpu} s of CPU: {message}");
    assert_still_serving(&server).await;
}

/// The number of seconds that comes just before `unit` in `message`.
fn seconds_before(message: &str, unit: &str) -> f64 {
    let head = &message[..message.find(unit).expect(unit)];
    let number = head
        .rsplit(|c: char| c != '.' && !c.is_ascii_digit())
        .next()
        .unwrap();
    number
        .parse()
        .unwrap_or_else(|_| panic!("no number before {unit:?}: {message}"))
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
        chaos_synthesizer_pipeline("bad-id", "bad-id"),
        chaos_synthesizer_pipeline("fake", "fake-synthesis"),
        chaos_synthesizer_pipeline("bad-details", "bad-details"),
    ]
    .concat();
    let server = serving_server(&mock, &extra).await;

    let bad_id = text(&server.ask("bad-id", "q").await);
    assert!(
        bad_id.contains("plugin `chaos-bad-id` returned something unusable: its answer cites call 99, but the run made 5 calls"),
        "{bad_id}"
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
            "was built for chorus:strategy@0.7.0, but this chorus speaks chorus:strategy@0.6.0"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_citing_a_failed_call_does_not_count_it() {
    let mock = Mock::start().await;
    let server = serving_server(
        &mock,
        &chaos_synthesizer_pipeline("cites-failure", "failed-id"),
    )
    .await;
    mock.script("m3", [Step::status(400, "bad request")]);
    let result = server.ask("cites-failure", "q").await;
    let said = text(&result);
    assert!(
        said.contains("cited calls that gave no answer (m3); they are not counted"),
        "{said}"
    );
    let sources = structured(&result)["summary"].as_str().unwrap().to_owned();
    assert!(!sources.contains("5 of 5"), "{sources}");
    assert_still_serving(&server).await;
}

fn legacy_pipeline(mode: &str) -> String {
    format!(
        r#"
[plugins.legacy-{mode}]
path = "{dir}/legacy_longest.wasm"
settings = {{ mode = "{mode}" }}

[pipelines.legacy-{mode}]
description = "A synthesizer built for contract 0.1."
selector = "panel"
prompter = "passthrough"
synthesizer = "legacy-{mode}"
"#,
        dir = plugin_dir().display(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_built_for_contract_0_1_keeps_working_its_citations_mapped_to_call_ids() {
    let mock = Mock::start().await;
    let extra = [legacy_pipeline("longest"), legacy_pipeline("bad-index")].concat();
    let server = serving_server(&mock, &extra).await;
    mock.script("m1", [Step::status(503, "down")]);
    mock.script("m4", [Step::answer("the longest answer of them all")]);

    let file = write_config(&config(&mock, &extra));
    let check = command(&["check", "--config", file.path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    let listing = String::from_utf8_lossy(&check.stdout);
    assert!(
        listing
            .lines()
            .any(|l| l.contains("legacy-longest") && l.contains("chorus:strategy@0.1.0")),
        "{listing}"
    );

    let result = server.ask("legacy-longest", "q").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let structured = structured(&result);
    assert_eq!(structured["kind"], "pick");
    assert_eq!(structured["answer"], "the longest answer of them all");
    assert_eq!(structured["summary"], "One of 4 answers, picked verbatim.");

    let result = server.ask("legacy-bad-index", "q").await;
    let bad = text(&result);
    assert!(
        bad.contains("its answer cites completion 99, but the fan-out has 5"),
        "{bad}"
    );
    // The answers that were paid for come back, side by side.
    let structured_bad = crate::support::structured(&result);
    assert_eq!(structured_bad["kind"], "unmerged", "{bad}");
    assert!(bad.contains("Merging failed"), "{bad}");
    assert_still_serving(&server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_settings_are_refused_at_load_with_the_plugins_own_message() {
    let mock = Mock::start().await;
    let text = config(&mock, "").replace(
        r#"settings = { panel = ["m1""#,
        r#"settings = { pannel = ["m9"], panel = ["m1""#,
    );
    let file = write_config(&text);
    let output = command(&["check", "--config", file.path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`plugins.panel.settings`"), "{stderr}");
    assert!(
        stderr
            .contains("plugin `panel` refused its settings: bad settings: unknown field `pannel`"),
        "{stderr}"
    );

    // `serve` refuses to start on the same file, with the same words.
    let output = command(&["serve", "--config", file.path.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("refused its settings"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sleeping_plugin_is_stopped_by_its_wall_time_not_the_run_deadline() {
    let mock = Mock::start().await;
    let extra = chaos_pipeline("sleeps", "sleep", ", seconds = 3600")
        .replace("cpu_time = \"2s\"", "cpu_time = \"2s\"\nwall_time = \"1s\"");
    let server = serving_server(&mock, &extra).await;
    let started = std::time::Instant::now();
    let message = text(&server.ask("sleeps", "q").await);
    assert!(
        message.contains(
            "plugin `chaos-sleeps` spent more than its 1s of wall-clock time outside model calls, sleeping or waiting"
        ),
        "{message}"
    );
    assert!(seconds_before(&message, " s of CPU") < 0.5, "{message}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "not the 20 s run deadline"
    );
    assert_still_serving(&server).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_see_fixed_clocks_and_their_budget() {
    let mock = Mock::start().await;
    let extra = [
        chaos_pipeline("clock", "clock", ""),
        chaos_pipeline("budget", "budget", ""),
    ]
    .concat();
    let server = serving_server(&mock, &extra).await;
    let clock = server.ask("clock", "q").await;
    let notes = structured(&clock)["notes"].to_string();
    // 2000-01-01T00:00:00Z, whatever the host's time.
    assert!(notes.contains("wall clock: 946684800;"), "{notes}");

    let budget = server.ask("budget", "q").await;
    let notes = structured(&budget)["notes"].to_string();
    assert!(
        notes.contains("budget: 64 calls left, cost left None"),
        "{notes}"
    );

    // With a cost ceiling (here the call's own), the plugin sees what is left.
    let capped = server
        .call(
            "budget",
            serde_json::json!({"prompt": "q", "max_cost_usd": 0.25}),
        )
        .await;
    let notes = structured(&capped)["notes"].to_string();
    assert!(notes.contains("cost left Some(0.25)"), "{notes}");
}

#[tokio::test(flavor = "multi_thread")]
async fn log_and_progress_floods_are_bounded_and_said_to_be() {
    let mock = Mock::start().await;
    let server = serving_server(
        &mock,
        &chaos_pipeline("chatter", "chatter", ", count = 5000"),
    )
    .await;
    let result = server.ask("chatter", "q").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let log = server.stderr();
    assert!(log.contains("chatter 199"), "the first 200 are logged");
    assert!(!log.contains("chatter 200"), "the rest are not");
    assert!(
        log.contains(
            "the plugin logged 4800 more messages than the 200 a call may; they were dropped"
        ),
        "{log}"
    );
    assert!(log.contains("4900 more progress messages than the 100 a call may"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_response_format_providers_would_refuse_stops_the_plugin_saying_why() {
    let mock = Mock::start().await;
    let extra = chaos_pipeline("bad-format", "bad-format", "");
    let server = serving_server(&mock, &extra).await;
    let message = text(&server.ask("bad-format", "q").await);
    assert!(
        message.contains(
            "plugin `chaos-bad-format` was stopped: its host.complete request 0 (\"bad format\") cannot be sent: the response format's schema name \"my schema\" must be 1 to 64 letters, digits, `_` or `-`"
        ),
        "{message}"
    );
    assert!(mock.requests_for("m1").is_empty(), "nothing was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_batch_stops_the_plugin_with_a_clear_error() {
    let mock = Mock::start().await;
    let extra = [
        chaos_pipeline("batch", "batch", ", count = 20000"),
        chaos_pipeline("small-batch", "batch", ", count = 3"),
    ]
    .concat();
    let server = serving_server(&mock, &extra).await;
    let message = text(&server.ask("batch", "q").await);
    assert!(
        message.contains("plugin `chaos-batch` was stopped: it asked host.complete for 20000 chat completions in one batch; the most a run may make is 64"),
        "{message}"
    );
    assert!(mock.requests_for("m1").is_empty(), "nothing was sent");
    let small = server.ask("small-batch", "q").await;
    assert!(
        structured(&small)["notes"]
            .to_string()
            .contains("3 of the batch answered")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_past_max_concurrent_runs_wait_for_a_slot_and_say_so() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(300, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let text_config = config(&mock, "").replace(
        "run_timeout = \"20s\"",
        "run_timeout = \"20s\"\nmax_concurrent_runs = 1",
    );
    let server = Server::start(&text_config).await;
    let (a, b) = tokio::join!(server.ask("ask", "first"), server.ask("ask", "second"));
    for result in [&a, &b] {
        assert_eq!(result.is_error, Some(false), "{}", text(result));
    }
    assert_eq!(mock.max_in_flight(), 5, "one run's fan-out at a time");
    let waited = mock
        .wait_until(std::time::Duration::from_secs(5), |_| {
            server.progress.lock().unwrap().iter().any(|p| {
                p.message
                    .as_deref()
                    .is_some_and(|m| m.contains("waiting for a free slot: 1 runs are in progress"))
            })
        })
        .await;
    assert!(waited, "the waiting run said so");
}
