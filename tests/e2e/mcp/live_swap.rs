//! Live swaps: `chorus serve` reloads plugins.toml and the plugin files it
//! names when they change (or on SIGHUP). A run in flight finishes on the
//! set it started with; new calls use the new set; a client hears
//! `notifications/tools/list_changed` when the tools changed; a broken
//! change is refused, reported, and the old set keeps serving. Every wait
//! here watches for what chorus says (a stderr line, a notification), never
//! a fixed sleep.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

/// Waits (up to 60 s) until `check` holds.
async fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes the config as an editor does: a temporary file renamed over it.
fn save(path: &Path, text: &str) {
    let temporary = path.with_extension("toml.swp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

/// Every panel model answers once `gate` opens (the first request), then
/// at once.
fn gated_panel(mock: &Mock, gate: &Gate, models: &[&str]) {
    for model in models {
        let text = format!("answer from {model}, {}", "x".repeat(model.len()));
        mock.script(
            model,
            [
                Step::Gated {
                    gate: gate.clone(),
                    text: text.clone(),
                },
                Step::answer(&text),
            ],
        );
    }
}

async fn tool_names(server: &Server) -> Vec<String> {
    server
        .client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

const VOTE: &str = "\n[plugins.vote]\nbuiltin = \"vote\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_synthesizer_swapped_mid_run_serves_new_runs_while_the_run_in_flight_finishes_on_the_old()
{
    let mock = Mock::start().await;
    let gate = Gate::default();
    gated_panel(&mock, &gate, &PANEL);
    mock.script(SYNTH, [Step::answer("merged by the synthesizer model")]);
    let before = config(&mock, VOTE);
    let server = Arc::new(Server::start(&before).await);

    let first = tokio::spawn({
        let server = server.clone();
        async move { server.ask("ask", "the first question").await }
    });
    assert!(
        mock.wait_until(Duration::from_secs(30), |m| m.in_flight() == PANEL.len())
            .await,
        "the first run reached its fan-out"
    );
    let after = before.replace("synthesizer = \"synthesize\"", "synthesizer = \"vote\"");
    assert_ne!(after, before);
    save(server.config_path(), &after);
    let reloaded = server.wait_for_stderr("reloaded plugins.toml", 1).await;
    assert!(
        reloaded[0].contains("pipelines changed: ask"),
        "{reloaded:?}"
    );

    gate.open();
    let first = first.await.unwrap();
    let first = structured(&first);
    assert_eq!(first["kind"], "synthesis", "{first:#}");
    assert_eq!(first["answer"], "merged by the synthesizer model");
    assert_eq!(mock.requests_for(SYNTH).len(), 1);

    let second = server.ask("ask", "the second question").await;
    let second = structured(&second);
    assert_eq!(second["kind"], "vote", "{second:#}");
    assert_eq!(
        mock.requests_for(SYNTH).len(),
        1,
        "the vote asks no synthesizer model"
    );

    // The tools did not change (same pipelines, descriptions, options and
    // synthesizers): no list_changed. A change that adds a tool sends one,
    // after any the first reload would have sent on the same connection.
    let more = format!(
        "{after}\n[pipelines.more]\ndescription = \"More.\"\nselector = \"panel\"\nprompter = \"passthrough\"\nsynthesizer = \"vote\"\n"
    );
    save(server.config_path(), &more);
    let reloaded = server.wait_for_stderr("reloaded plugins.toml", 2).await;
    assert!(reloaded[1].contains("pipelines +more"), "{reloaded:?}");
    until("tools/list_changed arrives", || {
        server.tool_list_changes() >= 1
    })
    .await;
    assert_eq!(
        server.tool_list_changes(),
        1,
        "only the change that added a tool was announced"
    );
    assert!(tool_names(&server).await.contains(&"more".to_owned()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_file_corrupted_mid_run_is_refused_the_run_finishes_and_a_fix_is_picked_up() {
    let mock = Mock::start().await;
    let gate = Gate::default();
    gated_panel(&mock, &gate, &["m1", "m22"]);
    let files = tempfile::tempdir().unwrap();
    let merge = files.path().join("merge.wasm");
    std::fs::copy(plugin_dir().join("legacy_longest.wasm"), &merge).unwrap();
    let extra = format!(
        r#"
[plugins.merge]
path = "{merge}"
settings = {{ mode = "fake-synthesis" }}

[plugins.pair]
builtin = "static-panel"
settings = {{ panel = ["m1", "m22"], synthesizers = ["{SYNTH}"] }}

[models.m22]
context_window = 100000

[pipelines.pick]
description = "The longest of two answers."
selector = "pair"
prompter = "passthrough"
synthesizer = "merge"
"#,
        merge = merge.display()
    );
    let server = Arc::new(Server::start(&config(&mock, &extra)).await);
    let first = tokio::spawn({
        let server = server.clone();
        async move { server.ask("pick", "q").await }
    });
    assert!(
        mock.wait_until(Duration::from_secs(30), |m| m.in_flight() == 2)
            .await
    );

    // The synthesizer's file is overwritten while the run waits for its
    // panel; the run then merges with the plugin as it was loaded.
    std::fs::write(&merge, b"this is not a WebAssembly component").unwrap();
    server.wait_for_stderr("was refused", 1).await;
    let log = server.stderr();
    let block: Vec<&str> = log
        .lines()
        .skip_while(|line| !line.contains("was refused"))
        .take(3)
        .collect();
    let reason = block[1].trim();
    assert!(
        reason.contains("plugins.merge.path")
            && reason.contains(&merge.display().to_string())
            && reason.contains("is not a loadable WebAssembly component"),
        "{block:#?}"
    );
    assert!(block[0].contains("still serving"), "{block:#?}");
    assert!(block[2].contains("chorus check --config"), "{block:#?}");

    gate.open();
    let first = first.await.unwrap();
    let first = structured(&first);
    assert_eq!(first["kind"], "pick", "{first:#}");
    assert!(first["answer"].as_str().unwrap().contains("from m22"));

    let again = server.ask("pick", "q").await;
    assert_eq!(structured(&again)["kind"], "pick", "the old set serves");

    // `chorus check` on the same file shows the same error.
    let check = command(&["check", "--config", server.config_path().to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(check.status.code(), Some(2));
    let checked = String::from_utf8_lossy(&check.stderr);
    assert!(checked.contains(reason), "{checked}\n---\n{reason}");

    // A good file is picked up: a 0.2 synthesizer whose "synthesis" of one
    // answer chorus relabels.
    std::fs::copy(plugin_dir().join("chaos_synthesizer.wasm"), &merge).unwrap();
    let reloaded = server.wait_for_stderr("reloaded plugins.toml", 1).await;
    assert!(
        reloaded[0].contains("plugins rebuilt: merge"),
        "{reloaded:?}"
    );
    let fixed = server.ask("pick", "q").await;
    assert_eq!(
        structured(&fixed)["kind"],
        "single",
        "{:#}",
        structured(&fixed)
    );
}

const SECOND: &str = r#"
[pipelines.second]
description = "The same, by another name."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_removed_pipeline_is_announced_and_calling_it_says_unknown_tool() {
    let mock = Mock::start().await;
    let server = Server::start(&config(&mock, SECOND)).await;
    assert!(tool_names(&server).await.contains(&"second".to_owned()));

    save(server.config_path(), &config(&mock, ""));
    until("tools/list_changed arrives", || {
        server.tool_list_changes() >= 1
    })
    .await;
    let reloaded = server.wait_for_stderr("reloaded plugins.toml", 1).await;
    assert!(reloaded[0].contains("pipelines −second"), "{reloaded:?}");
    let tools = tool_names(&server).await;
    assert!(!tools.contains(&"second".to_owned()), "{tools:?}");
    assert!(tools.contains(&"ask".to_owned()), "{tools:?}");

    let arguments = json!({"prompt": "q"}).as_object().cloned().unwrap();
    let error = server
        .client
        .call_tool(CallToolRequestParams::new("second").with_arguments(arguments))
        .await
        .expect_err("the tool is gone")
        .to_string();
    assert!(error.contains("unknown tool"), "{error}");
    assert!(error.contains("second"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_no_watch_only_sighup_reloads() {
    let mock = Mock::start().await;
    let server = Server::start_with_args(&config(&mock, ""), &["--no-watch"], &[]).await;
    save(server.config_path(), &config(&mock, SECOND));
    server.signal("HUP");
    let reloaded = server.wait_for_stderr("reloaded plugins.toml", 1).await;
    assert!(
        reloaded[0].contains("SIGHUP: reloaded plugins.toml: pipelines +second"),
        "the first reload is the signal's: {reloaded:?}"
    );
    until("tools/list_changed arrives", || {
        server.tool_list_changes() >= 1
    })
    .await;
    assert!(tool_names(&server).await.contains(&"second".to_owned()));

    // Nothing changed since: the signal says so.
    server.signal("HUP");
    let again = server.wait_for_stderr("reloaded plugins.toml", 2).await;
    assert!(again[1].ends_with("nothing changed"), "{again:?}");
}

#[tokio::test]
async fn serve_help_says_sighup_reloads_even_without_watching() {
    let help = command(&["serve", "--help"]).output().await.unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--no-watch"), "{help}");
    assert!(help.contains("SIGHUP still reloads"), "{help}");
}

/// A 2026-07-28 request as a stateless HTTP client sends it.
fn modern(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Reads `response`'s event stream until a message with `method` arrives.
async fn read_until(response: &mut reqwest::Response, seen: &mut String, method: &str) {
    let needle = format!("\"method\":\"{method}\"");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !seen.contains(&needle) {
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .unwrap_or_else(|_| panic!("no {method} within 60 s; got: {seen}"))
            .expect("the stream reads")
            .unwrap_or_else(|| panic!("the stream ended before {method}: {seen}"));
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_client_listening_for_changes_hears_that_the_tools_changed() {
    let mock = Mock::start().await;
    let file = write_config(&config(&mock, SECOND));
    let mut server = HttpServer::start(&file.path, Some(TOKEN), &[]).await;
    let listen = modern(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut stream = server
        .post(Some(TOKEN), &listen)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .send()
        .await
        .unwrap();
    if !stream.status().is_success() {
        panic!(
            "{}: {}",
            stream.status(),
            stream.text().await.unwrap_or_default()
        );
    }
    let mut seen = String::new();
    read_until(
        &mut stream,
        &mut seen,
        "notifications/subscriptions/acknowledged",
    )
    .await;

    save(&file.path, &config(&mock, ""));
    read_until(&mut stream, &mut seen, "notifications/tools/list_changed").await;
    server.wait_for_stderr("reloaded plugins.toml", 1).await;

    let list = server
        .post(Some(TOKEN), &modern(2, "tools/list", json!({})))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .send()
        .await
        .unwrap();
    let listed = crate::support::http::messages(list).await;
    let names: Vec<&str> = listed[0]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"second"), "{names:?}");
    drop(stream);
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_swap_keeps_warm_provider_connections_unless_the_provider_changed() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let before = config(&mock, "");
    let server = Server::start(&before).await;
    server.ask("ask", "warm up").await;
    let warm = mock.connections();
    assert!(warm > 0);

    // The pipelines change, the providers do not: the pool is kept.
    save(server.config_path(), &format!("{before}{SECOND}"));
    server.wait_for_stderr("reloaded plugins.toml", 1).await;
    assert_eq!(
        structured(&server.ask("ask", "q").await)["kind"],
        "synthesis"
    );
    assert_eq!(mock.connections(), warm, "no new connection after the swap");

    // The provider changes: new clients, new connections, said in the log.
    let changed = format!("{before}{SECOND}")
        .replace("request_timeout = \"10s\"", "request_timeout = \"11s\"");
    save(server.config_path(), &changed);
    let reloaded = server.wait_for_stderr("reloaded plugins.toml", 2).await;
    assert!(
        reloaded[1].contains("providers new clients: mock"),
        "{reloaded:?}"
    );
    assert_eq!(
        structured(&server.ask("ask", "q").await)["kind"],
        "synthesis"
    );
    assert!(
        mock.connections() > warm,
        "a changed provider connects anew"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_editors_burst_of_saves_is_one_reload() {
    let mock = Mock::start().await;
    let before = config(&mock, "");
    let server = Server::start(&before).await;
    let after = format!("{before}{SECOND}");
    // What editors do: write in place, write a backup, rename a temporary
    // over the file, touch it — several events within milliseconds.
    std::fs::write(server.config_path(), &after).unwrap();
    std::fs::write(server.config_path().with_extension("toml~"), &before).unwrap();
    save(server.config_path(), &after);
    save(server.config_path(), &after);
    std::fs::write(server.config_path(), &after).unwrap();
    let reloaded = server.wait_for_stderr("reloaded plugins.toml", 1).await;
    assert!(reloaded[0].contains("pipelines +second"), "{reloaded:?}");
    // SIGHUP's reload comes after any other the burst started.
    server.signal("HUP");
    server.wait_for_stderr("SIGHUP: reloaded", 1).await;
    let reloads = server.wait_for_stderr("reloaded plugins.toml", 1).await;
    assert_eq!(reloads.len(), 2, "one reload for the burst: {reloads:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_keys_and_refused_settings_are_refused_and_what_needs_a_restart_is_said() {
    let mock = Mock::start().await;
    mock.script(SYNTH, [Step::answer("merged")]);
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    let before = config(&mock, "");
    let server = Server::start(&before).await;

    // An unknown key: refused, naming the key.
    save(server.config_path(), &format!("bogus = 1\n{before}"));
    server.wait_for_stderr("was refused", 1).await;
    assert!(
        server.stderr().contains("unknown field `bogus`"),
        "{}",
        server.stderr()
    );

    // Settings the plugin itself refuses (static-panel's panel must name
    // models): refused with the plugin's own message.
    let refused = before.replace(
        "settings = { panel = [\"m1\", \"m2\", \"m3\", \"m4\", \"m5\"]",
        "settings = { panel = 5",
    );
    assert_ne!(refused, before);
    save(server.config_path(), &refused);
    let blocks = server.wait_for_stderr("was refused", 2).await;
    assert_eq!(blocks.len(), 2);
    let log = server.stderr();
    let lines: Vec<&str> = log.lines().collect();
    let last = lines
        .iter()
        .rposition(|line| line.contains("was refused"))
        .unwrap();
    let reason = lines[last + 1];
    assert!(
        reason.contains("plugins.panel.settings") && reason.contains("refused its settings"),
        "{log}"
    );
    assert_eq!(
        structured(&server.ask("ask", "q").await)["kind"],
        "synthesis"
    );

    // A good change with a key that needs a restart: applied, and the rest
    // is named.
    save(
        server.config_path(),
        &format!("{before}{SECOND}\n[store]\nmax_runs = 5\n"),
    );
    let reloaded = server.wait_for_stderr("reloaded plugins.toml", 1).await;
    assert!(
        reloaded[0].contains("pipelines +second")
            && reloaded[0].contains("needs a restart to take effect, still as before: [store]"),
        "{reloaded:?}"
    );
}
