//! {{name}}: a chorus prompter. Every seat on the panel gets the user's
//! question after a system prompt from its settings, with the run's
//! attachments (images, PDFs, files) placed before the question: the host
//! sends each one as the model takes it, or, to a model that cannot, what
//! the pipeline's `attachments_for_text_models` says.
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

/// The user's message: the run's attachments (by id; the host inlines
/// them), then the question.
fn question(request: &Request) -> Message {
    let mut content: Vec<ContentPart> = request.attachments.iter().map(|a| ContentPart::Attachment(a.id)).collect();
    content.push(ContentPart::Text(request.prompt.clone()));
    Message { role: Role::User, content }
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
                messages: vec![message(Role::System, system), question(&request)],
                sampling: seat.sampling,
                response_format: None,
                tools: None,
            })
            .collect();
        Ok(Prompts { requests, notes: Vec::new() })
    }
}

export!(Plugin);
