//! `chorus check`: validates the configuration, loads every plugin, fetches
//! the providers' model lists, and says what is there — including every
//! model id (in `[models]` and in plugin settings) that its provider does
//! not list, with the closest ids it does. Exits 2 for an invalid
//! configuration, 1 for unknown model ids, 0 otherwise.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;

use crate::llm::{PriceSource, closest, show_price};
use crate::pipeline::Runner;
use crate::plugins::Source;

pub async fn run(config: Option<&Path>, overrides: &crate::config::Overrides) -> ExitCode {
    let chorus = match crate::config::Loaded::discover(config)
        .and_then(|loaded| loaded.with_overrides(overrides))
        .and_then(Runner::load)
    {
        Ok(chorus) => chorus,
        Err(e) => {
            eprintln!("chorus: {e}");
            return ExitCode::from(2);
        }
    };
    let statuses = chorus.llm.load_catalogs(false).await;
    let mut out = std::io::stdout().lock();
    let written = report(&chorus, &mut out).and_then(|usable| {
        let flagged = catalogs(&chorus, &statuses, &mut out)?;
        Ok(usable && flagged == 0)
    });
    match written {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chorus: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The providers' lists, and every model id they do not list. Returns how
/// many ids were flagged.
fn catalogs(
    chorus: &Runner,
    statuses: &[crate::llm::CatalogStatus],
    out: &mut impl Write,
) -> std::io::Result<usize> {
    writeln!(out, "\nmodel lists ({{base_url}}/models):")?;
    for (name, provider) in &chorus.loaded.config.providers {
        let state = match statuses.iter().find(|s| &s.provider == name) {
            _ if !provider.catalog => "not fetched (catalog = false)".to_owned(),
            Some(status) => match &status.result {
                Ok(catalog) => catalog.describe(),
                Err(why) => format!("unavailable: {why}"),
            },
            None => "not fetched".to_owned(),
        };
        writeln!(out, "  {name:<16} {state}")?;
    }
    let models = chorus.llm.models();
    let mut flagged = Vec::new();
    for model in models.values() {
        if model.listed != Some(false) {
            continue;
        }
        let listed = listed_ids(statuses, &model.provider);
        flagged.push((
            format!("models.\"{}\"", model.id),
            model.id.clone(),
            format!(
                "not listed by provider `{}`; {}",
                model.provider,
                super::model_uses::describe(&chorus.loaded.config, &model.id)
            ),
            closest(&model.id, listed.iter().copied(), 3),
        ));
    }
    for (plugin, spec) in &chorus.loaded.config.plugins {
        let settings = serde_json::to_value(&spec.settings).unwrap_or(Value::Null);
        let mut ids = Vec::new();
        model_ids(&settings, &format!("plugins.{plugin}.settings"), &mut ids);
        for (key, id) in ids {
            if models.contains_key(&id) {
                continue; // checked above, as a model of [models]
            }
            let mut candidates: Vec<&str> = models.keys().map(String::as_str).collect();
            for status in statuses {
                candidates.extend(listed_ids(statuses, &status.provider));
            }
            candidates.sort_unstable();
            candidates.dedup();
            flagged.push((
                key,
                id.clone(),
                "not in [models], so no plugin may use it".to_owned(),
                closest(&id, candidates.into_iter(), 3),
            ));
        }
    }
    if flagged.is_empty() {
        return Ok(0);
    }
    writeln!(out, "\nunknown model ids:")?;
    for (key, id, why, near) in &flagged {
        let near = if near.is_empty() {
            String::new()
        } else {
            format!("; closest: {}", near.join(", "))
        };
        // An id given on the command line is not in the file: the line the
        // lookup would find is its nearest table, not the id.
        let given = chorus.loaded.overrides.model_ids().contains(&id.as_str());
        let at = if given {
            format!("(--models / ${}) ", crate::config::MODELS_ENV)
        } else {
            chorus
                .loaded
                .position(key)
                .map(|(line, _)| format!("{}:{line}: ", chorus.loaded.origin))
                .unwrap_or_default()
        };
        writeln!(out, "  {at}`{key}`: `{id}` is {why}{near}")?;
    }
    let same_url = if chorus.loaded.overrides.base_url.is_some() {
        " (with the same --base-url)"
    } else {
        ""
    };
    writeln!(
        out,
        "\n{} model id(s) will fail as written; fix them, or run `chorus models QUERY`{same_url} to search the lists",
        flagged.len()
    )?;
    Ok(flagged.len())
}

fn listed_ids<'a>(statuses: &'a [crate::llm::CatalogStatus], provider: &str) -> Vec<&'a str> {
    statuses
        .iter()
        .filter(|s| s.provider == provider)
        .filter_map(|s| s.result.as_ref().ok())
        .flat_map(|c| c.models.iter().map(|m| m.id.as_str()))
        .collect()
}

/// Strings in plugin settings that look like model ids (`vendor/model`),
/// with the key where each is written (`...panel[2]`).
fn model_ids(value: &Value, key: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::String(s)
            if s.contains('/')
                && !s.contains("://")
                && !s.chars().any(char::is_whitespace)
                && s.len() < 200 =>
        {
            out.push((key.to_owned(), s.clone()));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                model_ids(item, &format!("{key}[{i}]"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                model_ids(v, &format!("{key}.{k}"), out);
            }
        }
        _ => {}
    }
}

