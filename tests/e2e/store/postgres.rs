//! The run store in a real PostgreSQL (a throwaway cluster, see
//! `support::postgres`): runs written through one chorus process are read
//! through another and by `chorus runs --store-url`, follow-ups and
//! re-syntheses cross processes, `chorus check` says whether the database
//! can be reached (never its password), and a database that goes away and
//! comes back mid-load loses no finished run's answer.

use std::time::{Duration, Instant};

use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};

use crate::support::postgres::{Cluster, shared};
use crate::support::*;

const PASSWORD: &str = "pg-canary-51c0ffee";

fn in_database(mock: &Mock, url: &str) -> String {
    config(mock, &format!("\n[store]\nurl = \"{url}\"\n"))
}

fn echoing(mock: &Mock) {
    for model in PANEL {
        mock.script(
            model,
            [Step::Echo {
                prefix: format!("{model} on: "),
                delay: Duration::ZERO,
            }],
        );
    }
    mock.script(SYNTH, [Step::answer("merged")]);
}

fn run_id(result: &rmcp::model::CallToolResult) -> String {
    assert_ne!(result.is_error, Some(true), "{}", text(result));
    structured(result)["run_id"].as_str().unwrap().to_owned()
}

async fn read_run(server: &Server, run_id: &str) -> Value {
    let read = server
        .client
        .read_resource(ReadResourceRequestParams::new(format!(
            "chorus://runs/{run_id}"
        )))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("a text resource")
    };
    serde_json::from_str(text).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_written_through_one_chorus_are_read_through_another_and_by_chorus_runs() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let mock = Mock::start().await;
    echoing(&mock);
    let toml = in_database(&mock, &url);
    let env = [("PGPASSWORD", PASSWORD)];
    let (a, b) = tokio::join!(
        Server::start_with_env(&toml, &env),
        Server::start_with_env(&toml, &env)
    );

    let first = run_id(&a.ask("ask", "What is PostgreSQL?").await);
    // B reads A's run whole, and follows it up.
    let run = read_run(&b, &first).await;
    assert_eq!(run["status"], "done");
    assert_eq!(run["answer"], "merged");
    assert_eq!(run["calls"].as_array().unwrap().len(), 6);
    assert_eq!(run["calls"][0]["reply"], "m1 on: What is PostgreSQL?");
    let second = b
        .call(
            "ask",
            json!({"prompt": "And who makes it?", "follow_up_of": first}),
        )
        .await;
    let second = run_id(&second);
    let sent = mock.requests_for("m1");
    let messages = sent.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        messages.iter().any(|m| m["content"] == "merged"),
        "the follow-up carried A's answer: {messages:?}"
    );
    assert_eq!(a.client.list_all_resources().await.unwrap().len(), 2);

    // The terminal, pointed at the database by --store-url alone (the
    // config names no store), sees both, and merges A's run again.
    let plain = write_config(&config(&mock, ""));
    let plain = plain.path.to_str().unwrap();
    let (code, stdout, stderr) = run_cli_with(
        &["runs", "--config", plain, "--store-url", &url, "--json"],
        &env,
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let page: Value = serde_json::from_str(&stdout).unwrap();
    let ids: Vec<&str> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [second.as_str(), first.as_str()]);
    let (code, stdout, stderr) =
        run_cli_with(&["runs", "answer", &first[..20], "--store-url", &url], &env).await;
    assert_eq!((code, stdout.trim()), (0, "merged"), "{stderr}");
    let (code, stdout, stderr) = run_cli_with(
        &[
            "runs",
            "resynthesize",
            &first,
            "--config",
            plain,
            "--store-url",
            &url,
            "--json",
        ],
        &env,
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let again: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(again["resynthesis_of"], first.as_str());
    assert_eq!(
        mock.requests_for("m1").len(),
        2,
        "no panel model asked again"
    );
    let listed = read_run(&a, again["run_id"].as_str().unwrap()).await;
    assert_eq!(listed["resynthesis_of"], first.as_str());

    // `chorus check` says where runs go and that the database answers.
    let file = write_config(&toml);
    let (code, stdout, stderr) =
        run_cli_with(&["check", "--config", file.path.to_str().unwrap()], &env).await;
    let store = stdout
        .lines()
        .find(|l| l.starts_with("store:"))
        .unwrap_or_default();
    assert!(
        store.contains(&url) && store.contains("reachable, schema version"),
        "{code} {stdout}{stderr}"
    );
    let dead = format!("postgres://postgres@127.0.0.1:{}/nowhere", free_port());
    let (_, stdout, stderr) = run_cli_with(
        &[
            "runs",
            "--store-url",
            &dead.replace("postgres@", &format!("postgres:{PASSWORD}@")),
        ],
        &env,
    )
    .await;
    assert!(stderr.contains("cannot be reached"), "{stdout}{stderr}");
    let unreachable = write_config(&in_database(&mock, &dead));
    let (_, stdout, stderr) = run_cli_with(
        &["check", "--config", unreachable.path.to_str().unwrap()],
        &env,
    )
    .await;
    assert!(
        stdout.contains("UNREACHABLE") && stdout.contains("kept in memory"),
        "{stdout}{stderr}"
    );
    for output in [&stdout, &stderr, &a.stderr(), &b.stderr()] {
        // (stdout and stderr: of `chorus check` on the dead database.)
        assert!(!output.contains(PASSWORD), "the password leaked: {output}");
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_stopped_and_restarted_mid_load_loses_no_finished_answer() {
    // Its own cluster: this test stops it.
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let url = cluster.database();
    let mock = Mock::start().await;
    echoing(&mock);
    let server = Server::start(&in_database(&mock, &url)).await;

    let mut ids = Vec::new();
    let mut notes = Vec::new();
    for round in 0..3 {
        if round == 1 {
            cluster.stop();
        }
        if round == 2 {
            cluster.start_again();
        }
        let prompts: Vec<String> = (0..4)
            .map(|i| format!("round {round} question {i}"))
            .collect();
        let results = futures::future::join_all(prompts.iter().map(|p| server.ask("ask", p))).await;
        for result in &results {
            ids.push(run_id(result));
            assert_eq!(result.is_error, Some(false), "no run fails for the store");
            notes.push(structured(result)["notes"].to_string());
        }
    }
    assert!(
        notes[4..8].iter().all(|n| n.contains("cannot be reached")),
        "runs while the database was down say so: {notes:?}"
    );
    assert!(server.stderr().contains("the run store cannot be reached"));

    // Every run is in the database once the writer has caught up.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, stdout, stderr) =
            run_cli(&["runs", "--store-url", &url, "--json", "-n", "100"]).await;
        let page: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        let kept: Vec<(String, String)> = page["runs"]
            .as_array()
            .map(|runs| {
                runs.iter()
                    .map(|r| {
                        (
                            r["run_id"].as_str().unwrap_or_default().to_owned(),
                            r["status"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        if kept.len() == ids.len() {
            assert!(kept.iter().all(|(_, status)| status == "done"), "{kept:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} runs written: {code} {stderr}",
            kept.len(),
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for id in &ids {
        let (code, stdout, stderr) = run_cli(&["runs", "answer", id, "--store-url", &url]).await;
        assert_eq!((code, stdout.trim()), (0, "merged"), "{id}: {stderr}");
    }
    assert!(server.stderr().contains("reachable again"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_instances_runs_are_interrupted_within_30_s_and_the_others_serve_on() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let mock = Mock::start().await;
    echoing(&mock);
    // The first request to m1 (the killed instance's run) never answers in
    // time; later ones do.
    mock.script(
        "m1",
        [
            Step::answer_after(120_000, "too late"),
            Step::answer("m1 answers"),
        ],
    );
    let toml = in_database(&mock, &url);
    let (a, b) = tokio::join!(Server::start(&toml), Server::start(&toml));

    let slow = a.client.call_tool(
        rmcp::model::CallToolRequestParams::new("ask").with_arguments(
            json!({"prompt": "a run on a doomed instance"})
                .as_object()
                .cloned()
                .unwrap(),
        ),
    );
    let watch = async {
        // A's run is on record, running, with the answers that came.
        let id = loop {
            let page: Value =
                serde_json::from_str(&run_cli(&["runs", "--store-url", &url, "--json"]).await.1)
                    .unwrap_or(Value::Null);
            let running = page["runs"]
                .as_array()
                .and_then(|runs| runs.first())
                .filter(|r| r["status"] == "running")
                .map(|r| r["run_id"].as_str().unwrap().to_owned());
            if let Some(id) = running
                && read_run(&b, &id).await["calls"]
                    .as_array()
                    .is_some_and(|calls| calls.iter().filter(|c| c["status"] == "ok").count() == 4)
            {
                break id;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        a.kill();
        let killed = Instant::now();
        loop {
            let run = read_run(&b, &id).await;
            if run["status"] == "interrupted" {
                let replies: Vec<&Value> = run["calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c["reply"].is_string())
                    .collect();
                assert_eq!(replies.len(), 4, "the answers that came are kept: {run}");
                break killed.elapsed();
            }
            assert_eq!(run["status"], "running");
            assert!(
                killed.elapsed() < Duration::from_secs(30),
                "still running 30 s after its instance was killed"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    let (outcome, took) = tokio::join!(slow, watch);
    assert!(
        outcome.is_err(),
        "the killed instance answered: {outcome:?}"
    );
    eprintln!("interrupted {:.1} s after kill -9", took.as_secs_f64());

    // B serves on.
    let after = b.ask("ask", "still there?").await;
    assert_eq!(after.is_error, Some(false), "{}", text(&after));
}
