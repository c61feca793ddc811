//! A shared server with `[[http.clients]]`: each client sees only the
//! pipelines granted to it and only its own runs; a budget refuses a run
//! before any model is asked, and holds under 50 concurrent calls; the
//! per-minute limit answers 429 with `Retry-After`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::http::{HttpServer, messages, tool_call};
use crate::support::*;

pub(crate) const ALICE: &str = "alice-token-0c61f2a9d4b8e735";
pub(crate) const BOB: &str = "bob-token-93e1d7c0a5f2b468";
const ROOT: &str = "root-token-5a0e8c3f7d1b9642";

/// Each run may cost at most this (its worst case, reserved by budgets).
const RUN_CEILING: f64 = 0.01;

fn sha(token: &str) -> String {
    format!("{:x}", Sha256::digest(token.as_bytes()))
}

/// The test config with cheap prices (a call's worst case stays far under
/// the run's ceiling), a second pipeline, a store of its own, and `clients`.
fn team(mock: &Mock, clients: &str, store: &std::path::Path) -> String {
    team_in(mock, clients, &format!("path = \"{}\"", store.display()))
}

/// As `team`, with `store` the `[store]` table's lines.
pub(crate) fn team_in(mock: &Mock, clients: &str, store: &str) -> String {
    let extra = format!(
        r#"
[pipelines.cheap]
description = "The same panel, for the tests' second grant."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"

[store]
{store}

{clients}
"#
    );
    config(mock, &extra)
        .replace(
            "context_window = 100000\n",
            "context_window = 100000\nmax_output_tokens = 100\ninput_price = 1.0\noutput_price = 2.0\n",
        )
        .replace(
            "run_timeout = \"20s\"",
            &format!("run_timeout = \"20s\"\nmax_cost_usd = {RUN_CEILING}\nmax_concurrent_runs = 64"),
        )
}

pub(crate) fn client(name: &str, token: &str, more: &str) -> String {
    format!(
        "[[http.clients]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\n{more}\n",
        sha(token)
    )
}

pub(crate) fn answering(mock: &Mock) {
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
}

pub(crate) async fn rpc(server: &HttpServer, token: &str, message: Value) -> Value {
    rpc_at(&server.url, token, message).await
}

/// `rpc` to the MCP endpoint `url` (an instance, or a balancer in front).
pub(crate) async fn rpc_at(url: &str, token: &str, message: Value) -> Value {
    let mut request = crate::support::http::post_to(url, Some(token), &message);
    // A 2026-07-28 request names its version in a header too.
    if let Some(version) =
        message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str()
    {
        request = request
            .header("mcp-protocol-version", version)
            .header("mcp-method", message["method"].as_str().unwrap());
        let params = &message["params"];
        if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
            request = request.header("mcp-name", name);
        }
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let all = messages(response).await;
    let last = all.last().cloned().unwrap_or(Value::Null);
    assert_eq!(status, 200, "{last}");
    last
}

async fn tools(server: &HttpServer, token: &str) -> Vec<String> {
    let reply = rpc(
        server,
        token,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let mut names: Vec<String> = reply["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

async fn runs(server: &HttpServer, token: &str) -> Vec<String> {
    let reply = rpc(
        server,
        token,
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}),
    )
    .await;
    reply["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter_map(|uri| uri.strip_prefix("chorus://runs/"))
        .map(str::to_owned)
        .collect()
}

pub(crate) async fn call(server: &HttpServer, token: &str, tool: &str, arguments: Value) -> Value {
    // Ids of one caller's requests in flight differ, as a client's do.
    static NEXT: AtomicU64 = AtomicU64::new(100);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    rpc(
        server,
        token,
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}}),
    )
    .await
}

