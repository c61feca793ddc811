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

/// The clients of these tests (Alice, and an admin), the metric, and
/// `more`.
fn alice_and_ops(more: &str) -> String {
    format!(
        "{}{}{METRIC}{more}",
        client("alice", ALICE, ""),
        client("ops", OPS, "admin = true")
    )
}

/// Alice's chat completion of `ask` with `messages`.
async fn complete(server: &HttpServer, messages: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.origin()))
        .bearer_auth(ALICE)
        .json(&json!({"model": "ask", "messages": messages}))
        .send()
        .await
        .unwrap()
}

/// A run of `ask` through the OpenAI endpoint: its id and the variant
/// that served it.
async fn ask(server: &HttpServer, messages: Value) -> (String, String) {
    let completion: Value = complete(server, messages).await.json().await.unwrap();
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
    let toml = team_in(&mock, &alice_and_ops(experiment), &store);
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
    let (code, checked, err) = run_cli(&["check", "--config", config.path.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        checked.contains("experiments:\n  ask: ask (1), broken (1) · fixed weights"),
        "{checked}"
    );
    let server = HttpServer::start(&config.path, None, &[]).await;
    let mut broken = 0;
    let mut last = Vec::new();
    for i in 0..40 {
        let response = complete(
            &server,
            json!([{"role": "user", "content": format!("q{i}")}]),
        )
        .await;
        let ok = response.status() == 200;
        broken += usize::from(!ok);
        last.push(ok);
        // Let the numbers be read again after each run.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
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

/// `/metrics`, as the admin reads it.
async fn metrics_text(server: &HttpServer) -> String {
    reqwest::Client::new()
        .get(format!("{}/metrics", server.origin()))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// A counter of `/metrics` (0 when not there yet).
async fn counter(server: &HttpServer, series: &str) -> f64 {
    metrics_text(server)
        .await
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn shadow_standing(config: &std::path::Path, name: &str) -> Value {
    let (code, out, err) = run_cli(&[
        "experiments",
        name,
        "--json",
        "--config",
        config.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shadow_synthesizer_is_judged_on_the_same_panel_answers_in_both_orders() {
    let mock = Mock::start().await;
    crate::web::teams::answering(&mock);
    // The judge prefers the pipeline's own merge ("merged") to the
    // candidate's (`vote` answers with a panel answer, "ok"); another
    // judge always says A, whatever is in A.
    mock.script(SYNTH2, [Step::judge("merged")]);
    mock.script("biased", [Step::answer("A")]);
    mock.script("grader", [Step::answer("PASS\nAs good as the reference.")]);
    let dir = tempfile::tempdir().unwrap();
    let experiments = r#"
[models.biased]
context_window = 100000

[models.grader]
context_window = 100000

[plugins.alt-merge]
builtin = "vote"

[experiments.merge-test]
pipeline = "ask"
shadow = { synthesizer = "alt-merge", share = 1.0, judge = "synth2", budget_usd_per_day = 1.0 }

[experiments.position]
pipeline = "ask"
shadow = { synthesizer = "alt-merge", share = 1.0, judge = "biased", budget_usd_per_day = 1.0 }

[experiments.thrifty]
pipeline = "ask"
shadow = { synthesizer = "alt-merge", share = 1.0, judge = "synth2", budget_usd_per_day = 0.0005 }
"#;
    let toml = team_in(
        &mock,
        &alice_and_ops(experiments),
        &format!("path = \"{}\"", dir.path().join("runs.sqlite3").display()),
    );
    let config = write_config(&toml);
    let server = HttpServer::start(&config.path, None, &[]).await;
    let runs = 4;
    let mut answers = Vec::new();
    let mut ids = Vec::new();
    for i in 0..runs {
        let response = complete(
            &server,
            json!([{"role": "user", "content": format!("q{i}")}]),
        )
        .await;
        let completion: Value = response.json().await.unwrap();
        answers.push(completion["choices"][0]["message"]["content"].clone());
        ids.push(completion["chorus"]["run_id"].as_str().unwrap().to_owned());
        // Each run's three shadows end before the next run starts.
        let judged = |name: &'static str, outcome: &'static str| {
            format!(r#"chorus_shadow_judgements_total{{experiment="{name}",outcome="{outcome}"}}"#)
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let done = counter(&server, &judged("merge-test", "loss")).await
                + counter(&server, &judged("position", "tie")).await;
            let thrifty = counter(&server, &judged("thrifty", "loss")).await
                + counter(&server, &judged("thrifty", "budget")).await;
            if done == f64::from(2 * (i + 1)) && thrifty == f64::from(i + 1) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "run {i}'s shadows did not end: {}",
                server.stderr()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    // The caller's answers are the pipeline's own.
    assert!(answers.iter().all(|a| a == "merged"), "{answers:?}");

    // No panel model was asked again: each answered each run once.
    for model in PANEL {
        assert_eq!(mock.requests_for(model).len(), runs as usize, "{model}");
    }
    let merge_test = shadow_standing(&config.path, "merge-test").await;
    assert_eq!(merge_test["kind"], "shadow");
    assert_eq!(
        (
            &merge_test["judged"],
            &merge_test["losses"],
            &merge_test["wins"]
        ),
        (&json!(runs), &json!(runs), &json!(0)),
        "{merge_test:#}"
    );
    assert_eq!(merge_test["win_rate"], 0.0);
    // The judge was asked in both orders: the candidate's merge first in
    // one of them.
    let judge_asked: Vec<String> = mock
        .requests_for(SYNTH2)
        .iter()
        .map(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let first_is_pipeline =
        |prompt: &String| prompt.contains("[Answer A]\nmerged\n[End of answer A]");
    assert_eq!(
        judge_asked.iter().filter(|p| first_is_pipeline(p)).count(),
        judge_asked.len() / 2,
        "{judge_asked:?}"
    );
    // Its cost is its own: the judge's two calls per run ($0.0005 each).
    let judge = merge_test["judge_cost_per_run_usd"].as_f64().unwrap();
    assert!((judge - 0.001).abs() < 1e-9, "{merge_test:#}");
    let spent = merge_test["spent_today_usd"].as_f64().unwrap();
    assert!(
        (spent - 0.001 * f64::from(runs)).abs() < 1e-9,
        "{merge_test:#}"
    );
    assert_eq!(
        merge_test["baseline_cost_per_run_usd"], 0.0005,
        "{merge_test:#}"
    );

    // A judge that always picks A cancels out: every run is a tie.
    let position = shadow_standing(&config.path, "position").await;
    assert_eq!(position["ties"], json!(runs), "{position:#}");
    assert_eq!(position["win_rate"], 0.5);

    // A budget spent stops the judging for the day, and says so.
    let thrifty = shadow_standing(&config.path, "thrifty").await;
    assert_eq!(thrifty["judged"], 1, "{thrifty:#}");
    assert!(
        thrifty["status"]
            .as_str()
            .unwrap()
            .contains("today's budget is spent"),
        "{thrifty:#}"
    );
    assert_eq!(
        counter(
            &server,
            r#"chorus_shadow_judgements_total{experiment="thrifty",outcome="budget"}"#
        )
        .await,
        f64::from(runs - 1)
    );
    // Alice paid for her runs only (5 panel calls and a merge, $0.0005
    // each); the shadows' spending is counted as theirs.
    let metrics = metrics_text(&server).await;
    let alices: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("chorus_cost_usd_total{") && l.contains(r#"client="alice""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!((alices - 0.003 * f64::from(runs)).abs() < 1e-9, "{metrics}");
    let shadows = counter(
        &server,
        r#"chorus_shadow_cost_usd_total{experiment="merge-test"}"#,
    )
    .await;
    assert!(
        (shadows - 0.001 * f64::from(runs)).abs() < 1e-9,
        "{metrics}"
    );
    let (code, text, err) =
        run_cli(&["experiments", "--config", config.path.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("experiment merge-test · shadow of ask · candidate alt-merge · judge synth2"),
        "{text}"
    );
    eprintln!("{text}");
}
