//! The command line is a door like the others: `chorus ask` goes through
//! the one gate, and a limit it shares with the MCP door refuses it in the
//! same words, before any model is asked. Its caller is the person at the
//! machine (`local`, an admin): grants, runs per minute, runs in progress
//! and budgets belong to the tokens of `[[http.clients]]`, which the CLI
//! does not use, so the limit they share is the run's cost ceiling.

use serde_json::json;

use crate::support::http::HttpServer;
use crate::support::*;
use crate::web::teams::{ALICE, answering, call, client, refusal, team_in};

/// A call's `max_cost_usd` above `limits.max_cost_usd` (0.01 in the team's
/// config) is refused at the MCP door and at `chorus ask` with one message.
#[tokio::test(flavor = "multi_thread")]
async fn a_raised_cost_ceiling_is_refused_at_the_cli_and_the_mcp_door_in_the_same_words() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let store = format!("path = \"{}\"", dir.path().join("runs.sqlite3").display());
    let config = write_config(&team_in(&mock, &client("alice", ALICE, ""), &store));

    let server = HttpServer::start(&config.path, None, &[]).await;
    let over_mcp = refusal(
        &call(
            &server,
            ALICE,
            "ask",
            json!({"prompt": "q", "max_cost_usd": 5}),
        )
        .await,
    );
    let words = over_mcp.trim_start_matches("chorus: ").trim_end();
    assert!(
        words.contains("can lower the configured ceiling") && words.contains("limits.max_cost_usd"),
        "{over_mcp}"
    );

    let (code, stdout, stderr) = run_cli(&[
        "ask",
        "--config",
        config.path.to_str().unwrap(),
        "--quiet",
        "-o",
        "max_cost_usd=5",
        "q",
    ])
    .await;
    assert_ne!(code, 0, "refused: {stdout}");
    assert!(stdout.is_empty(), "no answer: {stdout}");
    assert!(
        stderr.contains(words),
        "the CLI says what MCP said ({words:?}): {stderr}"
    );
    for model in PANEL.iter().chain([&SYNTH]) {
        assert!(
            mock.requests_for(model).is_empty(),
            "no model was asked at either door: {model}"
        );
    }
}
