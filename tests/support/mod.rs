//! The test harness: a mock provider, a config pointing at it, and the real
//! `chorus` binary spawned and driven over stdio by rmcp's MCP client (or by
//! hand, JSON line by JSON line, with [`Raw`]). A child's stderr is kept, and
//! printed only when the test fails: a passing suite prints nothing of it.

#![allow(dead_code)]

pub mod http;
pub mod https;
pub mod litellm;
pub mod mock;
pub mod nginx;
pub mod postgres;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

pub use mock::{Gate, Mock, Sse, Step};

/// The environment variable the test config names for the API key, and a
/// canary value for it that must never show up anywhere.
pub const KEY_VAR: &str = "CHORUS_TEST_API_KEY";
pub const CANARY: &str = "sk-canary-7d3f9a61c0b2e845";

/// The panel of the test config, and its synthesizers in order.
pub const PANEL: [&str; 5] = ["m1", "m2", "m3", "m4", "m5"];
pub const SYNTH: &str = "synth";
pub const SYNTH2: &str = "synth2";

pub fn chorus_bin() -> &'static str {
    env!("CARGO_BIN_EXE_chorus")
}

/// Where the test-only plugins (chaos.wasm) were built.
pub fn plugin_dir() -> PathBuf {
    PathBuf::from(env!("CHORUS_PLUGIN_DIR"))
}

/// A config for `mock`: five panel models, two synthesizers, the default
/// `ask` pipeline, plus whatever `extra` TOML adds (more plugins, pipelines).
pub fn config(mock: &Mock, extra: &str) -> String {
    let models: String = PANEL
        .iter()
        .chain([SYNTH, SYNTH2].iter())
        .map(|m| format!("[models.{m}]\ncontext_window = 100000\n"))
        .collect();
    format!(
        r#"
default_pipeline = "ask"

[limits]
run_timeout = "20s"

[providers.mock]
base_url = "{url}"
api_key_env = "{KEY_VAR}"
connect_timeout = "2s"
request_timeout = "10s"
read_timeout = "10s"

[providers.mock.retry]
max_attempts = 3
initial_backoff = "10ms"
max_backoff = "200ms"

{models}
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3", "m4", "m5"], synthesizers = ["{SYNTH}", "{SYNTH2}"] }}

[plugins.passthrough]
builtin = "passthrough"

[plugins.synthesize]
builtin = "synthesize"

[pipelines.ask]
description = "Ask the panel; get one synthesized answer."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
{extra}
"#,
        url = mock.base_url,
    )
}

/// TOML for a pipeline whose selector is the chaos plugin in `mode`;
/// `more_settings` (`, key = value` pairs) may replace the default panel.
/// A provider model list naming every test model, each with a window of
/// 100,000 tokens and the request parameters `taking` gives it (on top of
/// `max_tokens` and `temperature`): e.g. `[(SYNTH, &["structured_outputs"])]`.
pub fn catalog_taking(mock: &Mock, taking: &[(&str, &[&str])]) {
    let models: Vec<Value> = PANEL
        .iter()
        .chain([SYNTH, SYNTH2].iter())
        .map(|id| {
            let mut supported = vec!["max_tokens", "temperature"];
            for (model, params) in taking {
                if model == id {
                    supported.extend_from_slice(params);
                }
            }
            serde_json::json!({"id": id, "context_length": 100000, "supported_parameters": supported})
        })
        .collect();
    mock.catalog(Value::Array(models));
}

pub fn chaos_pipeline(name: &str, mode: &str, more_settings: &str) -> String {
    let panel = if more_settings.contains("panel") {
        ""
    } else {
        r#", panel = ["m1", "m2"]"#
    };
    format!(
        r#"
[plugins.chaos-{name}]
path = "{dir}/chaos.wasm"
cpu_time = "2s"
max_memory_mib = 32
settings = {{ mode = "{mode}", synthesizers = ["{SYNTH}"]{panel}{more_settings} }}

[pipelines.{name}]
description = "Fault injection: {mode}."
selector = "chaos-{name}"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        dir = plugin_dir().display(),
    )
}

