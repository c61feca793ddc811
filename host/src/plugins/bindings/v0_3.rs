//! `chorus:strategy@0.3.0`: its generated bindings and what it adapts
//! unlike other versions (`adapt.rs` has the rest): a response format on
//! chat requests, and what was sent of it on replies.

generated!("../wit/0.3.0");

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use super::{GuestAnswer, Sources};
use crate::llm;
use crate::plugins::sandbox::{State, Stopped};
use crate::plugins::types::{self as own, Kind};

pub const VERSION: &str = "0.3.0";

/// A 0.3 request may ask for a response format.
fn response_format(r: &wit::ChatRequest) -> Result<Option<llm::ResponseFormat>, String> {
    Ok(match &r.response_format {
        None => None,
        Some(wit::ResponseFormat::JsonObject) => Some(llm::ResponseFormat::JsonObject),
        Some(wit::ResponseFormat::JsonSchema(s)) => Some(llm::ResponseFormat::JsonSchema(
            llm::JsonSchema::new(s.name.clone(), &s.schema, s.strict)?,
        )),
    })
}

/// A 0.3 reply says what was sent of the request's response format.
fn reply_of(reply: &llm::Reply) -> wit::Reply {
    wit::Reply {
        content: String::clone(&reply.content),
        served_by: reply.served_by.clone(),
        finish_reason: reply.finish_reason.clone(),
        usage: reply.usage.map(usage_of),
        format_sent: match reply.format_sent {
            llm::FormatSent::None => wit::FormatSent::None,
            llm::FormatSent::JsonObject => wit::FormatSent::JsonObject,
            llm::FormatSent::JsonSchema => wit::FormatSent::JsonSchema,
        },
    }
}

/// A request of this version's shape: no attachments before 0.4.
fn request_of(r: &own::Request) -> wit::Request {
    wit::Request {
        run_id: r.run_id.clone(),
        pipeline: r.pipeline.clone(),
        prompt: r.prompt.clone(),
        options: r.options.to_string(),
    }
}

/// Text is the only part before 0.4.
fn part_of(part: wit::ContentPart) -> super::Part {
    match part {
        wit::ContentPart::Text(text) => super::Part::Text(text),
    }
}

/// Not in contracts before 0.4: what a provider answers such a request
/// with (404, "no endpoints support image input"); the message says which.
const UNSUPPORTED_INPUT: wit::FailureKind = wit::FailureKind::HttpStatus;

adapters!(m => {});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_0_3_plugin_sees_no_attachments_and_unsupported_input_as_an_http_status() {
        // 0.3's request has no attachments field to fill: the conversion
        // compiles only because it leaves them out.
        let request = own::Request {
            run_id: "r".into(),
            pipeline: "ask".into(),
            prompt: "q".into(),
            options: serde_json::json!({}),
            attachments: Vec::new(),
            tools: None,
        };
        assert_eq!(wit::Request::from(&request).prompt, "q");
        assert!(matches!(
            wit::FailureKind::from(llm::FailureKind::UnsupportedInput),
            wit::FailureKind::HttpStatus
        ));
        let request = llm::ChatRequest::try_from(wit::ChatRequest {
            label: "l".into(),
            model: "m".into(),
            messages: vec![wit::Message {
                role: wit::Role::User,
                content: vec![
                    wit::ContentPart::Text("a".into()),
                    wit::ContentPart::Text("b".into()),
                ],
            }],
            sampling: wit::Sampling {
                temperature: None,
                top_p: None,
                max_tokens: None,
                seed: None,
            },
            response_format: None,
        })
        .unwrap();
        assert_eq!(request.messages[0].content, "ab");
        assert!(request.placed.is_empty());
    }
}
