//! A stderr that goes away must not change what chorus does (issue 44):
//! with the reader of its stderr pipe gone, every write there fails with
//! EPIPE, and a server that panicked on it would ignore SIGTERM (the
//! signal task dies before it stops anything) and stop reloading (the
//! watcher dies after its first line). Here the pipe's reader is dropped
//! as soon as the server has said where it listens; then a run, two
//! reloads and a SIGTERM must all still do what they do with a terminal.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;

use crate::support::http::{TOKEN, messages, post_to, tool_call};
use crate::support::*;

const EXTRA: &str = "[http]\ndrain_seconds = 5\n";

fn pipeline(name: &str) -> String {
    format!(
        "\n[pipelines.{name}]\ndescription = \"The same, by another name.\"\n\
         selector = \"panel\"\nprompter = \"passthrough\"\nsynthesizer = \"synthesize\"\n"
    )
}

/// Starts `chorus ARGS` with stderr a pipe, reads it until a line holds
/// `ready`, then closes the reading end: what chorus writes there from
/// now on fails. The text after `ready` on that line. `stdio`: whether
/// stdin and stdout are pipes (an MCP session on stdio) or nothing.
async fn start_then_close_stderr(args: &[&str], stdio: bool, ready: &str) -> (Child, String) {
    let pipe = || if stdio { Stdio::piped() } else { Stdio::null() };
    let mut child = command(args)
        .env("CHORUS_TOKEN", TOKEN)
        .stdin(pipe())
        .stdout(pipe())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chorus");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let found = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.expect("read stderr") {
            if let Some(rest) = line.split(ready).nth(1) {
                return rest.trim().to_owned();
            }
        }
        panic!("chorus ended before saying {ready:?}");
    })
    .await
    .expect("chorus starts within 120 s");
    drop(lines);
    (child, found)
}

async fn exits_on_sigterm(child: &mut Child) -> std::process::ExitStatus {
    sigterm(child);
    tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("chorus stops within the drain time of a SIGTERM, stderr gone or not")
        .expect("wait for chorus")
}

async fn tool_names(url: &str) -> Vec<String> {
    let list = async {
        let message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
        let response = post_to(url, Some(TOKEN), &message)
            .send()
            .await
            .expect("tools/list");
        messages(response).await
    };
    let listed = tokio::time::timeout(Duration::from_secs(30), list)
        .await
        .expect("tools/list is answered");
    listed
        .last()
        .and_then(|m| m["result"]["tools"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

async fn until_listed(url: &str, name: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !tool_names(url).await.iter().any(|n| n == name) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reload that adds `{name}` never happened"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn http_server_with_its_stderr_gone_still_runs_reloads_and_stops_on_sigterm() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let file = write_config(&config(&mock, EXTRA));
    let path = file.path.to_str().unwrap();
    let (mut child, url) = start_then_close_stderr(
        &["serve", "--http", "127.0.0.1:0", "--config", path],
        false,
        "serving MCP at ",
    )
    .await;

    let call = async {
        let response = post_to(&url, Some(TOKEN), &tool_call(1, "ask", "q"))
            .send()
            .await
            .expect("the call is answered");
        messages(response).await
    };
    let answered = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("a run completes with stderr gone (no task dies writing to it)");
    let last: Value = answered.last().cloned().unwrap_or_default();
    assert_eq!(last["result"]["isError"], false, "{last}");
    assert!(last.to_string().contains("merged"), "{last}");

    // Each reload says so on stderr: the first must not end the watcher.
    std::fs::write(
        &file.path,
        config(&mock, &format!("{EXTRA}{}", pipeline("second"))),
    )
    .unwrap();
    until_listed(&url, "second").await;
    let both = format!("{EXTRA}{}{}", pipeline("second"), pipeline("third"));
    std::fs::write(&file.path, config(&mock, &both)).unwrap();
    until_listed(&url, "third").await;

    let status = exits_on_sigterm(&mut child).await;
    assert!(status.success(), "a clean exit: {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_server_with_its_stderr_gone_runs_and_stops_on_sigterm() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let file = write_config(&config(&mock, ""));
    // stdin stays open: the session goes on until the signal ends it.
    let (mut child, _) = start_then_close_stderr(
        &["serve", "--config", file.path.to_str().unwrap()],
        true,
        "serving MCP on stdio",
    )
    .await;
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    for message in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "ask", "arguments": {"prompt": "q"}}}),
    ] {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let answered = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == 1 {
                return message;
            }
        }
        panic!("stdout closed before the call was answered");
    })
    .await
    .expect("a run completes with stderr gone");
    assert_eq!(answered["result"]["isError"], false, "{answered}");
    assert!(answered.to_string().contains("merged"), "{answered}");
    let status = exits_on_sigterm(&mut child).await;
    assert!(status.success(), "a clean exit: {status}");
    drop(stdin);
}