pub(crate) fn run_id(reply: &Value) -> String {
    reply["result"]["structuredContent"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run id: {reply}"))
        .to_owned()
}

/// The text of a tool's error result, or of a JSON-RPC error.
pub(crate) fn refusal(reply: &Value) -> String {
    if let Some(message) = reply["error"]["message"].as_str() {
        return message.to_owned();
    }
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_client_sees_its_own_pipelines_and_runs_only() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let clients = [
        client("alice", ALICE, "pipelines = [\"ask\"]"),
        client("bob", BOB, "pipelines = [\"cheap\"]"),
        client("root", ROOT, "admin = true"),
    ]
    .concat();
    let config = write_config(&team(&mock, &clients, &dir.path().join("runs.sqlite3")));
    let server = HttpServer::start(&config.path, None, &[]).await;

    assert_eq!(tools(&server, ALICE).await, ["ask", "resynthesize"]);
    assert_eq!(tools(&server, BOB).await, ["cheap", "resynthesize"]);
    assert_eq!(tools(&server, ROOT).await, ["ask", "cheap", "resynthesize"]);
    let wrong = server
        .post(
            Some("not-a-token"),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    let not_granted = refusal(&call(&server, ALICE, "cheap", json!({"prompt": "q"})).await);
    assert!(
        not_granted.contains("`alice` may not run pipeline `cheap`"),
        "{not_granted}"
    );
    assert!(mock.requests().is_empty(), "a refused call asked no model");

    let alices = run_id(&call(&server, ALICE, "ask", json!({"prompt": "alice asks"})).await);
    let bobs = run_id(&call(&server, BOB, "cheap", json!({"prompt": "bob asks"})).await);
    assert_eq!(runs(&server, ALICE).await, std::slice::from_ref(&alices));
    assert_eq!(runs(&server, BOB).await, std::slice::from_ref(&bobs));
    let everyone = runs(&server, ROOT).await;
    assert!(
        everyone.contains(&alices) && everyone.contains(&bobs),
        "{everyone:?}"
    );

    // Another's run is as unknown as one that never was, by every road.
    let read = |id: &str| {
        json!({"jsonrpc": "2.0", "id": 4, "method": "resources/read",
               "params": {"uri": format!("chorus://runs/{id}")}})
    };
    let foreign = rpc(&server, BOB, read(&alices)).await;
    let missing = rpc(&server, BOB, read("0196a1b2-c3d4-7000-8000-000000000001")).await;
    let say = |reply: &Value| {
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(say(&foreign).contains("no run at"), "{foreign}");
    assert_eq!(
        say(&foreign).replace(&alices, "ID"),
        say(&missing).replace("0196a1b2-c3d4-7000-8000-000000000001", "ID")
    );
    let call_of = rpc(
        &server,
        BOB,
        json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read",
               "params": {"uri": format!("chorus://runs/{alices}/calls/0")}}),
    )
    .await;
    assert!(say(&call_of).contains("no run at"), "{call_of}");
    assert!(rpc(&server, ALICE, read(&alices)).await["result"].is_object());
    assert!(rpc(&server, ROOT, read(&bobs)).await["result"].is_object());

    let asked = mock.requests().len();
    let follow = refusal(
        &call(
            &server,
            BOB,
            "cheap",
            json!({"prompt": "and?", "follow_up_of": alices}),
        )
        .await,
    );
    assert!(follow.contains(&format!("no run `{alices}`")), "{follow}");
    let again = refusal(&call(&server, BOB, "resynthesize", json!({"run_id": alices})).await);
    assert!(again.contains(&format!("no run `{alices}`")), "{again}");
    assert_eq!(mock.requests().len(), asked, "refusals asked no model");
    // A prefix both runs' ids share names the caller's own run only.
    let common = alices
        .chars()
        .zip(bobs.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let shared = &alices[..common];
    assert!(common >= 4, "{alices} {bobs}");
    let own = call(&server, BOB, "resynthesize", json!({"run_id": shared})).await;
    assert_eq!(
        own["result"]["structuredContent"]["resynthesis_of"], bobs,
        "{own}"
    );

    let stderr = server.stderr();
    for token in [ALICE, BOB, ROOT] {
        assert!(!stderr.contains(token), "a token in the log");
    }
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("run ended") && l.contains("client") && l.contains("bob")),
        "the run's audit line names its client"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_over_budget_is_refused_before_any_model_is_asked() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    // Less than one run's worst case: not even the first run fits.
    let clients = client("alice", ALICE, "max_usd_per_day = 0.005");
    let config = write_config(&team(&mock, &clients, &dir.path().join("runs.sqlite3")));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let refused = refusal(&call(&server, ALICE, "ask", json!({"prompt": "q"})).await);
    assert!(
        refused.contains("daily budget of $0.005")
            && refused.contains("max_usd_per_day")
            && refused.contains("resets at")
            && refused.contains("T00:00:00Z"),
        "{refused}"
    );
    assert!(mock.requests().is_empty(), "the mock saw no request");
    let audit = server.wait_for_stderr("refused a run", 1).await;
    assert!(
        audit[0].contains("alice") && audit[0].contains("budget"),
        "{audit:?}"
    );
    assert!(!server.stderr().contains(ALICE));
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_concurrent_calls_overspend_a_budget_by_at_most_one_run() {
    let mock = Mock::start().await;
    slow_panel(&mock);
    let dir = tempfile::tempdir().unwrap();
    let store = format!("path = \"{}\"", dir.path().join("runs.sqlite3").display());
    let config = write_config(&ten_runs(&mock, &store));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let replies = fifty_calls(&[&server]).await;
    held_to_budget(&mock, &replies);
}

/// The same budget held by two instances sharing one PostgreSQL store.
#[tokio::test(flavor = "multi_thread")]
async fn two_instances_on_one_database_hold_one_budget() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    slow_panel(&mock);
    let store = format!("url = \"{}\"", cluster.database());
    let config = write_config(&ten_runs(&mock, &store));
    let env = [("PGPASSWORD", "pg-canary-51c0ffee")];
    let (a, b) = tokio::join!(
        HttpServer::start_with_env("127.0.0.1:0", &config.path, None, &[], &env),
        HttpServer::start_with_env("127.0.0.1:0", &config.path, None, &[], &env)
    );
    let replies = fifty_calls(&[&a, &b]).await;
    held_to_budget(&mock, &replies);
}

fn slow_panel(mock: &Mock) {
    for model in PANEL {
        // Slow enough that the 50 calls are all asked for before any ends.
        mock.script(model, [Step::answer_after(1000, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
}

/// A budget of ten runs' worst case, for `alice`.
const BUDGET: f64 = 10.0 * RUN_CEILING;

fn ten_runs(mock: &Mock, store: &str) -> String {
    let clients = client("alice", ALICE, &format!("max_usd_per_day = {BUDGET}"));
    team_in(mock, &clients, store).replace(
        "[providers.mock]\n",
        "[providers.mock]\nmax_concurrency = 64\n",
    )
}

/// 50 calls of `alice` at once, spread over `servers`.
async fn fifty_calls(servers: &[&HttpServer]) -> Vec<Value> {
    let calls = (0..50).map(|i| {
        let server = servers[i % servers.len()];
        async move { call(server, ALICE, "ask", json!({"prompt": format!("q{i}")})).await }
    });
    futures::future::join_all(calls).await
}

/// At least the budget's ten runs were made, some refused, and what the
/// runs cost is within the budget and one run's worst case; refused runs
/// asked no model.
fn held_to_budget(mock: &Mock, replies: &[Value]) {
    let (mut spent, mut admitted, mut refused) = (0.0, 0, 0);
    for reply in replies {
        if reply["result"]["isError"] == true {
            let text = refusal(reply);
            assert!(text.contains("daily budget"), "{text}");
            refused += 1;
        } else {
            spent += reply["result"]["structuredContent"]["usage"]["cost_usd"]
                .as_f64()
                .unwrap();
            admitted += 1;
        }
    }
    assert!(
        admitted >= 10 && refused > 0,
        "{admitted} admitted, {refused} refused"
    );
    assert!(
        spent <= BUDGET + RUN_CEILING + 1e-9,
        "spent ${spent} of a ${BUDGET} budget"
    );
    assert_eq!(mock.requests().len(), admitted * (PANEL.len() + 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_past_the_per_minute_limit_get_429_with_retry_after() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let clients = [
        client("alice", ALICE, "max_runs_per_minute = 2"),
        client("bob", BOB, ""),
    ]
    .concat();
    let config = write_config(&team(&mock, &clients, &dir.path().join("runs.sqlite3")));
    let server = HttpServer::start(&config.path, None, &[]).await;
    for id in 0..2 {
        let response = server
            .post(Some(ALICE), &tool_call(id, "ask", "q"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let response = server
        .post(Some(ALICE), &tool_call(9, "ask", "q"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let wait: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "Retry-After: {wait}");
    let body = messages(response).await;
    assert_eq!(body[0]["id"], 9);
    let message = body[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_runs_per_minute"), "{message}");
    // Other requests of the same client, and other clients, go on.
    assert_eq!(
        tools(&server, ALICE).await,
        ["ask", "cheap", "resynthesize"]
    );
    let response = server
        .post(Some(BOB), &tool_call(10, "ask", "q"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

/// A 2026-07-28 request declaring the tasks extension.
pub(crate) fn modern(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_is_its_clients_own() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let clients = [
        client("alice", ALICE, ""),
        client("bob", BOB, ""),
        client("root", ROOT, "admin = true"),
    ]
    .concat();
    let config = write_config(&team(&mock, &clients, &dir.path().join("runs.sqlite3")));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let created = rpc(
        &server,
        ALICE,
        modern(
            1,
            "tools/call",
            json!({"name": "ask", "arguments": {"prompt": "q"}}),
        ),
    )
    .await;
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let get = |id| modern(id, "tasks/get", json!({"taskId": task}));
    let foreign = rpc(&server, BOB, get(2)).await;
    let never = rpc(
        &server,
        BOB,
        modern(
            3,
            "tasks/get",
            json!({"taskId": "4d1c0b9e-0000-4000-8000-000000000000"}),
        ),
    )
    .await;
    let say = |reply: &Value| {
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        say(&foreign).replace(&task, "ID"),
        say(&never).replace("4d1c0b9e-0000-4000-8000-000000000000", "ID"),
        "{foreign}"
    );
    assert!(say(&foreign).contains("unknown task"), "{foreign}");
    let cancel = rpc(
        &server,
        BOB,
        modern(4, "tasks/cancel", json!({"taskId": task})),
    )
    .await;
    assert!(say(&cancel).contains("unknown task"), "{cancel}");
    assert!(rpc(&server, ALICE, get(5)).await["result"].is_object());
    assert!(rpc(&server, ROOT, get(6)).await["result"].is_object());
}
