//! For `chorus check`: which pipelines use a model id — so an id the
//! provider (or the gateway in front of it) does not list is reported with
//! the pipelines that would fail on it, not as a problem of the whole
//! configuration.

use crate::config::Config;

/// The pipelines whose plugins name `id` in their settings (a panel, a
/// synthesizer list, a single model), sorted.
pub fn pipelines_naming(config: &Config, id: &str) -> Vec<String> {
    fn names(value: &toml::Value, id: &str) -> bool {
        match value {
            toml::Value::String(s) => s == id,
            toml::Value::Array(items) => items.iter().any(|v| names(v, id)),
            toml::Value::Table(table) => table.values().any(|v| names(v, id)),
            _ => false,
        }
    }
    let plugin_names = |plugin: &str| {
        config
            .plugins
            .get(plugin)
            .is_some_and(|spec| spec.settings.values().any(|v| names(v, id)))
    };
    config
        .pipelines
        .iter()
        .filter(|(_, p)| {
            [&p.selector, &p.prompter, &p.synthesizer]
                .iter()
                .any(|plugin| plugin_names(plugin))
                || p.fallbacks.values().any(|to| to.iter().any(|f| f == id))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// How a flagged id is used, for the line that reports it.
pub fn describe(config: &Config, id: &str) -> String {
    let pipelines = pipelines_naming(config, id);
    if pipelines.is_empty() {
        "no pipeline names it (a selector that chooses from [models] may pick it)".to_owned()
    } else {
        format!("used by pipeline(s) {}", pipelines.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipelines_that_name_a_model_are_found() {
        let config = crate::config::Loaded::builtin().unwrap().config;
        let grok = pipelines_naming(&config, "x-ai/grok-4");
        assert!(grok.contains(&"ask".to_owned()), "{grok:?}");
        assert!(
            !grok.contains(&"vote".to_owned()),
            "vote's selector picks by tags"
        );
        assert!(pipelines_naming(&config, "no/such").is_empty());
    }
}
