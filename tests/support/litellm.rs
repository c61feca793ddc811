//! LiteLLM's proxy (PyPI `litellm[proxy]`, pinned in tests/gateways/) in
//! front of the mock provider: a real OpenAI-compatible gateway that is not
//! OpenRouter — it sends a stream's usage only when asked, lists its models
//! with its own fields, and types upstream failures in its own words.
//!
//! Installed by tests/gateways/setup.sh into the target directory on first
//! use (`.ci/run` runs it up front). `LiteLlm::start` is `None` when it
//! cannot be installed — unless `CHORUS_REQUIRE_LITELLM=1` (set by
//! `.ci/run`), which makes that a failure.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::Mock;

pub const REQUIRE: &str = "CHORUS_REQUIRE_LITELLM";
/// The proxy's master key: what its clients send as their API key.
pub const MASTER_KEY: &str = "sk-litellm-master-5c2e9b71d04a";
/// What each model behind it reports per answer (the mock's usage).
pub const COST_PER_CALL: f64 = 0.0005;

/// The gateway's model ids, each served by the mock as the id without
/// `gw/` (`gw/alpha` is the mock's `alpha`).
pub const MODELS: [&str; 4] = ["gw/alpha", "gw/beta", "gw/merger", "gw/broken"];

pub struct LiteLlm {
    _dir: tempfile::TempDir,
    child: Child,
    /// `http://127.0.0.1:PORT/v1`: the base URL chorus is given.
    pub base_url: String,
    log: PathBuf,
}

impl Drop for LiteLlm {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The installed `litellm` command, installing it on first use.
fn installed() -> Option<PathBuf> {
    static INSTALLED: Mutex<Option<bool>> = Mutex::new(None);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateways");
    let bin = dir.join("venv/bin/litellm");
    let mut state = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if state.is_none() {
        let output = std::process::Command::new("bash")
            .arg(root().join("tests/gateways/setup.sh"))
            .arg(&dir)
            .output()
            .expect("run tests/gateways/setup.sh");
        let ok = output.status.success() && bin.exists();
        assert!(
            ok || std::env::var_os(REQUIRE).is_none(),
            "{REQUIRE} is set, and installing LiteLLM's proxy failed (needs python3 and PyPI):\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        *state = Some(ok);
    }
    state.unwrap().then_some(bin)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

impl LiteLlm {
    /// The proxy in front of `mock`, up and answering; `None` when LiteLLM
    /// is not installed and not required.
    pub async fn start(mock: &Mock) -> Option<Self> {
        let bin = installed()?;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("litellm.yaml");
        let entry = |name: &str, info: &str| {
            let upstream = name.trim_start_matches("gw/");
            format!(
                "  - model_name: {name}\n{info}    litellm_params:\n      model: openai/{upstream}\n      api_base: {base}\n      api_key: upstream-key-not-chorus\n",
                base = mock.base_url
            )
        };
        // `gw/alpha` says its limits as LiteLLM's `model_info` does; the
        // others say nothing about themselves.
        let alpha_info =
            "    model_info:\n      max_input_tokens: 32000\n      max_output_tokens: 4000\n";
        let models: String = MODELS
            .iter()
            .map(|m| entry(m, if *m == "gw/alpha" { alpha_info } else { "" }))
            .collect();
        std::fs::write(
            &config,
            format!(
                "model_list:\n{models}litellm_settings:\n  num_retries: 0\n  request_timeout: 30\nrouter_settings:\n  num_retries: 0\ngeneral_settings:\n  master_key: {MASTER_KEY}\n"
            ),
        )
        .expect("write LiteLLM's config");
        let port = free_port();
        let log = dir.path().join("litellm.log");
        let child = Command::new(&bin)
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .current_dir(dir.path())
            // No network: its price list from the package, no telemetry.
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_TELEMETRY", "False")
            .env("NO_DOCS", "True")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("LiteLLM's log"))
            .stderr(std::fs::File::create(dir.path().join("litellm.err")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("start LiteLLM's proxy");
        let mut proxy = Self {
            _dir: dir,
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            log,
        };
        proxy.wait_until_up(port).await;
        Some(proxy)
    }

    /// Its startup imports a great deal of Python: up to two minutes.
    async fn wait_until_up(&mut self, port: u16) {
        let url = format!("http://127.0.0.1:{port}/health/liveliness");
        let client = reqwest::Client::new();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("LiteLLM's proxy exited ({status}):\n{}", self.logs());
            }
            if let Ok(response) = client.get(&url).send().await
                && response.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("LiteLLM's proxy did not come up in 120 s:\n{}", self.logs());
    }

    /// What it wrote, for a failing test's message.
    pub fn logs(&self) -> String {
        let out = std::fs::read_to_string(&self.log).unwrap_or_default();
        let err = std::fs::read_to_string(self.log.with_extension("err")).unwrap_or_default();
        let tail = |text: &str| {
            text.lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        };
        format!("{}\n{}", tail(&out), tail(&err))
    }
}
