//! Task mode (`io.modelcontextprotocol/tasks`, MCP 2026-07-28): a client that
//! declares the extension gets a task at once, polls it with a readable
//! status, gets the result when done (read back from the run store), can
//! cancel it, and tasks do not outlive their TTL. Requests here use 2026-07-28's framing: no
//! `initialize`, the version and capabilities in each request's `_meta`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

fn tasks_capability() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// A 2026-07-28 request: `params` plus the `_meta` that version requires.
fn modern(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": tasks_capability(),
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn call(id: i64) -> Value {
    modern(
        id,
        "tools/call",
        json!({"name": "ask", "arguments": {"prompt": "q"}}),
    )
}

fn legacy_call(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "ask", "arguments": {"prompt": "q"}}})
}

async fn get(raw: &mut Raw, id: i64, task: &str) -> Value {
    raw.send(modern(id, "tasks/get", json!({"taskId": task})))
        .await;
    let (response, _) = raw.response(&json!(id)).await;
    response["result"].clone()
}

/// Polls `tasks/get` until `done` holds (within `limit`); returns the task.
async fn poll_until(
    raw: &mut Raw,
    task: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + limit;
    let mut id = 1000;
    loop {
        id += 1;
        let state = get(raw, id, task).await;
        if done(&state) {
            return state;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting; last: {state:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_returns_a_task_at_once_with_a_live_status_then_its_result() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script("m3", [Step::answer_after(2_500, "late")]);
    mock.script(SYNTH, [Step::answer("merged")]);
    let mut raw = Raw::start(&config(&mock, "")).await;
    raw.send(modern(0, "server/discover", json!({}))).await;
    let (discovered, _) = raw.response(&json!(0)).await;
    assert!(
        discovered["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object(),
        "the server declares the extension: {discovered}"
    );

    raw.send(call(1)).await;
    let (created, _) = raw.response(&json!(1)).await;
    let created = &created["result"];
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working");
    assert_eq!(created["ttlMs"], 3_600_000, "limits.task_ttl's default");
    assert!(created["pollIntervalMs"].as_u64().is_some());
    let task = created["taskId"].as_str().unwrap().to_owned();

    let waiting = poll_until(&mut raw, &task, Duration::from_secs(20), |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("4/5 answered; waiting on m3 for "))
    })
    .await;
    assert_eq!(waiting["status"], "working", "{waiting}");

    let done = poll_until(&mut raw, &task, Duration::from_secs(20), |t| {
        t["status"] != "working"
    })
    .await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(done["statusMessage"], "Synthesis of 5 of 5 answers.");
    assert_eq!(done["result"]["structuredContent"]["answer"], "merged");
    assert_eq!(done["result"]["isError"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn task_status_notifications_follow_the_run_to_its_end() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(100, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let mut raw = Raw::start(&config(&mock, "")).await;
    raw.send(call(1)).await;
    let (created, _) = raw.response(&json!(1)).await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    let mut list_changed = 0;
    loop {
        let message = raw.recv().await;
        if message["method"] == "notifications/resources/list_changed" {
            list_changed += 1;
            continue;
        }
        assert_eq!(message["method"], "notifications/tasks", "{message}");
        assert_eq!(message["params"]["taskId"], task.as_str());
        let status = message["params"]["status"].as_str().unwrap().to_owned();
        seen.push((status.clone(), message["params"]["statusMessage"].clone()));
        if status != "working" {
            assert_eq!(status, "completed");
            assert_eq!(
                message["params"]["result"]["structuredContent"]["answer"],
                "merged"
            );
            break;
        }
    }
    // The panel's progress shows while it answers (which count the last
    // notification before synthesis caught depends on scheduling).
    assert!(
        seen.iter()
            .any(|(_, m)| m.as_str().is_some_and(|m| m.contains("/5 answered"))),
        "{seen:#?}"
    );
    assert_eq!(
        list_changed, 1,
        "the kept run is announced before the task ends"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_task_stops_its_run_and_upstream_calls() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let mut raw = Raw::start(&config(&mock, "")).await;
    raw.send(call(1)).await;
    let (created, _) = raw.response(&json!(1)).await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == 5)
            .await
    );
    raw.send(modern(2, "tasks/cancel", json!({"taskId": task})))
        .await;
    let (ack, _) = raw.response(&json!(2)).await;
    assert!(ack.get("result").is_some(), "{ack}");
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 0)
            .await,
        "{} upstream requests still open",
        mock.in_flight()
    );
    let state = poll_until(&mut raw, &task, Duration::from_secs(5), |t| {
        t["status"] != "working"
    })
    .await;
    assert_eq!(state["status"], "cancelled", "{state}");
}

/// Starts a task and polls it to its end.
async fn finished_task(raw: &mut Raw, id: i64) -> (String, Value) {
    raw.send(call(id)).await;
    let (created, _) = raw.response(&json!(id)).await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let done = poll_until(raw, &task, Duration::from_secs(20), |t| {
        t["status"] != "working"
    })
    .await;
    (task, done)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finished_task_gives_its_result_from_the_run_store_not_from_memory() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    let answers = ["the first answer", "the second answer"];
    mock.script(SYNTH, answers.map(Step::answer));
    // Runs kept in memory, one at a time: the second run pushes out the first.
    let config = config(&mock, "\n[store]\nenabled = false\n").replace(
        "run_timeout = \"20s\"",
        "run_timeout = \"20s\"\nmax_runs_kept = 1",
    );
    let mut raw = Raw::start(&config).await;
    let (first, done) = finished_task(&mut raw, 1).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(done["result"]["structuredContent"]["answer"], answers[0]);
    assert_eq!(done["result"]["content"][0]["text"], answers[0]);

    let (_, done) = finished_task(&mut raw, 2).await;
    assert_eq!(done["result"]["structuredContent"]["answer"], answers[1]);
    // The first run is gone from the store, and the task held no copy.
    let again = get(&mut raw, 3, &first).await;
    assert_eq!(again["status"], "completed");
    let result = &again["result"]["structuredContent"];
    let answer = result["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("[This task no longer holds the answer (16 bytes)"),
        "{answer}"
    );
    assert!(
        result["notes"]
            .to_string()
            .contains("is no longer in this process's memory"),
        "{result:#}"
    );
    assert_eq!(
        result["summary"], "Synthesis of 5 of 5 answers.",
        "the rest stays"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_ttl_shorter_than_a_run_is_refused_at_startup() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, "").replace(
        "run_timeout = \"20s\"",
        "run_timeout = \"20s\"\ntask_ttl = \"1s\"",
    ));
    let output = command(&["check", "--config", config.path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("limits.task_ttl") && stderr.contains("limits.run_timeout"),
        "{stderr}"
    );
}

/// Before 2026-07-28 a call is answered in place, even from a client that
/// declares the extension (the Inspector CLI does, and cannot read a task);
/// without the declaration the task methods are refused.
#[tokio::test(flavor = "multi_thread")]
async fn older_sessions_get_answers_in_place_and_task_methods_need_the_extension() {
    let mock = Mock::start().await;
    for model in PANEL.iter().chain(&[SYNTH]) {
        mock.script(model, [Step::answer("ok")]);
    }
    let mut raw = Raw::start(&config(&mock, "")).await;
    raw.initialize(tasks_capability()).await;
    raw.send(legacy_call(1)).await;
    let (answer, _) = raw.response(&json!(1)).await;
    assert_eq!(
        answer["result"]["structuredContent"]["answer"], "ok",
        "{answer}"
    );

    let mut plain = Raw::start(&config(&mock, "")).await;
    plain.initialize(json!({})).await;
    plain
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "x"}}))
        .await;
    let (refused, _) = plain.response(&json!(2)).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}
