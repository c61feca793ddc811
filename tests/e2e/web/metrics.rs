//! `/metrics`: on the HTTP listener behind the token, and on `--metrics
//! ADDR` without one, in the format a real Prometheus (Debian's
//! `prometheus`) scrapes — runs by pipeline and outcome, model calls by
//! outcome, latency histograms. And the audit log a server writes: a line
//! per run and per refused request, as JSON with `--log-format json`. Without the prometheus binary the scrape
//! test says so and returns, unless `CHORUS_REQUIRE_PROMETHEUS=1` (set by
//! .ci/run, which installs it).

use std::time::Duration;

use serde_json::Value;

use crate::support::http::{HttpServer, TOKEN, messages, tool_call};
use crate::support::*;

fn answering(mock: &Mock) {
    for model in PANEL {
        mock.script(model, [Step::answer("yes")]);
    }
    mock.script("m5", [Step::status(503, "overloaded")]);
    mock.script(SYNTH, [Step::answer("merged")]);
}

/// A server with its metrics also on a listener of their own; that
/// listener's `/metrics` address.
async fn serving(mock: &Mock) -> (HttpServer, String, ConfigFile) {
    let config = write_config(&config(mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &["--metrics", "127.0.0.1:0"]).await;
    let line = server
        .wait_for_stderr("metrics at http://", 1)
        .await
        .remove(0);
    let url = line.split("metrics at ").nth(1).unwrap().trim().to_owned();
    (server, url, config)
}

async fn ask(server: &HttpServer, id: u64) {
    let response = server
        .post(Some(TOKEN), &tool_call(id, "ask", "q"))
        .send()
        .await
        .unwrap();
    let messages = messages(response).await;
    assert_eq!(
        messages.last().unwrap()["result"]["structuredContent"]["answer"],
        "merged",
        "{messages:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_runs_and_calls_behind_the_token_or_on_their_own_listener() {
    let mock = Mock::start().await;
    answering(&mock);
    let (server, open, _config) = serving(&mock).await;
    ask(&server, 1).await;
    ask(&server, 2).await;

    let client = reqwest::Client::new();
    let behind = format!("{}/metrics", server.origin());
    let refused = client.get(&behind).send().await.unwrap();
    assert_eq!(
        refused.status(),
        401,
        "the token guards /metrics on the MCP listener"
    );
    for request in [client.get(&behind).bearer_auth(TOKEN), client.get(&open)] {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/openmetrics-text")
        );
        let text = response.text().await.unwrap();
        for line in [
            r#"chorus_runs_total{pipeline="ask",outcome="synthesis"} 2"#,
            r#"chorus_model_calls_total{model="m1",provider="mock",outcome="ok"} 2"#,
            r#"chorus_model_calls_total{model="m5",provider="mock",outcome="http-status"} 2"#,
            r#"chorus_model_calls_total{model="synth",provider="mock",outcome="ok"} 2"#,
            r#"chorus_run_duration_seconds_count{pipeline="ask"} 2"#,
            // Every call that answered had a first token; every call sent
            // went through the permits (6 a run: 5 panel, 1 synthesizer).
            r#"chorus_model_time_to_first_token_seconds_count{model="m1",provider="mock"} 2"#,
            r#"chorus_model_time_to_first_token_seconds_count{model="synth",provider="mock"} 2"#,
            r#"chorus_provider_queue_wait_seconds_count{provider="mock"} 12"#,
            // Each run's start, its 6 calls sent and its end, written
            // before the run answered.
            "chorus_store_write_lag_seconds_count 16",
            // Each run called its selector, prompter and synthesizer once.
            r#"chorus_plugin_call_duration_seconds_count{plugin="panel",export="select",outcome="ok"} 2"#,
            r#"chorus_plugin_call_duration_seconds_count{plugin="synthesize",export="synthesize",outcome="ok"} 2"#,
            "chorus_runs_in_flight 0",
        ] {
            assert!(text.contains(line), "no {line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_logs_each_run_and_each_refusal_as_json_lines_without_the_token() {
    let mock = Mock::start().await;
    answering(&mock);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &["--log-format", "json"]).await;
    ask(&server, 1).await;
    let refused = server
        .post(Some("not-the-token"), &tool_call(2, "ask", "q"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    server
        .wait_for_stderr("refused a request with a wrong bearer token", 1)
        .await;
    let ended = server.wait_for_stderr("run ended", 1).await.remove(0);
    let line: Value = serde_json::from_str(&ended).unwrap_or_else(|e| panic!("{e}: {ended}"));
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["target"], "chorus::audit");
    let fields = &line["fields"];
    assert_eq!(fields["pipeline"], "ask", "{line}");
    // CHORUS_TOKEN alone is one admin client, named `admin`.
    assert_eq!(fields["client"], "admin", "{line}");
    assert_eq!(fields["kind"], "synthesis");
    assert_eq!(fields["calls"], 6);
    assert!(fields["run"].as_str().is_some_and(|r| r.len() > 8));
    assert!(fields["duration_ms"].as_u64().is_some());
    let stderr = server.stderr();
    assert!(!stderr.contains(TOKEN) && !stderr.contains("not-the-token"));
    assert!(!stderr.contains("merged"), "no answer in the audit log");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `query` answered by Prometheus's HTTP API: its vector's samples.
async fn query(prometheus: &str, query: &str) -> Vec<Value> {
    let response: Value = reqwest::Client::new()
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[("query", query)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(response["status"], "success", "{response}");
    response["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_scrapes_runs_and_latency() {
    let binary = std::path::Path::new("/usr/bin/prometheus");
    if !binary.exists() {
        assert!(
            std::env::var_os("CHORUS_REQUIRE_PROMETHEUS").is_none_or(|v| v != "1"),
            "CHORUS_REQUIRE_PROMETHEUS=1 but {} is missing (apt-get install prometheus)",
            binary.display()
        );
        eprintln!(
            "skipped: no {} (apt-get install prometheus)",
            binary.display()
        );
        return;
    }
    let mock = Mock::start().await;
    answering(&mock);
    let (server, open, _config) = serving(&mock).await;
    for id in 1..=3 {
        ask(&server, id).await;
    }

    let dir = tempfile::tempdir().unwrap();
    let target = open
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: chorus\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let web = format!("127.0.0.1:{}", free_port());
    let mut prometheus = tokio::process::Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start prometheus");
    let api = format!("http://{web}");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let runs = loop {
        if let Ok(Some(status)) = prometheus.try_wait() {
            panic!("prometheus exited: {status}");
        }
        let ready = reqwest::get(format!("{api}/-/ready")).await;
        if ready.is_ok_and(|r| r.status() == 200) {
            let runs = query(
                &api,
                r#"chorus_runs_total{pipeline="ask",outcome="synthesis"}"#,
            )
            .await;
            if !runs.is_empty() {
                break runs;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "prometheus never scraped chorus"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(runs[0]["value"][1], "3", "{runs:?}");
    let calls = query(&api, r#"sum(chorus_model_calls_total{outcome="ok"})"#).await;
    assert_eq!(
        calls[0]["value"][1], "15",
        "4 panel members and the synthesizer, 3 times"
    );
    let buckets = query(
        &api,
        r#"chorus_run_duration_seconds_bucket{pipeline="ask",le="+Inf"}"#,
    )
    .await;
    assert_eq!(
        buckets[0]["value"][1], "3",
        "a latency histogram: {buckets:?}"
    );
    let up = query(&api, r#"up{job="chorus"}"#).await;
    assert_eq!(up[0]["value"][1], "1");
    drop(server);
}
