//! Time to the first answer token, and to the whole answer, for the same
//! pipeline asked through `/v1/chat/completions` (streamed and not) and
//! through MCP (`tools/call` over Streamable HTTP): the real `chorus serve
//! --http` against the mock provider of the tests, with the same latencies
//! for every door — each of three panel models answers after `PANEL_MS`,
//! the synthesizer streams its first token after `SYNTH_FIRST_MS` and the
//! rest over `SYNTH_REST_MS`. Runs `CHORUS_BENCH_RUNS` (default 20) of
//! each, one at a time, and prints p50 and p90.
//!
//! `cargo bench --bench openai`

#[path = "../../tests/support/mock.rs"]
#[allow(dead_code)]
mod mock;

use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mock::{Mock, Sse, Step};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

const PANEL_MS: u64 = 500;
const SYNTH_FIRST_MS: u64 = 150;
const SYNTH_REST_MS: u64 = 600;
const TOKEN: &str = "bench-token-9c41e07b2d5f3a86";
const ANSWER: [&str; 4] = ["Rayleigh ", "scattering ", "favours ", "blue."];

fn synthesizer() -> Step {
    let gap = Duration::from_millis(SYNTH_REST_MS / (ANSWER.len() as u64 - 1));
    let mut events = vec![Sse::Wait(Duration::from_millis(SYNTH_FIRST_MS))];
    for (i, piece) in ANSWER.iter().enumerate() {
        if i > 0 {
            events.push(Sse::Wait(gap));
        }
        events.push(Sse::Content((*piece).into()));
    }
    events.extend(mock::finish_events());
    Step::Sse {
        events,
        crlf: false,
    }
}

fn config(base_url: &str, dir: &std::path::Path) -> String {
    format!(
        r#"
[cache]
dir = "{dir}"
[store]
path = "{dir}/runs.sqlite3"
[providers.mock]
base_url = "{base_url}"
[models.m1]
context_window = 100000
[models.m2]
context_window = 100000
[models.m3]
context_window = 100000
[models.synth]
context_window = 100000
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3"], synthesizers = ["synth"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"
[pipelines.ask]
description = "bench"
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        dir = dir.display()
    )
}

/// `chorus serve --http` on a free port; its origin once it listens.
async fn start(config: &std::path::Path) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_chorus"))
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(config)
        .env("CHORUS_TOKEN", TOKEN)
        .env("CHORUS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let origin = loop {
        let line = stderr
            .next_line()
            .await
            .unwrap()
            .expect("chorus exited before listening");
        if let Some(url) = line.split("serving MCP at ").nth(1) {
            break url.trim().trim_end_matches("/mcp").to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    (child, origin)
}

/// A response's body as it arrives: when the first answer text came (as
/// `first` finds it in the bytes so far), and when the body ended.
async fn timed(
    response: reqwest::Response,
    started: Instant,
    first: impl Fn(&str) -> bool,
) -> (Duration, Duration, String) {
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let mut first_at = None;
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        if first_at.is_none() && first(&text) {
            first_at = Some(started.elapsed());
        }
    }
    let total = started.elapsed();
    (first_at.unwrap_or(total), total, text)
}

async fn openai(client: &reqwest::Client, origin: &str, stream: bool) -> (Duration, Duration) {
    let started = Instant::now();
    let response = client
        .post(format!("{origin}/v1/chat/completions"))
        .bearer_auth(TOKEN)
        .json(&json!({"model": "ask", "stream": stream,
                      "messages": [{"role": "user", "content": "Why is the sky blue?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (first, total, text) = timed(response, started, |text| text.contains(ANSWER[0])).await;
    assert!(text.contains("blue."), "{text}");
    (first, total)
}

async fn mcp(client: &reqwest::Client, origin: &str, id: u64) -> (Duration, Duration) {
    let started = Instant::now();
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "ask", "arguments": {"prompt": "Why is the sky blue?"}}});
    let response = client
        .post(format!("{origin}/mcp"))
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (first, total, text) = timed(response, started, |text| text.contains(ANSWER[0])).await;
    assert!(text.contains("blue."), "{text}");
    (first, total)
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let at = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[at]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let runs: usize = std::env::var("CHORUS_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mock = Mock::start().await;
    for model in ["m1", "m2", "m3"] {
        mock.script(model, [Step::answer_after(PANEL_MS, "a panel answer")]);
    }
    mock.script("synth", [synthesizer()]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plugins.toml");
    std::fs::write(&file, config(&mock.base_url, dir.path())).unwrap();
    let (_child, origin) = start(&file).await;
    let client = reqwest::Client::new();
    // Warm-up: plugins compiled, connections open.
    openai(&client, &origin, false).await;
    mcp(&client, &origin, 0).await;

    let doors = [
        "/v1/chat/completions stream",
        "/v1/chat/completions",
        "MCP tools/call",
    ];
    let mut samples: Vec<(Vec<Duration>, Vec<Duration>)> = vec![Default::default(); doors.len()];
    for i in 0..runs {
        // Interleaved, so drift hits every door alike.
        for (door, (firsts, totals)) in samples.iter_mut().enumerate() {
            let (first, total) = match door {
                0 => openai(&client, &origin, true).await,
                1 => openai(&client, &origin, false).await,
                _ => mcp(&client, &origin, i as u64 + 1).await,
            };
            firsts.push(first);
            totals.push(total);
        }
    }
    println!(
        "mock latencies: panel {PANEL_MS} ms (3 models, in parallel), synthesizer first token {SYNTH_FIRST_MS} ms, the rest over {SYNTH_REST_MS} ms; {runs} runs per door, one at a time"
    );
    println!(
        "{:<30} {:>22} {:>22}",
        "door", "first answer token p50/p90", "whole answer p50/p90"
    );
    for (door, (firsts, totals)) in doors.iter().zip(samples.iter_mut()) {
        let ms = |d: Duration| d.as_millis();
        println!(
            "{door:<30} {:>10} / {:>5} ms {:>13} / {:>5} ms",
            ms(percentile(firsts, 0.5)),
            ms(percentile(firsts, 0.9)),
            ms(percentile(totals, 0.5)),
            ms(percentile(totals, 0.9)),
        );
    }
}
