//! The bench's two ends: a zero-latency OpenAI-compatible provider in this
//! process, and a `chorus serve` child (this build's, or a baseline's)
//! driven over MCP stdio by a raw JSON-RPC client. Also the `/proc`
//! readers (CPU time, RSS) the measures use.

use std::collections::HashMap;
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

pub const PANEL: [&str; 5] = ["m1", "m2", "m3", "m4", "m5"];
const SLOW: [&str; 5] = ["slow1", "slow2", "slow3", "slow4", "slow5"];
/// How long a slow model takes, for the in-flight memory measurement.
pub const SLOW_FOR: Duration = Duration::from_secs(20);
pub const QUESTION: &str = "Which is better for a small team, A or B?";

// ---------------------------------------------------------------------------
// The provider: zero latency, counts connections.

pub struct Provider {
    pub url: String,
    pub connections: Arc<AtomicU64>,
}

const ANSWER: &str = r#"{"id":"bench","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"An answer of moderate length, as models give: a sentence or two that the synthesizer will merge with the others."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":34,"cost":0.0005}}"#;

pub async fn provider() -> Provider {
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
    let mut line = String::new();
    loop {
        let mut length = 0usize;
        let mut first = true;
        let mut get = false;
        loop {
            line.clear();
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
// The configuration both binaries run.

/// Which keys the config may use: `Full` is this build's (with the run
/// store on, as in real use); `Minimal` drops the keys an older chorus
/// refuses (`[store]`, `max_concurrent_runs`), for a baseline that
/// predates them — it then runs without a run store, as it shipped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flavor {
    Full,
    Minimal,
}

pub fn config(provider: &str, dir: &Path, flavor: Flavor) -> PathBuf {
    let models: String = PANEL
        .iter()
        .chain(&SLOW)
        .chain(&["synth"])
        .map(|m| format!("[models.{m}]\nprovider = \"fast\"\n"))
        .collect();
    let (limits, store) = match flavor {
        Flavor::Full => (
            "max_concurrent_runs = 1024\n".to_owned(),
            // Not beside the config, whose directory the file watcher
            // watches (every WAL write would wake it): chorus's default
            // store lives apart from the config too.
            format!("[store]\npath = \"{}/store/runs.sqlite3\"\n", dir.display()),
        ),
        Flavor::Minimal => (String::new(), String::new()),
    };
    let text = format!(
        r#"
default_pipeline = "ask"
[limits]
run_timeout = "120s"
{limits}
{store}
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
        slow = SLOW_FOR.as_secs(),
    );
    let path = dir.join(match flavor {
        Flavor::Full => "plugins.toml",
        Flavor::Minimal => "plugins-minimal.toml",
    });
    std::fs::write(&path, text).unwrap();
    path
}

// ---------------------------------------------------------------------------
// chorus as an MCP server, driven by a raw JSON-RPC client.

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

pub struct Server {
    child: Child,
    stdin: Mutex<ChildStdin>,
    pending: Pending,
    next: AtomicU64,
    /// Runs answered so far.
    pub runs: AtomicU64,
}

impl Server {
    /// Spawns `binary serve --config CONFIG` and completes `initialize`;
    /// returns the time from spawn to the `initialize` answer, or what
    /// went wrong (the child exited: a config it refuses, say).
    pub async fn start(
        binary: &Path,
        config: &Path,
        cache: &Path,
    ) -> Result<(Self, Duration), String> {
        let started = Instant::now();
        let mut child = Command::new(binary)
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
            .map_err(|e| format!("spawn {}: {e}", binary.display()))?;
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
            // The child is gone: whoever still waits hears so.
            routes.lock().await.clear();
        });
        let server = Self {
            child,
            stdin: Mutex::new(stdin),
            pending,
            next: AtomicU64::new(1),
            runs: AtomicU64::new(0),
        };
        let init = server
            .try_request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
            )
            .await
            .ok_or_else(|| format!("{} exited before initialize", binary.display()))?;
        if init.get("result").is_none() {
            return Err(format!("initialize: {init}"));
        }
        let elapsed = started.elapsed();
        server.notify("notifications/initialized", json!({})).await;
        Ok((server, elapsed))
    }

    async fn notify(&self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        let mut stdin = self.stdin.lock().await;
        let _ = stdin.write_all(line.as_bytes()).await;
        let _ = stdin.write_all(b"\n").await;
    }

    /// One request; `None` when the child is gone.
    async fn try_request(&self, method: &str, params: Value) -> Option<Value> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.pending.lock().await.insert(id, sender);
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        {
            let mut stdin = self.stdin.lock().await;
            stdin.write_all(line.as_bytes()).await.ok()?;
            stdin.write_all(b"\n").await.ok()?;
        }
        receiver.await.ok()
    }

    pub async fn request(&self, method: &str, params: Value) -> Value {
        self.try_request(method, params)
            .await
            .expect("chorus exited mid-bench")
    }

    /// One run of `tool`; panics on anything but an answer.
    pub async fn ask(&self, tool: &str) -> Duration {
        let started = Instant::now();
        let response = self
            .request(
                "tools/call",
                json!({"name": tool, "arguments": {"prompt": QUESTION}}),
            )
            .await;
        let elapsed = started.elapsed();
        assert_eq!(
            response["result"]["isError"],
            json!(false),
            "a run failed: {response}"
        );
        self.runs.fetch_add(1, Ordering::Relaxed);
        elapsed
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }
}

/// `/proc/PID/stat` user + system time.
pub fn cpu_time(pid: u32) -> Duration {
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
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// What of the RSS is the process's own memory (`RssAnon`: heap, stacks,
/// anonymous maps) and what is files mapped from the page cache
/// (`RssFile`: the binary's code and data, shared and reclaimable), in KiB.
pub fn rss_parts_kib(pid: u32) -> (u64, u64) {
    (status_kib(pid, "RssAnon:"), status_kib(pid, "RssFile:"))
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The same six calls a run makes (five in parallel, then one), by a bare
/// reqwest client: what a run would take with no chorus in between.
pub async fn bare_run(client: &reqwest::Client, url: &str) -> Duration {
    let body = |model: &str| json!({"model": model, "stream": true, "messages": [{"role": "user", "content": QUESTION}]});
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
