use serde_json::json;

use super::*;
use crate::llm::types::{ChatRequest, Message, Role, Sampling};

fn parse(body: serde_json::Value) -> Result<Reply, Failure> {
    parse_reply(body.to_string().as_bytes(), "asked/model")
}

#[test]
fn a_normal_completion_parses_with_usage() {
    let reply = parse(json!({
        "model": "served/model",
        "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "cost": 0.25}
    }))
    .unwrap();
    assert_eq!(reply.content, "hello");
    assert_eq!(reply.served_by, "served/model");
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    let usage = reply.usage.unwrap();
    assert_eq!(
        (usage.prompt_tokens, usage.completion_tokens, usage.cost),
        (3, 5, Some(0.25))
    );
}

#[test]
fn content_parts_are_joined_and_a_missing_model_falls_back() {
    let reply = parse(json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]})).unwrap();
    assert_eq!(reply.content, "ab");
    assert_eq!(reply.served_by, "asked/model");
    assert!(reply.usage.is_none());
}

#[test]
fn unusable_bodies_are_malformed_responses_not_panics() {
    for (body, why) in [
        ("not json at all".to_owned(), "not a chat completion"),
        (json!({"choices": []}).to_string(), "no choices"),
        (json!({"id": "x"}).to_string(), "no choices"),
        (
            json!({"choices": [{"message": {"content": null}}]}).to_string(),
            "content is null",
        ),
        (
            json!({"choices": [{"message": {"content": null, "refusal": "I can't"}}]}).to_string(),
            "refused: I can't",
        ),
        (
            json!({"choices": [{"message": {"content": 7}}]}).to_string(),
            "not text",
        ),
        (json!({"choices": [{}]}).to_string(), "no message"),
        (String::new(), "not a chat completion"),
    ] {
        let failure = parse_reply(body.as_bytes(), "m").unwrap_err();
        assert_eq!(failure.kind, FailureKind::MalformedResponse, "{body}");
        assert!(failure.message.contains(why), "{body}: {}", failure.message);
    }
}

#[test]
fn an_error_inside_a_200_is_reported_with_the_providers_words() {
    let failure = parse(
        json!({"error": {"message": "Provider returned error", "code": 502,
        "metadata": {"raw": "upstream overloaded"}}}),
    )
    .unwrap_err();
    assert_eq!(failure.kind, FailureKind::HttpStatus);
    assert_eq!(failure.status, Some(502));
    assert_eq!(
        failure.message,
        "Provider returned error (upstream overloaded)"
    );
}

#[test]
fn error_messages_come_from_json_or_text_bodies() {
    assert_eq!(
        error_message(br#"{"error": {"message": "Invalid API key"}}"#),
        "Invalid API key"
    );
    assert_eq!(error_message(br#"{"error": "plain"}"#), "plain");
    assert_eq!(
        error_message(b"<html>Bad Gateway</html>"),
        "<html>Bad Gateway</html>"
    );
    assert_eq!(error_message(b""), "(empty body)");
    let long = "x".repeat(10_000);
    assert!(error_message(long.as_bytes()).chars().count() <= 501);
}

#[test]
fn the_request_body_carries_sampling_and_extra_fields_but_extra_never_overrides() {
    let request = ChatRequest {
        label: "panel".into(),
        model: "a/b".into(),
        messages: vec![Message {
            role: Role::User,
            content: "hi".into(),
        }],
        sampling: Sampling {
            temperature: Some(0.5),
            max_tokens: Some(10),
            ..Sampling::default()
        },
    };
    let extra = json!({"usage": {"include": true}, "model": "evil/override"});
    let body = request_body(&request, extra.as_object().unwrap());
    assert_eq!(body["model"], "a/b");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["max_tokens"], 10);
    assert!(body.get("top_p").is_none());
    assert_eq!(body["usage"], json!({"include": true}));
}

mod properties {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::super::*;

    /// JSON shaped like what providers send, wrong in every way they can be.
    fn provider_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e9f64..1e9).prop_map(Value::from),
            "\\PC{0,40}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            let key = prop_oneof![
                Just("choices".to_owned()),
                Just("message".to_owned()),
                Just("content".to_owned()),
                Just("error".to_owned()),
                Just("usage".to_owned()),
                Just("code".to_owned()),
                Just("prompt_tokens".to_owned()),
                "[a-z_]{1,12}",
            ];
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key, inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_bytes_become_a_reply_or_a_typed_failure(body in prop::collection::vec(any::<u8>(), 0..2048)) {
            let _ = parse_reply(&body, "m");
            prop_assert!(error_message(&body).chars().count() <= 501);
        }

        #[test]
        fn any_provider_shaped_json_becomes_a_reply_or_a_typed_failure(value in provider_json()) {
            let body = value.to_string();
            match parse_reply(body.as_bytes(), "m") {
                Ok(reply) => prop_assert!(!reply.served_by.is_empty()),
                Err(failure) => prop_assert!(matches!(failure.kind, FailureKind::MalformedResponse | FailureKind::HttpStatus)),
            }
            let _ = error_message(body.as_bytes());
        }

        #[test]
        fn well_formed_completions_keep_their_content(content in "\\PC{0,200}", prompt in any::<u32>(), completion in any::<u32>()) {
            let body = serde_json::json!({
                "choices": [{"message": {"content": content}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion}
            });
            let reply = parse_reply(body.to_string().as_bytes(), "m").unwrap();
            prop_assert_eq!(reply.content, content);
            prop_assert_eq!(reply.usage.unwrap().completion_tokens, completion);
        }
    }
}
