//! The container image `bash dist/build.sh` writes
//! (target/dist/chorus-VERSION-linux-x64.oci.tar), loaded into Debian's
//! podman and run the way a team deploys it: a read-only root filesystem
//! (no tmpfs either), as the image's non-root user, the config mounted at
//! /etc/chorus/plugins.toml, a token and a key in the environment, and the
//! mock provider on 127.0.0.1 reached with `--network host`. It answers
//! `/health` and an MCP `tools/call` over HTTP, writes its run store into
//! the declared volume, and on `podman stop` (SIGTERM, as Kubernetes and
//! `docker stop` send it) drains: a call in flight still gets its answer,
//! and the container exits 0.
//!
//! podman keeps its images and containers in a temporary directory of the
//! test (its own storage, `vfs`), with the settings these machines need
//! (shared/notes/real-parts.md: runc, cgroupfs, no default ulimits).
//! Without podman the test is skipped, saying so, unless
//! `CHORUS_REQUIRE_PODMAN=1` (set by .ci/run, which installs it); without
//! the archive, as the other dist tests (`CHORUS_REQUIRE_DIST`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::packaging::dist::artifacts;
use crate::support::http::{TOKEN, messages, post_to, tool_call};
use crate::support::*;

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The image's user and group (dist/oci/make_image.py).
const UID: &str = "65532";

/// podman with a storage, run directory and settings of its own.
struct Podman {
    dir: tempfile::TempDir,
}

impl Podman {
    /// `None` (the test is skipped) when podman is missing and
    /// CHORUS_REQUIRE_PODMAN is not set.
    fn new() -> Option<Self> {
        let found = Command::new("podman")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            assert!(
                std::env::var_os("CHORUS_REQUIRE_PODMAN").is_none_or(|v| v != "1"),
                "CHORUS_REQUIRE_PODMAN=1 but podman is not installed (Debian: podman runc)"
            );
            eprintln!(
                "skipped: podman is not installed (CHORUS_REQUIRE_PODMAN=1 makes this a failure)"
            );
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(
            dir.path().join("containers.conf"),
            "[containers]\ndefault_ulimits = []\npids_limit = 0\n\n\
             [engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\nruntime = \"runc\"\n",
        )
        .unwrap();
        Some(Self { dir })
    }

