//! The MCP project's own conformance suite (`@modelcontextprotocol/conformance`,
//! its server scenarios) against `chorus serve --http` on loopback, with
//! tests/conformance/expected-failures.yml as its baseline: a scenario
//! failing that is not listed there fails this test, and so does one
//! listed that passes. The suite tests servers over HTTP only (it takes a
//! URL), so stdio is covered by chorus's own tests.
//!
//! The suite and the Node 22 it needs are installed at pinned versions by
//! tests/conformance/setup.sh (npm) into the target directory on first use;
//! CI runs it up front.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::support::http::HttpServer;
use crate::support::*;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Where the suite is installed, installing it on first use.
fn suite() -> PathBuf {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance");
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if !*installed {
        let output = std::process::Command::new("bash")
            .arg(root().join("tests/conformance/setup.sh"))
            .arg(&dir)
            .output()
            .expect("run tests/conformance/setup.sh");
        assert!(
            output.status.success(),
            "installing the conformance suite failed (needs npm and the npm registry):\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        *installed = true;
    }
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_conformance_suite_passes_but_for_its_baseline() {
    let suite = suite();
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let config = write_config(&config(&mock, ""));
    // No token: the suite's DNS-rebinding scenario is for loopback servers
    // without one, and its client sends none.
    let server = HttpServer::start(&config.path, None, &[]).await;
    let results = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(suite.join("node_modules/.bin/node"))
        .arg(suite.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", &server.url, "--expected-failures"])
        .arg(root().join("tests/conformance/expected-failures.yml"))
        .arg("--output-dir")
        .arg(results.path())
        .current_dir(results.path())
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the conformance suite finished within 5 minutes")
        .expect("run the conformance suite under Node 22");
    assert!(
        output.status.success(),
        "the conformance suite found failures not in tests/conformance/expected-failures.yml, \
         or entries there that now pass ({}):\n{}{}\n----- chorus stderr -----\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        server.stderr()
    );
}
