//! Selector: a panel spread across model vendors (the part of the model id
//! before `/`, e.g. `openai`), one per vendor before any vendor gets a
//! second, in the order the config lists them. On a run with images, PDFs
//! or audio, the spread is made of models that can take them first, and
//! of the rest only to fill the panel (the plan says which).
//!
//! ```toml
//! [plugins.diverse.settings]
//! count = 3
//! synthesizers = ["model"]   # default: the first chosen model
//! ```

kit::plugin!(selector, Diverse);

use kit::wit::host;
use kit::wit::types::{ModelInfo, Plan, Request};
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

    fn select(request: Request, settings: String) -> Result<Plan, String> {
        let settings = parse(&settings)?;
        let needed = kit::seeing::needed(&request);
        let models = host::models();
        let (seeing, blind): (Vec<&ModelInfo>, Vec<&ModelInfo>) =
            models.iter().partition(|m| kit::seeing::sees(m, &needed));
        let mut panel = spread(&seeing, settings.count);
        panel.extend(spread(&blind, settings.count - panel.len()));
        if panel.is_empty() {
            return Err("the catalog has no models".into());
        }
        let mut vendors: Vec<String> = panel.iter().map(|(v, _)| v.clone()).collect();
        vendors.sort();
        vendors.dedup();
        let panel: Vec<String> = panel.into_iter().map(|(_, id)| id).collect();
        let mut notes = vec![format!(
            "A panel of {} models from {} vendors.",
            panel.len(),
            vendors.len()
        )];
        notes.extend(kit::seeing::blind_note(&panel, &models, &needed));
        Ok(kit::guest::plan(panel, settings.synthesizers, notes))
    }
}

/// Up to `count` of `models`, one per vendor before any vendor gets a
/// second, in catalog order; each with its vendor.
fn spread(models: &[&ModelInfo], count: usize) -> Vec<(String, String)> {
    // Group by vendor, keeping catalog order within each.
    let mut vendors: Vec<(String, Vec<String>)> = Vec::new();
    for model in models {
        let vendor = model
            .id
            .split_once('/')
            .map_or(model.provider.clone(), |(v, _)| v.to_owned());
        match vendors.iter_mut().find(|(v, _)| *v == vendor) {
            Some((_, ids)) => ids.push(model.id.clone()),
            None => vendors.push((vendor, vec![model.id.clone()])),
        }
    }
    let mut panel = Vec::new();
    let mut round = 0;
    while panel.len() < count && vendors.iter().any(|(_, m)| m.len() > round) {
        for (vendor, ids) in &vendors {
            if panel.len() < count
                && let Some(id) = ids.get(round)
            {
                panel.push((vendor.clone(), id.clone()));
            }
        }
        round += 1;
    }
    panel
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "count, synthesizers")
}
