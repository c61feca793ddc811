//! `chorus serve --http` as a test drives it: the real binary on
//! 127.0.0.1 (a free port), its address read from its stderr, and plain
//! HTTP requests to it (reqwest) for what an SDK would hide — status codes,
//! headers, a dropped connection.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Child;

use super::{Log, capture, command};

/// A token the tests start servers with.
pub const TOKEN: &str = "test-token-4b1d9e0c7a52f3861";

pub struct HttpServer {
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    pub child: Child,
    stderr: Log,
}

impl HttpServer {
    /// `chorus serve --http 127.0.0.1:0 --config CONFIG ARGS…`, with
    /// `CHORUS_TOKEN` set to `token` (or unset); waits until it listens.
    pub async fn start(config: &Path, token: Option<&str>, args: &[&str]) -> Self {
        Self::start_at("127.0.0.1:0", config, token, args).await
    }

    pub async fn start_at(listen: &str, config: &Path, token: Option<&str>, args: &[&str]) -> Self {
        Self::start_with_env(listen, config, token, args, &[]).await
    }

    /// [`Self::start_at`] with more environment, e.g. `CHORUS_LOG`.
    pub async fn start_with_env(
        listen: &str,
        config: &Path,
        token: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let mut command = command(&[
            "serve",
            "--http",
            listen,
            "--config",
            config.to_str().unwrap(),
        ]);
        command
            .args(args)
            .env_remove("CHORUS_TOKEN")
            .envs(env.iter().copied());
        if let Some(token) = token {
            command.env("CHORUS_TOKEN", token);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chorus serve --http");
        let stderr = capture(child.stderr.take());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let url = loop {
            let text = stderr.text();
            // Complete lines only: the line may arrive in pieces.
            let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
            if let Some(url) = complete
                .lines()
                .find_map(|line| line.split("serving MCP at ").nth(1))
            {
                break url.trim().to_owned();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("chorus serve --http exited ({status}):\n{text}");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "chorus serve --http never said where it listens:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // Replace the port-0 address with the one bound.
        let url = url.replace("0.0.0.0", "127.0.0.1");
        Self { url, child, stderr }
    }

    /// `http://127.0.0.1:PORT`
    pub fn origin(&self) -> String {
        self.url.trim_end_matches("/mcp").to_owned()
    }

    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Waits (up to 60 s) until stderr has `n` complete lines containing
    /// `needle`.
    pub async fn wait_for_stderr(&self, needle: &str, n: usize) -> Vec<String> {
        super::wait_for_lines(&self.stderr, needle, n).await
    }

    /// A POST of one JSON-RPC message as an MCP client makes it, with the
    /// bearer token when given.
    pub fn post(&self, token: Option<&str>, message: &Value) -> reqwest::RequestBuilder {
        post_to(&self.url, token, message)
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        super::sigterm(&self.child);
        tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("chorus exited within 15 s of SIGTERM")
            .expect("wait for chorus")
    }
}

/// The JSON-RPC messages of a response, whether it is one JSON object or a
/// stream of server-sent events.
pub async fn messages(response: reqwest::Response) -> Vec<Value> {
    let text = response.text().await.expect("read the response");
    if let Ok(value) = serde_json::from_str::<Value>(&text) {
        return vec![value];
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

/// A `tools/call` request.
pub fn tool_call(id: u64, tool: &str, prompt: &str) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"prompt": prompt}, "_meta": {"progressToken": id}},
    })
}

/// A POST of one JSON-RPC message to the MCP endpoint `url`, as an MCP
/// client makes it, with the bearer token when given.
pub fn post_to(url: &str, token: Option<&str>, message: &Value) -> reqwest::RequestBuilder {
    let request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(message.to_string());
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}
