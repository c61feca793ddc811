//! What `chorus serve --http` carries, one process or several behind a load
//! balancer (run with `cargo bench --bench http_load`; docs/scaling.md
//! quotes its output): the real binary behind its bearer token, a slow mock
//! provider on 127.0.0.1 (each of the three panel models answers after
//! `PANEL_MS`, the synthesizer after `SYNTH_MS`), and C clients, each
//! calling `ask` over Streamable HTTP in a loop (one stateless POST per
//! call, progress asked for, the whole SSE response read). For each C, over
//! a window of `WINDOW` after a ramp-up:
//! - runs/s completed, and each call's latency (p50, p99) against the
//!   provider's own 1.2 s;
//! - how long after the level's clients start the first run completes
//!   (under a low `max_concurrency`: whether runs finish or all wait);
//! - chorus's CPU time per run (utime + stime from /proc, summed over its
//!   processes), and PostgreSQL's and nginx's when they are in play;
//! - chorus's resident memory during the window (mean of samples every
//!   100 ms, summed over its processes) over the idle resident size
//!   measured before, divided by C: the memory one in-flight run holds;
//! - the peak (VmHWM, summed).
//!
//! `CHORUS_BENCH_LEVELS=1,16,64` picks the concurrency levels;
//! `CHORUS_BENCH_WINDOW_SECS` the window; `CHORUS_BENCH_MAX_CONCURRENCY`
//! the provider's `max_concurrency` (default 1024, its maximum, so that
//! chorus itself is measured; the shipped default is 8);
//! `CHORUS_BENCH_WARMUP` the warm-up runs (default 128).
//!
//! Without `CHORUS_BENCH_INSTANCES`, the clients call one process directly,
//! its runs in a SQLite file. `CHORUS_BENCH_INSTANCES=N` starts N instances
//! behind Debian's nginx (`http_load/deploy.rs`), and the clients call
//! nginx; `CHORUS_BENCH_STORE=postgres|sqlite` picks the store (default:
//! SQLite for one instance, PostgreSQL — a throwaway cluster of Debian's
//! `postgresql` — for more; SQLite only for one). With two instances or
//! more, the failover measure follows the levels (`http_load/failover.rs`:
//! `CHORUS_BENCH_FAILOVER_CLIENTS` clients, default 64;
//! `CHORUS_BENCH_FAILOVER=0` skips it).

#[path = "../../tests/support/mock.rs"]
#[allow(dead_code)]
mod mock;
#[path = "../../tests/support/nginx.rs"]
#[allow(dead_code)]
mod nginx;
#[path = "../../tests/support/postgres.rs"]
mod postgres;

#[path = "http_load/deploy.rs"]
mod deploy;
#[path = "http_load/failover.rs"]
mod failover;
#[path = "http_load/procs.rs"]
mod procs;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deploy::{Deployment, Store};
use procs::{cpu_ticks, memory, ticks_per_second, tree_ticks};
use serde_json::Value;

const PANEL_MS: u64 = 1000;
const SYNTH_MS: u64 = 200;
const TOKEN: &str = "bench-token-2f0c9b17e4d3a685";

/// One JSON-RPC request as an MCP client makes it; the last message of the
/// response (one JSON object, or the events of an SSE stream), or why not.
async fn rpc(client: &reqwest::Client, url: &str, message: &Value) -> Result<Value, String> {
    let response = client
        .post(url)
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(message.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| format!("{status}, then {e}"))?;
    if status != 200 {
        return Err(format!(
            "{status}: {}",
            text.chars().take(300).collect::<String>()
        ));
    }
    serde_json::from_str(&text)
        .ok()
        .or_else(|| {
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str(data.trim()).ok())
                .next_back()
        })
        .ok_or_else(|| {
            format!(
                "no message in: {}",
                text.chars().take(300).collect::<String>()
            )
        })
}

/// One call of `ask` as an MCP client makes it over Streamable HTTP; its
/// latency, or why it failed.
async fn ask(client: &reqwest::Client, url: &str, id: u64) -> Result<Duration, String> {
    let started = Instant::now();
    let call = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "ask", "arguments": {"prompt": "What is 2 + 2?"},
                   "_meta": {"progressToken": id}}});
    let reply = rpc(client, url, &call).await?;
    let text = reply["result"]["structuredContent"].to_string();
    if !text.contains("the synthesis") {
        return Err(reply.to_string().chars().take(600).collect());
    }
    Ok(started.elapsed())
}

