//! `--models` for every pipeline that uses the default panel. The built-in
//! configuration names its five models in more places than the
//! `static-panel`: the `diverse` and `route` selectors' synthesizers, the
//! `self-moa` model, `route`'s default panel. Pointed at a gateway with
//! `--base-url … --models a,b`, those pipelines would still ask for models
//! the gateway does not serve. So when `--models` replaces a `static-panel`'s
//! panel, every other plugin setting naming a model it displaced follows:
//! a list of the old synthesizers becomes the new synthesizers, any other
//! list of old panel models becomes the new panel, a single id becomes the
//! first synthesizer. A displaced model that nothing names any more leaves
//! `[models]`, so selectors that choose from `[models]` (`cheapest`,
//! `diverse`) choose among the models given.

use toml::Value;

use super::Config;

/// What the panel plugin said before `--models` changed it.
pub(super) struct Before {
    pub panel: Vec<String>,
    pub synthesizers: Vec<String>,
}

impl Before {
    pub fn of(settings: &toml::Table) -> Self {
        let ids = |key: &str| -> Vec<String> {
            settings
                .get(key)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        Self {
            panel: ids("panel"),
            synthesizers: ids("synthesizers"),
        }
    }
}

/// Makes the plugins other than `panel_plugin` follow the new panel (see
/// the module docs); `synthesizers` are the panel plugin's synthesizers
/// as they now are.
pub(super) fn follow(
    config: &mut Config,
    panel_plugin: &str,
    before: &Before,
    models: &[String],
    synthesizers: &[String],
) {
    let kept = |id: &String| models.contains(id) || synthesizers.contains(id);
    let displaced: Vec<String> = before
        .panel
        .iter()
        .chain(&before.synthesizers)
        .filter(|id| !kept(id))
        .cloned()
        .collect();
    if displaced.is_empty() || models.is_empty() {
        return;
    }
    let new_synthesizers = if synthesizers.is_empty() {
        &models[..1]
    } else {
        synthesizers
    };
    let change = Change {
        before,
        displaced: &displaced,
        models,
        synthesizers: new_synthesizers,
    };
    for (name, spec) in &mut config.plugins {
        if name != panel_plugin {
            for (_, value) in spec.settings.iter_mut() {
                change.apply(value);
            }
        }
    }
    for id in &displaced {
        if !named_anywhere(config, id) {
            config.models.shift_remove(id);
        }
    }
}

struct Change<'a> {
    before: &'a Before,
    displaced: &'a [String],
    models: &'a [String],
    synthesizers: &'a [String],
}

impl Change<'_> {
    fn apply(&self, value: &mut Value) {
        let ids = |list: &[String]| Value::Array(list.iter().cloned().map(Value::from).collect());
        match value {
            Value::String(id) if self.displaced.contains(id) => {
                *value = Value::from(self.synthesizers[0].clone());
            }
            Value::Array(items) => {
                let strings: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
                match strings {
                    Some(list) if self.of_defaults(&list) => {
                        let all_synthesizers = list
                            .iter()
                            .all(|id| self.before.synthesizers.iter().any(|s| s == id));
                        *value = if all_synthesizers {
                            ids(self.synthesizers)
                        } else {
                            ids(self.models)
                        };
                    }
                    Some(_) => {}
                    None => items.iter_mut().for_each(|item| self.apply(item)),
                }
            }
            Value::Table(table) => table.iter_mut().for_each(|(_, v)| self.apply(v)),
            _ => {}
        }
    }

    /// A non-empty list of the old panel's models, one at least displaced.
    fn of_defaults(&self, list: &[&str]) -> bool {
        let old = |id: &&str| {
            self.before.panel.iter().any(|p| p == id)
                || self.before.synthesizers.iter().any(|s| s == id)
        };
        !list.is_empty()
            && list.iter().all(old)
            && list.iter().any(|id| self.displaced.iter().any(|d| d == id))
    }
}

/// Whether any plugin setting or fallback list still names `id`.
fn named_anywhere(config: &Config, id: &str) -> bool {
    fn names(value: &Value, id: &str) -> bool {
        match value {
            Value::String(s) => s == id,
            Value::Array(items) => items.iter().any(|v| names(v, id)),
            Value::Table(table) => table.values().any(|v| names(v, id)),
            _ => false,
        }
    }
    config
        .plugins
        .values()
        .any(|spec| spec.settings.values().any(|v| names(v, id)))
        || config
            .models
            .iter()
            .any(|(other, m)| other != id && m.fallbacks.iter().any(|f| f == id))
        || config.pipelines.values().any(|p| {
            p.fallbacks
                .iter()
                .any(|(from, to)| from == id || to.iter().any(|f| f == id))
        })
}

#[cfg(test)]
mod tests {
    use crate::config::{Loaded, Overrides};

    fn gateway(models: &[&str], synthesizers: &[&str]) -> crate::config::Config {
        let overrides = Overrides {
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            synthesizers: synthesizers.iter().map(|m| (*m).to_owned()).collect(),
            base_url: Some("http://127.0.0.1:4000/v1".into()),
            ..Overrides::default()
        };
        Loaded::builtin()
            .unwrap()
            .with_overrides(&overrides)
            .expect("the built-in configuration takes a gateway's models")
            .config
    }

    /// Every string in every plugin's settings.
    fn named(config: &crate::config::Config) -> Vec<String> {
        fn walk(value: &toml::Value, out: &mut Vec<String>) {
            match value {
                toml::Value::String(s) => out.push(s.clone()),
                toml::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                toml::Value::Table(t) => t.values().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        for spec in config.plugins.values() {
            spec.settings.values().for_each(|v| walk(v, &mut out));
        }
        out
    }

    #[test]
    fn the_models_given_replace_the_default_ones_in_every_pipeline() {
        let config = gateway(&["gw/a", "gw/b"], &["gw/s"]);
        let ids: Vec<&str> = config.models.keys().map(String::as_str).collect();
        assert_eq!(ids, ["gw/a", "gw/b", "gw/s"], "no built-in model is left");
        let named = named(&config);
        assert!(
            !named
                .iter()
                .any(|s| s.contains("claude") || s.contains("gpt-5")),
            "no plugin names a built-in model any more: {named:?}"
        );
        let moa = &config.plugins["self-moa"].settings["model"];
        assert_eq!(
            moa.as_str(),
            Some("gw/s"),
            "the best model: the synthesizer"
        );
        let route = &config.plugins["route"].settings;
        assert_eq!(route["default"].as_array().unwrap().len(), 2);
        assert_eq!(
            route["synthesizers"].as_array().unwrap()[0].as_str(),
            Some("gw/s")
        );
    }

    #[test]
    fn default_synthesizers_kept_by_the_panel_stay_where_they_are_named() {
        let config = gateway(&["gw/a"], &[]);
        assert!(
            config.models.contains_key("anthropic/claude-sonnet-4.5"),
            "still the panel's synthesizer, so still a model"
        );
        assert!(!config.models.contains_key("x-ai/grok-4"), "displaced");
    }
}
