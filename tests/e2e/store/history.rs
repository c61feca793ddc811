//! Runs that outlive their process: the SQLite run store shared by several
//! servers and the CLI, a restart, a crash, follow-ups, re-synthesis with no
//! panel call, and `chorus runs`.

use std::path::Path;
use std::time::Duration;

use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};

use crate::support::*;

/// The test config with its run store in `dir`.
fn stored(mock: &Mock, dir: &Path, extra: &str) -> String {
    config(
        mock,
        &format!(
            "{extra}\n[store]\npath = \"{}\"\n",
            dir.join("runs.sqlite3").display()
        ),
    )
}

fn echo(prefix: &str) -> Step {
    Step::Echo {
        prefix: prefix.to_owned(),
        delay: Duration::ZERO,
    }
}

async fn read_run(server: &Server, run_id: &str) -> Result<Value, String> {
    let read = server
        .client
        .read_resource(ReadResourceRequestParams::new(format!(
            "chorus://runs/{run_id}"
        )))
        .await
        .map_err(|e| e.to_string())?;
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("a text resource")
    };
    Ok(serde_json::from_str(text).unwrap())
}

fn run_id(result: &rmcp::model::CallToolResult) -> String {
    assert_ne!(result.is_error, Some(true), "{}", text(result));
    structured(result)["run_id"].as_str().unwrap().to_owned()
}

fn request_counts(mock: &Mock) -> Vec<usize> {
    PANEL
        .iter()
        .chain([SYNTH, SYNTH2].iter())
        .map(|m| mock.requests_for(m).len())
        .collect()
}

