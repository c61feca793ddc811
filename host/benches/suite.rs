//! The benchmark suite: `cargo bench --bench suite` prints a table and
//! writes `docs/benchmarks.md` with the machine and the command.
//!
//! chorus runs as a real `chorus serve` child driven over MCP stdio by a
//! raw JSON-RPC client, against a zero-latency provider in this process (a
//! minimal HTTP/1.1 keep-alive server: it parses nothing but the request
//! head and the body's length, so it is never the bottleneck). Measured:
//! - added latency at concurrency 1: a run's time minus the same six calls
//!   (five in parallel, then one) made by a bare reqwest client, in the
//!   same process and run;
//! - throughput and chorus's CPU per run at concurrency 16 and 64;
//! - memory per in-flight run (2,000 runs in flight against a slow model);
//! - idle RSS after `initialize`;
//! - spawn → `initialize`, with a cold and a warm compile cache;
//! - new upstream connections per 1,000 runs after warm-up;
//! - instantiate + call p50/p99 per shipped strategy plugin, in process.
//!
//! `CHORUS_BENCH_QUICK=1` runs fewer iterations (for a smoke test).

#[path = "suite/plugin_calls.rs"]
mod plugin_calls;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Mutex, oneshot};

const PANEL: [&str; 5] = ["m1", "m2", "m3", "m4", "m5"];
const SLOW: [&str; 5] = ["slow1", "slow2", "slow3", "slow4", "slow5"];
/// How long a slow model takes, for the in-flight memory measurement.
const SLOW_FOR: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------
// The provider: zero latency, counts connections.

struct Provider {
    url: String,
    connections: Arc<AtomicU64>,
}

const ANSWER: &str = r#"{"id":"bench","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"An answer of moderate length, as models give: a sentence or two that the synthesizer will merge with the others."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":34,"cost":0.0005}}"#;

async fn provider() -> Provider {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicU64::new(0));
    let counter = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::Relaxed);
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve_connection(stream));
        }
    });
    Provider { url, connections }
}

async fn serve_connection(stream: TcpStream) {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        head.clear();
        let mut length = 0usize;
        let mut first = true;
        let mut get = false;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if first {
                get = line.starts_with("GET");
                first = false;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        let response = if get {
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned()
        } else {
            if memchr::memmem::find(&body, b"\"model\":\"slow").is_some() {
                tokio::time::sleep(SLOW_FOR).await;
            }
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{ANSWER}",
                ANSWER.len()
            )
        };
        if reader
            .get_mut()
            .write_all(response.as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// chorus as an MCP server, driven by a raw JSON-RPC client.

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

struct Server {
    child: Child,
    stdin: Mutex<ChildStdin>,
    pending: Pending,
    next: AtomicU64,
}

impl Server {
    async fn start(config: &Path, cache: &Path) -> (Self, Duration) {
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_chorus"))
            .args(["serve", "--config"])
            .arg(config)
            .env("XDG_CACHE_HOME", cache)
            .env("XDG_DATA_HOME", cache)
            .env("BENCH_KEY", "bench")
            .env_remove("CHORUS_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn chorus serve");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let pending: Pending = Arc::default();
        let routes = pending.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(id) = message["id"].as_u64()
                    && let Some(sender) = routes.lock().await.remove(&id)
                {
                    let _ = sender.send(message);
                }
            }
        });
        let server = Self {
            child,
            stdin: Mutex::new(stdin),
            pending,
            next: AtomicU64::new(1),
        };
        let init = server
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
            )
            .await;
        assert!(init.get("result").is_some(), "initialize: {init}");
        let elapsed = started.elapsed();
        server.notify("notifications/initialized", json!({})).await;
        (server, elapsed)
    }

    async fn notify(&self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        let mut stdin = self.stdin.lock().await;
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
    }

    async fn request(&self, method: &str, params: Value) -> Value {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.pending.lock().await.insert(id, sender);
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        {
            let mut stdin = self.stdin.lock().await;
            stdin.write_all(line.as_bytes()).await.unwrap();
            stdin.write_all(b"\n").await.unwrap();
        }
        receiver.await.expect("a response")
    }

    /// One run of `tool`; panics on anything but an answer.
    async fn ask(&self, tool: &str) -> Duration {
        let started = Instant::now();
        let response = self
            .request(
                "tools/call",
                json!({"name": tool, "arguments": {"prompt": "Which is better for a small team, A or B?"}}),
            )
            .await;
        let elapsed = started.elapsed();
        assert_eq!(
            response["result"]["isError"],
            json!(false),
            "a run failed: {response}"
        );
        elapsed
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }
}

/// `/proc/PID/stat` user + system time.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum())
        .unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

