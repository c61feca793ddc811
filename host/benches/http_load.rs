//! What one `chorus serve --http` process carries (run with `cargo bench
//! --bench http_load`; docs/scaling.md quotes its output): the real binary
//! behind its bearer token, a slow mock provider on 127.0.0.1 (each of the
//! three panel models answers after `PANEL_MS`, the synthesizer after
//! `SYNTH_MS`), and C clients, each calling `ask` over Streamable HTTP in a
//! loop (one stateless POST per call, progress asked for, the whole SSE
//! response read). For each C, over a window of `WINDOW` after a ramp-up:
//! - runs/s completed, and each call's latency (p50, p99) against the
//!   provider's own 1.2 s;
//! - how long after the level's clients start the first run completes
//!   (under a low `max_concurrency`: whether runs finish or all wait);
//! - chorus's CPU time per run (utime + stime from /proc);
//! - its resident memory during the window (mean of samples every 100 ms)
//!   over the idle resident size measured before, divided by C: the memory
//!   one in-flight run holds;
//! - the peak (VmHWM).
//!
//! `CHORUS_BENCH_LEVELS=1,16,64` picks the concurrency levels;
//! `CHORUS_BENCH_WINDOW_SECS` the window; `CHORUS_BENCH_MAX_CONCURRENCY`
//! the provider's `max_concurrency` (default 1024, its maximum, so that
//! chorus itself is measured; the shipped default is 8);
//! `CHORUS_BENCH_WARMUP` the warm-up runs (default 128).

#[path = "../../tests/support/mock.rs"]
#[allow(dead_code)]
mod mock;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mock::{Mock, Step};
use tokio::io::{AsyncBufReadExt, BufReader};

const PANEL_MS: u64 = 1000;
const SYNTH_MS: u64 = 200;
const TOKEN: &str = "bench-token-2f0c9b17e4d3a685";

fn config(base_url: &str, cache_dir: &Path, max_concurrency: usize) -> String {
    format!(
        r#"
[cache]
dir = "{cache_dir}"
[providers.mock]
base_url = "{base_url}"
max_concurrency = {max_concurrency}
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
        cache_dir = cache_dir.display()
    )
}

/// VmRSS and VmHWM of `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU time `pid` has used (user + system), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    field(11).unwrap_or(0) + field(12).unwrap_or(0)
}

#[cfg(unix)]
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// The bench measures through Linux's /proc; elsewhere it compiles (so the
/// workspace checks for every platform) but reads no CPU time.
#[cfg(not(unix))]
fn ticks_per_second() -> f64 {
    100.0
}

