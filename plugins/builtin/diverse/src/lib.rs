//! Selector: a panel spread across model vendors (the part of the model id
//! before `/`, e.g. `openai`), one per vendor before any vendor gets a
//! second, in the order the config lists them.
//!
//! ```toml
//! [plugins.diverse.settings]
//! count = 3
//! synthesizers = ["model"]   # default: the first chosen model
//! ```

wit_bindgen::generate!({
    world: "selector-plugin",
    path: "../../../wit/0.3.0",
    with: {
        "chorus:strategy/types@0.3.0": kit::wit::types,
        "chorus:strategy/host@0.3.0": kit::wit::host,
    },
});

use exports::chorus::strategy::selector::Guest;
use kit::wit::host;
use kit::wit::types::{Plan, Request};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    count: usize,
    #[serde(default)]
    synthesizers: Vec<String>,
}

struct Diverse;

impl Guest for Diverse {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn select(_request: Request, settings: String) -> Result<Plan, String> {
        let settings = parse(&settings)?;
        // Group the catalog by vendor, keeping catalog order within each.
        let mut vendors: Vec<(String, Vec<String>)> = Vec::new();
        for model in host::models() {
            let vendor = model
                .id
                .split_once('/')
                .map_or(model.provider.clone(), |(v, _)| v.to_owned());
            match vendors.iter_mut().find(|(v, _)| *v == vendor) {
                Some((_, models)) => models.push(model.id),
                None => vendors.push((vendor, vec![model.id])),
            }
        }
        let mut panel = Vec::new();
        let mut round = 0;
        while panel.len() < settings.count && vendors.iter().any(|(_, m)| m.len() > round) {
            for (_, models) in &vendors {
                if panel.len() < settings.count
                    && let Some(model) = models.get(round)
                {
                    panel.push(model.clone());
                }
            }
            round += 1;
        }
        if panel.is_empty() {
            return Err("the catalog has no models".into());
        }
        let vendor_count = vendors.len().min(panel.len());
        let notes = vec![format!(
            "A panel of {} models from {vendor_count} vendors.",
            panel.len()
        )];
        Ok(kit::guest::plan(panel, settings.synthesizers, notes))
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "count, synthesizers")
}

export!(Diverse);