/// A config file in a fresh temporary directory.
pub struct ConfigFile {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn write_config(text: &str) -> ConfigFile {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("plugins.toml");
    std::fs::write(&path, text).expect("write the config");
    ConfigFile { dir, path }
}

/// `chorus` with the test environment: the canary key, a shared compile
/// cache, a data directory (for the run store) under the target directory —
/// never the real home — and nothing inherited that could change its
/// behaviour. `Server` gives each server a data directory of its own.
/// Sends SIGTERM to `child` (a chorus still running).
pub fn sigterm(child: &tokio::process::Child) {
    let pid = child.id().expect("still running").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(sent.success());
}

/// Runs `chorus ARGS` to its end (within 60 s): its exit code, stdout and
/// stderr.
pub async fn run_cli(args: &[&str]) -> (i32, String, String) {
    run_cli_with(args, &[]).await
}

/// `run_cli` with `env` set for the child.
pub async fn run_cli_with(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = command(args);
    command.envs(env.iter().copied());
    output_of(command).await
}

/// `command` run to its end (within 60 s): its exit code, stdout, stderr.
pub async fn output_of(mut command: tokio::process::Command) -> (i32, String, String) {
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("chorus finished within 60 s")
        .expect("chorus ran");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

pub fn command(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(chorus_bin());
    command
        .args(args)
        .env(KEY_VAR, CANARY)
        .env(
            "XDG_CACHE_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache"),
        )
        .env(
            "XDG_DATA_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("data"),
        )
        .env(
            "XDG_CONFIG_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-user-config"),
        )
        .env("CHORUS_LOG", "debug")
        .env_remove("CHORUS_CONFIG")
        .env_remove("CHORUS_MODELS")
        .env_remove("CHORUS_SYNTHESIZER")
        .env_remove("CHORUS_PIPELINE")
        .env_remove("CHORUS_BASE_URL")
        .env_remove("CHORUS_STORE_URL")
        .env_remove("PGPASSWORD")
        .env_remove("RUST_LOG")
        .kill_on_drop(true);
    command
}

/// Collects progress notifications, and counts resource-list and
/// tool-list changes.
#[derive(Clone, Default)]
pub struct Client {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    pub resource_list_changes: Arc<std::sync::atomic::AtomicUsize>,
    pub tool_list_changes: Arc<std::sync::atomic::AtomicUsize>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.resource_list_changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tool_list_changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A running `chorus serve` and an MCP client connected to it.
pub struct Server {
    pub client: RunningService<RoleClient, Client>,
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    tool_list_changes: Arc<std::sync::atomic::AtomicUsize>,
    stderr: Log,
    pid: Option<u32>,
    _config: ConfigFile,
}

impl Server {
    pub async fn start(config: &str) -> Self {
        Self::start_with_env(config, &[]).await
    }

    /// Starts with extra environment variables (e.g. `CHORUS_LOG=trace`).
    pub async fn start_with_env(config: &str, env: &[(&str, &str)]) -> Self {
        Self::start_with_args(config, &[], env).await
    }

    /// Starts with extra `serve` arguments (e.g. `--no-watch`) and
    /// environment variables.
    pub async fn start_with_args(config: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let file = write_config(config);
        let mut command = command(&["serve", "--config", file.path.to_str().unwrap()]);
        command.args(args);
        Self::spawn(command, file, env).await
    }

    /// Starts `chorus ARGS` with no config file anywhere: the built-in
    /// default, changed only by `args` and `env` (a one-line install).
    pub async fn start_without_config(args: &[&str], env: &[(&str, &str)]) -> Self {
        let file = write_config("");
        let mut command = command(args);
        command.env("XDG_CONFIG_HOME", file.dir.path().join("config"));
        Self::spawn(command, file, env).await
    }

    async fn spawn(
        mut command: tokio::process::Command,
        file: ConfigFile,
        env: &[(&str, &str)],
    ) -> Self {
        command.env("XDG_DATA_HOME", file.dir.path().join("data"));
        command.envs(env.iter().copied());
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chorus serve");
        let pid = transport.id();
        let log = capture(stderr);
        let handler = Client::default();
        let progress = handler.progress.clone();
        let tool_list_changes = handler.tool_list_changes.clone();
        let client = handler
            .serve(transport)
            .await
            .expect("MCP initialize with chorus");
        Self {
            client,
            progress,
            tool_list_changes,
            stderr: log,
            pid,
            _config: file,
        }
    }

    /// The config file the server was started with (rewrite it to test
    /// live reloads).
    pub fn config_path(&self) -> &Path {
        &self._config.path
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.pid.expect("the server's pid")
    }

    /// Sends the server a signal, e.g. `HUP`.
    pub fn signal(&self, name: &str) {
        let pid = self.pid.expect("the server's pid").to_string();
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {pid}");
    }

