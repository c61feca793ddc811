//! `chorus check`: validates the configuration, loads every plugin, and
//! says what is there. Exits non-zero with the precise problem otherwise.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::pipeline::Runner;
use crate::plugins::Source;

pub fn run(config: Option<&Path>) -> ExitCode {
    let chorus = match crate::config::Loaded::discover(config).and_then(Runner::load) {
        Ok(chorus) => chorus,
        Err(e) => {
            eprintln!("chorus: {e}");
            return ExitCode::from(2);
        }
    };
    match report(&chorus, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chorus: {e}");
            ExitCode::FAILURE
        }
    }
}

fn report(chorus: &Runner, out: &mut impl Write) -> std::io::Result<()> {
    let config = &chorus.loaded.config;
    writeln!(out, "config: {} (ok)", chorus.loaded.origin)?;
    match crate::store::path_for(&chorus.loaded) {
        _ if !config.store.enabled => writeln!(
            out,
            "store: off ([store] enabled = false): runs are kept in memory only"
        )?,
        Ok(path) => writeln!(out, "store: {}", path.display())?,
        Err(e) => writeln!(out, "store: {e}")?,
    }
    writeln!(
        out,
        "contract: chorus:strategy@{}",
        crate::plugins::CONTRACT
    )?;

    writeln!(out, "\nproviders:")?;
    let missing = chorus.llm.missing_keys();
    for (name, provider) in &config.providers {
        let key = match &provider.api_key_env {
            None => "no API key".to_owned(),
            Some(var) if missing.iter().any(|(p, _)| p == name) => {
                format!("key: ${var} NOT SET — calls will fail")
            }
            Some(var) => format!("key: ${var} (set)"),
        };
        writeln!(
            out,
            "  {name:<16} {}  max {} in flight  {key}",
            provider.base_url, provider.max_concurrency
        )?;
    }

    writeln!(out, "\nmodels:")?;
    for model in chorus.llm.catalog() {
        let window = model
            .context_window
            .map(|w| format!("  {w} tokens"))
            .unwrap_or_default();
        writeln!(out, "  {:<40} {}{window}", model.id, model.provider)?;
    }

    writeln!(out, "\nplugins:")?;
    for plugin in chorus.registry.iter() {
        let source = match plugin.source {
            Source::Cached => "cached",
            Source::Compiled => "compiled",
        };
        writeln!(
            out,
            "  {:<20} {:<12} chorus:strategy@{:<8} {}  ({source}, {:.1} ms)",
            plugin.name,
            plugin.kind.to_string(),
            plugin.contract,
            plugin.origin,
            plugin.load_time.as_secs_f64() * 1000.0
        )?;
    }

    writeln!(out, "\npipelines:")?;
    let default = chorus.loaded.default_pipeline();
    for (name, p) in chorus.pipelines() {
        let mark = if Some(name.as_str()) == default {
            " (default)"
        } else {
            ""
        };
        writeln!(
            out,
            "  {name}{mark}: {} -> {} -> fan-out -> {}",
            p.selector, p.prompter, p.synthesizer
        )?;
        for (option, spec) in &p.options {
            let default = spec
                .default
                .as_ref()
                .map(|d| format!(", default {d}"))
                .unwrap_or_default();
            writeln!(
                out,
                "      option {option} ({}{default}): {}",
                spec.kind.as_str(),
                spec.description
            )?;
        }
    }
    if !missing.is_empty() {
        let vars: Vec<_> = missing.iter().map(|(_, v)| format!("${v}")).collect();
        writeln!(
            out,
            "\nwarning: {} not set; the configuration is valid, but calls will fail until it is",
            vars.join(", ")
        )?;
    }
    Ok(())
}