/// Three questions at once, from `who`; their run ids.
async fn asks(server: &Server, who: &str) -> Vec<String> {
    let prompts: Vec<String> = (0..3).map(|i| format!("question {i} from {who}")).collect();
    let results = futures::future::join_all(prompts.iter().map(|p| server.ask("ask", p))).await;
    results.iter().map(run_id).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_outlive_their_process_and_servers_share_one_store() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [echo(&format!("{model} on: "))]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let dir = tempfile::tempdir().unwrap();
    let toml = stored(&mock, dir.path(), "");
    let (a, b) = tokio::join!(Server::start(&toml), Server::start(&toml));

    let (from_a, from_b) = tokio::join!(asks(&a, "a"), asks(&b, "b"));

    // Each server reads the other's runs, whole.
    for (server, ids, who) in [(&a, &from_b, "b"), (&b, &from_a, "a")] {
        for id in ids {
            let run = read_run(server, id).await.unwrap();
            assert_eq!(run["status"], "done");
            assert_eq!(run["answer"], "merged");
            assert!(
                run["prompt"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("from {who}"))
            );
            let calls = run["calls"].as_array().unwrap();
            assert_eq!(calls.len(), 6);
            assert_eq!(
                calls[0]["reply"].as_str().unwrap(),
                format!("m1 on: {}", run["prompt"].as_str().unwrap())
            );
        }
    }
    let listed = a.client.list_all_resources().await.unwrap();
    assert_eq!(listed.len(), 6, "{listed:?}");
    assert!(
        a.stderr().lines().all(|l| !l.contains("WARN")),
        "no store warnings: {}",
        a.stderr()
    );
    drop((a, b));

    // A restart: the history is still there.
    let c = Server::start(&toml).await;
    let run = read_run(&c, &from_a[0]).await.unwrap();
    assert_eq!(run["run_id"], from_a[0].as_str());
    let missing = read_run(&c, "0190aaaa-0000-7000-8000-000000000000")
        .await
        .unwrap_err();
    assert!(missing.contains("unknown"), "{missing}");
    assert!(!missing.contains("expire"), "{missing}");

    // The terminal sees the same history.
    let file = write_config(&toml);
    let config = file.path.to_str().unwrap();
    let (code, stdout, stderr) = run_cli(&["runs", "--config", config]).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 7, "a header and six runs: {stdout}");
    assert!(lines[0].starts_with("STARTED"), "{stdout}");
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.contains(" ask ") && l.contains("synthesis")),
        "{stdout}"
    );
    assert!(stdout.contains("question 2 from b"), "{stdout}");
    assert!(lines[1].contains("$0.0030"), "{stdout}");

    // No run store file holds the API key.
    let bytes = std::fs::read(dir.path().join("runs.sqlite3")).unwrap();
    let wal = std::fs::read(dir.path().join("runs.sqlite3-wal")).unwrap_or_default();
    for content in [bytes, wal] {
        assert!(!String::from_utf8_lossy(&content).contains(CANARY));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_shows_the_models_the_conversation_and_links_to_it() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [echo(&format!("{model} heard: "))]);
    }
    mock.script(
        SYNTH,
        [
            Step::answer("Paris is the capital."),
            Step::answer("About 2.1 million people."),
            Step::answer("Cold and grey."),
            Step::answer("Mild."),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let toml = stored(&mock, dir.path(), "");
    let server = Server::start(&toml).await;
    let tools = server.client.list_all_tools().await.unwrap();
    let ask = tools.iter().find(|t| t.name == "ask").unwrap();
    assert_eq!(
        ask.input_schema["properties"]["follow_up_of"]["type"],
        "string"
    );

    let first = run_id(&server.ask("ask", "What is the capital of France?").await);
    let second = server
        .call(
            "ask",
            json!({"prompt": "How many people live there?", "follow_up_of": first}),
        )
        .await;
    let second_id = run_id(&second);
    assert_eq!(structured(&second)["follow_up_of"], first.as_str());
    let messages = |model: &str, n: usize| -> Vec<(String, String)> {
        mock.requests_for(model)[n].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_owned(),
                    m["content"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let pair = |role: &str, content: &str| (role.to_owned(), content.to_owned());
    assert_eq!(
        messages("m1", 1),
        [
            pair("user", "What is the capital of France?"),
            pair("assistant", "Paris is the capital."),
            pair("user", "How many people live there?"),
        ]
    );
    // The synthesizer sees the conversation too, ahead of its own prompt.
    let synthesis = messages(SYNTH, 1);
    let first_user = synthesis
        .iter()
        .position(|(role, _)| role == "user")
        .unwrap();
    assert_eq!(synthesis[first_user].1, "What is the capital of France?");
    assert_eq!(synthesis[first_user + 1].1, "Paris is the capital.");

    // A chain: the third turn sees both earlier ones.
    let third = server
        .call(
            "ask",
            json!({"prompt": "And the winters?", "follow_up_of": second_id}),
        )
        .await;
    run_id(&third);
    let contents: Vec<String> = messages("m3", 2).into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        contents,
        [
            "What is the capital of France?",
            "Paris is the capital.",
            "How many people live there?",
            "About 2.1 million people.",
            "And the winters?"
        ]
    );
    let stored_run = read_run(&server, &second_id).await.unwrap();
    assert_eq!(stored_run["follow_up_of"], first.as_str());

    // An unknown or malformed id is a clear error, and nothing is asked.
    let before = request_counts(&mock);
    let unknown = server
        .call("ask", json!({"prompt": "q", "follow_up_of": "0190ffff"}))
        .await;
    assert_eq!(unknown.is_error, Some(true));
    let message = text(&unknown);
    assert!(message.contains("no run `0190ffff`"), "{message}");
    assert!(message.contains("unknown"), "{message}");
    let wrong = server
        .call("ask", json!({"prompt": "q", "follow_up_of": 5}))
        .await;
    assert!(
        text(&wrong).contains("`follow_up_of` must be the run_id"),
        "{}",
        text(&wrong)
    );
    assert_eq!(request_counts(&mock), before);

    // The terminal can follow up too, naming the run by `last`.
    let file = write_config(&toml);
    let (code, stdout, stderr) = run_cli(&[
        "ask",
        "--quiet",
        "--config",
        file.path.to_str().unwrap(),
        "--follow-up",
        "last",
        "And the summers?",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "Mild.\n");
    let contents: Vec<String> = messages("m1", 3).into_iter().map(|(_, c)| c).collect();
    assert_eq!(contents.len(), 7, "three earlier turns and the question");
    assert_eq!(contents[4], "And the winters?");
}

fn vote_pipeline() -> &'static str {
    r#"
[plugins.vote]
builtin = "vote"

[pipelines.voted]
description = "Majority vote."
selector = "panel"
prompter = "passthrough"
synthesizer = "vote"
"#
}

#[tokio::test(flavor = "multi_thread")]
async fn resynthesis_merges_again_without_asking_the_panel() {
    let mock = Mock::start().await;
    for model in ["m1", "m3", "m4"] {
        mock.script(model, [Step::answer("The answer is 42.")]);
    }
    mock.script("m5", [Step::answer("It is 41.")]);
    mock.script("m2", [Step::status(500, "m2 fell over")]);
    mock.script(
        SYNTH,
        [Step::answer("first merge"), Step::answer("second merge")],
    );
    let dir = tempfile::tempdir().unwrap();
    let toml = stored(&mock, dir.path(), vote_pipeline());
    let server = Server::start(&toml).await;
    let tools = server.client.list_all_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name == "resynthesize").unwrap();
    assert_eq!(tool.input_schema["required"], json!(["run_id"]));
    assert_eq!(
        tool.input_schema["properties"]["synthesizer"]["enum"],
        json!(["synthesize", "vote"])
    );

    let source = run_id(&server.ask("ask", "What is six times seven?").await);
    let panel_calls = request_counts(&mock);
    assert_eq!(panel_calls, [1, 3, 1, 1, 1, 1, 0], "m2 was retried");

    // Another synthesizer: no model call at all.
    let voted = server
        .call(
            "resynthesize",
            json!({"run_id": source, "synthesizer": "vote"}),
        )
        .await;
    let voted_id = run_id(&voted);
    let result = structured(&voted);
    assert_eq!(result["kind"], "vote");
    assert_eq!(result["answer"], "The answer is 42.");
    assert_eq!(result["resynthesis_of"], source.as_str());
    assert_eq!(result["usage"]["cost_usd"], 0.0);
    let calls = result["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 5);
    assert!(
        calls
            .iter()
            .all(|c| c["reused_from"]["run_id"] == source.as_str())
    );
    assert_eq!(calls[1]["status"], "failed");
    assert_eq!(request_counts(&mock), panel_calls, "nobody was asked");

    // The same synthesizer again: one synthesis call, nothing else.
    let again = server.call("resynthesize", json!({"run_id": source})).await;
    run_id(&again);
    assert_eq!(structured(&again)["answer"], "second merge");
    assert_eq!(
        structured(&again)["summary"],
        "Synthesis of 4 of 5 answers."
    );
    let mut expected = panel_calls.clone();
    expected[5] += 1;
    assert_eq!(request_counts(&mock), expected, "only the synthesizer");
    assert!((structured(&again)["usage"]["cost_usd"].as_f64().unwrap() - 0.0005).abs() < 1e-9);

    // Another pipeline's way of merging; and a re-synthesis of a re-synthesis.
    let piped = server
        .call(
            "resynthesize",
            json!({"run_id": source, "pipeline": "voted"}),
        )
        .await;
    assert_eq!(structured(&piped)["pipeline"], "voted");
    assert_eq!(structured(&piped)["kind"], "vote");
    let twice = server
        .call(
            "resynthesize",
            json!({"run_id": voted_id, "synthesizer": "vote"}),
        )
        .await;
    assert_eq!(structured(&twice)["answer"], "The answer is 42.");
    assert_eq!(request_counts(&mock), expected);

    // What cannot be done says why.
    for (arguments, expected) in [
        (json!({"run_id": "0190ffff"}), "no run `0190ffff`"),
        (
            json!({"run_id": source, "synthesizer": "panel"}),
            "is a selector, not a synthesizer",
        ),
        (
            json!({"run_id": source, "synthesizer": "vote", "pipeline": "voted"}),
            "not both",
        ),
        (
            json!({"run_id": source, "pipeline": "nope"}),
            "no pipeline named `nope`",
        ),
        (json!({}), "missing `run_id`"),
    ] {
        let result = server.call("resynthesize", arguments).await;
        assert_eq!(result.is_error, Some(true));
        assert!(text(&result).contains(expected), "{}", text(&result));
    }

    // From the terminal, by a prefix of the id.
    let file = write_config(&toml);
    let config = file.path.to_str().unwrap();
    let (code, stdout, stderr) = run_cli(&[
        "runs",
        "resynthesize",
        &source[..30],
        "--synthesizer",
        "vote",
        "--config",
        config,
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "The answer is 42.\n");
    assert_eq!(request_counts(&mock), expected, "still nobody asked");
    let (code, stdout, _) = run_cli(&["runs", "show", "last", "--config", config]).await;
    assert_eq!(code, 0);
    assert!(
        stdout.contains(&format!("merges    the answers of {source} again")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("(reused from {source} #0)")),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_keeps_the_answers_that_arrived() {
    let mock = Mock::start().await;
    for model in ["m1", "m2", "m3", "m4"] {
        mock.script(model, [Step::answer(&format!("{model} answered"))]);
    }
    mock.script("m5", [Step::Hang]);
    mock.script(SYNTH, [Step::answer("merged after the crash")]);
    let dir = tempfile::tempdir().unwrap();
    let toml = stored(&mock, dir.path(), "");
    let file = write_config(&toml);
    let config = file.path.to_str().unwrap().to_owned();
    let server = Server::start(&toml).await;
    let call = {
        let peer = server.client.peer().clone();
        tokio::spawn(async move {
            let arguments = json!({"prompt": "Will this survive?"});
            peer.call_tool(
                rmcp::model::CallToolRequestParams::new("ask")
                    .with_arguments(arguments.as_object().cloned().unwrap()),
            )
            .await
        })
    };
    // Wait until the four answers are on disk.
    let show = || async {
        let (_, stdout, _) =
            run_cli(&["runs", "show", "last", "--json", "--config", &config]).await;
        serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null)
    };
    let mut run = Value::Null;
    for _ in 0..100 {
        run = show().await;
        let answered = run["calls"].as_array().map_or(0, |calls| {
            calls.iter().filter(|c| c["status"] == "ok").count()
        });
        if answered == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(run["status"], "running", "{run}");
    server.kill();
    call.abort();
    drop(server);

    // The process is gone: the run was interrupted, its answers are kept.
    let mut status = Value::Null;
    for _ in 0..100 {
        run = show().await;
        status = run["status"].clone();
        if status == "interrupted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "interrupted", "{run}");
    let calls = run["calls"].as_array().unwrap();
    assert_eq!(calls[0]["reply"], "m1 answered");
    assert_eq!(calls[4]["status"], "unfinished");

    // And they can still be merged, without asking anyone again.
    let m1 = mock.requests_for("m1").len();
    let (code, stdout, stderr) = run_cli(&[
        "runs",
        "resynthesize",
        "last",
        "--quiet",
        "--config",
        &config,
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "merged after the crash\n");
    assert_eq!(mock.requests_for("m1").len(), m1);
}

#[tokio::test(flavor = "multi_thread")]
async fn chorus_runs_lists_filters_shows_exports_and_prunes() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [echo("")]);
    }
    mock.script(SYNTH, [echo("merged: ")]);
    let dir = tempfile::tempdir().unwrap();
    let toml = stored(
        &mock,
        dir.path(),
        r#"
[pipelines.second]
description = "Another pipeline."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
    );
    let file = write_config(&toml);
    let config = file.path.to_str().unwrap();
    let (code, _, stderr) = run_cli(&["runs", "--config", config]).await;
    assert_eq!(code, 0);
    assert!(stderr.contains("no runs yet"), "{stderr}");

    let server = Server::start(&toml).await;
    let mut ids = Vec::new();
    for (pipeline, prompt) in [
        ("ask", "Why is the sky blue?"),
        ("second", "How do tides work?\nPlease be brief."),
        ("ask", "What is a monad?"),
    ] {
        ids.push(run_id(&server.ask(pipeline, prompt).await));
    }
    let runs = |args: &[&str]| {
        let mut all = vec!["runs"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--config", config]);
        let all: Vec<String> = all.iter().map(|s| s.to_string()).collect();
        async move {
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            run_cli(&all).await
        }
    };

    let (_, stdout, _) = runs(&["--pipeline", "second"]).await;
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(stdout.contains("How do tides work? …"), "{stdout}");
    let (_, stdout, _) = runs(&["--text", "MONAD"]).await;
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    let (_, stdout, _) = runs(&["--since", "1h"]).await;
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    let (_, stdout, stderr) = runs(&["--since", "2999-01-01"]).await;
    assert_eq!(stdout, "", "{stderr}");
    let (code, _, stderr) = runs(&["--since", "someday"]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("neither a time ago"), "{stderr}");

    // Paging: two at a time, then the rest.
    let (_, page, more) = runs(&["-n", "2", "--json"]).await;
    let page: Value = serde_json::from_str(&page).unwrap();
    assert_eq!(page["runs"].as_array().unwrap().len(), 2);
    let next = page["next"].as_str().unwrap().to_owned();
    assert_eq!(more, "");
    let (_, rest, _) = runs(&["-n", "2", "--json", "--before", &next]).await;
    let rest: Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(rest["runs"][0]["run_id"], ids[0].as_str());
    assert_eq!(rest["next"], Value::Null);

    let (code, stdout, _) = runs(&["show", &ids[1]]).await;
    assert_eq!(code, 0);
    for expected in [
        "second · synthesis · done",
        "How do tides work?",
        "#0   fan-out      m1",
        "(first token ",
        "synthesize",
        "merged: ",
    ] {
        assert!(stdout.contains(expected), "{expected}: {stdout}");
    }
    let (code, stdout, _) = runs(&["answer", &ids[2]]).await;
    assert_eq!(code, 0);
    assert!(stdout.starts_with("merged: "), "{stdout}");
    let (_, exported, _) = runs(&["export", &ids[2]]).await;
    let exported: Value = serde_json::from_str(&exported).unwrap();
    assert_eq!(exported["prompt"], "What is a monad?");
    assert_eq!(
        exported["calls"][0]["request"]["messages"][0]["content"],
        "What is a monad?"
    );
    assert_eq!(exported["calls"][0]["reply"], "What is a monad?");

    // Ids by prefix; a prefix shared by every run is ambiguous. Ids begin
    // with their time in ms (UUIDv7), so the runs' common prefix is taken,
    // not a fixed length: 8 hex digits change every 65.5 s, and runs made
    // either side of such a change share only 7 or fewer.
    let shared = ids.iter().fold(ids[0].clone(), |shared, id| {
        shared
            .chars()
            .zip(id.chars())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a)
            .collect()
    });
    assert!(shared.len() >= 4, "runs made seconds apart: {ids:?}");
    let (code, _, stderr) = runs(&["show", &shared]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("several runs"), "{stderr}");
    let (code, _, stderr) = runs(&["answer", "ffffffff"]).await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("no run `ffffffff`: the id is unknown"),
        "{stderr}"
    );

    let (code, stdout, stderr) = runs(&["prune", "--max-runs", "1"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("removed 2 run(s)"), "{stdout}");
    let (_, stdout, _) = runs(&[]).await;
    assert_eq!(stdout.lines().count(), 2);
    assert!(stdout.contains("What is a monad?"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_default_store_is_under_the_data_directory_and_can_be_turned_off() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    run_id(&server.ask("ask", "q").await);
    let file = server_data_file(&server);
    assert!(file.exists(), "{}", file.display());

    let dir = tempfile::tempdir().unwrap();
    let off = config(&mock, "\n[store]\nenabled = false\n");
    let data = dir.path().join("data");
    let mut command = command(&[]);
    let file = write_config(&off);
    command
        .args(["serve", "--config", file.path.to_str().unwrap()])
        .env("XDG_DATA_HOME", &data);
    // Its log is not this test's output.
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use rmcp::ServiceExt;
    let client = ().serve(transport).await.unwrap();
    let arguments = json!({"prompt": "q"}).as_object().cloned().unwrap();
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new("ask").with_arguments(arguments))
        .await
        .unwrap();
    let id = run_id(&result);
    // Kept in memory for this process: readable, follow-up-able.
    let read = client
        .read_resource(ReadResourceRequestParams::new(format!(
            "chorus://runs/{id}"
        )))
        .await
        .unwrap();
    assert_eq!(read.contents.len(), 1);
    let arguments = json!({"prompt": "q2", "follow_up_of": id})
        .as_object()
        .cloned()
        .unwrap();
    let follow = client
        .call_tool(rmcp::model::CallToolRequestParams::new("ask").with_arguments(arguments))
        .await
        .unwrap();
    run_id(&follow);
    client.cancel().await.unwrap();
    assert!(!data.exists(), "nothing written to disk");
    let (code, _, stderr) = run_cli(&["runs", "--config", file.path.to_str().unwrap()]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("enabled = false"), "{stderr}");
}

/// Where `Server::start` puts a server's default run store.
fn server_data_file(server: &Server) -> std::path::PathBuf {
    server.data_dir().join("chorus").join("runs.sqlite3")
}

fn text_of(contents: &[ResourceContents]) -> &str {
    let ResourceContents::TextResourceContents { text, .. } = &contents[0] else {
        panic!("a text resource")
    };
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_page_as_resources_and_each_answer_and_call_has_an_address() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer(&format!("{model} says yes"))]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&stored(&mock, dir.path(), "")).await;
    let changes = server.client.service().resource_list_changes.clone();
    let prompts: Vec<String> = (0..55).map(|i| format!("question {i}")).collect();
    let results = futures::future::join_all(prompts.iter().map(|p| server.ask("ask", p))).await;
    let last = results.last().unwrap();
    let run_id = structured(last)["run_id"].as_str().unwrap().to_owned();

    // The result links to its run.
    let link = last
        .content
        .iter()
        .find_map(|c| c.as_resource_link())
        .expect("a resource link in the result");
    assert_eq!(link.uri, format!("chorus://runs/{run_id}"));

    // resources/list pages through every run, newest first.
    let first = server.client.list_resources(None).await.unwrap();
    assert_eq!(first.resources.len(), 50);
    let cursor = first.next_cursor.clone().expect("a second page");
    let second = server
        .client
        .list_resources(Some(
            rmcp::model::PaginatedRequestParams::default().with_cursor(Some(cursor)),
        ))
        .await
        .unwrap();
    assert_eq!(second.resources.len(), 5);
    assert!(second.next_cursor.is_none());
    let mut uris: Vec<&str> = first
        .resources
        .iter()
        .chain(&second.resources)
        .map(|r| r.uri.as_str())
        .collect();
    uris.sort_unstable();
    uris.dedup();
    assert_eq!(uris.len(), 55, "no run listed twice or missed");

    let read = |uri: String| {
        let client = server.client.peer().clone();
        async move {
            client
                .read_resource(ReadResourceRequestParams::new(uri))
                .await
        }
    };
    let runs: Value = serde_json::from_str(text_of(
        &read("chorus://runs".into()).await.unwrap().contents,
    ))
    .unwrap();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 50);
    let next = runs["next"]
        .as_str()
        .expect("a link to older runs")
        .to_owned();
    let older: Value = serde_json::from_str(text_of(&read(next).await.unwrap().contents)).unwrap();
    assert_eq!(older["runs"].as_array().unwrap().len(), 5);
    assert!(older["next"].is_null());

    let answer = read(format!("chorus://runs/{run_id}/answer"))
        .await
        .unwrap();
    assert_eq!(text_of(&answer.contents), "merged");
    let call: Value = serde_json::from_str(text_of(
        &read(format!("chorus://runs/{run_id}/calls/1"))
            .await
            .unwrap()
            .contents,
    ))
    .unwrap();
    assert_eq!(call["model"], "m2");
    assert_eq!(call["reply"], "m2 says yes");
    assert_eq!(call["request"]["messages"][0]["content"], "question 54");

    let missing = read(format!("chorus://runs/{run_id}/calls/99"))
        .await
        .unwrap_err()
        .to_string();
    assert!(missing.contains("has no call 99"), "{missing}");
    let unknown = read("chorus://runs/0000-unknown".into())
        .await
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("unknown"), "{unknown}");
    assert!(!unknown.contains("expired"), "{unknown}");

    // Every kept run was announced.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while changes.load(std::sync::atomic::Ordering::SeqCst) < 55 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "list_changed for each run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resynthesis_waits_for_a_run_slot_like_any_run() {
    let mock = Mock::start().await;
    let gate = Gate::default();
    for model in PANEL {
        mock.script(
            model,
            [
                Step::answer("The answer is 42."),
                Step::Gated {
                    gate: gate.clone(),
                    text: "held".into(),
                },
            ],
        );
    }
    mock.script(SYNTH, (0..3).map(|i| Step::answer(&format!("merge {i}"))));
    let dir = tempfile::tempdir().unwrap();
    let toml = stored(&mock, dir.path(), "").replace(
        "run_timeout = \"20s\"",
        "run_timeout = \"20s\"\nmax_concurrent_runs = 1",
    );
    let server = Server::start(&toml).await;
    let source = run_id(&server.ask("ask", "What is six times seven?").await);

    // A second run holds the one slot until the gate opens.
    let holding = server.ask("ask", "hold the slot");
    let resynthesis = async {
        let started = mock
            .wait_until(Duration::from_secs(10), |m| m.requests_for("m1").len() == 2)
            .await;
        assert!(started, "the holding run reached its panel");
        server
            .call(
                "resynthesize",
                json!({"run_id": source, "synthesizer": "synthesize"}),
            )
            .await
    };
    let waiting = async {
        let said = mock
            .wait_until(Duration::from_secs(10), |_| {
                server.progress.lock().unwrap().iter().any(|p| {
                    p.message.as_deref().is_some_and(|m| {
                        m.contains("waiting for a free slot: 1 runs are in progress")
                    })
                })
            })
            .await;
        assert!(said, "the re-synthesis said it waits for a slot");
        assert_eq!(
            mock.requests_for(SYNTH).len(),
            1,
            "no synthesizer call while the slot is held"
        );
        gate.open();
    };
    let (held, merged, ()) = tokio::join!(holding, resynthesis, waiting);
    run_id(&held);
    let merged_id = run_id(&merged);
    assert_ne!(merged_id, source);
    assert_eq!(structured(&merged)["resynthesis_of"], source.as_str());
}
