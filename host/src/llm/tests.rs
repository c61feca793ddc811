use std::path::PathBuf;
use std::time::Duration;

use super::*;

fn llm(catalog: bool) -> Llm {
    let text = crate::config::tests::MINIMAL
        .replace("[models.m]", &format!("catalog = {catalog}\n[models.m]"));
    let text = format!("[cache]\nenabled = false\n{text}");
    let loaded = crate::config::Loaded::parse(&text, "test.toml", PathBuf::from(".")).unwrap();
    Llm::new(&loaded).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_run_skips_loading_while_every_catalog_is_kept_and_loads_after() {
    let llm = llm(true);
    assert!(!llm.catalogs_fresh(), "nothing is loaded yet");
    // Port 9 refuses: the failure is kept for a minute, then asked again.
    llm.load_catalogs(false).await;
    assert!(llm.catalogs_fresh());
    tokio::time::advance(Duration::from_secs(61)).await;
    assert!(!llm.catalogs_fresh(), "a kept failure expires");
}

#[tokio::test]
async fn without_a_catalog_nothing_ever_needs_loading() {
    let llm = llm(false);
    llm.load_catalogs(false).await;
    assert!(llm.catalogs_fresh());
}

/// A request to `m` saying `text`, carrying `attachments` placed at `placed`.
fn carrying(
    text: &str,
    attachments: Vec<crate::attach::Attachment>,
    placed: Vec<Placed>,
) -> ChatRequest {
    ChatRequest {
        label: "panel".to_owned(),
        model: "m".to_owned(),
        messages: vec![Message {
            role: Role::User,
            content: text.to_owned(),
        }],
        sampling: Sampling::default(),
        response_format: None,
        attachments: crate::attach::Attachments::new(attachments),
        placed,
        tools: None,
    }
}

fn file(
    id: u32,
    kind: crate::attach::Kind,
    shape: crate::attach::Shape,
) -> crate::attach::Attachment {
    crate::attach::Attachment {
        id,
        name: format!("f{id}"),
        kind,
        mime: "application/pdf".to_owned(),
        bytes: 1_000_000,
        sha256: String::new(),
        shape,
        body: crate::attach::Body::Base64(std::sync::Arc::from("")),
    }
}

#[test]
fn a_requests_estimate_counts_the_attachments_it_sends() {
    use crate::attach::{Kind, Shape};
    let pages = |n| Shape {
        pages: Some(n),
        ..Shape::default()
    };
    let text = "x".repeat(400);
    let bare = estimate_prompt_tokens(&carrying(&text, Vec::new(), Vec::new()));
    assert_eq!(bare, 104);
    // With the last user message: a 300-page PDF and a 512×512 image.
    let image = Shape {
        pages: None,
        width: Some(512),
        height: Some(512),
    };
    let request = carrying(
        &text,
        vec![file(1, Kind::Pdf, pages(300)), file(2, Kind::Image, image)],
        Vec::new(),
    );
    assert_eq!(estimate_prompt_tokens(&request), bare + 900_000 + 350);
    // Placed by a plugin: each placement is a part sent, and only those.
    let at = |id| Placed {
        message: 0,
        at: 0,
        id,
    };
    let request = carrying(
        &text,
        vec![file(1, Kind::Pdf, pages(2)), file(2, Kind::Image, image)],
        vec![at(1), at(1)],
    );
    assert_eq!(estimate_prompt_tokens(&request), bare + 2 * 6_000);
}
