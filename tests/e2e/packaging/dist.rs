//! The packages `bash dist/build.sh` writes into target/dist, installed the
//! way a user gets them — the wheel into a fresh venv, the npm tarballs into
//! an empty folder (from the files: no registry), the MCP Bundle unpacked
//! with the official `mcpb` CLI and started as its manifest says — each
//! started by the official Python SDK over stdio, making one `ask` against
//! the mock provider. No TOML is written: the built-in configuration, its
//! provider pointed at the mock with `CHORUS_BASE_URL` and its panel set
//! with `CHORUS_MODELS` / `CHORUS_SYNTHESIZER`, as a client's `env` would.
//!
//! The artifacts come from a release build this suite does not make: with
//! `CHORUS_REQUIRE_DIST=1` (set by .ci/run after dist/build.sh) a missing
//! one fails the test; without it and without artifacts, each test returns
//! early, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::mcp::clients::clients;
use crate::support::*;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// `names` under target/dist, or `None` (the test is skipped) when they are
/// missing and CHORUS_REQUIRE_DIST is not set.
pub(crate) fn artifacts(names: &[String]) -> Option<Vec<PathBuf>> {
    let dir = root().join("target/dist");
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    let missing: Vec<&String> = names
        .iter()
        .zip(&paths)
        .filter(|(_, p)| !p.is_file())
        .map(|(n, _)| n)
        .collect();
    if missing.is_empty() {
        return Some(paths);
    }
    assert!(
        std::env::var_os("CHORUS_REQUIRE_DIST").is_none_or(|v| v != "1"),
        "CHORUS_REQUIRE_DIST=1 but {} lacks {missing:?}: run `bash dist/build.sh` first",
        dir.display()
    );
    eprintln!(
        "skipped: {} lacks {missing:?} (run `bash dist/build.sh`; CHORUS_REQUIRE_DIST=1 makes this a failure)",
        dir.display()
    );
    None
}