/// One call of `ask` as an MCP client makes it over Streamable HTTP.
async fn ask(client: &reqwest::Client, url: &str, id: u64) -> Duration {
    let started = Instant::now();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ask","arguments":{{"prompt":"What is 2 + 2?"}},"_meta":{{"progressToken":{id}}}}}}}"#
    );
    let response = client
        .post(url)
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("chorus answers");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("the whole response");
    assert!(
        text.contains("\"structuredContent\"") && text.contains("the synthesis"),
        "{}",
        &text[..text.len().min(600)]
    );
    started.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let levels: Vec<usize> = std::env::var("CHORUS_BENCH_LEVELS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 16, 64, 256]);
    let window = Duration::from_secs(
        std::env::var("CHORUS_BENCH_WINDOW_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    );

    let mock = Mock::start().await;
    for model in ["m1", "m2", "m3"] {
        mock.script(model, [Step::answer_after(PANEL_MS, "an answer")]);
    }
    mock.script("synth", [Step::answer_after(SYNTH_MS, "the synthesis")]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bench.toml");
    let max_concurrency = std::env::var("CHORUS_BENCH_MAX_CONCURRENCY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    std::fs::write(&file, config(&mock.base_url, dir.path(), max_concurrency)).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_chorus"))
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&file)
        .env("CHORUS_TOKEN", TOKEN)
        .env("CHORUS_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    let url = loop {
        let Some(line) = stderr.next_line().await.unwrap() else {
            panic!("chorus exited before listening:\n{said}");
        };
        said.push_str(&line);
        said.push('\n');
        if let Some(url) = line.split("serving MCP at ").nth(1) {
            break url.trim().to_owned();
        }
    };
    // Keep reading stderr so chorus never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()
        .unwrap();
    // Warm up past `max_runs_kept` (100): the finished runs chorus keeps in
    // memory are then part of the idle size, as in a server that has been
    // up a while.
    let warmup: u64 = std::env::var("CHORUS_BENCH_WARMUP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(128);
    let warm: Vec<_> = (0..warmup)
        .map(|i| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { ask(&client, &url, i).await })
        })
        .collect();
    for call in warm {
        call.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (idle, _) = memory(pid);
    println!(
        "chorus serve --http: idle after {warmup} warm-up runs {:.1} MB resident; each run: 3 panel models answering after {PANEL_MS} ms, a synthesizer after {SYNTH_MS} ms; provider max_concurrency {max_concurrency}; window {} s per level",
        idle as f64 / 1024.0,
        window.as_secs()
    );
    println!(
        "{:>7} {:>8} {:>8} {:>9} {:>9} {:>12} {:>12} {:>14} {:>9}",
        "clients",
        "first s",
        "runs/s",
        "p50 s",
        "p99 s",
        "CPU ms/run",
        "RSS mean MB",
        "KB/in-flight",
        "peak MB"
    );
    let ticks = ticks_per_second();
    for clients in levels {
        let stop = Arc::new(AtomicBool::new(false));
        let measuring = Arc::new(AtomicBool::new(false));
        let level_start = Instant::now();
        // Milliseconds from the level's start to its first completed run.
        let first = Arc::new(AtomicU64::new(u64::MAX));
        let workers: Vec<_> = (0..clients)
            .map(|worker| {
                let (client, url) = (client.clone(), url.clone());
                let (stop, measuring, first) = (stop.clone(), measuring.clone(), first.clone());
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    let mut id = (worker as u64) << 32;
                    while !stop.load(Ordering::Relaxed) {
                        id += 1;
                        let latency = ask(&client, &url, id).await;
                        let at = level_start.elapsed().as_millis() as u64;
                        first.fetch_min(at, Ordering::Relaxed);
                        // The calls that end inside the window.
                        if measuring.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                            latencies.push(latency);
                        }
                    }
                    latencies
                })
            })
            .collect();
        // Ramp up: every client has a call in flight.
        tokio::time::sleep(Duration::from_millis(3 * (PANEL_MS + SYNTH_MS))).await;
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        let cpu_before = cpu_ticks(pid);
        measuring.store(true, Ordering::Relaxed);
        let started = Instant::now();
        let mut samples = Vec::new();
        while started.elapsed() < window {
            samples.push(memory(pid).0);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let elapsed = started.elapsed();
        let cpu = cpu_ticks(pid) - cpu_before;
        let (_, peak) = memory(pid);
        stop.store(true, Ordering::Relaxed);
        let mut latencies = Vec::new();
        for worker in workers {
            latencies.extend(worker.await.unwrap());
        }
        latencies.sort();
        let runs = latencies.len();
        let quantile = |q: f64| {
            latencies
                .get(((runs as f64 * q) as usize).min(runs.saturating_sub(1)))
                .map_or(0.0, Duration::as_secs_f64)
        };
        let mean = samples.iter().sum::<u64>() as f64 / samples.len().max(1) as f64;
        println!(
            "{clients:>7} {:>8} {:>8.1} {:>9.2} {:>9.2} {:>12.2} {:>12.1} {:>14.0} {:>9.1}",
            match first.load(Ordering::Relaxed) {
                u64::MAX => "none".to_owned(),
                ms => format!("{:.2}", ms as f64 / 1000.0),
            },
            runs as f64 / elapsed.as_secs_f64(),
            quantile(0.5),
            quantile(0.99),
            cpu as f64 / ticks * 1000.0 / runs.max(1) as f64,
            mean / 1024.0,
            (mean - idle as f64) / clients as f64,
            peak as f64 / 1024.0,
        );
        // Let the server settle between levels.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (after, _) = memory(pid);
    println!(
        "idle again after the last level: {:.1} MB resident",
        after as f64 / 1024.0
    );
    let _ = child.start_kill();
    let _ = child.wait().await;
}
