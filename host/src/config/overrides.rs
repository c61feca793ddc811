//! The configuration as the command line and the environment change it —
//! `--models`, `--synthesizer`, `--pipeline`, `--base-url` and their
//! `CHORUS_*` variables — for one-line installs whose only settings are an
//! MCP client's `args` and `env`. Applied to whichever configuration was
//! read (built-in or a file) and again on every reload, then validated like
//! the file itself.

use super::{Config, Invalid, Model, PluginSpec};

pub const MODELS_ENV: &str = "CHORUS_MODELS";
pub const SYNTHESIZER_ENV: &str = "CHORUS_SYNTHESIZER";
pub const PIPELINE_ENV: &str = "CHORUS_PIPELINE";
pub const BASE_URL_ENV: &str = "CHORUS_BASE_URL";

/// The name of the selector added for a pipeline whose own selector is not
/// a `static-panel` (which cannot take a panel).
pub const PANEL_PLUGIN: &str = "command-line-panel";

/// What the command line or the environment says; empty fields change nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// The panel of the pipeline's selector.
    pub models: Vec<String>,
    /// Its synthesizer models, tried in order.
    pub synthesizers: Vec<String>,
    /// The pipeline whose panel changes; it also becomes the default one.
    pub pipeline: Option<String>,
    /// A new `base_url` for the (only) provider.
    pub base_url: Option<String>,
    /// Directories added to `limits.attachment_dirs` (`serve --allow-dir`).
    pub attachment_dirs: Vec<std::path::PathBuf>,
}

/// A comma-separated list of model ids: `a, b,c` -> `[a, b, c]`.
pub fn model_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
        .collect()
}

impl Overrides {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Every model id named (panel and synthesizers), each once.
    pub fn model_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = Vec::new();
        for id in self.models.iter().chain(&self.synthesizers) {
            if !ids.contains(&id.as_str()) {
                ids.push(id);
            }
        }
        ids
    }

    /// Changes `config`; `(key, message)` when it cannot, the message saying
    /// which flag or variable to fix.
    pub fn apply(&self, config: &mut Config) -> Result<(), Invalid> {
        for dir in &self.attachment_dirs {
            let dir = std::path::absolute(dir).map_err(|e| {
                (
                    "limits.attachment_dirs".to_owned(),
                    format!("--allow-dir {}: {e}", dir.display()),
                )
            })?;
            config.limits.attachment_dirs.push(dir);
        }
        if let Some(url) = &self.base_url {
            set_base_url(config, url)?;
        }
        let pipeline = match &self.pipeline {
            Some(name) if !config.pipelines.contains_key(name) => {
                let known: Vec<&str> = config.pipelines.keys().map(String::as_str).collect();
                return Err((
                    "pipelines".into(),
                    format!(
                        "--pipeline / ${PIPELINE_ENV}: there is no pipeline `{name}` (there are: {})",
                        known.join(", ")
                    ),
                ));
            }
            Some(name) => {
                config.default_pipeline = Some(name.clone());
                Some(name.clone())
            }
            None => config.default_pipeline.clone().or_else(|| {
                (config.pipelines.len() == 1)
                    .then(|| config.pipelines.keys().next().cloned())
                    .flatten()
            }),
        };
        if self.models.is_empty() && self.synthesizers.is_empty() {
            return Ok(());
        }
        let Some(pipeline) = pipeline else {
            return Err((
                "default_pipeline".into(),
                format!(
                    "--models / --synthesizer change one pipeline's panel, but the configuration names no default_pipeline: choose one with --pipeline or ${PIPELINE_ENV}"
                ),
            ));
        };
        add_models(config, &self.model_ids())?;
        set_panel(config, &pipeline, &self.models, &self.synthesizers)
    }
}

fn set_base_url(config: &mut Config, url: &str) -> Result<(), Invalid> {
    let parsed = url::Url::parse(url).map_err(|e| {
        (
            "providers".to_owned(),
            format!(
                "--base-url / ${BASE_URL_ENV}: `{url}` is not a URL ({e}); write it like https://host/v1"
            ),
        )
    })?;
    let mut providers = config.providers.iter_mut();
    match (providers.next(), providers.next()) {
        (Some((_, provider)), None) => {
            provider.base_url = parsed;
            Ok(())
        }
        _ => {
            let names: Vec<&str> = config.providers.keys().map(String::as_str).collect();
            Err((
                "providers".into(),
                format!(
                    "--base-url / ${BASE_URL_ENV} points the one provider elsewhere, but this configuration has {} ({}): set base_url in the file instead",
                    names.len(),
                    names.join(", ")
                ),
            ))
        }
    }
}

/// Adds the ids that `[models]` lacks, served by the only provider: what is
/// left out (context window, prices) comes from its model list.
fn add_models(config: &mut Config, ids: &[&str]) -> Result<(), Invalid> {
    for id in ids {
        if config.models.contains_key(*id) {
            continue;
        }
        if config.providers.len() != 1 {
            let names: Vec<&str> = config.providers.keys().map(String::as_str).collect();
            return Err((
                "models".into(),
                format!(
                    "--models / --synthesizer: `{id}` is not in [models], and with several providers ({}) chorus cannot tell which serves it: add [models.\"{id}\"] with its provider",
                    names.join(", ")
                ),
            ));
        }
        config.models.insert((*id).to_owned(), Model::default());
    }
    Ok(())
}

/// The pipeline's selector gets the panel: a `static-panel` in place (every
/// pipeline sharing it follows), any other kind replaced, for this pipeline,
/// by a `static-panel` of its own.
fn set_panel(
    config: &mut Config,
    pipeline: &str,
    models: &[String],
    synthesizers: &[String],
) -> Result<(), Invalid> {
    let list = |ids: &[String]| toml::Value::Array(ids.iter().cloned().map(Into::into).collect());
    let selector = config.pipelines[pipeline].selector.clone();
    let spec = config.plugins.get_mut(&selector);
    if let Some(spec) = spec.filter(|s| s.builtin.as_deref() == Some("static-panel")) {
        let before = super::follow::Before::of(&spec.settings);
        if !models.is_empty() {
            spec.settings.insert("panel".into(), list(models));
        }
        if !synthesizers.is_empty() {
            spec.settings
                .insert("synthesizers".into(), list(synthesizers));
        }
        let now = super::follow::Before::of(&spec.settings);
        super::follow::follow(config, &selector, &before, models, &now.synthesizers);
        return Ok(());
    }
    if models.is_empty() {
        return Err((
            format!("pipelines.{pipeline}.selector"),
            format!(
                "--synthesizer alone changes a `static-panel` selector's synthesizers, but pipeline `{pipeline}` selects with `{selector}`: give --models too"
            ),
        ));
    }
    let mut spec: PluginSpec = toml::from_str("builtin = \"static-panel\"")
        .expect("a static-panel plugin table deserializes");
    spec.settings.insert("panel".into(), list(models));
    let synthesizers = if synthesizers.is_empty() {
        &models[..1]
    } else {
        synthesizers
    };
    spec.settings
        .insert("synthesizers".into(), list(synthesizers));
    config.plugins.insert(PANEL_PLUGIN.into(), spec);
    if let Some(p) = config.pipelines.get_mut(pipeline) {
        p.selector = PANEL_PLUGIN.into();
    }
    Ok(())
}
