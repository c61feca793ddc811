use serde_json::{Map, json};

use super::*;
use crate::llm::ModelInfo;
use crate::llm::secret::Secret;
use crate::llm::stream::Assembler;
use crate::llm::types::{ChatRequest, JsonSchema, Message, ResponseFormat, Role, Sampling};

fn parse(body: serde_json::Value) -> Result<Reply, Failure> {
    parse_reply(
        body.to_string().as_bytes(),
        "asked/model",
        &Scrubber::none(),
    )
}

#[test]
fn a_normal_completion_parses_with_usage() {
    let reply = parse(json!({
        "model": "served/model",
        "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "cost": 0.25}
    }))
    .unwrap();
    assert_eq!(*reply.content, "hello");
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
    assert_eq!(*reply.content, "ab");
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
        let failure = parse_reply(body.as_bytes(), "m", &Scrubber::none()).unwrap_err();
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
fn odd_usage_fields_never_discard_an_answer() {
    for usage in [
        json!({"prompt_tokens": 12.0, "completion_tokens": "34", "cost": "0.0005"}),
        json!({"prompt_tokens": -3, "completion_tokens": 1e30, "cost": -1}),
        json!({"prompt_tokens": null, "completion_tokens": [1], "cost": {"usd": 1}}),
        json!("lots"),
        json!([1, 2]),
        json!({"completion_tokens_details": "none", "prompt_tokens_details": 7}),
    ] {
        let reply = parse(json!({
            "choices": [{"message": {"content": "kept"}, "finish_reason": "stop"}],
            "usage": usage
        }))
        .unwrap_or_else(|f| panic!("{usage}: {f}"));
        assert_eq!(*reply.content, "kept", "{usage}");
    }
    let usage = parse(json!({
        "choices": [{"message": {"content": "x"}}],
        "usage": {"prompt_tokens": 12.0, "completion_tokens": "34", "cost": "0.0005",
                  "completion_tokens_details": {"reasoning_tokens": 20}}
    }))
    .unwrap()
    .usage
    .unwrap();
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.reasoning_tokens,
            usage.cost
        ),
        (12, 34, Some(20), Some(0.0005))
    );
    let clamped = parse(json!({
        "choices": [{"message": {"content": "x"}}],
        "usage": {"prompt_tokens": -3, "completion_tokens": 1e30, "cost": -1}
    }))
    .unwrap()
    .usage
    .unwrap();
    assert_eq!(
        (
            clamped.prompt_tokens,
            clamped.completion_tokens,
            clamped.cost
        ),
        (0, u32::MAX, None)
    );
    assert!(
        clamped.tokens_estimated,
        "a count that was not given is not trusted"
    );
}

#[test]
fn content_parts_skip_reasoning_and_non_text_parts() {
    let reply = parse(json!({"choices": [{"message": {"content": [
        "plain ",
        {"type": "reasoning", "text": "hidden thoughts"},
        {"type": "text", "text": "answer"},
        {"type": "image_url", "image_url": {"url": "x"}},
        7
    ]}}]}))
    .unwrap();
    assert_eq!(*reply.content, "plain answer");
}