/// `/proc/PID/status` VmRSS, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn config(provider: &str, dir: &Path) -> PathBuf {
    let models: String = PANEL
        .iter()
        .chain(&SLOW)
        .chain(&["synth"])
        .map(|m| format!("[models.{m}]\nprovider = \"fast\"\n"))
        .collect();
    let text = format!(
        r#"
default_pipeline = "ask"
[limits]
run_timeout = "120s"
max_concurrent_runs = 1024
[store]
path = "{dir}/runs.sqlite3"
[providers.fast]
base_url = "{provider}"
api_key_env = "BENCH_KEY"
max_concurrency = 512
{models}
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3", "m4", "m5"], synthesizers = ["synth"] }}
[plugins.slow-panel]
builtin = "static-panel"
settings = {{ panel = ["slow1", "slow2", "slow3", "slow4", "slow5"], synthesizers = ["synth"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"
[pipelines.ask]
description = "bench"
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
[pipelines.slow]
description = "bench: a panel that takes {slow}s"
selector = "slow-panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        dir = dir.display(),
        slow = SLOW_FOR.as_secs(),
    );
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).unwrap();
    path
}

// ---------------------------------------------------------------------------
// The bare client: the same six calls, no chorus.

async fn bare_run(client: &reqwest::Client, url: &str) -> Duration {
    let body = |model: &str| json!({"model": model, "stream": true, "messages": [{"role": "user", "content": "Which is better for a small team, A or B?"}]});
    let call = |model: &'static str| {
        let request = client
            .post(format!("{url}/chat/completions"))
            .bearer_auth("bench")
            .json(&body(model));
        async move {
            let response = request.send().await.unwrap();
            let _: Value = response.json().await.unwrap();
        }
    };
    let started = Instant::now();
    futures::future::join_all(PANEL.map(call)).await;
    call("synth").await;
    started.elapsed()
}

// ---------------------------------------------------------------------------

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct Row {
    what: String,
    measured: String,
    target: String,
    met: Option<bool>,
}

