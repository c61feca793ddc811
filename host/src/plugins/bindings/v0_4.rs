//! `chorus:strategy@0.4.0`: its generated bindings
//! and what it adapts unlike other versions (`adapt.rs` has the rest): the
//! run's attachments on the request (metadata, never bytes), attachments
//! placed in messages, models' input modalities, and replies' citations.

generated!("../wit/0.4.0");

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use super::{GuestAnswer, Sources};
use crate::attach;
use crate::llm;
use crate::plugins::sandbox::{State, Stopped};
use crate::plugins::types::{self as own, Kind};

pub const VERSION: &str = "0.4.0";

/// What 0.4 adapts unlike the versions before it (see `adapt.rs` for the
/// list), written once for 0.4 and the versions that keep its types (0.5,
/// and 0.6 with the fields it adds to replies and requests, as
/// `since_0_4!(reply(r) => { field: …, }, request(q) => { field: …, })`,
/// `r` the `llm::Reply`, `q` the `own::Request`): expanded in each
/// version's module, over its generated `wit` types.
macro_rules! since_0_4 {
    () => {
        since_0_4!(reply(_reply) => {}, request(_request) => {});
    };
    (reply($reply:ident) => { $($reply_extra:tt)* }, request($r:ident) => { $($request_extra:tt)* }) => {
        /// A request may ask for a response format (as from 0.3).
        fn response_format(r: &wit::ChatRequest) -> Result<Option<llm::ResponseFormat>, String> {
            Ok(match &r.response_format {
                None => None,
                Some(wit::ResponseFormat::JsonObject) => Some(llm::ResponseFormat::JsonObject),
                Some(wit::ResponseFormat::JsonSchema(s)) => Some(llm::ResponseFormat::JsonSchema(
                    llm::JsonSchema::new(s.name.clone(), &s.schema, s.strict)?,
                )),
            })
        }

        /// A reply says what was sent of the request's response format (as from
        /// 0.3), and the sources it cites.
        fn reply_of($reply: &llm::Reply) -> wit::Reply {
            wit::Reply {
                content: String::clone(&$reply.content),
                served_by: $reply.served_by.clone(),
                finish_reason: $reply.finish_reason.clone(),
                usage: $reply.usage.map(usage_of),
                format_sent: match $reply.format_sent {
                    llm::FormatSent::None => wit::FormatSent::None,
                    llm::FormatSent::JsonObject => wit::FormatSent::JsonObject,
                    llm::FormatSent::JsonSchema => wit::FormatSent::JsonSchema,
                },
                citations: $reply
                    .citations
                    .iter()
                    .map(|c| wit::Citation {
                        url: c.url.clone(),
                        title: c.title.clone(),
                        cited_text: c.cited.clone(),
                        start_index: c.start_index,
                        end_index: c.end_index,
                    })
                    .collect(),
                $($reply_extra)*
            }
        }

        /// The request with the run's attachments: what they are, not their bytes.
        fn request_of($r: &own::Request) -> wit::Request {
            wit::Request {
                run_id: $r.run_id.clone(),
                pipeline: $r.pipeline.clone(),
                prompt: $r.prompt.clone(),
                options: $r.options.to_string(),
                attachments: $r
                    .attachments
                    .iter()
                    .map(|a| wit::AttachmentInfo {
                        id: a.info.id,
                        kind: match a.info.kind {
                            attach::Kind::Image => wit::AttachmentKind::Image,
                            attach::Kind::Pdf => wit::AttachmentKind::Pdf,
                            attach::Kind::Audio => wit::AttachmentKind::Audio,
                            attach::Kind::Text => wit::AttachmentKind::Text,
                        },
                        mime: a.info.mime.clone(),
                        name: Some(a.info.name.clone()),
                        bytes: a.info.bytes as u64,
                        // Measured from the bytes when the run started
                        // (`attach::shape`); none for a URL or what did not parse.
                        pages: a.info.shape.pages,
                        width: a.info.shape.width,
                        height: a.info.shape.height,
                        description: a.description.clone(),
                    })
                    .collect(),
                $($request_extra)*
            }
        }

        /// A part is text, or a run attachment placed there.
        fn part_of(part: wit::ContentPart) -> super::Part {
            match part {
                wit::ContentPart::Text(text) => super::Part::Text(text),
                wit::ContentPart::Attachment(id) => super::Part::Attachment(id),
            }
        }

        const UNSUPPORTED_INPUT: wit::FailureKind = wit::FailureKind::UnsupportedInput;
    };
}

