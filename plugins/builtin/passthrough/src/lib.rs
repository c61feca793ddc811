//! Prompter: sends the user's prompt unchanged to every seat on the panel,
//! after an optional system prompt — once, or `samples` times per seat for
//! strategies that compare several samples (self-consistency votes).
//!
//! With `waves = true` it sends only the first wave of those samples: the
//! fewest that could settle a majority vote (more than half of samples x
//! seats), every seat's first sample before any seat's second. The `vote`
//! synthesizer asks for the rest only while the vote can still change.
//!
//! ```toml
//! [plugins.passthrough.settings]
//! system = "Answer concisely."   # optional
//! samples = 3                    # per seat; the call's `samples_per_model` option wins
//! waves = false                  # true: the first wave only (for the `vote` synthesizer)
//! ```

kit::plugin!(prompter, Passthrough);

use kit::wit::types::{ChatRequest, Plan, Prompts, Request, Role};
use serde::Deserialize;

/// More samples than this per seat is a configuration mistake, not a plan.
const MAX_SAMPLES: u32 = 16;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    system: Option<String>,
    samples: Option<u32>,
    #[serde(default)]
    waves: bool,
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
        // Every seat's first sample before any seat's second: a wave cut
        // short still hears from every model.
        for sample in 0..samples {
            for seat in &plan.panel {
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
                    response_format: None,
                    tools: None,
                });
            }
        }
        let mut notes = Vec::new();
        if settings.waves {
            let ceiling = u32::try_from(requests.len()).unwrap_or(u32::MAX);
            let first = kit::adaptive::first_wave(ceiling) as usize;
            if first < requests.len() {
                notes.push(format!(
                    "First wave: {first} of at most {ceiling} samples ({samples} per model x {} models); \
                     more are asked only while the vote can still change.",
                    plan.panel.len()
                ));
            }
            requests.truncate(first.max(1));
        }
        Ok(Prompts { requests, notes })
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "optional `system`, `samples` and `waves`")
}
