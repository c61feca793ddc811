//! Tasks from any instance: several `chorus serve --http` on one
//! PostgreSQL store answer for each other's tasks — polled on one, cancelled
//! on another (the owner's upstream requests close within a second), its
//! whole result given anywhere once it ends, and a
//! task whose instance is killed reads `failed`, saying so, on the others.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::HttpServer;
use crate::support::*;
use crate::web::teams::{ALICE, BOB, client, modern, rpc, team_in};

/// A store of its own in the shared PostgreSQL, alice and bob as clients,
/// and every panel model hanging until its request is dropped.
pub(crate) fn hanging(mock: &Mock, url: &str) -> String {
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let clients = [client("alice", ALICE, ""), client("bob", BOB, "")].concat();
    team_in(mock, &clients, &format!("url = \"{url}\""))
}

pub(crate) async fn instance(config: &std::path::Path) -> HttpServer {
    let env = [("PGPASSWORD", "pg-canary-51c0ffee")];
    HttpServer::start_with_env("127.0.0.1:0", config, None, &[], &env).await
}

pub(crate) async fn start_task(server: &HttpServer) -> String {
    let ask = json!({"name": "ask", "arguments": {"prompt": "q"}});
    let created = rpc(server, ALICE, modern(1, "tools/call", ask)).await;
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned()
}

async fn get(server: &HttpServer, token: &str, task: &str) -> Value {
    rpc(
        server,
        token,
        modern(2, "tasks/get", json!({"taskId": task})),
    )
    .await
}

/// Polls `tasks/get` on `server` until the task is no longer working.
pub(crate) async fn ended(server: &HttpServer, task: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let reply = get(server, ALICE, task).await;
        if reply["result"]["status"] != "working" || Instant::now() > deadline {
            return reply["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_made_on_one_instance_is_polled_on_another_and_cancelled_on_a_third() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    let config = write_config(&hanging(&mock, &cluster.database()));
    let (a, b, c) = tokio::join!(
        instance(&config.path),
        instance(&config.path),
        instance(&config.path)
    );
    let task = start_task(&a).await;
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == PANEL.len())
            .await
    );

    // B answers for it, with A's live status; to bob it is unknown.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let seen = get(&b, ALICE, &task).await;
    assert_eq!(seen["result"]["taskId"], task.as_str(), "{seen}");
    assert_eq!(seen["result"]["status"], "working", "{seen}");
    let status = seen["result"]["statusMessage"].as_str().unwrap_or_default();
    assert!(status.contains("answered"), "A's live status: {seen}");
    let foreign = get(&b, BOB, &task).await;
    let said = foreign["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("unknown task"), "{foreign}");

    // Cancelled on C: A's upstream requests close within a second.
    let asked = Instant::now();
    let ack = rpc(
        &c,
        ALICE,
        modern(3, "tasks/cancel", json!({"taskId": task})),
    )
    .await;
    assert!(ack.get("result").is_some(), "{ack}");
    assert!(
        mock.wait_until(Duration::from_secs(1), |m| m.in_flight() == 0)
            .await,
        "{} upstream requests still open {:?} after the cancel",
        mock.in_flight(),
        asked.elapsed()
    );
    let state = ended(&b, &task, Duration::from_secs(5)).await;
    assert_eq!(state["status"], "cancelled", "{state}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_whose_instance_is_killed_reads_failed_on_another_within_the_lease() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    let config = write_config(&hanging(&mock, &cluster.database()));
    let (mut a, b) = tokio::join!(instance(&config.path), instance(&config.path));
    let task = start_task(&a).await;
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == PANEL.len())
            .await
    );
    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    let killed = Instant::now();
    let state = ended(&b, &task, Duration::from_secs(30)).await;
    assert_eq!(state["status"], "failed", "{state}");
    let said = state["statusMessage"].as_str().unwrap_or_default();
    assert!(
        said.contains("instance running this task was lost"),
        "{state}"
    );
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "{:?}",
        killed.elapsed()
    );
}

/// A finished task's whole result (the answer read back from the run in
/// the store, not the slim copy the owner holds) is given on any instance.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_finished_on_one_instance_gives_its_whole_result_on_another() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    let config = write_config(&hanging(&mock, &cluster.database()));
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged answer")]);
    let (a, b) = tokio::join!(instance(&config.path), instance(&config.path));
    let task = start_task(&a).await;
    let state = ended(&b, &task, Duration::from_secs(20)).await;
    assert_eq!(state["status"], "completed", "{state}");
    let result = &state["result"];
    assert_eq!(result["isError"], false, "{state}");
    assert_eq!(
        result["structuredContent"]["answer"], "merged answer",
        "{state}"
    );
    assert!(
        !state.to_string().contains("no longer holds the answer"),
        "{state}"
    );
}
