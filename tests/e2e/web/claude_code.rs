//! Claude Code against chorus's Messages API (issue 52): `claude -p` with
//! `ANTHROPIC_BASE_URL` at `serve --http` and a pipeline as its model —
//! the panel proposes a `Read` of a file, Claude Code runs it, the result
//! comes back to every panel member, and the answer is printed.

use serde_json::Value;

use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_runs_a_tool_the_panel_proposed() {
    let claude = crate::mcp::clients::claude_code();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("notes.txt");
    std::fs::write(&file, "The launch code is 4217.\n").unwrap();
    let mock = Mock::start().await;
    let taking: Vec<(&str, &[&str])> = PANEL
        .iter()
        .chain([&SYNTH])
        .map(|m| (*m, &["tools"][..]))
        .collect();
    catalog_taking(&mock, &taking);
    let read = serde_json::json!({"file_path": file.to_str().unwrap()}).to_string();
    for model in PANEL {
        mock.script(
            model,
            [
                Step::tool_call("Read", &read),
                Step::answer("The file says the launch code is 4217."),
            ],
        );
    }
    mock.script(
        SYNTH,
        [Step::stream("The launch code in notes.txt is 4217.")],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let home = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new("node")
        .arg(&claude)
        .args([
            "-p",
            "What does notes.txt say?",
            "--allowedTools",
            "Read",
            "--output-format",
            "json",
        ])
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", server.origin())
        .env("ANTHROPIC_AUTH_TOKEN", TOKEN)
        .env("ANTHROPIC_MODEL", "ask")
        .env("ANTHROPIC_SMALL_FAST_MODEL", "ask")
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", "ask")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env_remove("ANTHROPIC_API_KEY")
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(180), output)
        .await
        .expect("claude finished within 180 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    eprintln!("claude -p: {result}");
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["result"], "The launch code in notes.txt is 4217.");
    assert_eq!(result["num_turns"], 2, "a tool turn, then the answer");
    // The panel got Claude Code's tools; every member saw the file's
    // contents come back from the Read it proposed.
    for model in PANEL {
        let sent = mock.requests_for(model);
        let tools: Vec<&str> = sent[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert!(tools.contains(&"Read"), "{model}: {tools:?}");
        let result = sent[1].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .unwrap_or_else(|| panic!("{model} got the Read's result"))
            .clone();
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("The launch code is 4217."),
            "{model}: {result}"
        );
    }
}