#[test]
fn an_empty_answer_cut_by_length_is_a_token_limit_failure() {
    for content in [json!(""), json!(null)] {
        let failure = parse(json!({
            "choices": [{"message": {"content": content, "reasoning": "long thoughts"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4096,
                      "completion_tokens_details": {"reasoning_tokens": 4096}}
        }))
        .unwrap_err();
        assert_eq!(failure.kind, FailureKind::TokenLimit);
        assert!(
            failure
                .message
                .contains("4096 completion tokens, 4096 of them reasoning")
                && failure.message.contains("max_tokens"),
            "{}",
            failure.message
        );
    }
    // A truncated but non-empty answer is still an answer.
    let reply =
        parse(json!({"choices": [{"message": {"content": "half"}, "finish_reason": "length"}]}))
            .unwrap();
    assert_eq!(reply.finish_reason.as_deref(), Some("length"));
}

#[test]
fn error_messages_come_from_json_or_text_bodies() {
    assert_eq!(
        error_message(
            r#"{"error": {"message": "Invalid API key", "code": "invalid_api_key"}}"#,
            &Scrubber::none()
        ),
        "Invalid API key"
    );
    assert_eq!(
        error_message(r#"{"error": "plain"}"#, &Scrubber::none()),
        "plain"
    );
    assert_eq!(
        error_message(
            r#"{"error": {"code": "model_not_found"}}"#,
            &Scrubber::none()
        ),
        "model_not_found"
    );
    assert_eq!(
        error_message(r#"{"detail": "Not Found"}"#, &Scrubber::none()),
        "Not Found"
    );
    assert_eq!(
        error_message("<html>Bad Gateway</html>", &Scrubber::none()),
        "<html>Bad Gateway</html>"
    );
    assert_eq!(error_message("", &Scrubber::none()), "(empty body)");
    let long = "x".repeat(10_000);
    assert!(error_message(&long, &Scrubber::none()).chars().count() <= 501);
}

#[test]
fn the_request_body_layers_extra_body_sampling_and_params() {
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
        response_format: None,
        attachments: Default::default(),
        placed: Vec::new(),
        tools: None,
    };
    let extra = json!({"transforms": [], "temperature": 1.0, "model": "evil/override"});
    let params = json!({"reasoning": {"effort": "high"}, "max_tokens": 20000, "stream": false});
    let bytes = request_body(
        &request,
        extra.as_object().unwrap(),
        params.as_object().unwrap(),
        true,
        FormatSent::None,
        false,
    );
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["model"], "a/b", "nobody overrides the model");
    assert_eq!(body["stream"], true, "nor streaming");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
    assert_eq!(body["temperature"], 0.5, "sampling over extra_body");
    assert_eq!(body["max_tokens"], 20000, "params over sampling");
    assert_eq!(body["reasoning"], json!({"effort": "high"}));
    assert!(body.get("top_p").is_none());
    assert!(body.get("usage").is_none(), "nothing a provider may reject");
    assert_eq!(
        max_tokens(&request, params.as_object().unwrap()),
        Some(20000)
    );
    assert_eq!(max_tokens(&request, &Map::new()), Some(10));
}

fn asking_for(format: Option<ResponseFormat>) -> ChatRequest {
    ChatRequest {
        label: "analysis".into(),
        model: "a/b".into(),
        messages: vec![Message {
            role: Role::User,
            content: "Reply in JSON.".into(),
        }],
        sampling: Sampling::default(),
        response_format: format,
        attachments: Default::default(),
        placed: Vec::new(),
        tools: None,
    }
}

fn schema() -> ResponseFormat {
    ResponseFormat::JsonSchema(
        JsonSchema::new(
            "panel_analysis".into(),
            r#"{"type": "object", "properties": {"x": {"type": "string"}}}"#,
            true,
        )
        .unwrap(),
    )
}

fn body_of(
    request: &ChatRequest,
    params: serde_json::Value,
    sent: FormatSent,
) -> serde_json::Value {
    let bytes = request_body(
        request,
        &Map::new(),
        params.as_object().unwrap(),
        false,
        sent,
        false,
    );
    serde_json::from_slice(&bytes).unwrap()
}

#[test]
fn a_response_format_is_sent_as_far_as_the_model_takes_it() {
    let request = asking_for(Some(schema()));
    let full = body_of(&request, json!({}), FormatSent::JsonSchema);
    assert_eq!(
        full["response_format"],
        json!({
            "type": "json_schema",
            "json_schema": {
                "name": "panel_analysis",
                "schema": {"type": "object", "properties": {"x": {"type": "string"}}},
                "strict": true,
            }
        })
    );
    let json_mode = body_of(&request, json!({}), FormatSent::JsonObject);
    assert_eq!(json_mode["response_format"], json!({"type": "json_object"}));
    let none = body_of(&request, json!({}), FormatSent::None);
    assert!(none.get("response_format").is_none(), "{none}");
    let free_text = body_of(&asking_for(None), json!({}), FormatSent::JsonSchema);
    assert!(free_text.get("response_format").is_none(), "{free_text}");
}

#[test]
fn an_operators_response_format_wins_and_is_what_is_reported() {
    let forced = json!({"response_format": {"type": "json_object"}});
    let body = body_of(
        &asking_for(Some(schema())),
        forced.clone(),
        FormatSent::JsonObject,
    );
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(
        forced_format(forced.as_object().unwrap()),
        Some(FormatSent::JsonObject)
    );
    let text = json!({"response_format": {"type": "text"}});
    assert_eq!(
        forced_format(text.as_object().unwrap()),
        Some(FormatSent::None)
    );
    assert_eq!(forced_format(&Map::new()), None);
}

#[test]
fn what_a_model_takes_follows_its_supported_parameters() {
    let model = |params: Option<&[&str]>| ModelInfo {
        id: "a/b".into(),
        provider: "p".into(),
        context_window: None,
        input_price: None,
        cache_read_price: None,
        cache_write_price: None,
        output_price: None,
        tags: vec![],
        max_output_tokens: None,
        supported_parameters: params.map(|p| p.iter().map(|s| (*s).to_owned()).collect()),
        input_modalities: None,
        prices_source: None,
        listed: None,
    };
    let schema = schema();
    let json = ResponseFormat::JsonObject;
    let structured = model(Some(&["structured_outputs", "response_format", "tools"]));
    assert_eq!(structured.format_for(Some(&schema)), FormatSent::JsonSchema);
    assert_eq!(structured.format_for(Some(&json)), FormatSent::JsonObject);
    assert_eq!(structured.format_for(None), FormatSent::None);
    let json_mode = model(Some(&["response_format", "temperature"]));
    assert_eq!(json_mode.format_for(Some(&schema)), FormatSent::JsonObject);
    let neither = model(Some(&["temperature"]));
    assert_eq!(neither.format_for(Some(&schema)), FormatSent::None);
    let unknown = model(None);
    assert_eq!(
        unknown.format_for(Some(&json)),
        FormatSent::None,
        "nobody said it takes one"
    );
}

#[test]
fn a_schema_providers_would_refuse_is_refused_here_saying_why() {
    let object = r#"{"type": "object"}"#;
    assert!(JsonSchema::new("ok_name-2".into(), object, false).is_ok());
    for name in ["", "has space", "dots.not.allowed", &"x".repeat(65)] {
        let error = JsonSchema::new(name.into(), object, true).unwrap_err();
        assert!(error.contains("1 to 64 letters"), "{error}");
    }
    let not_json = JsonSchema::new("s".into(), "{type: object", true).unwrap_err();
    assert!(not_json.contains("is not JSON"), "{not_json}");
    let not_object = JsonSchema::new("s".into(), "[1, 2]", true).unwrap_err();
    assert!(not_object.contains("must be a JSON object"), "{not_object}");
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
            let _ = parse_reply(&body, "m", &Scrubber::none());
            prop_assert!(error_message(&String::from_utf8_lossy(&body), &Scrubber::none()).chars().count() <= 501);
        }

        #[test]
        fn any_provider_shaped_json_becomes_a_reply_or_a_typed_failure(value in provider_json()) {
            let body = value.to_string();
            match parse_reply(body.as_bytes(), "m", &Scrubber::none()) {
                Ok(reply) => prop_assert!(!reply.served_by.is_empty()),
                Err(failure) => prop_assert!(matches!(failure.kind, FailureKind::MalformedResponse | FailureKind::HttpStatus | FailureKind::TokenLimit)),
            }
            let _ = error_message(&body, &Scrubber::none());
        }

        #[test]
        fn well_formed_completions_keep_their_content(content in "\\PC{0,200}", prompt in any::<u32>(), completion in any::<u32>()) {
            let body = serde_json::json!({
                "choices": [{"message": {"content": content}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion}
            });
            let reply = parse_reply(body.to_string().as_bytes(), "m", &Scrubber::none()).unwrap();
            prop_assert_eq!(reply.content.as_str(), content);
            prop_assert_eq!(reply.usage.unwrap().completion_tokens, completion);
        }
    }
}

const KEY: &str = "sk-canary-7d3f9a61c0b2e845";

/// `KEY` echoed so that a cut at `chars` characters falls 9 characters
/// into it: cut first and the 9 are too short for the scrubber to know.
fn across(chars: usize) -> String {
    format!("{}{KEY}{}", "x".repeat(chars - 9), "y".repeat(50))
}

#[test]
fn a_key_echo_across_any_cut_is_scrubbed_before_the_cut() {
    let scrubber = Secret::new(KEY.into()).scrubber();
    let stream_event = |data: &str| {
        Assembler::new(scrubber.clone())
            .event(data)
            .unwrap_err()
            .message
    };
    let raw = json!({"error": {"message": "m", "metadata": {"raw": across(300)}}}).to_string();
    let code = json!({"error": {"code": across(100)}}).to_string();
    let cases = [
        (
            "excerpt of a body",
            parse_reply(across(500).as_bytes(), "m", &scrubber)
                .unwrap_err()
                .message,
        ),
        (
            "metadata.raw",
            parse_reply(raw.as_bytes(), "m", &scrubber)
                .unwrap_err()
                .message,
        ),
        (
            "error code",
            parse_reply(code.as_bytes(), "m", &scrubber)
                .unwrap_err()
                .message,
        ),
        ("raw in a stream", stream_event(&raw)),
        ("excerpt of a stream event", stream_event(&across(500))),
        (
            "error body message",
            error_message(&json!({"message": across(500)}).to_string(), &scrubber),
        ),
        ("error body text", error_message(&across(500), &scrubber)),
    ];
    for (cut, message) in cases {
        assert!(!message.contains(&KEY[..9]), "{cut}: {message}");
        assert!(
            message.contains("xxx"),
            "{cut}: the text around the echo stays: {message}"
        );
    }
}

#[test]
fn cached_and_written_prompt_tokens_are_read_under_either_name() {
    let usage = |usage: serde_json::Value| {
        parse(json!({
            "choices": [{"message": {"content": "x"}}],
            "usage": usage
        }))
        .unwrap()
        .usage
        .unwrap()
    };
    let openrouter = usage(json!({"prompt_tokens": 1000, "completion_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 800, "cache_write_tokens": "150", "audio_tokens": 0}}));
    assert_eq!(
        (openrouter.cached_tokens, openrouter.cache_write_tokens),
        (Some(800), Some(150))
    );
    let anthropic = usage(json!({"prompt_tokens": 1000, "completion_tokens": 10,
        "cache_read_input_tokens": 700, "cache_creation_input_tokens": 0}));
    assert_eq!(
        (anthropic.cached_tokens, anthropic.cache_write_tokens),
        (Some(700), Some(0))
    );
    let none = usage(json!({"prompt_tokens": 5, "completion_tokens": 1,
        "prompt_tokens_details": null}));
    assert_eq!((none.cached_tokens, none.cache_write_tokens), (None, None));
}

fn conversation(model: &str, messages: &[(Role, &str)]) -> serde_json::Value {
    let request = ChatRequest {
        label: "panel".into(),
        model: model.into(),
        messages: messages
            .iter()
            .map(|(role, content)| Message {
                role: *role,
                content: (*content).into(),
            })
            .collect(),
        sampling: Sampling::default(),
        response_format: None,
        attachments: Default::default(),
        placed: Vec::new(),
        tools: None,
    };
    body_of(&request, json!({}), FormatSent::None)
}

#[test]
fn models_that_cache_only_when_told_get_the_end_of_the_repeated_prefix_marked() {
    let messages = [
        (Role::System, "Be terse."),
        (Role::User, "earlier question"),
        (Role::Assistant, "earlier answer"),
        (Role::User, "now"),
    ];
    for model in ["anthropic/claude-sonnet-4.5", "google/gemini-2.5-pro"] {
        let body = conversation(model, &messages);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": "earlier question"},
                {"role": "assistant", "content": [{"type": "text", "text": "earlier answer",
                    "cache_control": {"type": "ephemeral"}}]},
                {"role": "user", "content": "now"},
            ]),
            "{model}"
        );
    }
    let body = conversation("anthropic/claude-sonnet-4.5", &messages[..1]);
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "Be terse."}]),
        "nothing repeats ahead of a lone message"
    );
    for model in [
        "openai/gpt-5",
        "google/gemma-3-27b-it",
        "deepseek/deepseek-chat",
    ] {
        let body = conversation(model, &messages);
        assert!(
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["content"].is_string()),
            "{model} caches by itself or not at all: {body}"
        );
    }
}

