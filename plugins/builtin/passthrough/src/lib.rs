//! Prompter: sends the user's prompt unchanged to every seat on the panel,
//! after an optional system prompt — once, or `samples` times per seat for
//! strategies that compare several samples (self-consistency votes).
//!
//! ```toml
//! [plugins.passthrough.settings]
//! system = "Answer concisely."   # optional
//! samples = 3                    # per seat; the call's `samples_per_model` option wins
//! ```

wit_bindgen::generate!({
    world: "prompter-plugin",
    path: "../../../wit/0.2.0",
    with: {
        "chorus:strategy/types@0.2.0": kit::wit::types,
        "chorus:strategy/host@0.2.0": kit::wit::host,
    },
});

use exports::chorus::strategy::prompter::Guest;
use kit::wit::types::{ChatRequest, Plan, Prompts, Request, Role};
use serde::Deserialize;

/// More samples than this per seat is a configuration mistake, not a plan.
const MAX_SAMPLES: u32 = 16;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    system: Option<String>,
    samples: Option<u32>,
}

struct Passthrough;

impl Guest for Passthrough {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn prompt(request: Request, plan: Plan, settings: String) -> Result<Prompts, String> {
        let settings = parse(&settings)?;
        let samples = kit::count(
            &request.options,
            "samples_per_model",
            settings.samples,
            1,
            1..=MAX_SAMPLES,
        )?;
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = settings.system.filter(|s| !s.trim().is_empty()) {
            messages.push(kit::guest::message(Role::System, system));
        }
        messages.push(kit::guest::message(Role::User, request.prompt));
        let mut requests = Vec::new();
        for seat in &plan.panel {
            for sample in 0..samples {
                let mut sampling = seat.sampling;
                let label = if samples == 1 {
                    "panel".to_owned()
                } else {
                    // Distinct seeds, so providers that honour them vary the samples.
                    sampling.seed = Some(u64::from(sample) + 1);
                    format!("sample {}", sample + 1)
                };
                requests.push(ChatRequest {
                    label,
                    model: seat.model.clone(),
                    messages: messages.clone(),
                    sampling,
                });
            }
        }
        Ok(Prompts {
            requests,
            notes: Vec::new(),
        })
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "optional `system` and `samples`")
}

export!(Passthrough);
