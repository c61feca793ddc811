//! One pass of the suite's measures over one chorus binary: startup (cold
//! and warm), idle memory, added latency at concurrency 1, CPU per MCP
//! round trip, throughput and CPU per run under load, memory after many
//! runs and per in-flight run. The result is a list of named figures with
//! the targets of issue 24, so one pass and a baseline's can be compared.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::server::{
    Flavor, Provider, QUESTION, SLOW_FOR, Server, bare_run, config, cpu_time, rss_kib,
    rss_parts_kib,
};

/// How a figure is printed, and which way is better.
#[derive(Clone, Copy)]
pub enum Unit {
    Ms,
    Us,
    Mb,
    Kib,
    RunsPerSec,
    Count,
}

impl Unit {
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Ms if v < 100.0 => format!("{v:.1} ms"),
            Unit::Ms => format!("{v:.0} ms"),
            Unit::Us => format!("{v:.0} µs"),
            Unit::Mb => format!("{v:.1} MB"),
            Unit::Kib => format!("{v:.1} KiB"),
            Unit::RunsPerSec => format!("{v:.0} runs/s"),
            Unit::Count => format!("{v:.1}"),
        }
    }

    fn higher_is_better(self) -> bool {
        matches!(self, Unit::RunsPerSec)
    }
}

/// One figure of one pass.
pub struct Figure {
    pub what: String,
    pub value: f64,
    pub unit: Unit,
    /// The target's bound, in the figure's unit.
    pub target: Option<f64>,
    /// Extra words for the single-binary table (how it was derived).
    pub detail: Option<String>,
}

impl Figure {
    fn new(what: impl Into<String>, value: f64, unit: Unit, target: Option<f64>) -> Self {
        Self {
            what: what.into(),
            value,
            unit,
            target,
            detail: None,
        }
    }

    pub fn target_text(&self) -> String {
        match self.target {
            None => "–".into(),
            Some(t) if self.unit.higher_is_better() => format!("≥ {}", self.unit.show(t)),
            Some(t) => format!("≤ {}", self.unit.show(t)),
        }
    }

    pub fn met(&self) -> Option<bool> {
        let t = self.target?;
        Some(if self.unit.higher_is_better() {
            self.value >= t
        } else {
            self.value <= t
        })
    }
}

