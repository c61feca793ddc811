//! `chorus plugin new` writes projects that build and load as written: for
//! each language and kind, the test creates the project, builds it with the
//! command its README gives, loads it with `chorus check`, and runs its
//! pipeline against the mock provider — the prompter with an image it
//! places before the question, the synthesizer with answers that cite web
//! sources it numbers for the merge (contract 0.4).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::attachments::sent::{GIF, b64};
use crate::strategies::toolchains::{self, componentize_js_modules, componentize_py};
use crate::support::*;

const KINDS: [&str; 3] = ["selector", "prompter", "synthesizer"];
/// The models of the generated chorus.toml; the first also merges.
const MODELS: [&str; 3] = [
    "anthropic/claude-sonnet-4.5",
    "openai/gpt-5",
    "google/gemini-2.5-pro",
];

async fn new_project(parent: &Path, name: &str, kind: &str, lang: &str) -> PathBuf {
    let output = command(&[
        "plugin", "new", name, "--kind", kind, "--lang", lang, "--dir",
    ])
    .arg(parent)
    .output()
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "plugin new: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    parent.join(name)
}

fn build(project: &Path, lang: &str, kind: &str) {
    let name = project.file_name().unwrap().to_str().unwrap();
    match lang {
        "rust" => {
            // Reuse compiled dependencies across runs: the project's own
            // target/ is a link to one kept under chorus's target directory.
            let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffold-target");
            std::fs::create_dir_all(&shared).unwrap();
            link_dir(&shared, &project.join("target"));
            let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()));
            cargo
                .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
                .current_dir(project);
            for var in [
                "CARGO_TARGET_DIR",
                "RUSTFLAGS",
                "CARGO_ENCODED_RUSTFLAGS",
                "CARGO_BUILD_TARGET",
            ] {
                cargo.env_remove(var);
            }
            toolchains::run(&mut cargo, "cargo build (generated Rust plugin)");
        }
        "python" => toolchains::run(
            Command::new(componentize_py())
                .args([
                    "-d",
                    "wit",
                    "-w",
                    &format!("{kind}-plugin"),
                    "componentize",
                    "app",
                    "-o",
                ])
                .arg(format!("{name}.wasm"))
                .current_dir(project),
            "componentize-py (generated Python plugin)",
        ),
        "js" => {
            link_dir(&componentize_js_modules(), &project.join("node_modules"));
            toolchains::run(
                Command::new("npm")
                    .args(["run", "--silent", "build"])
                    .current_dir(project),
                "npm run build (generated JavaScript plugin)",
            );
        }
        other => unreachable!("{other}"),
    }
}