fn env<T: FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.trim().parse().ok())
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
    let window = Duration::from_secs(env("CHORUS_BENCH_WINDOW_SECS").unwrap_or(10));
    let max_concurrency = env("CHORUS_BENCH_MAX_CONCURRENCY").unwrap_or(1024);
    let balanced = env::<usize>("CHORUS_BENCH_INSTANCES").is_some();
    let instances = env::<usize>("CHORUS_BENCH_INSTANCES").unwrap_or(1).max(1);
    let store = match std::env::var("CHORUS_BENCH_STORE").ok().as_deref() {
        Some("postgres") => Store::Postgres,
        Some("sqlite") if instances == 1 => Store::Sqlite,
        None if instances == 1 => Store::Sqlite,
        None => Store::Postgres,
        Some(other) => {
            eprintln!(
                "CHORUS_BENCH_STORE={other} with {instances} instances: say postgres, or sqlite with one instance"
            );
            std::process::exit(2);
        }
    };
    let mut deployment = Deployment::start(instances, store, balanced, max_concurrency).await;
    let url = deployment.url.clone();

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()
        .unwrap();
    // Warm up past `max_runs_kept` (100): the finished runs chorus keeps in
    // memory are then part of the idle size, as in a server that has been
    // up a while.
    let warmup: u64 = env("CHORUS_BENCH_WARMUP").unwrap_or(128);
    let warm: Vec<_> = (0..warmup)
        .map(|i| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { ask(&client, &url, i).await })
        })
        .collect();
    for call in warm {
        call.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pids = deployment.pids();
    let rss = |pids: &[u32]| pids.iter().map(|&p| memory(p).0).sum::<u64>();
    let idle = rss(&pids);
    println!(
        "chorus serve --http: {instances} instance{} {}, runs in {}; idle after {warmup} warm-up runs {:.1} MB resident{}; each run: 3 panel models answering after {PANEL_MS} ms, a synthesizer after {SYNTH_MS} ms; provider max_concurrency {max_concurrency}; window {} s per level",
        if instances == 1 { "" } else { "s" },
        if balanced {
            "behind nginx"
        } else {
            "called directly"
        },
        match store {
            Store::Sqlite => "SQLite",
            Store::Postgres => "PostgreSQL",
        },
        idle as f64 / 1024.0,
        if instances == 1 { "" } else { " in all" },
        window.as_secs()
    );
    println!(
        "{:>7} {:>8} {:>8} {:>7} {:>7} {:>11} {:>10} {:>12} {:>11} {:>12} {:>8}",
        "clients",
        "first s",
        "runs/s",
        "p50 s",
        "p99 s",
        "CPU ms/run",
        "pg ms/run",
        "nginx ms/run",
        "RSS mean MB",
        "KB/in-flight",
        "peak MB"
    );
    let ticks = ticks_per_second();
    let postmaster = deployment.postmaster();
    let nginx = deployment.nginx.as_ref().and_then(|n| n.pid());
    let others = || (postmaster.map(tree_ticks), nginx.map(cpu_ticks));
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
                        let latency = ask(&client, &url, id)
                            .await
                            .unwrap_or_else(|e| panic!("a call failed: {e}"));
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
        for pid in &pids {
            let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        }
        let cpu = |pids: &[u32]| pids.iter().map(|&p| cpu_ticks(p)).sum::<u64>();
        let (cpu_before, others_before) = (cpu(&pids), others());
        measuring.store(true, Ordering::Relaxed);
        let started = Instant::now();
        let mut samples = Vec::new();
        while started.elapsed() < window {
            samples.push(rss(&pids));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let elapsed = started.elapsed();
        let used = cpu(&pids) - cpu_before;
        let others_after = others();
        let peak = pids.iter().map(|&p| memory(p).1).sum::<u64>();
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
        let per_run = |used: u64| used as f64 / ticks * 1000.0 / runs.max(1) as f64;
        let other = |before: Option<u64>, after: Option<u64>| match (before, after) {
            (Some(before), Some(after)) => format!("{:.2}", per_run(after - before)),
            _ => "–".to_owned(),
        };
        println!(
            "{clients:>7} {:>8} {:>8.1} {:>7.2} {:>7.2} {:>11.2} {:>10} {:>12} {:>11.1} {:>12.0} {:>8.1}",
            match first.load(Ordering::Relaxed) {
                u64::MAX => "none".to_owned(),
                ms => format!("{:.2}", ms as f64 / 1000.0),
            },
            runs as f64 / elapsed.as_secs_f64(),
            quantile(0.5),
            quantile(0.99),
            per_run(used),
            other(others_before.0, others_after.0),
            other(others_before.1, others_after.1),
            mean / 1024.0,
            (mean - idle as f64) / clients as f64,
            peak as f64 / 1024.0,
        );
        // Let the server settle between levels.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let after = rss(&pids);
    println!(
        "idle again after the last level: {:.1} MB resident",
        after as f64 / 1024.0
    );
    if instances > 1 && std::env::var("CHORUS_BENCH_FAILOVER").as_deref() != Ok("0") {
        let clients = env("CHORUS_BENCH_FAILOVER_CLIENTS").unwrap_or(64);
        failover::measure(&mut deployment, &client, clients).await;
    }
}
