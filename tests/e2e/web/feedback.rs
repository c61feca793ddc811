//! Feedback on runs (issue 53), by every door, through one gate: a client
//! rates its own run over `POST /v1/feedback` (with the id the endpoint
//! gave) and the MCP tool `feedback`, a second rating replaces its first,
//! another client's run is as unknown as one that never was, a metric not
//! declared or a value out of bounds is refused naming what is taken, the
//! run's resource and `chorus runs show` carry it, and `/metrics` counts
//! it.

use serde_json::{Value, json};

use crate::support::http::HttpServer;
use crate::support::*;
use crate::web::teams::{ALICE, BOB, answering, call, client, rpc, run_id, team_in};

/// An admin: `/metrics` shows every client's runs.
const OPS: &str = "ops-token-4b7e1c9a0d2f5386";

const METRICS: &str = r#"
[metrics.helpful]
type = "boolean"

[metrics.score]
type = "float"
min = 0
max = 10
optimize = "max"
"#;

async fn rate(server: &HttpServer, token: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/feedback", server.origin()))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_rates_its_own_runs_by_every_door_and_no_one_elses() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let clients = format!(
        "{}{}{}{METRICS}",
        client("alice", ALICE, ""),
        client("bob", BOB, ""),
        client("ops", OPS, "admin = true")
    );
    let toml = team_in(
        &mock,
        &clients,
        &format!("path = \"{}\"", dir.path().join("runs.sqlite3").display()),
    );
    let config = write_config(&toml);
    let server = HttpServer::start(&config.path, None, &[]).await;

    // Alice asks as a model, and rates the answer by the id it came with.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.origin()))
        .bearer_auth(ALICE)
        .json(&json!({"model": "ask", "messages": [{"role": "user", "content": "q"}]}))
        .send()
        .await
        .unwrap();
    let completion: Value = response.json().await.unwrap();
    let id = completion["id"].as_str().unwrap().to_owned();
    let run = completion["chorus"]["run_id"].as_str().unwrap().to_owned();
    let (status, given) = rate(
        &server,
        ALICE,
        json!({"response_id": id, "metric": "helpful", "value": true}),
    )
    .await;
    assert_eq!(status, 200, "{given}");
    assert_eq!(
        (&given["run_id"], &given["value"], &given["replaced"]),
        (&json!(run), &json!(1.0), &json!(false))
    );
    let (_, again) = rate(
        &server,
        ALICE,
        json!({"run_id": run, "metric": "helpful", "value": false, "comment": "wrong year"}),
    )
    .await;
    assert_eq!(again["replaced"], true, "{again}");

    // Bob cannot rate it, and cannot tell it from a run that never was.
    let (status, foreign) = rate(
        &server,
        BOB,
        json!({"run_id": run, "metric": "helpful", "value": true}),
    )
    .await;
    let (_, missing) = rate(
        &server,
        BOB,
        json!({"run_id": "0196a1b2-c3d4-7000-8000-000000000001", "metric": "helpful", "value": true}),
    )
    .await;
    assert_eq!(status, 404, "{foreign}");
    let said = |v: &Value, id: &str| v["error"]["message"].as_str().unwrap().replace(id, "ID");
    assert_eq!(
        said(&foreign, &run),
        said(&missing, "0196a1b2-c3d4-7000-8000-000000000001")
    );

    // What is not taken is said, with what is.
    for (body, needle) in [
        (
            json!({"run_id": run, "metric": "stars", "value": 5}),
            "no metric `stars`: this chorus takes `helpful`, `score`",
        ),
        (
            json!({"run_id": run, "metric": "score", "value": 11}),
            "at most 10",
        ),
        (
            json!({"run_id": run, "metric": "helpful", "value": "yes"}),
            "give true or false",
        ),
        (
            json!({"run_id": run, "metric": "helpful", "value": true, "stars": 1}),
            "Unknown field `stars`",
        ),
        (
            json!({"metric": "helpful", "value": true}),
            "Missing `run_id`",
        ),
    ] {
        let (status, refused) = rate(&server, ALICE, body).await;
        assert_eq!(status, 400, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{message}");
    }

    // Over MCP: the tool is listed, rates her run, and refuses Bob.
    let tools = rpc(
        &server,
        ALICE,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert!(
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "feedback"),
        "{tools}"
    );
    let mcp_run = run_id(&call(&server, ALICE, "ask", json!({"prompt": "another q"})).await);
    let rated = call(
        &server,
        ALICE,
        "feedback",
        json!({"run_id": mcp_run, "metric": "score", "value": 8.5}),
    )
    .await;
    assert_eq!(rated["result"]["isError"], false, "{rated}");
    assert_eq!(rated["result"]["structuredContent"]["value"], 8.5);
    assert!(
        rated["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&format!("Recorded score = 8.5 on run {mcp_run}")),
        "{rated}"
    );
    let refused = call(
        &server,
        BOB,
        "feedback",
        json!({"run_id": mcp_run, "metric": "score", "value": 0}),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");

    // The run carries it, with who gave it and when.
    let read = rpc(
        &server,
        ALICE,
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
               "params": {"uri": format!("chorus://runs/{run}")}}),
    )
    .await;
    let record: Value =
        serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    let feedback = record["feedback"].as_array().unwrap();
    assert_eq!(feedback.len(), 1, "{record}");
    assert_eq!(
        (
            &feedback[0]["client"],
            &feedback[0]["value"],
            &feedback[0]["comment"]
        ),
        (&json!("alice"), &json!(0.0), &json!("wrong year"))
    );
    assert!(feedback[0]["at"].as_i64().unwrap() > 0);

    // Counted by metric and pipeline (a replacement counts again).
    let metrics = reqwest::Client::new()
        .get(format!("{}/metrics", server.origin()))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"chorus_feedback_total{metric="helpful",pipeline="ask"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"chorus_feedback_value_total{metric="score",pipeline="ask"} 8.5"#),
        "{metrics}"
    );

    // In the viewer: the run's page offers it, its form holds the
    // session's CSRF token, and a form without it is refused.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let origin = server.origin();
    let session = |token: &'static str| {
        let browser = browser.clone();
        let origin = origin.clone();
        async move {
            let signed_in = browser
                .post(format!("{origin}/sign-in"))
                .form(&[("token", token)])
                .send()
                .await
                .unwrap();
            let cookie = signed_in.headers()["set-cookie"]
                .to_str()
                .unwrap()
                .to_owned();
            cookie.split(';').next().unwrap().to_owned()
        }
    };
    // A run's page as a session sees it, and the CSRF token in its forms.
    let page = |cookie: &str, run: &str| {
        let request = browser
            .get(format!("{origin}/runs/{run}"))
            .header("cookie", cookie.to_owned());
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let csrf_of = |page: &str| {
        page.split(r#"name="csrf" value=""#)
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_owned()
    };
    let alice = session(ALICE).await;
    let alices = page(&alice, &mcp_run).await;
    assert!(alices.contains("Rate this answer"), "{alices}");
    let csrf = csrf_of(&alices);
    let form = |csrf: &str| {
        vec![
            ("csrf", csrf.to_owned()),
            ("metric", "helpful".to_owned()),
            ("value", "true".to_owned()),
            ("comment", String::new()),
        ]
    };
    let post = |cookie: &str, csrf: &str| {
        browser
            .post(format!("{origin}/runs/{mcp_run}/feedback"))
            .header("cookie", cookie.to_owned())
            .form(&form(csrf))
            .send()
    };
    assert_eq!(post(&alice, "guess").await.unwrap().status(), 403);
    let rated = post(&alice, &csrf).await.unwrap();
    assert_eq!(rated.status(), 303);
    assert_eq!(
        rated.headers()["location"],
        format!("/runs/{mcp_run}#feedback").as_str()
    );
    let rated = page(&alice, &mcp_run).await;
    assert!(rated.contains("helpful = 1"), "{rated}");
    // Bob, with a CSRF token of his own session (from his own run's
    // page), cannot rate Alice's run: it is not found.
    let bob = session(BOB).await;
    let bobs_run = run_id(&call(&server, BOB, "ask", json!({"prompt": "bob's q"})).await);
    let bobs_csrf = csrf_of(&page(&bob, &bobs_run).await);
    assert_eq!(post(&bob, &bobs_csrf).await.unwrap().status(), 404);

    // From the terminal, as the local user, on the same store.
    let file = config.path.to_str().unwrap();
    let (code, stdout, stderr) =
        run_cli(&["runs", "feedback", &run, "score", "3", "--config", file]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("Recorded score = 3 on run {run}")),
        "{stdout}"
    );
    let (code, _, stderr) =
        run_cli(&["runs", "feedback", &run, "score", "ten", "--config", file]).await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("the metric `score` is a number"),
        "{stderr}"
    );
    let (_, shown, _) = run_cli(&["runs", "show", &run, "--config", file]).await;
    assert!(shown.contains("helpful = 0  by alice"), "{shown}");
    assert!(shown.contains("score = 3  by local"), "{shown}");
}