async fn check(config: &Path) -> (bool, String, String) {
    // The project's config calls OpenRouter, as its author's would: with a
    // key set (`chorus check` fails when no provider can be called).
    let output = command(&["check", "--config", config.to_str().unwrap()])
        .env("OPENROUTER_API_KEY", "sk-or-v1-scaffold-test")
        .output()
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Creates, builds, checks and runs one plugin of each kind in `lang`.
async fn scaffold(lang: &str) {
    let parent = tempfile::tempdir().unwrap();
    let mock = Mock::start().await;
    for (i, model) in MODELS.iter().enumerate() {
        mock.script(model, [Step::answer(&format!("answer {i} from {model}"))]);
    }
    for kind in KINDS {
        let name = format!("demo-{lang}-{kind}");
        let project = new_project(parent.path(), &name, kind, lang).await;
        for file in ["README.md", "chorus.toml", "wit/strategy.wit"] {
            assert!(project.join(file).exists(), "{name}: {file}");
        }
        let built = {
            let project = project.clone();
            let (lang, kind) = (lang.to_owned(), kind.to_owned());
            tokio::task::spawn_blocking(move || build(&project, &lang, &kind))
        };
        built.await.unwrap();

        // Loads as written, settings validated; a long compile is announced
        // while it happens (the same sources build the same component, so
        // only the first run of this test compiles it), and the next load
        // comes from the cache.
        let config = project.join("chorus.toml");
        let (ok, stdout, stderr) = check(&config).await;
        assert!(ok, "{name}: chorus check failed:\n{stderr}");
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&name))
            .unwrap_or_else(|| panic!("{name} is not listed:\n{stdout}"));
        assert!(
            line.contains(&format!("{kind:<12} chorus:strategy@0.6.0")),
            "{line}"
        );
        if lang != "rust" {
            let announced = stderr.contains(&format!("chorus: compiling plugin `{name}` ("))
                && stderr.contains("first load; cached afterwards)");
            assert_eq!(announced, line.contains("(compiled,"), "{line}\n{stderr}");
        }
        let (_, again, stderr) = check(&config).await;
        assert!(!stderr.contains("compiling plugin"), "{stderr}");
        assert!(
            again
                .lines()
                .any(|l| l.contains(&name) && l.contains("(cached,")),
            "{again}"
        );

        // Runs: the same file, pointed at the mock.
        let text = std::fs::read_to_string(&config)
            .unwrap()
            .replace("https://openrouter.ai/api/v1", &mock.base_url)
            .replace("OPENROUTER_API_KEY", KEY_VAR);
        let test_config = project.join("test.toml");
        std::fs::write(&test_config, text).unwrap();
        let result = ask(&test_config, &[], "Why is the sky blue?").await;
        assert_eq!(result["kind"], "synthesis", "{name}: {result}");
        assert_eq!(result["summary"], "Synthesis of 3 of 3 answers.", "{name}");
        assert_eq!(
            result["answer"],
            format!("answer 0 from {}", MODELS[0]),
            "{name}"
        );
        let gif = project.join("shape.gif");
        std::fs::write(&gif, GIF).unwrap();
        let attach = ["--attach", gif.to_str().unwrap()];
        match kind {
            "selector" => {
                assert!(
                    result["notes"]
                        .to_string()
                        .contains(&format!("{name} chose {}", MODELS.join(", "))),
                    "{name}: {result}"
                );
                // With an image, the model that sees images comes first.
                let one_sees = std::fs::read_to_string(&test_config).unwrap().replace(
                    &format!("[models.\"{}\"]\n", MODELS[2]),
                    &format!(
                        "[models.\"{}\"]\ninput = [\"text\", \"image\"]\n",
                        MODELS[2]
                    ),
                );
                std::fs::write(&test_config, one_sees).unwrap();
                let result = ask(&test_config, &attach, "What shape?").await;
                let notes = result["notes"].to_string();
                assert!(
                    notes.contains(&format!(
                        "{name} chose {}, {}, {}.",
                        MODELS[2], MODELS[0], MODELS[1]
                    )) && notes.contains(&format!(
                        "{}, {} cannot take the run's attachments",
                        MODELS[0], MODELS[1]
                    )),
                    "{name}: {notes}"
                );
            }
            "prompter" => {
                let sent = mock.requests_for(MODELS[1]);
                let system = &sent.last().unwrap().body["messages"][0];
                assert!(
                    system["content"]
                        .as_str()
                        .unwrap()
                        .starts_with("Answer the question well"),
                    "{system}"
                );
                // With an image, for models that see images: placed before
                // the question, once.
                let seeing = std::fs::read_to_string(&test_config)
                    .unwrap()
                    .replace("tags = [", "input = [\"text\", \"image\"]\ntags = [");
                std::fs::write(&test_config, seeing).unwrap();
                let result = ask(&test_config, &attach, "What shape?").await;
                assert_eq!(result["kind"], "synthesis", "{name}: {result}");
                let sent = mock.requests_for(MODELS[1]);
                assert_eq!(
                    sent.last().unwrap().body["messages"][1],
                    json!({"role": "user", "content": [
                        {"type": "image_url", "image_url": {"url": format!("data:image/gif;base64,{}", b64(GIF))}},
                        {"type": "text", "text": "What shape?"}
                    ]}),
                    "{name}"
                );
            }
            "synthesizer" => {
                assert!(
                    result["notes"]
                        .to_string()
                        .contains(&format!("3 answers merged by {}", MODELS[0])),
                    "{name}: {result}"
                );
                // Answers that cite web sources go to the merge with them,
                // numbered as the run's list is.
                cite_sources(&mock);
                let result = ask(&test_config, &[], "Which language?").await;
                assert_eq!(
                    result["sources"][1]["url"], "https://b.example/go",
                    "{result}"
                );
                let merge = mock.requests_for(MODELS[0]).pop().unwrap().body;
                // The merger is an Anthropic model: its system prompt, the
                // prefix every call repeats, goes as a block marked for caching.
                let system = &merge["messages"][0]["content"];
                let system = system
                    .as_str()
                    .or_else(|| system[0]["text"].as_str())
                    .unwrap_or_else(|| panic!("{name}: {merge}"));
                assert!(
                    system.ends_with("cite no others and do not list them at the end."),
                    "{name}: {system}"
                );
                assert_eq!(
                    merge["messages"][1]["content"],
                    "Question:\nWhich language?\n\n\
                     --- Answer 1 ---\nRust.\n\nSources this answer cites:\n[1] Rust <https://a.example/rust>\n\n\
                     --- Answer 2 ---\nRust and Go.\n\nSources this answer cites:\n\
                     [1] Rust again <https://A.example/rust/?utm_source=x>\n[2] Go <https://b.example/go>\n\n\
                     --- Answer 3 ---\nGo.\n\n",
                    "{name}"
                );
            }
            _ => {}
        }
    }
}