since_0_4!();

adapters!(m => {
    input_modalities: m.input_modalities.clone(),
});

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn text(t: &str) -> wit::ContentPart {
        wit::ContentPart::Text(t.to_owned())
    }

    #[test]
    fn attachments_placed_among_text_are_kept_at_the_byte_they_come_before() {
        let request = wit::ChatRequest {
            label: "panel".into(),
            model: "m".into(),
            messages: vec![
                wit::Message {
                    role: wit::Role::System,
                    content: vec![text("Answer.")],
                },
                wit::Message {
                    role: wit::Role::User,
                    content: vec![
                        wit::ContentPart::Attachment(2),
                        text("Look: é"),
                        wit::ContentPart::Attachment(1),
                        text(" then?"),
                    ],
                },
            ],
            sampling: wit::Sampling {
                temperature: None,
                top_p: None,
                max_tokens: None,
                seed: None,
            },
            response_format: None,
        };
        let request = llm::ChatRequest::try_from(request).unwrap();
        assert_eq!(request.messages[0].content, "Answer.");
        assert_eq!(request.messages[1].content, "Look: é then?");
        assert_eq!(
            request.placed,
            [
                llm::Placed {
                    message: 1,
                    at: 0,
                    id: 2
                },
                llm::Placed {
                    message: 1,
                    at: "Look: é".len(),
                    id: 1
                },
            ]
        );
        assert!(request.attachments.is_empty(), "the pipeline adds them");
    }

    #[test]
    fn the_request_lists_attachments_and_replies_and_models_say_the_rest() {
        let info = attach::Info {
            id: 1,
            name: "d.png".into(),
            kind: attach::Kind::Image,
            mime: "image/png".into(),
            bytes: 41,
            sha256: "ab".into(),
            shape: attach::Shape {
                pages: None,
                width: Some(640),
                height: Some(480),
            },
            url: None,
        };
        let request = own::Request {
            run_id: "r".into(),
            pipeline: "ask".into(),
            prompt: "q".into(),
            options: json!({}),
            attachments: vec![own::AttachmentInfo {
                info,
                description: Some("a diagram".into()),
            }],
            tools: None,
        };
        let sent = wit::Request::from(&request);
        let listed = &sent.attachments[0];
        assert_eq!((listed.id, listed.bytes), (1, 41));
        assert!(matches!(listed.kind, wit::AttachmentKind::Image));
        assert_eq!(listed.mime, "image/png");
        assert_eq!(listed.name.as_deref(), Some("d.png"));
        assert_eq!(listed.description.as_deref(), Some("a diagram"));
        assert_eq!(
            (listed.pages, listed.width, listed.height),
            (None, Some(640), Some(480))
        );

        let reply = llm::Reply {
            content: Arc::new("Rust [1]".into()),
            served_by: "m".into(),
            finish_reason: None,
            usage: None,
            format_sent: llm::FormatSent::None,
            citations: vec![llm::Citation {
                url: "https://a.example".into(),
                title: Some("A".into()),
                cited: Some("Rust".into()),
                start_index: Some(0),
                end_index: Some(4),
            }],
            tool_calls: Vec::new(),
        };
        let cited = &reply_of(&reply).citations[0];
        assert_eq!(cited.url, "https://a.example");
        assert_eq!(cited.title.as_deref(), Some("A"));
        assert_eq!(cited.cited_text.as_deref(), Some("Rust"));
        assert_eq!((cited.start_index, cited.end_index), (Some(0), Some(4)));

        assert!(matches!(
            wit::FailureKind::from(llm::FailureKind::UnsupportedInput),
            wit::FailureKind::UnsupportedInput
        ));
    }
}
