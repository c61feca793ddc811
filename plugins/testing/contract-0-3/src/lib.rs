//! A test fixture: a prompter built for `chorus:strategy@0.3.0` (kept in
//! `wit/0.3.0`), without the kit — proof that a 0.3 plugin runs unchanged
//! on a run with attachments (it never sees them; the host puts them with
//! its last user message). Built for the tests, never embedded in chorus.

wit_bindgen::generate!({ world: "prompter-plugin", path: "../../../wit/0.3.0" });

use chorus::strategy::types::{ChatRequest, ContentPart, Message, Plan, Prompts, Request, Role};
use exports::chorus::strategy::prompter::Guest;

struct Legacy;

impl Guest for Legacy {
    fn validate_settings(_settings: String) -> Result<(), String> {
        Ok(())
    }

    fn prompt(request: Request, plan: Plan, _settings: String) -> Result<Prompts, String> {
        let requests = plan
            .panel
            .iter()
            .map(|seat| ChatRequest {
                label: "panel".to_owned(),
                model: seat.model.clone(),
                messages: vec![Message {
                    role: Role::User,
                    content: vec![ContentPart::Text(request.prompt.clone())],
                }],
                sampling: seat.sampling,
                response_format: None,
            })
            .collect();
        Ok(Prompts {
            requests,
            notes: Vec::new(),
        })
    }
}

export!(Legacy);