    /// How many `notifications/tools/list_changed` the client has had.
    pub fn tool_list_changes(&self) -> usize {
        self.tool_list_changes
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits (up to 60 s) until the server's stderr has `n` complete lines
    /// containing `needle`; returns those lines.
    pub async fn wait_for_stderr(&self, needle: &str, n: usize) -> Vec<String> {
        wait_for_lines(&self.stderr, needle, n).await
    }

    /// Kills the server process outright (SIGKILL): nothing of it runs
    /// after this, as when a machine loses power or the OOM killer strikes.
    pub fn kill(&self) {
        let pid = self.pid.expect("the server's pid").to_string();
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -KILL {pid}");
    }

    pub async fn call(&self, tool: &str, arguments: Value) -> CallToolResult {
        let arguments = arguments
            .as_object()
            .cloned()
            .expect("arguments are an object");
        // Long enough for a first call that waits for a Python or
        // JavaScript plugin to compile (a loaded machine, a debug build).
        tokio::time::timeout(
            Duration::from_secs(180),
            self.client
                .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)),
        )
        .await
        .expect("the call finished within 180 s")
        .expect("the call got a response")
    }

    pub async fn ask(&self, tool: &str, prompt: &str) -> CallToolResult {
        self.call(tool, serde_json::json!({ "prompt": prompt }))
            .await
    }

    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// The server's `XDG_DATA_HOME`, where its run store is by default.
    pub fn data_dir(&self) -> PathBuf {
        self._config.dir.path().join("data")
    }
}

/// What a child wrote to stderr; replayed when dropped in a failing test
/// (the harness shows it with the failure), silent otherwise.
#[derive(Default)]
pub struct Log(Arc<Mutex<String>>);

impl Log {
    pub fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "----- chorus stderr -----\n{}----- end of chorus stderr -----",
                self.text()
            );
        }
    }
}

/// Waits (up to 60 s) until `log` has `n` complete lines containing
/// `needle`; returns those lines. Panics (showing the log) if it never does.
pub async fn wait_for_lines(log: &Log, needle: &str, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let text = log.text();
        let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
        let found: Vec<String> = complete
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect();
        if found.len() >= n {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw {n} line(s) with {needle:?} on stderr"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Keeps what a child writes to stderr.
pub fn capture(stderr: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>) -> Log {
    let log = Log::default();
    if let Some(mut stderr) = stderr {
        // The reader holds the buffer, not the `Log`: only the test's own
        // handle replays it.
        let buffer = log.0.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                buffer
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    log
}

/// `chorus serve` driven by hand, one JSON line at a time.
pub struct Raw {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
    stderr: Log,
    _config: ConfigFile,
}

impl Raw {
    pub async fn start(config: &str) -> Self {
        let file = write_config(config);
        let mut child = command(&["serve", "--config", file.path.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chorus serve");
        let stderr = capture(child.stderr.take());
        Self {
            stdin: child.stdin.take(),
            stdout: Some(BufReader::new(child.stdout.take().unwrap()).lines()),
            child,
            stderr,
            _config: file,
        }
    }

    pub async fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("chorus reads stdin");
    }

    pub async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    /// The next message chorus writes (within 30 s), checked to be JSON-RPC.
    pub async fn recv(&mut self) -> Value {
        let stdout = self.stdout.as_mut().expect("stdout is open");
        let line = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
            .await
            .expect("chorus answers within 30 s")
            .expect("stdout reads")
            .expect("stdout stays open");
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:.300}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line:.300}");
        message
    }

    /// Reads until the response to `id`; returns it and every message
    /// before it, in wire order.
    pub async fn response(&mut self, id: &Value) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.recv().await;
            if message.get("method").is_none() && &message["id"] == id {
                return (message, before);
            }
            before.push(message);
        }
    }

    /// `initialize` (2025-11-25) with `capabilities`, then `initialized`.
    pub async fn initialize(&mut self, capabilities: Value) -> Value {
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "0"}}}),
        )
        .await;
        let (response, _) = self.response(&Value::from("init")).await;
        self.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        response
    }

    pub fn config_path(&self) -> &Path {
        &self._config.path
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn close_stdout(&mut self) {
        self.stdout.take();
    }

    pub fn stderr(&self) -> String {
        self.stderr.text()
    }
}

/// The structured result of a tool call.
pub fn structured(result: &CallToolResult) -> &Value {
    result
        .structured_content
        .as_ref()
        .expect("the result has structured content")
}

/// All text content of a tool call, joined.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The call records of a structured result for `stage`.
pub fn calls<'a>(result: &'a Value, stage: &str) -> Vec<&'a Value> {
    result["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["stage"] == stage)
        .collect()
}