pub fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn mb(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The config `binary` accepts: this build's, or the minimal one for a
/// baseline that refuses newer keys.
pub async fn config_for(
    binary: &Path,
    provider: &Provider,
    dir: &Path,
) -> (Flavor, std::path::PathBuf) {
    for flavor in [Flavor::Full, Flavor::Minimal] {
        let path = config(&provider.url, dir, flavor);
        let cache = tempfile::tempdir().unwrap();
        if Server::start(binary, &path, cache.path()).await.is_ok() {
            return (flavor, path);
        }
    }
    panic!(
        "{} accepts neither the full nor the minimal bench config",
        binary.display()
    );
}

async fn throughput(server: &Server, concurrency: usize, runs: usize) -> (f64, Duration) {
    let cpu_before = cpu_time(server.pid());
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let worker = || async {
        while next.fetch_add(1, Ordering::Relaxed) < runs as u64 {
            server.ask("ask").await;
        }
    };
    futures::future::join_all((0..concurrency).map(|_| worker())).await;
    let elapsed = started.elapsed();
    let cpu = cpu_time(server.pid()) - cpu_before;
    (runs as f64 / elapsed.as_secs_f64(), cpu / runs as u32)
}

/// CPU per MCP round trip alone: a `tools/call` of a tool that does not
/// exist, at concurrency 16.
async fn round_trip_cpu(server: &Server, calls: usize) -> Duration {
    let cpu_before = cpu_time(server.pid());
    let next = AtomicU64::new(0);
    let worker = || async {
        while next.fetch_add(1, Ordering::Relaxed) < calls as u64 {
            server
                .request(
                    "tools/call",
                    json!({"name": "no-such-tool", "arguments": {}}),
                )
                .await;
        }
    };
    futures::future::join_all((0..16).map(|_| worker())).await;
    (cpu_time(server.pid()) - cpu_before) / calls as u32
}

/// Every measure, on `binary` with `config`.
pub async fn pass(binary: &Path, config: &Path, provider: &Provider, quick: bool) -> Vec<Figure> {
    let scale = |n: usize| if quick { (n / 20).max(5) } else { n };
    let mut figures = Vec::new();

    // Spawn → initialize: the first start compiles the plugins.
    eprintln!("  spawn → initialize, cold and warm…");
    let cache = tempfile::tempdir().unwrap();
    let (server, cold) = Server::start(binary, config, cache.path()).await.unwrap();
    drop(server);
    let mut warm = Vec::new();
    for _ in 0..scale(20) {
        let (server, took) = Server::start(binary, config, cache.path()).await.unwrap();
        warm.push(took);
        drop(server);
    }
    warm.sort();
    figures.push(Figure::new(
        "spawn → initialize, cold cache (default plugins compiled)",
        ms(cold),
        Unit::Ms,
        Some(400.0),
    ));
    figures.push(Figure::new(
        "spawn → initialize, warm cache (p50)",
        ms(percentile(&warm, 50)),
        Unit::Ms,
        Some(10.0),
    ));
    // The suite's `max_concurrent_runs = 1024` sizes the plugin instance
    // pool (and its fiber stacks, each with a guard page made at start) for
    // 1,026 calls at once; most configurations keep the default of 64.
    let defaults = config.with_file_name("plugins-default-limits.toml");
    let text = std::fs::read_to_string(config).unwrap();
    std::fs::write(&defaults, text.replace("max_concurrent_runs = 1024", "")).unwrap();
    let mut warm = Vec::new();
    for _ in 0..scale(20) {
        let (server, took) = Server::start(binary, &defaults, cache.path())
            .await
            .unwrap();
        warm.push(took);
        drop(server);
    }
    warm.sort();
    figures.push(Figure::new(
        "spawn → initialize, warm cache, default max_concurrent_runs (p50)",
        ms(percentile(&warm, 50)),
        Unit::Ms,
        None,
    ));

    let (server, _) = Server::start(binary, config, cache.path()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut idle = Figure::new(
        "idle RSS after initialize",
        mb(rss_kib(server.pid())),
        Unit::Mb,
        Some(20.0),
    );
    let (anon, file) = rss_parts_kib(server.pid());
    idle.detail = Some(format!(
        "{:.1} MB its own, {:.1} MB mapped files",
        mb(anon),
        mb(file)
    ));
    figures.push(idle);

    // Added latency at concurrency 1: chorus's run against the bare client's.
    eprintln!("  added latency at concurrency 1…");
    let client = reqwest::Client::new();
    for _ in 0..scale(200) {
        server.ask("ask").await;
        bare_run(&client, &provider.url).await;
    }
    let mut chorus = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..scale(2000) {
        chorus.push(server.ask("ask").await);
        bare.push(bare_run(&client, &provider.url).await);
    }
    chorus.sort();
    bare.sort();
    for (p, target) in [(50, Some(400.0)), (99, None)] {
        let run = percentile(&chorus, p);
        let without = percentile(&bare, p);
        let mut figure = Figure::new(
            format!("added latency per run, concurrency 1, p{p}"),
            us(run.saturating_sub(without)),
            Unit::Us,
            target,
        );
        figure.detail = Some(format!(
            "run {:.0} µs − bare client {:.0} µs",
            us(run),
            us(without)
        ));
        figures.push(figure);
    }

    eprintln!("  MCP round trip alone…");
    figures.push(Figure::new(
        "chorus CPU per MCP round trip (unknown tool), concurrency 16",
        us(round_trip_cpu(&server, scale(4000)).await),
        Unit::Us,
        None,
    ));

    // Throughput, CPU per run, and connections after warm-up.
    for concurrency in [16, 64] {
        eprintln!("  throughput at concurrency {concurrency}…");
        throughput(&server, concurrency, scale(1000)).await;
        let connections = provider.connections.load(Ordering::Relaxed);
        let runs = scale(5000);
        let (per_second, cpu) = throughput(&server, concurrency, runs).await;
        let opened = provider.connections.load(Ordering::Relaxed) - connections;
        let primary = concurrency == 16;
        figures.push(Figure::new(
            format!("throughput, concurrency {concurrency}"),
            per_second,
            Unit::RunsPerSec,
            primary.then_some(2500.0),
        ));
        figures.push(Figure::new(
            format!("chorus CPU per run, concurrency {concurrency}"),
            us(cpu),
            Unit::Us,
            primary.then_some(500.0),
        ));
        figures.push(Figure::new(
            format!("new upstream connections per 1,000 runs, concurrency {concurrency}"),
            opened as f64 * 1000.0 / runs as f64,
            Unit::Count,
            Some(0.0),
        ));
        if primary {
            let done = server.runs.load(Ordering::Relaxed);
            figures.push(Figure::new(
                format!("RSS after {done} runs"),
                mb(rss_kib(server.pid())),
                Unit::Mb,
                (done >= 4000).then_some(30.0),
            ));
            // The same once chorus has been idle a moment: a build that
            // gives freed memory back when idle (app/trim.rs) has by then.
            tokio::time::sleep(Duration::from_secs(2)).await;
            figures.push(Figure::new(
                format!("RSS 2 s after those {done} runs"),
                mb(rss_kib(server.pid())),
                Unit::Mb,
                None,
            ));
        }
    }

    // Memory per in-flight run: many runs waiting on slow models.
    let in_flight = scale(2000);
    eprintln!("  memory with {in_flight} runs in flight…");
    let before = rss_kib(server.pid());
    let server = Arc::new(server);
    let runs: Vec<_> = (0..in_flight)
        .map(|_| {
            let server = server.clone();
            // Only their memory matters here: runs queued behind the
            // provider's max_concurrency may be cut before they answer.
            tokio::spawn(async move {
                server
                    .request(
                        "tools/call",
                        json!({"name": "slow", "arguments": {"prompt": QUESTION}}),
                    )
                    .await
            })
        })
        .collect();
    let mut peak = before;
    let deadline = Instant::now() + SLOW_FOR - Duration::from_secs(2);
    while Instant::now() < deadline {
        peak = peak.max(rss_kib(server.pid()));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    figures.push(Figure::new(
        format!("memory per in-flight run ({in_flight} in flight)"),
        peak.saturating_sub(before) as f64 / in_flight as f64,
        Unit::Kib,
        Some(32.0),
    ));
    // Their answers don't matter: stop waiting, and the child goes with
    // the last handle on it.
    for run in runs {
        run.abort();
    }
    figures
}
