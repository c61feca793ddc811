//! The test harness: a mock provider, a config pointing at it, and the real
//! `chorus` binary spawned and driven over stdio by rmcp's MCP client.

#![allow(dead_code)]

pub mod mock;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;

pub use mock::{Mock, Step};

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
        .env("CHORUS_LOG", "debug")
        .env_remove("CHORUS_CONFIG")
        .env_remove("RUST_LOG")
        .kill_on_drop(true);
    command
}

/// Collects progress notifications.
#[derive(Clone, Default)]
pub struct Client {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

/// A running `chorus serve` and an MCP client connected to it.
pub struct Server {
    pub client: RunningService<RoleClient, Client>,
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    stderr: Arc<Mutex<String>>,
    _config: ConfigFile,
}

impl Server {
    pub async fn start(config: &str) -> Self {
        Self::start_with_env(config, &[]).await
    }

    /// Starts with extra environment variables (e.g. `CHORUS_LOG=trace`).
    pub async fn start_with_env(config: &str, env: &[(&str, &str)]) -> Self {
        let file = write_config(config);
        let mut command = command(&["serve", "--config", file.path.to_str().unwrap()]);
        command.env("XDG_DATA_HOME", file.dir.path().join("data"));
        command.envs(env.iter().copied());
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chorus serve");
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(mut stderr) = stderr {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 8192];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    log.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let handler = Client::default();
        let progress = handler.progress.clone();
        let client = handler
            .serve(transport)
            .await
            .expect("MCP initialize with chorus");
        Self {
            client,
            progress,
            stderr: log,
            _config: file,
        }
    }

    pub async fn call(&self, tool: &str, arguments: Value) -> CallToolResult {
        let arguments = arguments
            .as_object()
            .cloned()
            .expect("arguments are an object");
        tokio::time::timeout(
            Duration::from_secs(60),
            self.client
                .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)),
        )
        .await
        .expect("the call finished within 60 s")
        .expect("the call got a response")
    }

    pub async fn ask(&self, tool: &str, prompt: &str) -> CallToolResult {
        self.call(tool, serde_json::json!({ "prompt": prompt }))
            .await
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The server's `XDG_DATA_HOME`, where its run store is by default.
    pub fn data_dir(&self) -> PathBuf {
        self._config.dir.path().join("data")
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
