use std::sync::Arc;

use super::*;
use crate::attach::{Attachment, Attachments, Body, Kind};
use crate::llm::{Message, ResponseFormat, Role};

fn identity() -> Identity {
    Identity {
        scope: "alice".into(),
        provider: "mock".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        settings: String::new(),
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        label: "panel".into(),
        model: "m1".into(),
        messages: vec![
            Message {
                role: Role::System,
                content: "Be brief.".into(),
            },
            Message {
                role: Role::User,
                content: "What is 2 + 2?".into(),
            },
        ],
        sampling: Sampling {
            temperature: Some(0.0),
            ..Sampling::default()
        },
        response_format: None,
        attachments: Attachments::default(),
        placed: Vec::new(),
        tools: None,
    }
}

fn image(sha256: &str) -> Attachments {
    Attachments::new(vec![Attachment {
        id: 1,
        name: "chart.png".into(),
        kind: Kind::Image,
        mime: "image/png".into(),
        bytes: 4,
        sha256: sha256.into(),
        shape: Default::default(),
        body: Body::Base64(Arc::from("AAAA")),
    }])
}

fn key_of(request: &ChatRequest) -> String {
    key(&identity(), request, None)
}

#[test]
fn identical_requests_have_one_key_whatever_their_label() {
    let mut relabelled = request();
    relabelled.label = "judge".into();
    assert_eq!(key_of(&request()), key_of(&request()));
    assert_eq!(key_of(&request()), key_of(&relabelled));
    assert_eq!(key_of(&request()).len(), 64, "hex SHA-256");
}

#[test]
fn anything_that_changes_the_answer_changes_the_key() {
    let base = key_of(&request());
    let changed: Vec<(&str, ChatRequest)> = vec![
        ("temperature", {
            let mut r = request();
            r.sampling.temperature = Some(0.7);
            r
        }),
        ("top_p", {
            let mut r = request();
            r.sampling.top_p = Some(0.9);
            r
        }),
        ("seed", {
            let mut r = request();
            r.sampling.seed = Some(7);
            r
        }),
        ("max_tokens", {
            let mut r = request();
            r.sampling.max_tokens = Some(100);
            r
        }),
        ("model", {
            let mut r = request();
            r.model = "m2".into();
            r
        }),
        ("message", {
            let mut r = request();
            r.messages[1].content = "What is 2 + 3?".into();
            r
        }),
        ("role", {
            let mut r = request();
            r.messages[0].role = Role::User;
            r
        }),
        ("messages split differently", {
            let mut r = request();
            r.messages[0].content = "Be brief.What".into();
            r.messages[1].content = " is 2 + 2?".into();
            r
        }),
        ("attachment", {
            let mut r = request();
            r.attachments = image("aa");
            r
        }),
        ("placement", {
            let mut r = request();
            r.placed = vec![crate::llm::Placed {
                message: 1,
                at: 0,
                id: 1,
            }];
            r
        }),
        ("response format", {
            let mut r = request();
            r.response_format = Some(ResponseFormat::JsonObject);
            r
        }),
    ];
    for (what, request) in &changed {
        assert_ne!(
            key_of(request),
            base,
            "a different {what} gives another key"
        );
    }
    let mut one = request();
    one.attachments = image("aa");
    let mut other = request();
    other.attachments = image("bb");
    assert_ne!(key_of(&one), key_of(&other), "another attachment's bytes");

    let searching = WebSearch {
        max_results: Some(3),
        context: None,
    };
    assert_ne!(key(&identity(), &request(), Some(&searching)), base);
    let elsewhere = Identity {
        base_url: "http://127.0.0.1:10/v1".into(),
        ..identity()
    };
    assert_ne!(key(&elsewhere, &request(), None), base, "another base URL");
    let renamed = Identity {
        provider: "other".into(),
        ..identity()
    };
    assert_ne!(key(&renamed, &request(), None), base, "another provider");
}

#[test]
fn only_deterministic_requests_qualify_unless_sampled_ones_are_opted_into() {
    let at = |temperature: Option<f32>, seed: Option<u64>| Sampling {
        temperature,
        seed,
        ..Sampling::default()
    };
    assert!(qualifies(&at(Some(0.0), None), false));
    assert!(qualifies(&at(Some(0.8), Some(42)), false), "a fixed seed");
    assert!(qualifies(&at(None, Some(1)), false));
    assert!(!qualifies(&at(None, None), false), "the provider's default");
    assert!(!qualifies(&at(Some(0.2), None), false));
    assert!(qualifies(&at(None, None), true));
    assert!(qualifies(&at(Some(1.0), None), true));
}

#[test]
fn another_clients_identical_request_has_another_key() {
    let bob = Identity {
        scope: "bob".into(),
        ..identity()
    };
    assert_ne!(key(&bob, &request(), None), key_of(&request()));
}
