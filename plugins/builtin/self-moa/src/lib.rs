//! Selector for Self-MoA: the single best model, sampled N times (at a
//! temperature that makes the samples differ), merged by the same model.
//! Research found this often beats mixing weaker models.
//!
//! ```toml
//! [plugins.self-moa.settings]
//! model = "best/model"
//! samples = 4          # the call's `samples` option wins (1-16)
//! temperature = 0.8
//! ```

kit::plugin!(selector, SelfMoa);

use kit::wit::types::{Plan, Request, Sampling, Seat};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    model: String,
    samples: Option<u32>,
    temperature: Option<f32>,
}

struct SelfMoa;

impl Guest for SelfMoa {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn select(request: Request, settings: String) -> Result<Plan, String> {
        let settings = parse(&settings)?;
        let samples = kit::count(&request.options, "samples", settings.samples, 4, 1..=16)?;
        let panel = (0..samples)
            .map(|i| Seat {
                model: settings.model.clone(),
                sampling: Sampling {
                    temperature: Some(settings.temperature.unwrap_or(0.8)),
                    top_p: None,
                    max_tokens: None,
                    seed: Some(u64::from(i) + 1),
                },
            })
            .collect();
        Ok(Plan {
            panel,
            synthesizers: vec![settings.model.clone()],
            notes: vec![format!(
                "Self-MoA: {} sampled {samples} times.",
                settings.model
            )],
        })
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "model, samples, temperature")
}
