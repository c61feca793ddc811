//! A first start with nothing compiled (issue 37, defect 19): a client may
//! send its first request without waiting long for chorus, so `chorus
//! serve` answers `initialize` and `tools/list` from the configuration at
//! once while the plugins compile in the background. A call waits for the
//! plugins it needs; a plugin that fails to compile fails only its
//! pipelines' calls, with the error a failed start used to give. And a
//! warm start (issue 39): a built-in with its shipped settings is loaded
//! only when a run first needs it.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;

use crate::support::*;

/// Each test starts with a compile cache of its own, empty.
fn cold_cache() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

fn tool_names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cold_start_answers_before_its_plugins_are_compiled() {
    // A Python plugin: many seconds of compiling, on any machine.
    let wasm = tokio::task::spawn_blocking(crate::strategies::polyglot::medoid)
        .await
        .unwrap();
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("The capital of France is Paris")]);
    mock.script("m2", [Step::answer("Paris is the capital of France")]);
    mock.script("m3", [Step::answer("The capital of France is Paris")]);
    mock.script("m4", [Step::answer("Lyon")]);
    mock.script("m5", [Step::answer("Paris")]);
    let extra = format!(
        r#"
[plugins.medoid]
path = "{}"
max_memory_mib = 64
cpu_time = "5s"
settings = {{ min_agreement = 0.2 }}

# A synthesizer no pipeline names, compiling too.
[plugins.spare]
path = "{}"

[pipelines.consensus]
description = "The answer that agrees most with the others."
selector = "panel"
prompter = "passthrough"
synthesizer = "medoid"
run_timeout = "300s"
"#,
        wasm.display(),
        plugin_dir().join("legacy_longest.wasm").display()
    );
    let cache = cold_cache();
    let server = Server::start_with_env(
        &config(&mock, &extra),
        &[("XDG_CACHE_HOME", cache.path().to_str().unwrap())],
    )
    .await;
    // `initialize` is answered (Server::start waited for it); now the tools.
    let tools = server.client.list_all_tools().await.expect("tools/list");
    let compiled = server.stderr();
    assert!(
        !compiled.contains("compiled plugin `medoid`"),
        "initialize and tools/list were answered only once the plugin was compiled:\n{compiled}"
    );
    let names = tool_names(&tools);
    for pipeline in ["ask", "consensus", "resynthesize"] {
        assert!(
            names.iter().any(|n| n == pipeline),
            "{pipeline} in {names:?}"
        );
    }
    let synthesizers = |tools: &[rmcp::model::Tool]| {
        let resynthesize = tools.iter().find(|t| t.name == "resynthesize").unwrap();
        resynthesize.input_schema["properties"]["synthesizer"]["enum"].clone()
    };
    assert_eq!(
        synthesizers(&tools),
        serde_json::json!(["medoid", "spare", "synthesize"]),
        "a synthesizer still compiling is offered too, named by a pipeline or not"
    );

    // A call made right away waits for the plugin it needs.
    let arguments = serde_json::json!({"prompt": "What is the capital of France?"});
    let call = server.client.call_tool(
        CallToolRequestParams::new("consensus")
            .with_arguments(arguments.as_object().unwrap().clone()),
    );
    let result = tokio::time::timeout(Duration::from_secs(300), call)
        .await
        .expect("the call finished")
        .expect("the call got a response");
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert_eq!(structured(&result)["kind"], "pick");
    assert_eq!(
        structured(&result)["answer"],
        "The capital of France is Paris"
    );
    server
        .wait_for_stderr("chorus: compiling plugin `medoid`", 1)
        .await;
    server
        .wait_for_stderr("chorus: compiled plugin `medoid`", 1)
        .await;
    // Compiled, the tools are what they were: nothing for a client to hear.
    let compiled = server.client.list_all_tools().await.expect("tools/list");
    assert_eq!(synthesizers(&compiled), synthesizers(&tools));
    assert_eq!(server.tool_list_changes(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_that_fails_to_compile_fails_only_its_pipelines() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("an answer")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.wasm");
    // The magic number of a component, then nonsense.
    std::fs::write(&broken, b"\0asm\x0d\0\x01\0this is not a component").unwrap();
    let extra = format!(
        r#"
[plugins.broken]
path = "{}"

[pipelines.broken]
description = "A selector that does not compile."
selector = "broken"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        broken.display()
    );
    let cache = cold_cache();
    // Before, chorus refused to start at all.
    let server = Server::start_with_env(
        &config(&mock, &extra),
        &[("XDG_CACHE_HOME", cache.path().to_str().unwrap())],
    )
    .await;
    let tools = server.client.list_all_tools().await.expect("tools/list");
    let names = tool_names(&tools);
    assert!(names.iter().any(|n| n == "broken"), "{names:?}");

    let failed = server.ask("broken", "Anything?").await;
    assert_eq!(failed.is_error, Some(true));
    let message = text(&failed);
    for expected in [
        "plugin `broken` did not load",
        "plugins.broken.path",
        "broken.wasm is not a loadable WebAssembly component",
    ] {
        assert!(message.contains(expected), "{expected:?} in {message}");
    }
    assert_eq!(structured(&failed)["error"]["kind"], "plugin-failed");
    // Said on stderr too, for whoever runs chorus.
    server
        .wait_for_stderr("chorus: plugin `broken` did not load", 1)
        .await;

    // Every other pipeline serves.
    let answered = server.ask("ask", "Anything?").await;
    assert_eq!(answered.is_error, Some(false), "{}", text(&answered));
    assert_eq!(structured(&answered)["answer"], "merged");
}

/// `chorus COMMAND --config FILE ARGS` on the compile cache `cache`, with
/// no stdin, to its end: whether it succeeded, and its stderr.
async fn run_on(
    cache: &std::path::Path,
    command_name: &str,
    file: &ConfigFile,
    args: &[&str],
) -> (bool, String) {
    let output = command(&[command_name, "--config", file.path.to_str().unwrap()])
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stderr)
}

