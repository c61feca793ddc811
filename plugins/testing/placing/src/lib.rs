//! A test fixture: a 0.4 prompter that places run attachments in its
//! messages (`content-part.attachment`), between two pieces of text, so the
//! tests can see where the host puts them. Built for the tests, never
//! embedded in chorus.
//!
//! Settings: `ids`, the attachment ids to place (default: every one the
//! request lists, which also proves the request lists them). Its note
//! lists each attachment as the request has it, pages and pixels too.

kit::plugin!(prompter, Placing);

use kit::wit::types::{ChatRequest, ContentPart, Message, Plan, Prompts, Request, Role};
use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    ids: Option<Vec<u32>>,
}

struct Placing;

impl Guest for Placing {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn prompt(request: Request, plan: Plan, settings: String) -> Result<Prompts, String> {
        let ids = parse(&settings)?
            .ids
            .unwrap_or_else(|| request.attachments.iter().map(|a| a.id).collect());
        let mut content = vec![ContentPart::Text("Look at this:".to_owned())];
        content.extend(ids.iter().map(|id| ContentPart::Attachment(*id)));
        content.push(ContentPart::Text(format!("Then: {}", request.prompt)));
        let messages = vec![
            kit::guest::message(Role::System, "Answer briefly."),
            Message {
                role: Role::User,
                content,
            },
        ];
        let requests = plan
            .panel
            .iter()
            .map(|seat| ChatRequest {
                label: "panel".to_owned(),
                model: seat.model.clone(),
                messages: messages.clone(),
                sampling: seat.sampling,
                response_format: None,
                tools: None,
            })
            .collect();
        let listed: Vec<String> = request
            .attachments
            .iter()
            .map(|a| {
                let shape = match (a.pages, a.width, a.height) {
                    (Some(pages), ..) => format!(" {pages} pages"),
                    (None, Some(w), Some(h)) => format!(" {w}×{h} px"),
                    _ => String::new(),
                };
                format!("#{} {} {}{shape}", a.id, a.mime, a.bytes)
            })
            .collect();
        Ok(Prompts {
            requests,
            notes: vec![format!("The request listed: {}.", listed.join(", "))],
        })
    }
}

fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "ids")
}
