//! The terminal side: `chorus ask`, `chorus check`, config discovery and
//! errors, and the stdout contract of `chorus serve` checked byte by byte.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::*;

fn script_all(mock: &Mock) {
    for model in PANEL {
        mock.script(model, [Step::answer(&format!("{model}'s view"))]);
    }
    mock.script("m2", [Step::status(500, "m2 fell over")]);
    mock.script(SYNTH, [Step::answer("The merged answer.")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_prints_the_answer_on_stdout_and_progress_on_stderr() {
    let mock = Mock::start().await;
    script_all(&mock);
    let file = write_config(&config(&mock, ""));
    let (code, stdout, stderr) = run_cli(&[
        "ask",
        "--config",
        file.path.to_str().unwrap(),
        "Why is the sky blue?",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "The merged answer.\n");
    for model in ["m1", "m3", "m4", "m5"] {
        assert!(
            stderr
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("✓ {model} "))),
            "{stderr}"
        );
    }
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("✗ m2") && l.contains("HTTP 500") && l.contains("m2 fell over")),
        "{stderr}"
    );
    assert!(stderr.contains("Synthesis of 4 of 5 answers."), "{stderr}");
    assert!(
        !stderr.contains(CANARY) && !stdout.contains(CANARY),
        "the API key never appears"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_json_prints_the_structured_result() {
    let mock = Mock::start().await;
    script_all(&mock);
    let file = write_config(&config(&mock, ""));
    let (code, stdout, _) = run_cli(&[
        "ask",
        "--json",
        "--pipeline",
        "ask",
        "--config",
        file.path.to_str().unwrap(),
        "q",
    ])
    .await;
    assert_eq!(code, 0);
    let result: Value = serde_json::from_str(&stdout).expect("stdout is one JSON document");
    assert_eq!(result["kind"], "synthesis");
    assert_eq!(result["answer"], "The merged answer.");
    assert_eq!(result["calls"].as_array().unwrap().len(), 6);

    let (code, _, stderr) = run_cli(&[
        "ask",
        "--pipeline",
        "nope",
        "--config",
        file.path.to_str().unwrap(),
        "q",
    ])
    .await;
    // A pipeline that does not exist is a usage error, found before any
    // run: exit 2, naming the ones there are.
    assert_eq!(code, 2);
    assert!(
        stderr.contains("there is no pipeline `nope` (there are: ask)"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn check_describes_pipelines_plugins_contracts_and_models() {
    let mock = Mock::start().await;
    let file = write_config(&config(&mock, &chaos_pipeline("chaotic", "ok", "")));
    let (code, stdout, stderr) = run_cli(&["check", "--config", file.path.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    for expected in [
        "panel                selector     chorus:strategy@0.6.0",
        "synthesize           synthesizer  chorus:strategy@0.6.0    builtin:synthesize",
        "chaos-chaotic        selector     chorus:strategy@0.6.0",
        "ask (default): panel -> passthrough -> fan-out -> synthesize",
        "key: $CHORUS_TEST_API_KEY (set)",
        "synth2",
    ] {
        assert!(
            stdout.contains(expected),
            "missing `{expected}` in:\n{stdout}"
        );
    }

    // The built-in default validates too, from any directory.
    let elsewhere = tempfile::tempdir().unwrap();
    let output = command(&["check"])
        .current_dir(elsewhere.path())
        .env("OPENROUTER_API_KEY", "sk-or-v1-0123456789abcdef")
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("<built-in plugins.toml>"));

    // Without a usable key, nothing could be called: the check says so and
    // fails, whether the key is missing or cannot be sent.
    for key in [None, Some("sk-or-“quoted”")] {
        let mut check = command(&["check"]);
        check.current_dir(elsewhere.path());
        match key {
            Some(key) => check.env("OPENROUTER_API_KEY", key),
            None => check.env_remove("OPENROUTER_API_KEY"),
        };
        let output = check.output().await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{key:?}: {stdout}");
        assert!(
            stdout.contains("no provider that a model uses can be called"),
            "{stdout}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_config_names_the_file_and_the_key() {
    let mock = Mock::start().await;
    let good = config(&mock, "");
    let cases: Vec<(String, &str)> = vec![
        (
            good.replace(
                "connect_timeout = \"2s\"",
                "connect_timeout = \"2s\"\ntimeout_typo = 3",
            ),
            "`providers.mock.timeout_typo`: unknown field `timeout_typo`",
        ),
        (
            good.replace("selector = \"panel\"", "selector = \"panl\""),
            "`pipelines.ask.selector`: no plugin named `panl` (defined: panel, passthrough, synthesize)",
        ),
        (
            good.replace("selector = \"panel\"", "selector = \"passthrough\""),
            "`pipelines.ask.selector`: plugin `passthrough` is a prompter, not a selector",
        ),
        (
            good.replace("max_attempts = 3", "max_attempts = \"three\""),
            "`providers.mock.retry.max_attempts`: invalid type: string \"three\", expected u32",
        ),
        (
            good.replace(&mock.base_url, "not a url"),
            "`providers.mock.base_url`",
        ),
        (
            good.replace("builtin = \"passthrough\"", "path = \"missing.wasm\""),
            "`plugins.passthrough.path`: cannot read",
        ),
        (
            good.replace("builtin = \"passthrough\"", "builtin = \"passthru\""),
            "no built-in plugin `passthru` (built in: analysis, cascade, cascade-first, cheapest, council,",
        ),
    ];
    for (text, expected) in cases {
        let file = write_config(&text);
        let path = file.path.to_str().unwrap();
        for subcommand in ["check", "serve"] {
            let (code, stdout, stderr) = run_cli(&[subcommand, "--config", path]).await;
            assert_eq!(code, 2, "{subcommand}: {stderr}");
            assert!(
                stderr.contains(path),
                "{subcommand}: the file is named: {stderr}"
            );
            assert!(
                stderr.contains(expected),
                "{subcommand}: expected `{expected}` in: {stderr}"
            );
            assert!(stdout.is_empty(), "{subcommand}: nothing on stdout");
        }
    }

    let corrupt =
        write_config(&good.replace("builtin = \"passthrough\"", "path = \"garbage.wasm\""));
    std::fs::write(
        corrupt.dir.path().join("garbage.wasm"),
        b"\0asm but not really",
    )
    .unwrap();
    let (code, _, stderr) = run_cli(&["check", "--config", corrupt.path.to_str().unwrap()]).await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("`plugins.passthrough.path`")
            && stderr.contains("is not a loadable WebAssembly component"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_uses_chorus_config_or_the_builtin_default_from_any_directory() {
    let mock = Mock::start().await;
    let file = write_config(&config(&mock, ""));
    let elsewhere = tempfile::tempdir().unwrap();

    let mut from_env = command(&[]);
    from_env
        .current_dir(elsewhere.path())
        .env("CHORUS_CONFIG", &file.path);
    let tools = tool_names(from_env).await;
    assert_eq!(tools, ["ask", "resynthesize"]);

    let mut builtin = command(&[]);
    builtin.current_dir(elsewhere.path());
    let builtin_tools = tool_names(builtin).await;
    for pipeline in [
        "ask", "heavy", "moa", "vote", "best-of", "council", "debate", "analysis", "self-moa",
        "routed", "cheap",
    ] {
        assert!(
            builtin_tools.contains(&pipeline.to_owned()),
            "{pipeline}: {builtin_tools:?}"
        );
    }
}

async fn tool_names(command: tokio::process::Command) -> Vec<String> {
    use rmcp::ServiceExt;
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = ().serve(transport).await.unwrap();
    let names = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    client.cancel().await.unwrap();
    names
}

/// Drives `chorus serve` by hand and checks that every byte it writes to
/// stdout is a JSON-RPC message — while a plugin prints megabytes.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_but_json_rpc_reaches_stdout() {
    let mock = Mock::start().await;
    script_all(&mock);
    let file = write_config(&config(
        &mock,
        &chaos_pipeline("chatty", "print", ", bytes = 500000"),
    ));
    let mut child = command(&["serve", "--config", file.path.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "chatty", "arguments": {"prompt": "q"},
            "_meta": {"progressToken": "p1"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask", "arguments": {"prompt": "q"}}}),
    ];
    for message in messages {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut progress = Vec::new();
    let mut answered = std::collections::BTreeSet::new();
    let read_all = async {
        while answered.len() < 3 {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("stdout stays open until the answers");
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {line:.200}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line:.200}");
            if message["method"] == "notifications/progress" {
                assert_eq!(message["params"]["progressToken"], "p1");
                progress.push(message["params"]["progress"].as_f64().unwrap());
            }
            if let Some(id) = message["id"].as_u64() {
                assert!(message.get("result").is_some(), "{line:.300}");
                answered.insert(id);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read_all)
        .await
        .expect("all three answered");
    assert!(progress.len() >= 4, "progress was reported: {progress:?}");
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "progress increases on the wire: {progress:?}"
    );
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "chorus exits cleanly when stdin closes");
    while let Some(line) = lines.next_line().await.unwrap() {
        assert!(
            serde_json::from_str::<Value>(&line).is_ok(),
            "not JSON: {line:.200}"
        );
    }
}

/// Garbage on stdin is skipped; the session carries on.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_json_rpc_lines_do_not_end_the_session() {
    let mock = Mock::start().await;
    let file = write_config(&config(&mock, ""));
    let mut child = command(&["serve", "--config", file.path.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    for line in [
        "this is not json".to_owned(),
        "{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"tools/list\"".to_owned(),
        "[1, 2, 3]".to_owned(),
        initialize.to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        "\u{0}\u{1}garbage\u{7f}".to_owned(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut ids = Vec::new();
    while ids.len() < 2 {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("chorus keeps answering")
            .unwrap()
            .expect("stdout stays open");
        let message: Value = serde_json::from_str(&line).expect("only JSON-RPC on stdout");
        if let Some(id) = message["id"].as_u64() {
            assert!(message.get("result").is_some(), "{line:.200}");
            ids.push(id);
        }
    }
    assert_eq!(ids, [1, 2]);
    drop(stdin);
    let _ = child.wait().await;
}
