//! Experiments (issue 53): callers keep asking for `ask`, and each run is
//! served by one of its variants.
//!
//! - Adaptive, on two instances sharing one PostgreSQL: a client that rates
//!   `cheap`'s answers good and `ask`'s bad moves traffic toward `cheap`
//!   until the experiment declares it, with its numbers; a conversation
//!   (an OpenAI message history, an MCP follow-up) keeps its variant; after
//!   a restart the winner serves every run; `chorus experiments` says so.
//! - A guardrail stops a variant whose runs fail, and says why; the other
//!   variant serves from then on.

use serde_json::{Value, json};

use crate::store::failover::instance;
use crate::support::http::HttpServer;
use crate::support::*;
use crate::web::teams::{ALICE, call, client, team_in};

/// An admin: the experiments page adds up every client's runs.
const OPS: &str = "ops-token-5d1f0c7b9e2a4863";

const METRIC: &str = r#"
[metrics.helpful]
type = "boolean"
"#;

/// Runs of `ask` through the OpenAI endpoint: the variant that served it.
async fn ask(server: &HttpServer, messages: Value) -> (String, String) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.origin()))
        .bearer_auth(ALICE)
        .json(&json!({"model": "ask", "messages": messages}))
        .send()
        .await
        .unwrap();
    let completion: Value = response.json().await.unwrap();
    let chorus = &completion["chorus"];
    assert_eq!(chorus["experiment"]["name"], "ask", "{completion}");
    (
        chorus["run_id"].as_str().unwrap().to_owned(),
        chorus["experiment"]["variant"]
            .as_str()
            .unwrap_or_else(|| panic!("{completion}"))
            .to_owned(),
    )
}

