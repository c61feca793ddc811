//! The request body of a call that carries attachments.

use serde_json::{Map, json};

use super::*;
use crate::attach::{Access, Attachments, Limits, Source, load};
use crate::llm::types::{ChatRequest, Message, Placed, Role, Sampling};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";

fn attachments() -> Attachments {
    let limits = Limits {
        max_attachments: 10,
        max_attachment_bytes: 1 << 20,
        max_attachments_bytes: 1 << 20,
    };
    let sources = vec![
        Source::Bytes {
            bytes: PNG.to_vec(),
            name: Some("d.png".into()),
        },
        Source::Bytes {
            bytes: b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec(),
            name: Some("c.pdf".into()),
        },
        Source::Bytes {
            bytes: b"RIFF\x24\0\0\0WAVEfmt ".to_vec(),
            name: Some("v.wav".into()),
        },
    ];
    load(sources, &Access::Anywhere, &limits).unwrap()
}

#[test]
fn attachments_follow_the_last_user_message_as_content_parts() {
    let attachments = attachments();
    let request = ChatRequest {
        label: "panel".into(),
        model: "anthropic/claude".into(),
        messages: vec![
            Message {
                role: Role::System,
                content: "Be brief.".into(),
            },
            Message {
                role: Role::User,
                content: "What is wrong here?".into(),
            },
        ],
        sampling: Sampling::default(),
        response_format: None,
        attachments: attachments.clone(),
        placed: Vec::new(),
        tools: None,
    };
    let bytes = request_body(
        &request,
        &Map::new(),
        &Map::new(),
        false,
        FormatSent::None,
        false,
    );
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let all: Vec<&crate::attach::Attachment> = attachments.iter().collect();
    let png_url = format!("data:image/png;base64,{}", {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(PNG)
    });
    assert_eq!(
        body["messages"],
        json!([
            // The cache mark (an Anthropic model) and the attachments are
            // on different messages, and both hold.
            {"role": "system", "content": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "content": [
                {"type": "text", "text": "What is wrong here?"},
                {"type": "image_url", "image_url": {"url": png_url}},
                {"type": "file", "file": {"filename": "c.pdf", "file_data": all[1].url()}},
                {"type": "input_audio", "input_audio": {"data": all[2].url().split_once(",").unwrap().1, "format": "wav"}},
            ]},
        ])
    );
}

#[test]
fn placed_attachments_go_where_placed_and_nowhere_else() {
    let all = attachments();
    let message = |role, content: &str| Message {
        role,
        content: content.into(),
    };
    let request = ChatRequest {
        label: "panel".into(),
        model: "m".into(),
        messages: vec![
            message(Role::User, "First look:"),
            message(Role::Assistant, "Seen."),
            message(Role::User, "Now this: and say."),
        ],
        sampling: Sampling::default(),
        response_format: None,
        // Only the PDF and the audio: the image was not placed.
        attachments: all.only(|a| a.id != 1),
        placed: vec![
            Placed {
                message: 0,
                at: "First look:".len(),
                id: 3,
            },
            Placed {
                message: 2,
                at: "Now this:".len(),
                id: 2,
            },
        ],
        tools: None,
    };
    let bytes = request_body(
        &request,
        &Map::new(),
        &Map::new(),
        false,
        FormatSent::None,
        false,
    );
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let all: Vec<&crate::attach::Attachment> = all.iter().collect();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "First look:"},
                {"type": "input_audio", "input_audio": {"data": all[2].url().split_once(",").unwrap().1, "format": "wav"}},
            ]},
            {"role": "assistant", "content": "Seen."},
            {"role": "user", "content": [
                {"type": "text", "text": "Now this:"},
                {"type": "file", "file": {"filename": "c.pdf", "file_data": all[1].url()}},
                {"type": "text", "text": " and say."},
            ]},
        ])
    );
}
