//! Prompter: sends the user's prompt unchanged to every seat on the panel,
//! after an optional system prompt.
//!
//! ```toml
//! [plugins.passthrough.settings]
//! system = "Answer concisely."   # optional
//! ```

wit_bindgen::generate!({ world: "prompter-plugin", path: "../../wit" });

use chorus::strategy::types::{ChatRequest, Message, Plan, Prompts, Request, Role};
use exports::chorus::strategy::prompter::Guest;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    system: Option<String>,
}

struct Passthrough;

impl Guest for Passthrough {
    fn prompt(request: Request, plan: Plan, settings: String) -> Result<Prompts, String> {
        let settings: Settings = serde_json::from_str(&settings)
            .map_err(|e| format!("bad settings: {e} (expected an optional `system` string)"))?;
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = settings.system.filter(|s| !s.trim().is_empty()) {
            messages.push(Message {
                role: Role::System,
                content: system,
            });
        }
        messages.push(Message {
            role: Role::User,
            content: request.prompt,
        });
        let requests = plan
            .panel
            .into_iter()
            .map(|seat| ChatRequest {
                label: "panel".into(),
                model: seat.model,
                messages: messages.clone(),
                sampling: seat.sampling,
            })
            .collect();
        Ok(Prompts {
            requests,
            notes: Vec::new(),
        })
    }
}

export!(Passthrough);