async fn rate(server: &HttpServer, run: &str, good: bool) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/feedback", server.origin()))
        .bearer_auth(ALICE)
        .json(&json!({"run_id": run, "metric": "helpful", "value": good}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

fn share(variants: &[String], of: &str) -> f64 {
    variants.iter().filter(|v| *v == of).count() as f64 / variants.len().max(1) as f64
}

async fn standing(config: &std::path::Path) -> Value {
    let file = config.to_str().unwrap();
    let (code, out, err) = run_cli_with(
        &["experiments", "ask", "--json", "--config", file],
        &[("PGPASSWORD", "pg-canary-51c0ffee")],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn traffic_moves_to_the_variant_rated_better_and_the_experiment_declares_it() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    crate::web::teams::answering(&mock);
    let experiment = r#"
[experiments.ask]
variants = { ask = 1, cheap = 1 }
metric = "helpful"
adaptive = true
min_share = 0.2
min_rated = 3
"#;
    let store = format!("url = \"{}\"", cluster.database());
    let toml = team_in(
        &mock,
        &format!(
            "{}{}{METRIC}{experiment}",
            client("alice", ALICE, ""),
            client("ops", OPS, "admin = true")
        ),
        &store,
    );
    let config = write_config(&toml);
    let (a, b) = tokio::join!(instance(&config.path), instance(&config.path));

    // A conversation keeps its variant: a history the caller sends, and a
    // follow-up of a kept run.
    for i in 0..4 {
        let opening = format!("opening question {i}");
        let (_, first) = ask(&a, json!([{"role": "user", "content": opening}])).await;
        let (_, second) = ask(
            &b,
            json!([
                {"role": "user", "content": opening},
                {"role": "assistant", "content": "merged"},
                {"role": "user", "content": "and then?"}
            ]),
        )
        .await;
        assert_eq!(first, second, "turn 2 of conversation {i}");
    }
    let asked = call(&a, ALICE, "ask", json!({"prompt": "by MCP"})).await;
    let served = &asked["result"]["structuredContent"]["experiment"];
    assert_eq!(served["name"], "ask", "{asked}");
    let run = asked["result"]["structuredContent"]["run_id"]
        .as_str()
        .unwrap();
    let followed = call(
        &b,
        ALICE,
        "ask",
        json!({"prompt": "more", "follow_up_of": run}),
    )
    .await;
    assert_eq!(
        &followed["result"]["structuredContent"]["experiment"], served,
        "{followed}"
    );

    // Before any rating, the starting weights: half each.
    let before = standing(&config.path).await;
    assert_eq!(before["status"]["state"], "running", "{before:#}");
    assert_eq!(before["variants"][1]["share"], 0.5, "{before:#}");

    // Rated by a client that likes `cheap`: runs alternate between the
    // two instances, each rated on the other.
    let mut variants = Vec::new();
    let mut declared_at = None;
    // When the experiment first gave `cheap` most of the traffic.
    let mut moved_at = None;
    for i in 0..400 {
        let (serving, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let (run, variant) = ask(
            serving,
            json!([{"role": "user", "content": format!("question {i}")}]),
        )
        .await;
        rate(other, &run, variant == "cheap").await;
        variants.push(variant);
        if i % 10 == 9 {
            let now = standing(&config.path).await;
            if now["status"]["state"] == "winner" {
                declared_at = Some(variants.len());
                break;
            }
            let cheap = now["variants"][1]["share"].as_f64().unwrap();
            if cheap > 0.7 && moved_at.is_none() {
                moved_at = Some(variants.len());
            }
        }
    }
    let declared_at = declared_at.unwrap_or_else(|| {
        panic!(
            "no winner after {} runs: {}",
            variants.len(),
            standing_text(&variants)
        )
    });
    // Traffic moved before the experiment was sure: `cheap` was given more
    // than 70 % of it, and served most runs from then on.
    let moved_at =
        moved_at.unwrap_or_else(|| panic!("traffic never moved: {}", standing_text(&variants)));
    let after = share(&variants[moved_at..declared_at], "cheap");
    assert!(
        moved_at == declared_at || after > 0.5,
        "{after}: {}",
        standing_text(&variants)
    );

    let now = standing(&config.path).await;
    assert_eq!(now["status"]["variant"], "cheap", "{now:#}");
    assert_eq!(now["status_line"], "winner: cheap");
    let said = now["status"]["said"].as_str().unwrap();
    assert!(
        said.contains("cheap is better on helpful at 95 %"),
        "{said}"
    );
    assert!(said.contains("cheap: mean 1.000"), "{said}");
    assert!(said.contains("ask: mean 0.000"), "{said}");
    assert_eq!(now["variants"][1]["name"], "cheap");
    assert_eq!(now["variants"][1]["share"], 1.0);
    assert!(now["timeline"].as_array().unwrap().len() > 1, "{now:#}");
    eprintln!(
        "moved at run {moved_at}, declared at run {declared_at}; {}",
        standing_text(&variants)
    );
    for window in now["timeline"].as_array().unwrap() {
        eprintln!(
            "  {} runs: {}",
            window["runs"],
            serde_json::to_string(&window["shares"]).unwrap()
        );
    }

    // Both instances serve the winner only; so does one started after.
    for server in [&a, &b] {
        for i in 0..3 {
            let (_, variant) = ask(
                server,
                json!([{"role": "user", "content": format!("after {i}")}]),
            )
            .await;
            assert_eq!(variant, "cheap");
        }
    }
    drop((a, b));
    let restarted = instance(&config.path).await;
    for i in 0..5 {
        let (_, variant) = ask(
            &restarted,
            json!([{"role": "user", "content": format!("restarted {i}")}]),
        )
        .await;
        assert_eq!(variant, "cheap", "after a restart");
    }
    let (code, text, err) = run_cli_with(
        &["experiments", "--config", config.path.to_str().unwrap()],
        &[("PGPASSWORD", "pg-canary-51c0ffee")],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(
            "experiment ask · metric helpful · adaptive, 95 % anytime-valid · winner: cheap"
        ),
        "{text}"
    );
    assert!(text.contains("share of runs over time"), "{text}");

    // The viewer's page, drawn without script, for an admin only.
    let page = viewer_page(&restarted, OPS, "/experiments").await;
    assert_eq!(page.0, 200, "{}", page.1);
    for needle in [
        "Experiment <code>ask</code>",
        "winner: cheap",
        "Mean rating over time",
        r#"<svg class="experiment""#,
        "<polyline",
        "Cost against quality",
    ] {
        assert!(page.1.contains(needle), "{needle}: {}", page.1);
    }
    let refused = viewer_page(&restarted, ALICE, "/experiments").await;
    assert_eq!(refused.0, 403, "{}", refused.1);
    assert!(refused.1.contains("every client"), "{}", refused.1);
    let runs = viewer_page(&restarted, OPS, "/").await;
    assert!(runs.1.contains(r#"href="/experiments""#), "{}", runs.1);
}

/// A page of the viewer as `token`'s session sees it: status and body.
async fn viewer_page(server: &HttpServer, token: &str, path: &str) -> (u16, String) {
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let origin = server.origin();
    let signed_in = browser
        .post(format!("{origin}/sign-in"))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let response = browser
        .get(format!("{origin}{path}"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// The share of `cheap` in each tenth of the runs, for a failure message
/// and the closing note.
fn standing_text(variants: &[String]) -> String {
    let size = variants.len().div_ceil(10).max(1);
    let shares: Vec<String> = variants
        .chunks(size)
        .map(|chunk| format!("{:.0}%", share(chunk, "cheap") * 100.0))
        .collect();
    format!(
        "share of `cheap` by tenth of {} runs: {}",
        variants.len(),
        shares.join(" ")
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guardrail_stops_a_failing_variant_and_says_why() {
    let mock = Mock::start().await;
    crate::web::teams::answering(&mock);
    // `broken`'s only model always fails.
    mock.script(SYNTH2, [Step::status(500, "down")]);
    let dir = tempfile::tempdir().unwrap();
    let experiment = r#"
[plugins.dead-panel]
builtin = "static-panel"
settings = { panel = ["synth2"], synthesizers = ["synth2"] }

[pipelines.broken]
description = "A panel that never answers."
selector = "dead-panel"
prompter = "passthrough"
synthesizer = "synthesize"

[experiments.ask]
variants = { ask = 1, broken = 1 }
guardrails = { max_failure_rate = 0.5, min_runs = 3 }
"#;
    let toml = team_in(
        &mock,
        &format!("{}{experiment}", client("alice", ALICE, "")),
        &format!("path = \"{}\"", dir.path().join("runs.sqlite3").display()),
    );
    let config = write_config(&toml);
    let server = HttpServer::start(&config.path, None, &[]).await;
    let mut broken = 0;
    let mut last = Vec::new();
    for i in 0..40 {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", server.origin()))
            .bearer_auth(ALICE)
            .json(&json!({"model": "ask", "messages": [{"role": "user", "content": format!("q{i}")}]}))
            .send()
            .await
            .unwrap();
        let ok = response.status() == 200;
        broken += usize::from(!ok);
        last.push(ok);
        // Let the numbers be read again after each run.
        tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    }
    assert!(broken >= 3, "{broken} runs of `broken`");
    assert!(
        last[30..].iter().all(|ok| *ok),
        "once stopped, `broken` serves no run: {last:?}"
    );
    let (code, out, err) = run_cli(&[
        "experiments",
        "ask",
        "--json",
        "--config",
        config.path.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    let now: Value = serde_json::from_str(&out).unwrap();
    let stopped = now["variants"][1]["stopped"]
        .as_str()
        .unwrap_or_else(|| panic!("{now:#}"));
    assert!(stopped.starts_with("guardrail: "), "{stopped}");
    assert!(
        stopped.contains("runs failed (100 %), above max_failure_rate 0.5"),
        "{stopped}"
    );
    assert_eq!(now["variants"][1]["share"], 0.0);
    assert_eq!(
        now["status_line"],
        format!("running; broken stopped: {stopped}")
    );
    assert!(
        server.stderr().contains("variant stopped: guardrail: "),
        "said in the log"
    );
}
