//! `chorus plugin new`: writes a strategy plugin project that builds and
//! loads as written — a real strategy of the chosen kind (not a stub) in
//! Rust, Python or JavaScript, a copy of the contract it is built against,
//! a README with the build command, and a `chorus.toml` that runs it next
//! to the built-in plugins (`chorus check --config NAME/chorus.toml`).

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};

use crate::plugins::CONTRACT;

mod oci;

#[derive(Subcommand)]
pub enum Command {
    /// Write a new plugin project in ./NAME (or --dir).
    New(NewArgs),
    /// Publish a component to an OCI registry (`oci://HOST/REPO:TAG`) as a
    /// Wasm artifact; prints its digest, to pin in plugins.toml.
    Push(oci::PushArgs),
    /// Fetch a component (`oci://HOST/REPO@sha256:…` or `:TAG`) into the
    /// plugin cache; prints its digest.
    Pull(oci::RefArgs),
    /// Show what a reference holds: its digest, kind and contract version.
    Inspect(oci::RefArgs),
}

#[derive(clap::Args)]
pub struct NewArgs {
    /// The plugin's name: lowercase letters, digits and dashes.
    name: String,
    /// Which step of a pipeline it decides.
    #[arg(long, value_enum)]
    kind: Kind,
    /// The language to write it in.
    #[arg(long, value_enum)]
    lang: Lang,
    /// Where to create the project folder. Default: the current directory.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    Selector,
    Prompter,
    Synthesizer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Lang {
    Rust,
    Python,
    Js,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Selector => "selector",
            Kind::Prompter => "prompter",
            Kind::Synthesizer => "synthesizer",
        }
    }
}

/// The contract, copied into every project so it builds on its own.
const CONTRACT_WIT: &str = include_str!("../../../wit/0.6.0/strategy.wit");

pub async fn run(command: Command, config: Option<&std::path::Path>) -> ExitCode {
    match command {
        Command::New(args) => run_new(args),
        Command::Push(args) => oci::push(args, config).await,
        Command::Pull(args) => oci::pull(args, config).await,
        Command::Inspect(args) => oci::inspect(args, config).await,
    }
}

fn run_new(args: NewArgs) -> ExitCode {
    match new(&args) {
        Ok(dir) => {
            println!(
                "Created the {} {} plugin `{}` in {}.",
                lang_name(args.lang),
                args.kind.as_str(),
                args.name,
                dir.display()
            );
            println!(
                "Next: see {}/README.md to build it, then `chorus check --config {}/chorus.toml`.",
                dir.display(),
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("chorus: {message}");
            ExitCode::from(2)
        }
    }
}

fn lang_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
    }
}

fn new(args: &NewArgs) -> Result<PathBuf, String> {
    check_name(&args.name)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("."))
        .join(&args.name);
    if dir.exists() && std::fs::read_dir(&dir).map_or(true, |mut d| d.next().is_some()) {
        return Err(format!(
            "{} already exists and is not empty; choose another name or --dir",
            dir.display()
        ));
    }
    for (path, text) in files(args) {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(dir)
}

fn check_name(name: &str) -> Result<(), String> {
    let valid = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a usable plugin name: use lowercase letters, digits and dashes, starting with a letter (e.g. `my-selector`)"
        ))
    }
}

/// The project's files: (path in the project, contents).
fn files(args: &NewArgs) -> Vec<(&'static str, String)> {
    let kind = args.kind;
    let fill = |template: &str| {
        template
            .replace("{{name}}", &args.name)
            .replace("{{kind}}", kind.as_str())
    };
    let source = match (args.lang, kind) {
        (Lang::Rust, Kind::Selector) => include_str!("plugin/templates/rust-selector.rs"),
        (Lang::Rust, Kind::Prompter) => include_str!("plugin/templates/rust-prompter.rs"),
        (Lang::Rust, Kind::Synthesizer) => include_str!("plugin/templates/rust-synthesizer.rs"),
        (Lang::Python, Kind::Selector) => include_str!("plugin/templates/python-selector.py"),
        (Lang::Python, Kind::Prompter) => include_str!("plugin/templates/python-prompter.py"),
        (Lang::Python, Kind::Synthesizer) => include_str!("plugin/templates/python-synthesizer.py"),
        (Lang::Js, Kind::Selector) => include_str!("plugin/templates/js-selector.js"),
        (Lang::Js, Kind::Prompter) => include_str!("plugin/templates/js-prompter.js"),
        (Lang::Js, Kind::Synthesizer) => include_str!("plugin/templates/js-synthesizer.js"),
    };
    let mut files = vec![
        ("wit/strategy.wit", CONTRACT_WIT.to_owned()),
        ("chorus.toml", chorus_toml(args)),
        ("README.md", readme(args)),
    ];
    match args.lang {
        Lang::Rust => {
            files.push((
                "Cargo.toml",
                fill(include_str!("plugin/templates/rust-Cargo.toml")),
            ));
            files.push(("src/lib.rs", fill(source)));
            files.push((".gitignore", "/target\n".to_owned()));
        }
        Lang::Python => {
            files.push(("app.py", fill(source)));
            files.push((".gitignore", format!("/{}.wasm\n__pycache__/\n", args.name)));
        }
        Lang::Js => {
            files.push(("plugin.js", fill(source)));
            files.push((
                "package.json",
                fill(include_str!("plugin/templates/js-package.json")),
            ));
            files.push((
                ".gitignore",
                format!("/{}.wasm\nnode_modules/\n", args.name),
            ));
        }
    }
    files
}

