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