/// Scripts the models' answers to cite web sources: the first two share one
/// (written two ways), the third cites none; the first also merges.
fn cite_sources(mock: &Mock) {
    let cite = |url: &str, title: &str| json!({"type": "url_citation", "url_citation": {"url": url, "title": title}});
    let cited = |text: &str, annotations: Value| Step::Cited {
        text: text.to_owned(),
        annotations,
    };
    mock.script(
        MODELS[0],
        [
            cited("Rust.", json!([cite("https://a.example/rust", "Rust")])),
            Step::answer("merged"),
        ],
    );
    mock.script(
        MODELS[1],
        [cited(
            "Rust and Go.",
            json!([
                cite("https://A.example/rust/?utm_source=x", "Rust again"),
                cite("https://b.example/go", "Go")
            ]),
        )],
    );
    mock.script(MODELS[2], [Step::answer("Go.")]);
}

/// `chorus ask --json --config CONFIG ARGS PROMPT`: the result.
async fn ask(config: &Path, args: &[&str], prompt: &str) -> Value {
    let output = command(&["ask", "--json", "--config", config.to_str().unwrap()])
        .args(args)
        .arg(prompt)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}: ask failed:\n{}",
        config.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_rust_plugin_builds_loads_and_runs_as_written() {
    scaffold("rust").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_python_plugin_builds_loads_and_runs_as_written() {
    scaffold("python").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_javascript_plugin_builds_loads_and_runs_as_written() {
    scaffold("js").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_new_refuses_bad_names_and_existing_folders() {
    let parent = tempfile::tempdir().unwrap();
    let output = command(&[
        "plugin", "new", "Bad_Name", "--kind", "selector", "--lang", "rust", "--dir",
    ])
    .arg(parent.path())
    .output()
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("`Bad_Name` is not a usable plugin name")
    );

    std::fs::create_dir(parent.path().join("taken")).unwrap();
    std::fs::write(parent.path().join("taken/keep.txt"), "mine").unwrap();
    let output = command(&[
        "plugin", "new", "taken", "--kind", "selector", "--lang", "js", "--dir",
    ])
    .arg(parent.path())
    .output()
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists and is not empty"));
    assert_eq!(
        std::fs::read_to_string(parent.path().join("taken/keep.txt")).unwrap(),
        "mine"
    );
}

/// docs/plugins.md shows contract 0.4 in Python and JavaScript with code
/// cut from files the suite builds: every code block whose first line is
/// `# from PATH` or `// from PATH` must be in that file, verbatim.
#[test]
fn the_docs_snippets_are_the_code_they_name() {
    let docs = std::fs::read_to_string(toolchains::root().join("docs/plugins.md")).unwrap();
    let mut checked = Vec::new();
    for block in docs.split("```").skip(1).step_by(2) {
        let mut lines = block.lines().skip(1);
        let Some(first) = lines.next() else { continue };
        let Some(path) = first
            .strip_prefix("# from ")
            .or_else(|| first.strip_prefix("// from "))
        else {
            continue;
        };
        let code: String = lines.map(|line| format!("{line}\n")).collect();
        let source = std::fs::read_to_string(toolchains::root().join(path))
            .unwrap_or_else(|e| panic!("docs/plugins.md names {path}: {e}"));
        assert!(
            source.contains(&code),
            "docs/plugins.md's snippet from {path} is not that file's code:\n{code}"
        );
        checked.push(path);
    }
    assert_eq!(checked.len(), 5, "{checked:?}");
}

/// Makes `link` a symbolic link to the directory `to`.
fn link_dir(to: &Path, link: &Path) {
    #[cfg(unix)]
    std::os::unix::fs::symlink(to, link).unwrap();
    #[cfg(windows)]
    std::os::windows::fs::symlink_dir(to, link).unwrap();
}
