//! Strategy plugins written in Python (componentize-py) and JavaScript
//! (componentize-js) load and run like any other: the contract is the
//! language-neutral WIT, not Rust. Each example is built from source,
//! against contract 0.4: the JavaScript prompter places a run's image in
//! every persona's message (a model that sees images gets it there, a
//! text-only one the description), and the Python pick says which of the
//! run's numbered web sources its answer cites.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::attachments::sent::{GIF, b64};
use crate::strategies::toolchains::{self, componentize_js, componentize_py, fresh, root};
use crate::support::*;

fn contract() -> PathBuf {
    root().join("wit/0.4.0")
}

/// The Python example, built once per test process (and only when its
/// source or the contract changed since the last build).
pub(crate) fn medoid() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build_medoid).clone()
}

/// The JavaScript example, likewise.
fn personas() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build_personas).clone()
}

/// Builds the Python example into the target directory.
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
    let wasm = tokio::task::spawn_blocking(medoid).await.unwrap();
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
# Its first call may wait for the plugin to compile (seconds).
run_timeout = "150s"
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
    let wasm = tokio::task::spawn_blocking(personas).await.unwrap();
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
# Its first call may wait for the plugin to compile (seconds).
run_timeout = "150s"
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

/// The medoid pipeline `consensus` over the test panel.
fn medoid_pipeline(wasm: &Path) -> String {
    format!(
        r#"
[plugins.medoid]
path = "{}"
max_memory_mib = 64
cpu_time = "5s"

[pipelines.consensus]
description = "The answer that agrees most with the others."
selector = "panel"
prompter = "passthrough"
synthesizer = "medoid"
# Its first call may wait for the plugin to compile (seconds).
run_timeout = "150s"
"#,
        wasm.display()
    )
}

fn cited(text: &str, urls: &[(&str, &str)]) -> Step {
    let annotations: Vec<Value> = urls
        .iter()
        .map(|(url, title)| {
            json!({"type": "url_citation", "url_citation": {"url": url, "title": title}})
        })
        .collect();
    Step::Cited {
        text: text.to_owned(),
        annotations: Value::Array(annotations),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_pick_names_the_sources_its_answer_cites() {
    let wasm = tokio::task::spawn_blocking(medoid).await.unwrap();
    let mock = Mock::start().await;
    mock.script(
        "m1",
        [cited(
            "The capital of France is Paris",
            &[("https://b.example/paris?utm_source=x", "Paris")],
        )],
    );
    mock.script(
        "m2",
        [cited(
            "The capital of France is Paris, indeed",
            &[
                ("https://a.example/france", "France"),
                ("https://B.example/paris/", "Paris again"),
            ],
        )],
    );
    mock.script("m3", [Step::answer("Paris is the capital of France")]);
    mock.script("m4", [cited("Lyon", &[("https://c.example/lyon", "Lyon")])]);
    mock.script("m5", [Step::answer("Marseille")]);
    let server = Server::start(&config(&mock, &medoid_pipeline(&wasm))).await;
    let result = server
        .ask("consensus", "What is the capital of France?")
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let record = structured(&result);
    assert_eq!(record["kind"], "pick");
    // The run's list: m1's source, then m2's new one (its second is m1's),
    // then m4's; m1's answer cites the first.
    let urls: Vec<&str> = record["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            "https://b.example/paris?utm_source=x",
            "https://a.example/france",
            "https://c.example/lyon"
        ]
    );
    assert!(
        record["answer"]
            .as_str()
            .unwrap()
            .starts_with("The capital of France is Paris\n\nSources:\n1. [Paris]"),
        "{record}"
    );
    assert_eq!(
        record["notes"][1],
        "The chosen answer cites sources [1] of the 3 listed at the end."
    );

    // Without web sources, nothing is said about them.
    for model in PANEL {
        mock.script(model, [Step::answer("The capital of France is Paris")]);
    }
    let result = server.ask("consensus", "Again?").await;
    let notes = structured(&result)["notes"].to_string();
    assert!(!notes.contains("sources"), "{notes}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_javascript_prompter_places_an_image_for_every_persona() {
    let wasm = tokio::task::spawn_blocking(personas).await.unwrap();
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer(&format!("{model}: a square"))]);
    }
    mock.script(SYNTH, [Step::answer("merged: a square")]);
    mock.script(SYNTH2, [Step::answer("One black pixel on white.")]);
    // m1 sees images; synth2 too, and describes the image for the others.
    let seeing = |model: &str| {
        format!("[models.{model}]\ncontext_window = 100000\ninput = [\"text\", \"image\"]\n")
    };
    let toml = config(
        &mock,
        &format!(
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
describer = "{SYNTH2}"
# Its first call may wait for the plugin to compile (seconds).
run_timeout = "150s"
"#,
            wasm.display()
        ),
    )
    .replace("[models.m1]\ncontext_window = 100000\n", &seeing("m1"))
    .replace(
        &format!("[models.{SYNTH2}]\ncontext_window = 100000\n"),
        &seeing(SYNTH2),
    );
    let server = Server::start(&toml).await;
    let result = server
        .call(
            "angles",
            json!({"prompt": "What shape?", "attachments": [
                {"data": b64(GIF), "mime_type": "image/gif", "name": "pixel.gif"}
            ]}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));

    // Where the persona placed it: before the question, once.
    assert_eq!(
        mock.requests_for("m1")[0].body["messages"],
        json!([
            {"role": "system", "content": "Answer as a physicist."},
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": format!("data:image/gif;base64,{}", b64(GIF))}},
                {"type": "text", "text": "What shape?"}
            ]}
        ])
    );
    // A text-only model reads the description there instead. (The host
    // puts its paragraph break before it even with no text before it.)
    assert_eq!(
        mock.requests_for("m2")[0].body["messages"],
        json!([
            {"role": "system", "content": "Answer as a historian."},
            {"role": "user", "content": format!(
                "\n\n--- Attachment #1 pixel.gif (image/gif, 43 bytes): you cannot see it; \
                 this description by {SYNTH2} stands in for it ---\nOne black pixel on white.\n\
                 --- end of the description of attachment #1 ---\n\nWhat shape?"
            )}
        ])
    );
    let record = structured(&result);
    assert_eq!(record["answer"], "merged: a square");
    assert_eq!(record["summary"], "Synthesis of 5 of 5 answers.");
    assert!(
        record["notes"]
            .to_string()
            .contains("The attachments (#1 pixel.gif) were placed before each persona's question."),
        "{record:#}"
    );
}
