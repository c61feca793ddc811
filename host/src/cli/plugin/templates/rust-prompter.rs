//! {{name}}: a chorus prompter. Every seat on the panel gets the user's
//! question after a system prompt from its settings.
//!
//! ```toml
//! [plugins.{{name}}.settings]
//! system = "Answer concisely, and say how sure you are."   # optional
//! ```

wit_bindgen::generate!({ world: "prompter-plugin", path: "wit" });

use chorus::strategy::types::{ChatRequest, ContentPart, Message, Plan, Prompts, Request, Role};
use exports::chorus::strategy::prompter::Guest;
use serde::Deserialize;

const DEFAULT_SYSTEM: &str = "Answer the question well: directly, correctly and completely. Say how sure you are.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    system: Option<String>,
}

/// The settings, or what is wrong with them: `Err` is shown to the user by
/// `chorus check` and at startup.
fn parse(settings: &str) -> Result<Settings, String> {
    let settings: Settings = serde_json::from_str(settings)
        .map_err(|e| format!("bad settings: {e} (expected an optional `system` prompt)"))?;
    if settings.system.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return Err("system is empty: leave it out for the default".into());
    }
    Ok(settings)
}

fn message(role: Role, text: &str) -> Message {
    Message { role, content: vec![ContentPart::Text(text.to_owned())] }
}

struct Plugin;

impl Guest for Plugin {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn prompt(request: Request, plan: Plan, settings: String) -> Result<Prompts, String> {
        let settings = parse(&settings)?;
        let system = settings.system.as_deref().unwrap_or(DEFAULT_SYSTEM);
        let requests = plan
            .panel
            .iter()
            .map(|seat| ChatRequest {
                label: "panel".into(),
                model: seat.model.clone(),
                messages: vec![message(Role::System, system), message(Role::User, &request.prompt)],
                sampling: seat.sampling,
                response_format: None,
            })
            .collect();
        Ok(Prompts { requests, notes: Vec::new() })
    }
}

export!(Plugin);