/// Writes what the configuration holds. Returns whether any provider that a
/// model uses can be called (its key, when it needs one, is set and usable).
fn report(chorus: &Runner, out: &mut impl Write) -> std::io::Result<bool> {
    let config = &chorus.loaded.config;
    writeln!(out, "config: {} (ok)", chorus.loaded.origin)?;
    writeln!(out, "  read because: {}", chorus.loaded.source)?;
    super::describe_overrides(&chorus.loaded.overrides, out)?;
    writeln!(out, "store: {}", crate::store::probe(&chorus.loaded))?;
    writeln!(
        out,
        "telemetry: {}",
        crate::telemetry::describe(&chorus.loaded)
    )?;
    writeln!(
        out,
        "response cache: {}",
        crate::respcache::ResponseCache::describe(&chorus.loaded.config)
    )?;
    writeln!(
        out,
        "contract: chorus:strategy@{}",
        crate::plugins::CONTRACT
    )?;

    writeln!(out, "\nproviders:")?;
    let problems = chorus.llm.key_problems();
    for (name, provider) in &config.providers {
        let problem = problems.iter().find(|k| &k.provider == name);
        let key = match (&provider.api_key_env, problem) {
            (None, _) => "no API key".to_owned(),
            (Some(_), Some(p)) if p.unusable.is_none() => {
                format!(
                    "key: ${} NOT SET — calls will fail",
                    p.var.replace(" or ", " or $")
                )
            }
            (Some(_), Some(p)) => format!("key: ${} set but UNUSABLE — calls will fail", p.var),
            (Some(configured), None) => match chorus.llm.key_var(name) {
                Some(used) if used != configured => {
                    format!("key: ${used} (set; used in place of ${configured})")
                }
                Some(used) => format!("key: ${used} (set)"),
                None => format!("key: ${configured} (set)"),
            },
        };
        writeln!(
            out,
            "  {name:<16} {}  max {} in flight  {key}",
            provider.base_url, provider.max_concurrency
        )?;
    }

    for (name, where_) in chorus.llm.providers_inside() {
        writeln!(
            out,
            "  note: {name} is inside a network ({where_}) and fetches URL attachments itself: a URL whose host is an address inside a network is refused before it reaches it (limits.fetch_private_urls = false); a host name is resolved by {name}, not by chorus: set providers.{name}.fetch_urls = false to hold names to the same rule"
        )?;
    }

    writeln!(out, "\nmodels:")?;
    for model in chorus.llm.models().values() {
        let window = model
            .context_window
            .map(|w| format!("  {w} tokens"))
            .unwrap_or_default();
        let prices = match model.prices_source {
            None => String::new(),
            Some(source) => format!(
                "  {}/{} per M{}",
                show_price(model.input_price),
                show_price(model.output_price),
                if source == PriceSource::Catalog {
                    " (from the catalog)"
                } else {
                    ""
                }
            ),
        };
        writeln!(out, "  {:<40} {}{window}{prices}", model.id, model.provider)?;
    }

    writeln!(out, "\nplugins:")?;
    for plugin in chorus.registry.iter() {
        let source = match plugin.source {
            Source::Cached => "cached",
            Source::Compiled => "compiled",
            Source::Precompiled => "precompiled",
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
    let experiments = &chorus.loaded.config.experiments;
    if !experiments.is_empty() {
        writeln!(out, "\nexperiments:")?;
    }
    for (name, experiment) in experiments {
        match &experiment.shadow {
            Some(shadow) => writeln!(
                out,
                "  {name}: `{}` judged by {} against `{}`'s merge on {:.0}% of its runs, ${} a day",
                shadow.synthesizer,
                shadow.judge,
                experiment.pipeline.as_deref().unwrap_or(""),
                shadow.share * 100.0,
                shadow.budget_usd_per_day
            )?,
            None => {
                let variants: Vec<String> = experiment
                    .variants
                    .iter()
                    .map(|(variant, weight)| format!("{variant} ({weight})"))
                    .collect();
                let mode = match (&experiment.metric, experiment.adaptive) {
                    (Some(metric), true) => format!("adaptive on {metric}"),
                    (Some(metric), false) => format!("fixed weights, rated on {metric}"),
                    (None, _) => "fixed weights".to_owned(),
                };
                writeln!(out, "  {name}: {} · {mode}", variants.join(", "))?;
            }
        }
    }
    for problem in &problems {
        writeln!(
            out,
            "\nwarning: {problem}; the configuration is valid, but calls to `{}` will fail until it is fixed",
            problem.provider
        )?;
    }
    let models = chorus.llm.models();
    let usable = models
        .values()
        .any(|m| !problems.iter().any(|p| p.provider == m.provider));
    if !usable {
        writeln!(
            out,
            "\nerror: no provider that a model uses can be called; every run would fail until a key above is fixed"
        )?;
    }
    Ok(usable)
}
