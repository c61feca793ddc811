//! A strategy plugin written in Python (componentize-py) loads and runs like
//! any other: the contract is the language-neutral WIT, not Rust.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// `$COMPONENTIZE_PY`, else a virtualenv under the target directory, made
/// with pip from PyPI on first use.
fn componentize_py() -> PathBuf {
    if let Some(path) = std::env::var_os("COMPONENTIZE_PY") {
        return path.into();
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("componentize-py");
    let bin = venv.join("bin").join("componentize-py");
    if !bin.exists() {
        let run = |command: &mut Command, what: &str| {
            let status = command.status().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                status.success(),
                "{what} failed ({status}); set COMPONENTIZE_PY to an installed componentize-py"
            );
        };
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        );
        run(
            Command::new(venv.join("bin").join("pip")).args([
                "install",
                "--quiet",
                COMPONENTIZE_PY,
            ]),
            "pip install componentize-py",
        );
    }
    bin
}

/// Builds the example into the target directory (once per change of its
/// source or of the contract).
fn build_medoid() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let source = root.join("plugins/examples/python-medoid");
    let wit = root.join("wit/0.2.0");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("medoid.wasm");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = modified(&out).is_some_and(|built| {
        [source.join("app.py"), wit.join("strategy.wit")]
            .iter()
            .all(|input| modified(input).is_some_and(|m| m <= built))
    });
    if !fresh {
        let status = Command::new(componentize_py())
            .arg("-d")
            .arg(&wit)
            .args(["-w", "synthesizer-plugin", "componentize", "-p"])
            .arg(&source)
            .args(["app", "-o"])
            .arg(&out)
            .status()
            .expect("run componentize-py");
        assert!(
            status.success(),
            "componentize-py failed to build the example"
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
}