/// Runs `program args` to success; its stdout.
fn run(program: impl AsRef<std::ffi::OsStr>, args: &[&str], dir: &Path) -> String {
    let program = program.as_ref();
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run {program:?}: {e}"));
    assert!(
        output.status.success(),
        "{program:?} {args:?} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A mock provider that answers only with `OPENROUTER_API_KEY`'s value
/// (the canary); kept alive by the caller.
async fn provider() -> Mock {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    mock.require_key(CANARY);
    mock
}

/// The Python SDK starts `command args` with `env` and makes one `ask`;
/// asserts the answer came from the mock's synthesizer.
async fn ask_through_sdk(command: &Path, args: &[&str], env: &[(&str, &str)], mock: &Mock) {
    let script = root().join("tests/clients/one_ask.py");
    let python = clients().join("venv/bin/python");
    let home = tempfile::tempdir().expect("a temporary directory");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .arg(command)
        .args(args)
        .env("CHORUS_BASE_URL", &mock.base_url)
        .env("CHORUS_MODELS", PANEL.join(","))
        .env("CHORUS_SYNTHESIZER", SYNTH)
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env_remove("CHORUS_CONFIG")
        .env_remove("CHORUS_PIPELINE")
        .env_remove("OPENROUTER_API_KEY")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python SDK could not ask {} ({}):\n{stdout}\n{}",
        command.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no report ({e}): {stdout}"));
    assert!(
        report["tools"].as_array().unwrap().contains(&"ask".into()),
        "{report}"
    );
    assert_eq!(report["result"]["answer"], "merged", "{report}");
    assert_eq!(report["result"]["kind"], "synthesis", "{report}");
}

/// The packaged binary, on a machine that never ran chorus (an empty cache),
/// loads every built-in plugin from the code its build precompiled: nothing
/// is compiled. The first start writes that code to the cache, and later
/// starts map it from there without writing it again.
async fn loads_its_built_ins_precompiled(chorus: &Path) {
    let mock = provider().await;
    let home = tempfile::tempdir().expect("a temporary directory");
    let cache = home.path().join("cache");
    let check = || {
        let output = Command::new(chorus)
            .arg("check")
            .env("CHORUS_BASE_URL", &mock.base_url)
            .env("OPENROUTER_API_KEY", CANARY)
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("XDG_CACHE_HOME", &cache)
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env_remove("CHORUS_CONFIG")
            .output()
            .expect("run chorus check");
        let report = String::from_utf8_lossy(&output.stdout).into_owned();
        let plugins: Vec<String> = report
            .lines()
            .skip_while(|l| *l != "plugins:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect();
        assert!(plugins.len() >= 10, "the built-ins are listed:\n{report}");
        for line in &plugins {
            assert!(line.contains("(precompiled,"), "{line}\n{report}");
        }
        plugins.len()
    };
    // Each entry by name, with what says whether it was written again.
    let entries = || -> Vec<(std::path::PathBuf, std::time::SystemTime)> {
        let mut entries: Vec<_> = std::fs::read_dir(cache.join("chorus"))
            .map(|dir| {
                dir.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                    .map(|e| (e.path(), e.metadata().unwrap().modified().unwrap()))
                    .collect()
            })
            .unwrap_or_default();
        entries.sort();
        entries
    };
    let plugins = check();
    let written = entries();
    assert!(
        !written.is_empty() && written.len() <= plugins,
        "one entry per built-in component: {written:?}"
    );
    check();
    assert_eq!(entries(), written, "a later start wrote the cache again");
}

#[tokio::test]
async fn the_wheel_installs_into_a_fresh_venv_and_answers_an_mcp_client() {
    let wheel = format!(
        "chorus_mcp-{VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64.whl"
    );
    let Some(paths) = artifacts(&[wheel]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    run("python3", &["-m", "venv", "venv"], dir.path());
    let pip = dir.path().join("venv/bin/pip");
    let wheel = paths[0].to_str().unwrap();
    run(
        &pip,
        &[
            "install",
            "--quiet",
            "--no-index",
            "--disable-pip-version-check",
            wheel,
        ],
        dir.path(),
    );
    let chorus = dir.path().join("venv/bin/chorus");
    assert!(run(&chorus, &["--version"], dir.path()).contains(VERSION));
    loads_its_built_ins_precompiled(&chorus).await;

    // What `uvx chorus-mcp` starts: the command named after the package,
    // with no arguments (`serve` is the default).
    let mock = provider().await;
    let launcher = dir.path().join("venv/bin/chorus-mcp");
    ask_through_sdk(&launcher, &[], &[("OPENROUTER_API_KEY", CANARY)], &mock).await;
}

#[tokio::test]
async fn the_npm_tarballs_install_from_the_files_and_answer_an_mcp_client() {
    let names = [
        format!("chorus-mcp-linux-x64-{VERSION}.tgz"),
        format!("chorus-mcp-{VERSION}.tgz"),
    ];
    let Some(paths) = artifacts(&names) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("package.json"), "{\"private\": true}\n").unwrap();
    let mut args = vec![
        "install",
        "--offline",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
    ];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    run("npm", &args, dir.path());
    // What `npx -y chorus-mcp` runs: the wrapper's bin.
    let launcher = dir.path().join("node_modules/.bin/chorus-mcp");
    assert!(run(&launcher, &["--version"], dir.path()).contains(VERSION));

    let mock = provider().await;
    ask_through_sdk(&launcher, &[], &[("OPENROUTER_API_KEY", CANARY)], &mock).await;
}

#[tokio::test]
async fn the_bundle_unpacks_and_starts_as_its_manifest_says() {
    let Some(paths) = artifacts(&["chorus-linux-x64.mcpb".to_owned()]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mcpb = root().join("target/tmp/dist-tools/node_modules/.bin/mcpb");
    let unpacked = dir.path().join("chorus");
    run(
        &mcpb,
        &[
            "unpack",
            paths[0].to_str().unwrap(),
            unpacked.to_str().unwrap(),
        ],
        dir.path(),
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(unpacked.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["server"]["type"], "binary");
    let key = &manifest["user_config"]["openrouter_api_key"];
    assert_eq!(key["sensitive"], true, "{manifest}");

    // What a host does: substitute ${__dirname} and the user's answers.
    let substitute = |text: &str| {
        text.replace("${__dirname}", unpacked.to_str().unwrap())
            .replace("${user_config.openrouter_api_key}", CANARY)
    };
    let config_of_server = &manifest["server"]["mcp_config"];
    let command = PathBuf::from(substitute(config_of_server["command"].as_str().unwrap()));
    let args: Vec<String> = config_of_server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| substitute(a.as_str().unwrap()))
        .collect();
    let env: Vec<(String, String)> = config_of_server["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), substitute(v.as_str().unwrap())))
        .collect();
    assert!(
        env.iter()
            .any(|(k, v)| k == "OPENROUTER_API_KEY" && v == CANARY),
        "{env:?}"
    );

    let mock = provider().await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    ask_through_sdk(&command, &args, &env, &mock).await;
}