/// Where the build puts the component, relative to the project.
fn artifact(args: &NewArgs) -> String {
    match args.lang {
        Lang::Rust => format!(
            "target/wasm32-wasip2/release/{}.wasm",
            args.name.replace('-', "_")
        ),
        Lang::Python | Lang::Js => format!("{}.wasm", args.name),
    }
}

fn build_command(args: &NewArgs) -> String {
    let world = format!("{}-plugin", args.kind.as_str());
    match args.lang {
        Lang::Rust => {
            "rustup target add wasm32-wasip2   # once\ncargo build --release --target wasm32-wasip2"
                .to_owned()
        }
        Lang::Python => format!(
            "pip install componentize-py==0.25.1   # once\ncomponentize-py -d wit -w {world} componentize app -o {}.wasm",
            args.name
        ),
        Lang::Js => "npm install   # once: componentize-js 0.23.0\nnpm run build".to_owned(),
    }
}

fn chorus_toml(args: &NewArgs) -> String {
    let name = &args.name;
    let kind = args.kind;
    let memory = match args.lang {
        // CPython and SpiderMonkey need room to start.
        Lang::Python | Lang::Js => "max_memory_mib = 64\n",
        Lang::Rust => "",
    };
    let role = |role: Kind, builtin: &str| -> (String, String) {
        if role == kind {
            (name.clone(), String::new())
        } else {
            (builtin.to_owned(), builtin_plugin(builtin))
        }
    };
    let (selector, selector_table) = role(Kind::Selector, "panel");
    let (prompter, prompter_table) = role(Kind::Prompter, "passthrough");
    let (synthesizer, synthesizer_table) = role(Kind::Synthesizer, "synthesize");
    format!(
        r#"# Try {name}: `chorus check --config chorus.toml`, then
# `chorus ask --config chorus.toml "a question"` (with OPENROUTER_API_KEY set).
# The {kind} step is {name}; the other steps are chorus's built-in plugins.
default_pipeline = "{name}"

[providers.openrouter]
base_url = "https://openrouter.ai/api/v1"
api_key_env = "OPENROUTER_API_KEY"

[models."anthropic/claude-sonnet-4.5"]
context_window = 200000
tags = ["reasoning", "writing"]

[models."openai/gpt-5"]
context_window = 400000
tags = ["reasoning", "code"]

[models."google/gemini-2.5-pro"]
context_window = 1048576
tags = ["long-context"]

[plugins.{name}]
path = "{artifact}"
{memory}settings = {{}}
{selector_table}{prompter_table}{synthesizer_table}
[pipelines.{name}]
description = "A pipeline whose {kind} is {name}."
selector = "{selector}"
prompter = "{prompter}"
synthesizer = "{synthesizer}"
"#,
        kind = kind.as_str(),
        artifact = artifact(args),
    )
}

fn builtin_plugin(role: &str) -> String {
    match role {
        "panel" => r#"
[plugins.panel]
builtin = "static-panel"
settings = { panel = ["anthropic/claude-sonnet-4.5", "openai/gpt-5", "google/gemini-2.5-pro"], synthesizers = ["anthropic/claude-sonnet-4.5"] }
"#
        .to_owned(),
        other => format!("\n[plugins.{other}]\nbuiltin = \"{other}\"\n"),
    }
}

fn readme(args: &NewArgs) -> String {
    let name = &args.name;
    let kind = args.kind.as_str();
    let lang = lang_name(args.lang);
    let source = match args.lang {
        Lang::Rust => "src/lib.rs",
        Lang::Python => "app.py",
        Lang::Js => "plugin.js",
    };
    format!(
        r#"# {name}

A chorus {kind} plugin in {lang}, built against the plugin contract
`chorus:strategy@{CONTRACT}` (a copy is in `wit/strategy.wit`, world
`{kind}-plugin`). What it does and its settings are described at the top of
`{source}`.

## Build

```sh
{build}
```

This writes `{artifact}`.

## Try it

```sh
chorus check --config chorus.toml        # loads it and validates its settings
OPENROUTER_API_KEY=sk-or-... chorus ask --config chorus.toml "Why is the sky blue?"
```

`chorus.toml` runs it as the {kind} of a pipeline named `{name}`, with
chorus's built-in plugins for the other steps. To use it in your own
configuration, copy its `[plugins.{name}]` table (the path is relative to
the configuration file).

A plugin runs sandboxed: no files, network or environment, fixed clocks, a
CPU budget (`cpu_time`), a wall-clock budget outside model calls
(`wall_time`) and a memory cap (`max_memory_mib`). It asks the host for
model calls (`host.complete`), the catalog (`host.models`) and what the run
has left (`host.budget`). See chorus's docs/plugins.md for the whole contract.
"#,
        build = build_command(args),
        artifact = artifact(args),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_usable_as_file_crate_and_table_names() {
        for good in ["my-plugin", "a", "top3"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "My", "-x", "x-", "a b", "a_b", "3d", "ä"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn projects_get_the_contract_chorus_speaks() {
        assert!(
            CONTRACT_WIT.contains(&format!("\npackage chorus:strategy@{CONTRACT};\n")),
            "the scaffolder's wit/ copy is not chorus:strategy@{CONTRACT}"
        );
    }

    #[test]
    fn every_template_is_filled_in() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            for kind in [Kind::Selector, Kind::Prompter, Kind::Synthesizer] {
                let args = NewArgs {
                    name: "my-plugin".into(),
                    kind,
                    lang,
                    dir: None,
                };
                for (path, text) in files(&args) {
                    assert!(
                        !text.contains("{{"),
                        "{lang:?} {kind:?} {path}: a placeholder is left"
                    );
                }
            }
        }
    }
}
