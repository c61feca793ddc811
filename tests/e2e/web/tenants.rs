//! One tenant cannot starve, read or spend through another (issue 37): the
//! per-minute limit holds at every door, the response cache is each
//! client's own, `/metrics` (every client's names and spend) is for admins,
//! the names chorus records its own callers under cannot be taken, open
//! paths cannot hold the connection slots a token holder needs, and a
//! tokenless server does not accept any Host.

use std::time::Duration;

use serde_json::json;

use crate::support::http::{HttpServer, TOKEN, tool_call};
use crate::support::*;
use crate::web::teams::{ALICE, BOB, answering, call, client, refusal, run_id, team_in};

const ROOT: &str = "root-token-7e2a94c1b05d3f68";

fn store_in(dir: &tempfile::TempDir) -> String {
    format!("path = \"{}\"", dir.path().join("runs.sqlite3").display())
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_viewer_is_held_to_the_per_minute_limit_mcp_refused() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let clients = client("alice", ALICE, "max_runs_per_minute = 1");
    let config = write_config(&team_in(&mock, &clients, &store_in(&dir)));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let id = run_id(&call(&server, ALICE, "ask", json!({"prompt": "q"})).await);
    let refused = server
        .post(Some(ALICE), &tool_call(2, "ask", "q"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429, "the MCP door refuses the second run");

    let viewer = no_redirects()
        .post(format!("{}/runs/{id}/resynthesize", server.origin()))
        .bearer_auth(ALICE)
        .form(&[("merger", "as-before")])
        .send()
        .await
        .unwrap();
    assert_eq!(viewer.status(), 409, "refused, not sent to a new run");
    let page = viewer.text().await.unwrap();
    assert!(
        page.contains("may start 1 runs per minute (max_runs_per_minute)"),
        "the same words as over MCP: {page}"
    );
    assert_eq!(mock.requests_for(SYNTH).len(), 1, "nothing ran again");
}

/// The MCP door and the viewer's refuse a client over its budget through
/// the one gate: before any model is asked, in the same words.
#[tokio::test(flavor = "multi_thread")]
async fn a_budget_refuses_at_the_mcp_and_the_viewer_door_in_the_same_words() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    // A run of alice's, made while she had no budget.
    let free = write_config(&team_in(
        &mock,
        &client("alice", ALICE, ""),
        &store_in(&dir),
    ));
    let mut first = HttpServer::start(&free.path, None, &[]).await;
    let id = run_id(&call(&first, ALICE, "ask", json!({"prompt": "q"})).await);
    assert!(first.terminate().await.success());
    let asked = mock.requests().len();

    // Now a daily budget below any run's worst case.
    let capped = client("alice", ALICE, "max_usd_per_day = 0.0001");
    let config = write_config(&team_in(&mock, &capped, &store_in(&dir)));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let over_mcp = refusal(&call(&server, ALICE, "ask", json!({"prompt": "q"})).await);
    assert!(
        over_mcp.contains("daily budget of $0.0001") && over_mcp.contains("max_usd_per_day"),
        "{over_mcp}"
    );
    let viewer = no_redirects()
        .post(format!("{}/runs/{id}/resynthesize", server.origin()))
        .bearer_auth(ALICE)
        .form(&[("merger", "as-before")])
        .send()
        .await
        .unwrap();
    assert_eq!(viewer.status(), 409, "refused, not sent to a new run");
    let page = viewer.text().await.unwrap();
    // The gate's words, less the tool result's `chorus: ` and from the
    // first character HTML would escape.
    let words = over_mcp
        .trim_start_matches("chorus: ")
        .split(['\'', '"', '<', '&'])
        .next()
        .unwrap();
    assert!(
        words.len() > 30 && page.contains(words),
        "the viewer says what MCP said ({words:?}): {page}"
    );
    assert_eq!(
        mock.requests().len(),
        asked,
        "no model was asked at either door"
    );
    let audit = server.wait_for_stderr("refused a run", 2).await;
    assert!(audit.iter().all(|line| line.contains("alice")), "{audit:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_clients_cached_answer_is_never_anothers() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer(&format!("{model} answers"))]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let dir = tempfile::tempdir().unwrap();
    let clients = [client("alice", ALICE, ""), client("bob", BOB, "")].concat();
    let det = format!(
        "[cache]\nresponses = \"1h\"\n\n[plugins.det-panel]\nbuiltin = \"static-panel\"\n\
         settings = {{ panel = [\"m1\", \"m2\"], synthesizers = [\"{SYNTH}\"], temperature = 0.0 }}\n\n\
         [pipelines.det]\ndescription = \"At temperature 0.\"\nselector = \"det-panel\"\n\
         prompter = \"passthrough\"\nsynthesizer = \"synthesize\"\n\n{clients}"
    );
    let config = write_config(&team_in(&mock, &det, &store_in(&dir)));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let asked = |mock: &Mock| mock.requests_for("m1").len() + mock.requests_for("m2").len();

    let alices = call(
        &server,
        ALICE,
        "det",
        json!({"prompt": "alice's private question"}),
    )
    .await;
    let alices_run = run_id(&alices);
    assert_eq!(asked(&mock), 2);
    let again = call(
        &server,
        ALICE,
        "det",
        json!({"prompt": "alice's private question"}),
    )
    .await;
    assert_eq!(
        asked(&mock),
        2,
        "alice's own second ask is answered from her cache"
    );
    assert!(again.to_string().contains("cached_from"), "{again}");

    let bobs = call(
        &server,
        BOB,
        "det",
        json!({"prompt": "alice's private question"}),
    )
    .await;
    assert_eq!(asked(&mock), 4, "bob's identical question is asked anew");
    let bobs = bobs.to_string();
    assert!(!bobs.contains("cached_from"), "{bobs}");
    assert!(
        !bobs.contains(&alices_run),
        "bob never learns alice's run: {bobs}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_for_admins_on_the_main_listener() {
    let mock = Mock::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clients = [
        client("alice", ALICE, ""),
        client("root", ROOT, "admin = true"),
    ]
    .concat();
    let config = write_config(&team_in(&mock, &clients, &store_in(&dir)));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let get = |token: &'static str| {
        reqwest::Client::new()
            .get(format!("{}/metrics", server.origin()))
            .bearer_auth(token)
            .send()
    };
    let alice = get(ALICE).await.unwrap();
    assert_eq!(alice.status(), 403);
    let why = alice.text().await.unwrap();
    assert!(
        why.contains("only an admin client") && !why.contains("chorus_runs"),
        "{why}"
    );
    let root = get(ROOT).await.unwrap();
    assert_eq!(root.status(), 200);
    assert!(root.text().await.unwrap().contains("chorus_"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_metrics_listener_refuses_a_rebinding_host() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let mut child = command(&[
        "serve",
        "--config",
        config.path.to_str().unwrap(),
        "--metrics",
        "127.0.0.1:0",
    ])
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let stderr = capture(child.stderr.take());
    let line = wait_for_lines(&stderr, "metrics at http://", 1)
        .await
        .remove(0);
    let url = line.split("metrics at ").nth(1).unwrap().trim().to_owned();
    let by_address = reqwest::get(&url).await.unwrap();
    assert_eq!(by_address.status(), 200);
    let rebound = reqwest::Client::new()
        .get(&url)
        .header("host", "rebind.attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    assert!(rebound.text().await.unwrap().contains("DNS rebinding"));
}

#[tokio::test]
async fn a_client_cannot_take_a_name_chorus_records_its_own_callers_under() {
    let mock = Mock::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clients = client("admin", ALICE, "");
    let config = write_config(&team_in(&mock, &clients, &store_in(&dir)));
    let (code, _, stderr) = run_cli(&["check", "--config", config.path.to_str().unwrap()]).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("`admin` is reserved") && stderr.contains("http.clients[0].name"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn keep_alive_connections_to_open_paths_do_not_lock_a_token_holder_out() {
    let mock = Mock::start().await;
    answering(&mock);
    let config = write_config(&config(
        &mock,
        "[http]\nmax_connections = 6\nmax_connections_per_peer = 6\n",
    ));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    // Six clients that each hold a keep-alive connection after `/health`.
    let mut holders = Vec::new();
    for _ in 0..6 {
        let holder = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(600))
            .build()
            .unwrap();
        let health = holder
            .get(format!("{}/health", server.origin()))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        holders.push(holder);
    }
    let answered = tokio::time::timeout(
        Duration::from_secs(20),
        server.post(Some(TOKEN), &tool_call(1, "ask", "q")).send(),
    )
    .await
    .expect("the token holder gets a connection")
    .expect("and an answer");
    assert_eq!(answered.status(), 200);
    drop(holders);
}

#[tokio::test]
async fn any_host_is_refused_on_a_server_without_a_token() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let (code, _, stderr) = run_cli(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--config",
        config.path.to_str().unwrap(),
        "--allow-host",
        "*",
    ])
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("DNS rebinding"), "{stderr}");
}
