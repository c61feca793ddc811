//! Fallback models: `[models."x"] fallbacks = ["y", "z"]`, overridden per
//! pipeline by `[pipelines.P] fallbacks = { "x" = [...] }`. This module
//! checks them and resolves the chains a pipeline's runs use; the run's
//! context walks them (pipeline/context/fallback.rs).

use std::collections::HashMap;

use super::{Config, Invalid};

/// Every chain names models of [models], none twice, and not the model
/// itself: `Err((key, message))` for the first that does not.
pub(super) fn check(config: &Config) -> Result<(), Invalid> {
    for (id, model) in &config.models {
        chain(
            config,
            &format!("models.\"{id}\".fallbacks"),
            id,
            &model.fallbacks,
        )?;
    }
    for (name, pipeline) in &config.pipelines {
        for (id, fallbacks) in &pipeline.fallbacks {
            let key = format!("pipelines.{name}.fallbacks.\"{id}\"");
            if !config.models.contains_key(id) {
                return Err((key, format!("`{id}` is not a model of [models]")));
            }
            chain(config, &key, id, fallbacks)?;
        }
    }
    Ok(())
}

fn chain(config: &Config, key: &str, id: &str, fallbacks: &[String]) -> Result<(), Invalid> {
    for (i, fallback) in fallbacks.iter().enumerate() {
        if fallback == id {
            return Err((key.to_owned(), format!("`{id}` cannot be its own fallback")));
        }
        if fallbacks[..i].contains(fallback) {
            return Err((key.to_owned(), format!("`{fallback}` is listed twice")));
        }
        if !config.models.contains_key(fallback) {
            return Err((
                key.to_owned(),
                format!(
                    "`{fallback}` is not a model of [models]: add it there to use it as a fallback"
                ),
            ));
        }
    }
    Ok(())
}

/// The chains a run of `pipeline` uses, by model: the pipeline's own where
/// it sets one, else the model's. Models without fallbacks are left out.
pub fn chains(config: &Config, pipeline: &str) -> HashMap<String, Vec<String>> {
    let overrides = config.pipelines.get(pipeline).map(|p| &p.fallbacks);
    config
        .models
        .iter()
        .filter_map(|(id, model)| {
            let chain = overrides
                .and_then(|o| o.get(id))
                .unwrap_or(&model.fallbacks);
            (!chain.is_empty()).then(|| (id.clone(), chain.clone()))
        })
        .collect()
}