#[test]
fn cached_and_written_tokens_are_priced_at_the_cache_prices() {
    let model = ModelInfo {
        id: "anthropic/claude".into(),
        provider: "p".into(),
        context_window: None,
        input_price: Some(3.0),
        output_price: Some(15.0),
        cache_read_price: Some(0.3),
        cache_write_price: Some(3.75),
        tags: vec![],
        max_output_tokens: None,
        supported_parameters: None,
        input_modalities: None,
        prices_source: None,
        listed: None,
    };
    let usd = |prompt, cached, written, completion| {
        (model
            .cost_cached(prompt, cached, written, completion)
            .unwrap()
            * 1e9)
            .round()
            / 1e9
    };
    // 200 plain at 3, 800 cached at 0.3, 10 completion at 15 (per million).
    assert_eq!(usd(1000, 800, 0, 10), 0.00099);
    // 1000 written at 3.75.
    assert_eq!(usd(1000, 0, 1000, 0), 0.00375);
    // Counts that do not add up are clamped to the prompt.
    assert_eq!(usd(100, 800, 800, 0), 0.00003);
    let unpriced = ModelInfo {
        cache_read_price: None,
        cache_write_price: None,
        ..model.clone()
    };
    assert_eq!(
        unpriced.cost_cached(1000, 800, 0, 0),
        unpriced.cost(1000, 0),
        "no cache prices: cached tokens cost what any prompt token does"
    );
}

