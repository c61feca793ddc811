//! Three `chorus serve --http` on one PostgreSQL behind Debian's nginx, as
//! docs/scaling.md sets them up, act as one chorus to a client that only
//! knows the balancer: each instance makes a share of the runs, and every
//! run is read on every instance and by `chorus runs`; a task made through
//! the balancer is polled through it (landing on each instance in turn)
//! and cancelled through it, closing the owner's upstream requests within
//! a second; an instance killed is passed over, and the balancer goes on
//! answering.

use std::time::Duration;

use serde_json::{Value, json};

use crate::store::failover::instance;
use crate::support::nginx::Nginx;
use crate::support::*;
use crate::web::teams::{ALICE, client, modern, rpc, rpc_at, team_in};

fn ask(id: u64, prompt: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "ask", "arguments": {"prompt": prompt}}})
}

#[tokio::test(flavor = "multi_thread")]
async fn three_instances_behind_nginx_act_as_one_chorus() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("an answer")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let store = format!("url = \"{}\"", cluster.database());
    let config = write_config(&team_in(&mock, &client("alice", ALICE, ""), &store));
    let (mut a, b, c) = tokio::join!(
        instance(&config.path),
        instance(&config.path),
        instance(&config.path)
    );
    let Some(nginx) = Nginx::start(&[a.origin(), b.origin(), c.origin()]).await else {
        return;
    };
    let url = nginx.url();

    // Round robin: three runs, one made by each instance.
    let mut runs = Vec::new();
    for i in 0..3 {
        let reply = rpc_at(&url, ALICE, ask(i, &format!("balanced question {i}"))).await;
        assert_eq!(reply["result"]["isError"], false, "{reply}");
        let run = &reply["result"]["structuredContent"]["run_id"];
        runs.push(run.as_str().unwrap_or_else(|| panic!("{reply}")).to_owned());
    }
    for server in [&a, &b, &c] {
        let ended = server.wait_for_stderr("run ended", 1).await;
        assert_eq!(ended.len(), 1, "each instance made one run: {ended:?}");
    }
    // Every run is read on every instance, and listed by `chorus runs`.
    for server in [&a, &b, &c] {
        for run in &runs {
            let read = json!({"jsonrpc": "2.0", "id": 9, "method": "resources/read",
                              "params": {"uri": format!("chorus://runs/{run}")}});
            let reply = rpc(server, ALICE, read).await;
            assert!(reply.to_string().contains("merged"), "{run}: {reply}");
        }
    }
    let path = config.path.to_str().unwrap();
    let (code, stdout, stderr) = run_cli(&["runs", "--json", "--config", path]).await;
    assert_eq!(code, 0, "{stderr}");
    let page: Value = serde_json::from_str(&stdout).unwrap();
    let mut listed: Vec<&str> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    listed.sort_unstable();
    let mut made: Vec<&str> = runs.iter().map(String::as_str).collect();
    made.sort_unstable();
    assert_eq!(listed, made);

    // A task through the balancer: polled on each instance in turn, then
    // cancelled, wherever that lands.
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let asked = json!({"name": "ask", "arguments": {"prompt": "a balanced task"}});
    let created = rpc_at(&url, ALICE, modern(10, "tools/call", asked)).await;
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == PANEL.len())
            .await
    );
    for id in 11..14 {
        let seen = rpc_at(
            &url,
            ALICE,
            modern(id, "tasks/get", json!({"taskId": task})),
        )
        .await;
        assert_eq!(seen["result"]["status"], "working", "{seen}");
    }
    let ack = rpc_at(
        &url,
        ALICE,
        modern(14, "tasks/cancel", json!({"taskId": task})),
    )
    .await;
    assert!(ack.get("result").is_some(), "{ack}");
    assert!(
        mock.wait_until(Duration::from_secs(1), |m| m.in_flight() == 0)
            .await,
        "{} upstream requests still open a second after the cancel",
        mock.in_flight()
    );
    // Read wherever it lands, once the owner has written its end.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let seen = loop {
        let seen = rpc_at(
            &url,
            ALICE,
            modern(15, "tasks/get", json!({"taskId": task})),
        )
        .await;
        if seen["result"]["status"] != "working" || std::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(seen["result"]["status"], "cancelled", "{seen}");

    // An instance dies: the balancer tries the next, and answers every time.
    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    for id in 20..26 {
        let listed = rpc_at(
            &url,
            ALICE,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}),
        )
        .await;
        assert!(listed.to_string().contains("\"ask\""), "{listed}");
    }
}
