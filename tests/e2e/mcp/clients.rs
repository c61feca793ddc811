//! The official MCP clients drive the real binary: the Python SDK (its
//! legacy 2025-11-25 mode and its 2026-07-28 mode, where calls go through
//! tasks), the TypeScript SDK (which checks structuredContent against the
//! outputSchema) and the MCP Inspector CLI. Each lists tools, calls a
//! pipeline with progress, cancels, reads a run resource; and a run longer
//! than the clients' 60 s defaults completes in each.
//!
//! The clients are installed at pinned versions by tests/clients/setup.sh
//! (npm and PyPI) into the target directory on first use; CI runs it up
//! front.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

/// How long the long run takes; `CHORUS_LONG_RUN_SECS` changes it (the
/// report's 3-minute run).
fn long_run() -> Duration {
    let secs = std::env::var("CHORUS_LONG_RUN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(70);
    Duration::from_secs(secs)
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Where the clients are installed, installing them on first use.
pub fn clients() -> PathBuf {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clients");
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if !*installed {
        let output = std::process::Command::new("bash")
            .arg(root().join("tests/clients/setup.sh"))
            .arg(&dir)
            .output()
            .expect("run tests/clients/setup.sh");
        assert!(
            output.status.success(),
            "installing the official clients failed (needs node, npm, python3 and the npm and PyPI registries):\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        *installed = true;
    }
    // Node resolves packages from the script's own folder.
    for script in [
        "ts_client.mjs",
        "ts_no_token.mjs",
        "strict_schemas.mjs",
        "ai_sdk.mjs",
    ] {
        std::fs::copy(root().join("tests/clients").join(script), dir.join(script))
            .expect("copy the TypeScript clients next to their node_modules");
    }
    dir
}

/// Claude Code as `tests/clients/package.json` pins it: the launcher
/// that runs its native binary for this platform (`setup.sh` installs
/// with `--ignore-scripts`, so the postinstall that would copy the binary
/// into place never runs). Run it with `node`.
pub fn claude_code() -> PathBuf {
    clients().join("node_modules/@anthropic-ai/claude-code/cli-wrapper.cjs")
}

/// The test config plus a pipeline waiting on a model that never answers
/// (`stuck`) and one whose panel has a model answering after `slow`
/// (`slow`); timeouts long enough for the long run.
fn setup(mock: &Mock, slow: Duration) -> ConfigFile {
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    mock.script("hang", [Step::Hang]);
    mock.script(
        "slowpoke",
        [Step::answer_after(
            u64::try_from(slow.as_millis()).unwrap(),
            "worth the wait",
        )],
    );
    let extra = format!(
        r#"
[models.hang]
context_window = 100000
[models.slowpoke]
context_window = 100000

[plugins.hang-panel]
builtin = "static-panel"
settings = {{ panel = ["hang"], synthesizers = ["{SYNTH}"] }}

[plugins.slow-panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "slowpoke"], synthesizers = ["{SYNTH}"] }}

[pipelines.stuck]
description = "Waits on a model that never answers."
selector = "hang-panel"
prompter = "passthrough"
synthesizer = "synthesize"

[pipelines.slow]
description = "One model takes its time."
selector = "slow-panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#
    );
    let text = config(mock, &extra)
        .replace("run_timeout = \"20s\"", "run_timeout = \"900s\"")
        .replace("request_timeout = \"10s\"", "request_timeout = \"900s\"")
        .replace("read_timeout = \"10s\"", "read_timeout = \"900s\"");
    write_config(&text)
}

/// Runs a client to its end; its report (the last stdout line, JSON). The
/// client's output is shown only if it fails.
pub async fn run_client(program: &Path, args: &[&str], config: &ConfigFile) -> Value {
    run_client_with(program, args, config, &[]).await
}

/// [`run_client`] with more environment, e.g. `CHORUS_URL` for a client
/// that talks to a `chorus serve --http` instead of starting chorus.
async fn run_client_with(
    program: &Path,
    args: &[&str],
    config: &ConfigFile,
    env: &[(&str, &str)],
) -> Value {
    let dir = clients();
    let output = tokio::time::timeout(
        long_run() + Duration::from_secs(120),
        tokio::process::Command::new(program)
            .args(args)
            .current_dir(&dir)
            .env("CHORUS_BIN", chorus_bin())
            .env("CHORUS_CONFIG", &config.path)
            .env(KEY_VAR, CANARY)
            .env(
                "XDG_CACHE_HOME",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache"),
            )
            .env("CHORUS_LOG", "info")
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finished")
    .expect("the client ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{} {args:?} failed ({}):\n{stdout}\n{}",
        program.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no report ({e}): {stdout}"))
}

pub fn node() -> PathBuf {
    PathBuf::from("node")
}

pub fn python() -> PathBuf {
    clients().join("venv/bin/python")
}

pub fn python_script() -> String {
    root()
        .join("tests/clients/python_client.py")
        .to_string_lossy()
        .into_owned()
}

/// The Inspector CLI's command line for one method against chorus.
fn inspector(config: &ConfigFile, method: &[&str]) -> Vec<String> {
    let launcher = clients()
        .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let mut args = vec![launcher.to_string_lossy().into_owned(), "--cli".into()];
    for (key, value) in [
        ("CHORUS_CONFIG", config.path.to_string_lossy().into_owned()),
        (KEY_VAR, CANARY.to_owned()),
        (
            "XDG_CACHE_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("cache")
                .to_string_lossy()
                .into_owned(),
        ),
    ] {
        args.push("-e".into());
        args.push(format!("{key}={value}"));
    }
    args.extend(["--format".into(), "json".into(), "--quiet".into()]);
    args.extend(method.iter().map(|s| s.to_string()));
    args.extend(["--".into(), chorus_bin().into(), "serve".into()]);
    args
}

async fn run_inspector(config: &ConfigFile, method: &[&str]) -> Value {
    let args = inspector(config, method);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_client(&node(), &args, config).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_sdk_lists_calls_validates_cancels_and_reads() {
    let mock = Mock::start().await;
    let config = setup(&mock, Duration::ZERO);
    let report = run_client(&node(), &["ts_client.mjs", "basic"], &config).await;
    assert_eq!(report["cancelled"], true, "{report}");
    assert!(report["progress"].as_u64().unwrap() >= 3, "{report}");
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 0)
            .await,
        "the cancelled call's upstream request was dropped"
    );
    assert_eq!(mock.requests_for("hang").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_in_legacy_mode_lists_calls_cancels_and_reads() {
    let mock = Mock::start().await;
    let config = setup(&mock, Duration::ZERO);
    let report = run_client(&python(), &[&python_script(), "basic", "legacy"], &config).await;
    assert_eq!(report["cancelled"], true, "{report}");
    assert!(report["progress"].as_u64().unwrap() >= 3, "{report}");
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 0)
            .await,
        "the abandoned call's upstream request was dropped"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_in_2026_mode_calls_through_a_task_and_reads() {
    let mock = Mock::start().await;
    let config = setup(&mock, Duration::ZERO);
    let report = run_client(&python(), &[&python_script(), "basic", "auto"], &config).await;
    assert!(report["task_statuses"].as_u64().unwrap() >= 1, "{report}");
}

/// One shared `chorus serve --http`, two official clients in turn through
/// the Python SDK's Streamable HTTP client: without the token each is
/// turned away (401, with the SDK showing what to send); with it, the legacy client lists tools, calls with
/// progress, reads the run it made, abandons a call (whose upstream
/// request is dropped) and calls again; the 2026-07-28 client's call goes
/// through a task, polled over stateless POSTs.
#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_over_streamable_http_needs_the_token_and_calls_with_progress_and_tasks() {
    let mock = Mock::start().await;
    let config = setup(&mock, Duration::ZERO);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let env = [("CHORUS_URL", server.url.as_str()), ("CHORUS_TOKEN", TOKEN)];
    let script = python_script();

    let legacy = run_client_with(&python(), &[&script, "basic", "legacy"], &config, &env).await;
    assert_eq!(legacy["transport"], "http", "{legacy}");
    assert!(
        legacy["refused_without_token"]
            .as_str()
            .is_some_and(|e| e.contains("Authorization: Bearer")),
        "{legacy}"
    );
    assert!(legacy["progress"].as_u64().unwrap() >= 3, "{legacy}");
    assert_eq!(legacy["cancelled"], true, "{legacy}");
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 0)
            .await,
        "the abandoned call's upstream request was dropped"
    );
    assert_eq!(mock.requests_for("hang").len(), 1);

    let tasks = run_client_with(&python(), &[&script, "basic", "auto"], &config, &env).await;
    assert!(
        tasks["refused_without_token"]
            .as_str()
            .is_some_and(|e| e.contains("Authorization: Bearer")),
        "{tasks}"
    );
    assert!(tasks["task_statuses"].as_u64().unwrap() >= 1, "{tasks}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inspector_cli_lists_calls_and_reads() {
    let mock = Mock::start().await;
    let config = setup(&mock, Duration::ZERO);
    let tools = run_inspector(&config, &["--method", "tools/list"]).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{tools}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"ask"), "{tools}");
    let called = run_inspector(
        &config,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "ask",
            "--tool-arg",
            "prompt=hello",
        ],
    )
    .await;
    assert_eq!(
        called["result"]["structuredContent"]["answer"], "merged",
        "{called}"
    );
    // Each Inspector CLI invocation starts its own server, so the run above
    // is gone by now; what it can read is the resource template.
    let listed = run_inspector(&config, &["--method", "resources/templates/list"]).await;
    assert!(
        listed.to_string().contains("chorus://runs/{run_id}"),
        "{listed}"
    );
}

