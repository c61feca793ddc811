//! The whole configuration's check: each section's own `check` (in its
//! file), then what crosses sections — models → providers, pipelines →
//! plugins and models, a pipeline's times against `[limits]` and
//! `[fan_out]`, fallbacks (`fallbacks.rs`), clients → pipelines
//! (`clients.rs`), the default pipeline. Each failure is an [`Invalid`];
//! the caller adds the file and position.

use std::time::Duration;

use super::check::Invalid;
use super::{Config, MergeReserve, show_duration};

/// How much longer than the longest run an MCP task must live.
const TASK_TTL_MARGIN: Duration = Duration::from_secs(30);

pub(super) fn validate(config: &Config) -> Result<(), Invalid> {
    if config.providers.is_empty() {
        return Err((
            "providers".into(),
            "define at least one provider, e.g. [providers.openrouter]".into(),
        ));
    }
    if config.pipelines.is_empty() {
        return Err((
            "pipelines".into(),
            "define at least one pipeline, e.g. [pipelines.ask]".into(),
        ));
    }
    config.limits.check()?;
    config.cache.check()?;
    config.fan_out.check()?;
    config.http.check()?;
    super::clients::check(config)?;
    config.store.check()?;
    for (name, metric) in &config.metrics {
        metric.check(name)?;
    }
    for (name, provider) in &config.providers {
        provider.check(name)?;
    }
    for (id, model) in &config.models {
        model_provider(config, id, model.provider.as_deref())?;
        model.check(id)?;
    }
    for (name, plugin) in &config.plugins {
        plugin.check(name)?;
    }
    super::fallbacks::check(config)?;
    super::telemetry::check(config)?;
    for (name, pipeline) in &config.pipelines {
        pipeline.check(name)?;
        pipeline_references(config, name)?;
        pipeline_times(config, name)?;
    }
    super::experiments::check(config)?;
    if let Some(default) = &config.default_pipeline
        && !config.pipelines.contains_key(default)
    {
        return Err((
            "default_pipeline".into(),
            format!(
                "no pipeline named `{default}` (defined: {})",
                names(config.pipelines.keys())
            ),
        ));
    }
    Ok(())
}

/// The names of a section's entries, for a message: `a, b` or `none`.
pub(super) fn names<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let list: Vec<&str> = keys.map(String::as_str).collect();
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    }
}

/// A model's provider is one of [providers], and may be left out only
/// when there is one.
fn model_provider(config: &Config, id: &str, provider: Option<&str>) -> Result<(), Invalid> {
    match provider {
        Some(p) if !config.providers.contains_key(p) => Err((
            format!("models.\"{id}\".provider"),
            format!(
                "no provider named `{p}` (defined: {})",
                names(config.providers.keys())
            ),
        )),
        None if config.providers.len() > 1 => Err((
            format!("models.\"{id}\".provider"),
            format!(
                "required when there is more than one provider (defined: {})",
                names(config.providers.keys())
            ),
        )),
        _ => Ok(()),
    }
}

/// A pipeline's plugins are of [plugins], its describer of [models].
fn pipeline_references(config: &Config, name: &str) -> Result<(), Invalid> {
    let pipeline = &config.pipelines[name];
    for (role, plugin) in [
        ("selector", &pipeline.selector),
        ("prompter", &pipeline.prompter),
        ("synthesizer", &pipeline.synthesizer),
    ] {
        if !config.plugins.contains_key(plugin) {
            return Err((
                format!("pipelines.{name}.{role}"),
                format!(
                    "no plugin named `{plugin}` (defined: {})",
                    names(config.plugins.keys())
                ),
            ));
        }
    }
    if let Some(describer) = &pipeline.describer
        && !config.models.contains_key(describer)
    {
        return Err((
            format!("pipelines.{name}.describer"),
            format!("`{describer}` is not a model of [models]"),
        ));
    }
    Ok(())
}

/// A pipeline's run fits in an MCP task's life, and leaves its fan-out
/// time after the merge's reserve.
fn pipeline_times(config: &Config, name: &str) -> Result<(), Invalid> {
    let pipeline = &config.pipelines[name];
    let limits = &config.limits;
    let run_timeout = pipeline.run_timeout.unwrap_or(limits.run_timeout);
    // A task that expires mid-run is failed ("task expired") while its
    // run is recorded as cancelled: the task must outlive every run.
    if limits.task_ttl < run_timeout + TASK_TTL_MARGIN {
        let run_key = match pipeline.run_timeout {
            Some(_) => format!("pipelines.{name}.run_timeout"),
            None => "limits.run_timeout".to_owned(),
        };
        return Err((
            "limits.task_ttl".into(),
            format!(
                "is {}, shorter than {run_key} ({}) plus {} to finish: an MCP task would expire while its run works; \
                 set limits.task_ttl to at least {}, or shorten {run_key}",
                show_duration(limits.task_ttl),
                show_duration(run_timeout),
                show_duration(TASK_TTL_MARGIN),
                show_duration(run_timeout + TASK_TTL_MARGIN),
            ),
        ));
    }
    let (reserve_key, reserve) = match pipeline.fan_out.merge_reserve {
        Some(r) => (format!("pipelines.{name}.fan_out.merge_reserve"), r),
        None => (
            "fan_out.merge_reserve".to_owned(),
            config.fan_out.merge_reserve,
        ),
    };
    if let MergeReserve::Fixed(d) = reserve
        && d >= run_timeout
    {
        return Err((
            reserve_key,
            format!(
                "{} leaves pipeline `{name}` no time for its fan-out: its run_timeout is {}; \
                 use less, or a share such as \"25%\"",
                show_duration(d),
                show_duration(run_timeout)
            ),
        ));
    }
    Ok(())
}