#[test]
fn a_streamed_request_asks_for_usage_unless_the_operator_said_otherwise() {
    let request = ChatRequest {
        label: "panel".into(),
        model: "a/b".into(),
        messages: vec![Message {
            role: Role::User,
            content: "hi".into(),
        }],
        sampling: Sampling::default(),
        response_format: None,
        attachments: Default::default(),
        placed: Vec::new(),
        tools: None,
    };
    let body = |extra: serde_json::Value, stream: bool| -> serde_json::Value {
        let bytes = request_body(
            &request,
            extra.as_object().unwrap(),
            &Map::new(),
            stream,
            FormatSent::None,
            false,
        );
        serde_json::from_slice(&bytes).unwrap()
    };
    assert_eq!(
        body(json!({}), true)["stream_options"],
        json!({"include_usage": true}),
        "gateways send a stream's usage only when asked"
    );
    assert!(
        body(json!({}), false).get("stream_options").is_none(),
        "a plain request carries its usage anyway"
    );
    assert_eq!(
        body(
            json!({"stream_options": {"continuous_usage_stats": true}}),
            true
        )["stream_options"],
        json!({"continuous_usage_stats": true, "include_usage": true}),
        "the operator's own options stay"
    );
    assert_eq!(
        body(json!({"stream_options": {"include_usage": false}}), true)["stream_options"],
        json!({"include_usage": false}),
        "an explicit no is kept (a server that rejects the field)"
    );
}