fn row(what: &str, measured: String, target: &str, met: Option<bool>) -> Row {
    Row {
        what: what.to_owned(),
        measured,
        target: target.to_owned(),
        met,
    }
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

fn main() {
    let quick = std::env::var_os("CHORUS_BENCH_QUICK").is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rows = runtime.block_on(measure(quick));
    let table = render(&rows);
    println!("{table}");
    if !quick {
        let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks.md");
        let analysis = std::fs::read_to_string(&doc)
            .ok()
            .and_then(|old| old.find(ANALYSIS).map(|at| old[at..].to_owned()))
            .unwrap_or_default();
        std::fs::write(&doc, document(&table) + "\n" + &analysis).unwrap();
        println!("written to {}", doc.display());
    }
}

async fn measure(quick: bool) -> Vec<Row> {
    let scale = |n: usize| if quick { (n / 20).max(5) } else { n };
    let provider = provider().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(&provider.url, dir.path());
    let mut rows = Vec::new();

    // Spawn → initialize: the first start compiles the plugins.
    eprintln!("spawn → initialize, cold and warm…");
    let cold_dir = tempfile::tempdir().unwrap();
    let (server, cold) = Server::start(&config, cold_dir.path()).await;
    drop(server);
    let mut cached = Vec::new();
    for _ in 0..scale(20) {
        let (server, took) = Server::start(&config, cold_dir.path()).await;
        cached.push(took);
        drop(server);
    }
    cached.sort();
    rows.push(row(
        "spawn → initialize, cold cache (default plugins compiled)",
        format!("{:.0} ms", cold.as_secs_f64() * 1e3),
        "≤ 400 ms",
        Some(cold <= Duration::from_millis(400)),
    ));
    let cached_p50 = percentile(&cached, 50);
    rows.push(row(
        "spawn → initialize, warm cache (p50)",
        format!("{:.1} ms", cached_p50.as_secs_f64() * 1e3),
        "≤ 15 ms",
        Some(cached_p50 <= Duration::from_millis(15)),
    ));

    let (server, _) = Server::start(&config, cold_dir.path()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(server.pid());
    rows.push(row(
        "idle RSS after initialize",
        format!("{:.1} MB", idle as f64 / 1024.0),
        "≤ 15 MB",
        Some(idle <= 15 * 1024),
    ));

    // Added latency at concurrency 1: chorus's run against the bare client's.
    eprintln!("added latency at concurrency 1…");
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
    let added = |p| percentile(&chorus, p).saturating_sub(percentile(&bare, p));
    rows.push(row(
        "added latency per run, concurrency 1, p50",
        format!(
            "{:.0} µs (run {:.0} µs − bare client {:.0} µs)",
            micros(added(50)),
            micros(percentile(&chorus, 50)),
            micros(percentile(&bare, 50))
        ),
        "≤ 150 µs",
        Some(added(50) <= Duration::from_micros(150)),
    ));
    rows.push(row(
        "added latency per run, concurrency 1, p99",
        format!(
            "{:.0} µs (run {:.0} µs − bare client {:.0} µs)",
            micros(added(99)),
            micros(percentile(&chorus, 99)),
            micros(percentile(&bare, 99))
        ),
        "≤ 400 µs",
        Some(added(99) <= Duration::from_micros(400)),
    ));

    // Throughput, CPU per run, and connections after warm-up.
    for concurrency in [16, 64] {
        eprintln!("throughput at concurrency {concurrency}…");
        throughput(&server, concurrency, scale(1000)).await;
        let connections = provider.connections.load(Ordering::Relaxed);
        let runs = scale(5000);
        let (per_second, cpu) = throughput(&server, concurrency, runs).await;
        let opened = provider.connections.load(Ordering::Relaxed) - connections;
        rows.push(row(
            &format!("throughput, concurrency {concurrency}"),
            format!("{per_second:.0} runs/s"),
            "≥ 3,000 runs/s",
            Some(per_second >= 3000.0),
        ));
        rows.push(row(
            &format!("chorus CPU per run, concurrency {concurrency}"),
            format!("{:.0} µs", micros(cpu)),
            "≤ 300 µs",
            Some(cpu <= Duration::from_micros(300)),
        ));
        rows.push(row(
            &format!("new upstream connections per 1,000 runs, concurrency {concurrency}"),
            format!("{:.1}", opened as f64 * 1000.0 / runs as f64),
            "0",
            Some(opened == 0),
        ));
    }

    // Memory per in-flight run: many runs waiting on slow models.
    let in_flight = scale(2000);
    eprintln!("memory with {in_flight} runs in flight…");
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
                        json!({"name": "slow", "arguments": {"prompt": "Which is better for a small team, A or B?"}}),
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
    let per_run = peak.saturating_sub(before) as f64 / in_flight as f64;
    rows.push(row(
        &format!("memory per in-flight run ({in_flight} in flight)"),
        format!("{per_run:.1} KiB"),
        "≤ 48 KiB",
        Some(per_run <= 48.0),
    ));
    for run in runs {
        let _ = run.await;
    }

    eprintln!("instantiate + call, per plugin…");
    for timed in plugin_calls::measure(cold_dir.path(), scale(300)).await {
        let what = format!(
            "`{}` ({}): instantiate + call, p50 / p99",
            timed.plugin, timed.kind
        );
        let measured = match &timed.samples {
            Ok(samples) => format!(
                "{:.0} µs / {:.0} µs",
                percentile(samples, 50).as_secs_f64() * 1e6,
                percentile(samples, 99).as_secs_f64() * 1e6
            ),
            Err(e) => format!("failed: {e}"),
        };
        rows.push(row(&what, measured, "–", None));
    }
    rows
}

fn render(rows: &[Row]) -> String {
    let mut out =
        String::from("| measure | measured | target | met |\n| --- | --- | --- | --- |\n");
    for r in rows {
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {met} |",
            r.what, r.measured, r.target
        );
    }
    out
}

/// Where the hand-written analysis of docs/benchmarks.md begins: kept
/// when the suite writes the file anew.
const ANALYSIS: &str = "<!-- analysis: kept when the suite rewrites this file -->";

fn document(table: &str) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "# Benchmarks\n\n\
         Produced by `cargo bench --bench suite` (release build) on {cores} cores of {cpu}, \
         Linux {kernel_trimmed}. chorus runs as `chorus serve`, driven over MCP stdio by a raw \
         JSON-RPC client, against a zero-latency provider in the bench process (a minimal \
         HTTP/1.1 keep-alive server); the default `ask` pipeline: five panel calls and one \
         merge. The run store is on (a temporary SQLite file), as in real use.\n\n\
         {table}\n\
         Added latency is a run's round trip through chorus minus the same six calls (five \
         in parallel, then one) made by a bare reqwest client in the bench process, \
         interleaved with the runs. CPU per run is chorus's user + system time \
         (`/proc/PID/stat`) over the runs at that concurrency. Memory per in-flight run is \
         the peak RSS growth while the runs wait on slow models, divided by their number. \
         Instantiate + call is one call of each plugin of the default plugins.toml on a fresh \
         sandbox, in the bench process, with the models it asks for answering at once.\n",
        kernel_trimmed = kernel.trim(),
    )
}