    fn args(&self) -> Vec<String> {
        let at = |name: &str| self.dir.path().join(name).display().to_string();
        vec![
            format!("--root={}", at("storage")),
            format!("--runroot={}", at("run")),
            format!("--tmpdir={}", at("tmp")),
            "--storage-driver=vfs".into(),
            "--runtime=runc".into(),
            "--cgroup-manager=cgroupfs".into(),
        ]
    }

    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("podman");
        command
            .args(self.args())
            .env("CONTAINERS_CONF", self.dir.path().join("containers.conf"))
            .kill_on_drop(true);
        command
    }

    /// `podman ARGS` to success; its stdout.
    async fn run(&self, args: &[&str]) -> String {
        let output =
            tokio::time::timeout(Duration::from_secs(120), self.command().args(args).output())
                .await
                .unwrap_or_else(|_| panic!("podman {args:?} finished within 120 s"))
                .expect("run podman");
        assert!(
            output.status.success(),
            "podman {args:?} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for Podman {
    /// Removes what the test left running (a failed assertion); the
    /// storage goes with the temporary directory.
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(self.args())
            .env("CONTAINERS_CONF", self.dir.path().join("containers.conf"))
            .args(["rm", "--all", "--force", "--time", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The image's configuration, as podman shows it.
async fn inspect(podman: &Podman, image: &str) -> Value {
    let text = podman.run(&["image", "inspect", image]).await;
    let mut all: Value = serde_json::from_str(&text).expect("podman inspect prints JSON");
    all[0].take()
}

fn assert_configured_as_documented(image: &Value) {
    let config = &image["Config"];
    assert_eq!(config["User"], format!("{UID}:{UID}"), "{config}");
    assert_eq!(config["Entrypoint"], json!(["/chorus"]), "{config}");
    assert_eq!(
        config["Cmd"],
        json!(["serve", "--http", "0.0.0.0:8080"]),
        "{config}"
    );
    assert!(config["ExposedPorts"].get("8080/tcp").is_some(), "{config}");
    assert!(
        config["Volumes"].get("/var/lib/chorus").is_some(),
        "{config}"
    );
    let labels = &config["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], VERSION);
    assert_eq!(
        labels["org.opencontainers.image.licenses"],
        "MIT OR Apache-2.0"
    );
    assert_eq!(
        labels["org.opencontainers.image.source"],
        "https://github.com/chorus-mcp/chorus"
    );
    assert_eq!(image["Architecture"], "amd64");
    assert_eq!(image["Os"], "linux");
}

/// The options every run of the image here shares: what a hardened
/// deployment sets (read-only root, no writable tmpfs, no capabilities,
/// no privilege gain), as the image's own user.
const LOCKED_DOWN: [&str; 5] = [
    "--read-only",
    "--read-only-tmpfs=false",
    "--cap-drop=all",
    "--security-opt=no-new-privileges",
    "--rm",
];

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_read_only_as_its_user_answers_mcp_and_drains_on_sigterm() {
    let Some(paths) = artifacts(&[format!("chorus-{VERSION}-linux-x64.oci.tar")]) else {
        return;
    };
    let Some(podman) = Podman::new() else {
        return;
    };
    let loaded = podman
        .run(&["load", "--input", paths[0].to_str().unwrap()])
        .await;
    let image = format!("ghcr.io/chorus-mcp/chorus:{VERSION}");
    assert!(loaded.contains(&image), "podman load names it: {loaded}");
    assert_configured_as_documented(&inspect(&podman, &image).await);

    // Nothing mounted: the built-in configuration, the store in the
    // volume, the built-in plugins precompiled (nothing to write).
    let mut check: Vec<&str> = vec!["run"];
    check.extend(LOCKED_DOWN);
    check.extend(["--network=none", &image, "check"]);
    // (Its exit code is not the point: with no network, the providers'
    // model lists cannot be fetched.)
    let output = podman.command().args(&check).output().await.unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("the built-in default"), "{report}");
    assert!(
        report.contains("store: /var/lib/chorus/runs.sqlite3"),
        "{report}"
    );
    assert!(report.contains("(precompiled,"), "{report}");

    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok"), Step::answer_after(2000, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    mock.require_key(CANARY);
    let config = write_config(&config(&mock, "[http]\ndrain_seconds = 20\n"));
    set_mode(&config.path, 0o644);
    let name = format!("chorus-e2e-{}", std::process::id());
    let mount = format!(
        "type=bind,source={},destination=/etc/chorus/plugins.toml,ro",
        config.path.display()
    );
    let mut serve = podman.command();
    serve
        .arg("run")
        .args(LOCKED_DOWN)
        .args(["--name", &name, "--network=host", "--mount", &mount])
        .args(["--env", &format!("CHORUS_TOKEN={TOKEN}")])
        .args(["--env", &format!("{KEY_VAR}={CANARY}")])
        .args([&image, "serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut container = serve.spawn().expect("start podman run");
    let stderr = capture(container.stderr.take());
    let line = wait_for_lines(&stderr, "serving MCP at ", 1).await;
    let url = line[0]
        .split("serving MCP at ")
        .nth(1)
        .unwrap()
        .trim()
        .to_owned();
    let origin = url.trim_end_matches("/mcp").to_owned();

    // Its process runs as the image's user, not root.
    let pid = podman
        .run(&["inspect", "--format", "{{.State.Pid}}", &name])
        .await;
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uid.split_whitespace().nth(1),
        Some(UID),
        "{uid}\n{}",
        stderr.text()
    );

    let health = reqwest::get(format!("{origin}/health")).await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(health.text().await.unwrap().contains(VERSION));
    let refused = post_to(&url, None, &tool_call(1, "ask", "q"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401, "no token, no call");
    let answered = messages(
        post_to(&url, Some(TOKEN), &tool_call(2, "ask", "a question"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let last = answered.last().cloned().unwrap_or_default();
    assert_eq!(
        last["result"]["isError"],
        false,
        "{last}\n{}",
        stderr.text()
    );
    assert!(last.to_string().contains("merged"), "{last}");

    // The run is in the store, in the volume (the root is read-only).
    let shown = podman
        .run(&["exec", &name, "/chorus", "runs", "show", "last", "--json"])
        .await;
    let run: Value = serde_json::from_str(&shown).expect("runs show --json");
    assert_eq!(run["prompt"], "a question", "{run}");

    // A call in flight, then `podman stop` (SIGTERM; SIGKILL after 30 s).
    let call = post_to(&url, Some(TOKEN), &tool_call(3, "ask", "a slow question")).send();
    let call = tokio::spawn(async move { messages(call.await.unwrap()).await });
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == PANEL.len())
            .await
    );
    let mut stop = podman.command();
    stop.args(["stop", "--time", "30", &name])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let stop = stop.spawn().expect("start podman stop");
    wait_for_lines(&stderr, "new requests are refused", 1).await;
    let health = reqwest::get(format!("{origin}/health")).await.unwrap();
    assert_eq!(health.status(), 503, "a load balancer stops sending here");
    let answered = call.await.unwrap();
    let last = answered.last().cloned().unwrap_or_default();
    assert_eq!(last["result"]["isError"], false, "{last}");
    assert!(last.to_string().contains("merged"), "{last}");
    let exit = tokio::time::timeout(Duration::from_secs(30), container.wait())
        .await
        .expect("the container exits after draining")
        .unwrap();
    assert!(exit.success(), "a clean exit: {exit}\n{}", stderr.text());
    let stopped = stop.wait_with_output().await.unwrap();
    assert!(stopped.status.success(), "podman stop: {}", stopped.status);
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
