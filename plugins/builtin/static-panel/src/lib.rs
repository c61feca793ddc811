//! Selector: the panel and the synthesizers are whatever its settings say.
//!
//! ```toml
//! [plugins.static-panel.settings]
//! panel = ["model-a", "model-b"]          # required
//! synthesizers = ["model-a"]              # default: the first panel model
//! temperature = 0.7                       # optional, for every seat
//! max_tokens = 4096                       # optional, for every seat
//! ```

kit::plugin!(selector, StaticPanel);

use kit::wit::types::{Plan, Request, Sampling, Seat};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    panel: Vec<String>,
    #[serde(default)]
    synthesizers: Vec<String>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
}

struct StaticPanel;

impl Guest for StaticPanel {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn select(_request: Request, settings: String) -> Result<Plan, String> {
        let settings = parse(&settings)?;
        let sampling = Sampling {
            temperature: settings.temperature,
            top_p: None,
            max_tokens: settings.max_tokens,
            seed: None,
        };
        let synthesizers = if settings.synthesizers.is_empty() {
            vec![settings.panel[0].clone()]
        } else {
            settings.synthesizers
        };
        Ok(Plan {
            panel: settings
                .panel
                .into_iter()
                .map(|model| Seat { model, sampling })
                .collect(),
            synthesizers,
            notes: Vec::new(),
        })
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    let settings: Settings = kit::settings(
        settings,
        "panel = [\"model\", ...], optional synthesizers, temperature, max_tokens",
    )?;
    if settings.panel.is_empty() {
        return Err("settings.panel is empty: list at least one model".into());
    }
    Ok(settings)
}