/// A run longer than the clients' 60 s default request timeout completes in
/// each official client: through a task where the client supports tasks
/// (the Python SDK's 2026-07-28 mode, the Inspector CLI's modern era),
/// otherwise on progress heartbeats: the Python SDK sets no read timeout by
/// default; the TypeScript SDK needs its documented `resetTimeoutOnProgress`.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_run_completes_in_every_official_client() {
    let mock = Mock::start().await;
    let slow = long_run();
    let config = setup(&mock, slow);
    let script = python_script();
    let inspector_args = inspector(
        &config,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "slow",
            "--tool-arg",
            "prompt=hello",
            // In its default (legacy) era the CLI asks for no progress and
            // gives up at 60 s; in the modern era it runs the call as a task.
            "--protocol-era",
            "modern",
        ],
    );
    let inspector_args: Vec<&str> = inspector_args.iter().map(String::as_str).collect();
    let (node, python) = (node(), python());
    let legacy = [script.as_str(), "long", "legacy"];
    let auto = [script.as_str(), "long", "auto"];
    let (ts, py_legacy, py_tasks, inspector) = tokio::join!(
        run_client(&node, &["ts_client.mjs", "long"], &config),
        run_client(&python, &legacy, &config),
        run_client(&python, &auto, &config),
        run_client(&node, &inspector_args, &config),
    );
    for (client, report) in [
        ("typescript", &ts),
        ("python legacy", &py_legacy),
        ("python tasks", &py_tasks),
    ] {
        let seconds = report["seconds"].as_f64().unwrap_or_default();
        assert!(
            seconds >= slow.as_secs_f64(),
            "{client} waited for the slow model: {report}"
        );
    }
    assert!(
        ts["progress"].as_u64().unwrap() >= slow.as_secs() / 10,
        "{ts}"
    );
    assert!(
        py_tasks["task_statuses"].as_u64().unwrap() >= 2,
        "{py_tasks}"
    );
    assert_eq!(
        inspector["result"]["structuredContent"]["answer"], "merged",
        "{inspector}"
    );
}
