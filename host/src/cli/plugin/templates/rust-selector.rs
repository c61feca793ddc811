//! {{name}}: a chorus selector. It picks the panel from the host's model
//! catalog — the models carrying any of the `tags` in its settings (every
//! model when there are none), at most `count` of them, never more than the
//! run's budget allows — and the first of them (or `synthesizers`) merges.
//! When the run comes with images, PDFs or audio, models that can take them
//! come first (contract 0.4's `input-modalities`).
//!
//! ```toml
//! [plugins.{{name}}.settings]
//! tags = ["reasoning"]      # optional
//! count = 3                 # optional, 1-16
//! synthesizers = []         # optional; default: the first model chosen
//! ```

wit_bindgen::generate!({ world: "selector-plugin", path: "wit" });

use chorus::strategy::host;
use chorus::strategy::types::{AttachmentKind, ModelInfo, Plan, Request, Sampling, Seat};
use exports::chorus::strategy::selector::Guest;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default = "three")]
    count: u32,
    #[serde(default)]
    synthesizers: Vec<String>,
}

fn three() -> u32 {
    3
}

/// The settings, or what is wrong with them: `Err` is shown to the user by
/// `chorus check` and at startup.
fn parse(settings: &str) -> Result<Settings, String> {
    let settings: Settings = serde_json::from_str(settings)
        .map_err(|e| format!("bad settings: {e} (expected tags, count, synthesizers)"))?;
    if !(1..=16).contains(&settings.count) {
        return Err(format!("count must be between 1 and 16, got {}", settings.count));
    }
    Ok(settings)
}

/// Whether `model` takes every attachment of the run (a text file, every model reads).
fn sees(model: &ModelInfo, request: &Request) -> bool {
    let takes = |what: &str| model.input_modalities.as_ref().is_some_and(|m| m.iter().any(|t| t == what));
    request.attachments.iter().all(|a| match a.kind {
        AttachmentKind::Image => takes("image"),
        AttachmentKind::Pdf => takes("file"),
        AttachmentKind::Audio => takes("audio"),
        AttachmentKind::Text => true,
    })
}

struct Plugin;

impl Guest for Plugin {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn select(request: Request, settings: String) -> Result<Plan, String> {
        let settings = parse(&settings)?;
        // Leave a call for the merge.
        let affordable = host::budget().calls_left.saturating_sub(1).max(1);
        let count = settings.count.min(affordable) as usize;
        let mut candidates: Vec<ModelInfo> = host::models()
            .into_iter()
            .filter(|m| settings.tags.is_empty() || m.tags.iter().any(|t| settings.tags.contains(t)))
            .collect();
        candidates.sort_by_key(|m| !sees(m, &request)); // stable: catalog order otherwise
        candidates.truncate(count);
        let models: Vec<String> = candidates.iter().map(|m| m.id.clone()).collect();
        let blind: Vec<&str> = candidates.iter().filter(|m| !sees(m, &request)).map(|m| m.id.as_str()).collect();
        let Some(first) = models.first().cloned() else {
            return Err(format!("no model in the catalog has any of the tags {:?}", settings.tags));
        };
        let mut notes = vec![format!("{} chose {}.", "{{name}}", models.join(", "))];
        if (count as u32) < settings.count {
            notes.push(format!("The run's budget allowed {count} of the {} models asked for.", settings.count));
        }
        if !blind.is_empty() {
            notes.push(format!(
                "{} cannot take the run's attachments: they get what the pipeline's attachments_for_text_models says.",
                blind.join(", ")
            ));
        }
        let synthesizers = if settings.synthesizers.is_empty() { vec![first] } else { settings.synthesizers };
        let sampling = Sampling { temperature: None, top_p: None, max_tokens: None, seed: None };
        Ok(Plan {
            panel: models.into_iter().map(|model| Seat { model, sampling }).collect(),
            synthesizers,
            notes,
        })
    }
}

export!(Plugin);