/// How many times chorus logged loading the plugin `name`.
fn loads_of(stderr: &str, name: &str) -> usize {
    let field = format!("plugin={name} ");
    stderr
        .lines()
        .filter(|l| l.contains("loaded in") && l.contains(&field))
        .count()
}

/// A warm start of `serve` (or `ask`) maps and checks only what its runs
/// use: a built-in with its shipped settings loads when a run first needs
/// it — once, however many runs ask at once —, one with settings of its
/// own at start (so a refusal still stops the start, not a run), and a
/// shipped one that no run uses never. Its kind is known all along: a pipeline that gives it
/// the wrong role is refused at start, loaded or not.
#[tokio::test(flavor = "multi_thread")]
async fn a_warm_start_loads_a_shipped_built_in_when_a_run_first_needs_it() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("an answer")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let extra = r#"
# As the built-in configuration ships it; no pipeline here uses it.
[plugins.vote]
builtin = "vote"
"#;
    let toml = config(&mock, extra);
    let cache = cold_cache();
    let env = [("XDG_CACHE_HOME", cache.path().to_str().unwrap())];
    // The first start compiles everything (in the background) and caches it.
    let first = Server::start_with_env(&toml, &env).await;
    assert_eq!(first.ask("ask", "q").await.is_error, Some(false));
    drop(first);

    let server = Server::start_with_env(&toml, &env).await;
    server.client.list_all_tools().await.expect("tools/list");
    server.wait_for_stderr("loaded in", 1).await;
    let started = server.stderr();
    assert_eq!(
        loads_of(&started, "panel"),
        1,
        "settings of its own: loaded at start\n{started}"
    );
    for shipped in ["passthrough", "synthesize", "vote"] {
        assert_eq!(
            loads_of(&started, shipped),
            0,
            "{shipped}: not loaded by the start\n{started}"
        );
    }
    let (a, b) = tokio::join!(server.ask("ask", "q"), server.ask("ask", "q"));
    for result in [a, b] {
        assert_eq!(result.is_error, Some(false), "{}", text(&result));
        assert_eq!(structured(&result)["answer"], "merged");
    }
    let ran = server.stderr();
    for (plugin, loads) in [
        ("panel", 1),
        ("passthrough", 1),
        ("synthesize", 1),
        ("vote", 0),
    ] {
        assert_eq!(loads_of(&ran, plugin), loads, "{plugin}\n{ran}");
    }

    // `chorus ask` loads what its run uses, too.
    let file = write_config(&toml);
    let (asked, stderr) = run_on(cache.path(), "ask", &file, &["q"]).await;
    assert!(asked, "{stderr}");
    for (plugin, loads) in [("panel", 1), ("synthesize", 1), ("vote", 0)] {
        assert_eq!(loads_of(&stderr, plugin), loads, "{plugin}\n{stderr}");
    }

    // The wrong role for a plugin not loaded yet is refused at start.
    let wrong = write_config(&toml.replace(
        "synthesizer = \"synthesize\"",
        "synthesizer = \"passthrough\"",
    ));
    let (served, stderr) = run_on(cache.path(), "serve", &wrong, &[]).await;
    assert!(!served, "{stderr}");
    assert!(
        stderr.contains("plugin `passthrough` is a prompter, not a synthesizer"),
        "{stderr}"
    );
}
