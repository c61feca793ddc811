//! Strategy plugins written in Python (componentize-py) and JavaScript
//! (componentize-js) load and run like any other: the contract is the
//! language-neutral WIT, not Rust. Each example is built from source.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use crate::toolchains::{self, componentize_js, componentize_py, fresh, root};

fn contract() -> PathBuf {
    root().join("wit/0.2.0")
}

/// Builds the Python example into the target directory (once per change of
/// its source or of the contract).
fn build_medoid() -> PathBuf {
    let source = root().join("plugins/examples/python-medoid");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("medoid.wasm");
    if !fresh(
        &out,
        &[source.join("app.py"), contract().join("strategy.wit")],
    ) {
        toolchains::run(
            Command::new(componentize_py())
                .arg("-d")
                .arg(contract())
                .args(["-w", "synthesizer-plugin", "componentize", "-p"])
                .arg(&source)
                .args(["app", "-o"])
                .arg(&out),
            "componentize-py (the Python example)",
        );
    }
    out
}

/// Builds the JavaScript example the way its package.json says.
fn build_personas() -> PathBuf {
    let source = root().join("plugins/examples/js-personas");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("personas.wasm");
    if !fresh(
        &out,
        &[source.join("personas.js"), contract().join("strategy.wit")],
    ) {
        toolchains::run(
            Command::new(componentize_js())
                .arg("--wit")
                .arg(contract())
                .args(["--world-name", "prompter-plugin"])
                .args(["--disable", "http", "--disable", "fetch-event", "-o"])
                .arg(&out)
                .arg(source.join("personas.js")),
            "componentize-js (the JavaScript example)",
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_plugin_runs_as_a_synthesizer() {
    let wasm = tokio::task::spawn_blocking(build_medoid).await.unwrap();
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("The capital of France is Paris")]);
    mock.script(
        "m2",
        [Step::answer("The capital of France is Paris, indeed")],
    );
    mock.script("m3", [Step::answer("Paris is the capital of France")]);
    mock.script("m4", [Step::answer("Lyon")]);
    mock.script("m5", [Step::status(503, "overloaded")]);
    let extra = format!(
        r#"
[plugins.medoid]
path = "{}"
max_memory_mib = 64
cpu_time = "5s"
settings = {{ min_agreement = 0.2 }}

[pipelines.consensus]
description = "The answer that agrees most with the others."
selector = "panel"
prompter = "passthrough"
synthesizer = "medoid"
"#,
        wasm.display()
    );
    let server = Server::start(&config(&mock, &extra)).await;
    let result = server
        .ask("consensus", "What is the capital of France?")
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let structured = structured(&result);
    assert_eq!(structured["kind"], "pick");
    assert_eq!(structured["answer"], "The capital of France is Paris");
    assert!(
        structured["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("Picked m1's answer: it agrees most with the others")
    );
    assert!(
        structured["notes"]
            .to_string()
            .contains("m5 failed: overloaded")
    );
    assert_eq!(
        structured["details"]["agreement"].as_array().unwrap().len(),
        4
    );
    assert!(mock.requests_for(SYNTH).is_empty(), "no extra model call");

    // Its settings are checked at load, in its own words.
    let bad = config(
        &mock,
        &extra.replace("min_agreement = 0.2", "min_agreement = 7"),
    );
    let file = write_config(&bad);
    let output = command(&["check", "--config", file.path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("plugin `medoid` refused its settings: min_agreement must be a number from 0 to 1, got 7"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_javascript_plugin_runs_as_a_prompter() {
    let wasm = tokio::task::spawn_blocking(build_personas).await.unwrap();
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(
            model,
            [Step::Echo {
                prefix: format!("{model}: "),
                delay: std::time::Duration::ZERO,
            }],
        );
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let extra = format!(
        r#"
[plugins.personas]
path = "{}"
max_memory_mib = 64
cpu_time = "5s"
settings = {{ personas = ["a physicist", "a historian"] }}

[pipelines.angles]
description = "Each model answers as a different persona."
selector = "panel"
prompter = "personas"
synthesizer = "synthesize"
"#,
        wasm.display()
    );
    let server = Server::start(&config(&mock, &extra)).await;
    let result = server.ask("angles", "Why did Rome fall?").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    assert_eq!(structured["summary"], "Synthesis of 5 of 5 answers.");
    let labels: Vec<&str> = calls(structured, "fan-out")
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "persona 1: a physicist",
            "persona 2: a historian",
            "persona 3: a physicist",
            "persona 4: a historian",
            "persona 5: a physicist"
        ]
    );
    let sent = mock.requests_for("m2");
    let system = &sent[0].body["messages"][0];
    assert_eq!(system["role"], "system");
    assert_eq!(system["content"], "Answer as a historian.");
    assert!(
        structured["notes"]
            .to_string()
            .contains("Each of the 5 models answered as a different persona.")
    );

    let bad = config(
        &mock,
        &extra.replace(
            r#"personas = ["a physicist", "a historian"]"#,
            "personas = []",
        ),
    );
    let file = write_config(&bad);
    let output = command(&["check", "--config", file.path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("plugin `personas` refused its settings: personas must be a non-empty list of non-empty strings"),
        "{stderr}"
    );
}
