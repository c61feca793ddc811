use super::*;

#[test]
fn openrouter_shaped_lists_parse_with_prices_per_million() {
    let body = br#"{"data": [
        {"id": "openai/gpt-5", "name": "GPT-5", "context_length": 400000,
         "pricing": {"prompt": "0.00000125", "completion": "0.00001", "request": "0"},
         "top_provider": {"context_length": 400000, "max_completion_tokens": 128000},
         "supported_parameters": ["reasoning", "max_tokens", 7]},
        {"id": "openrouter/auto", "pricing": {"prompt": "-1", "completion": "-1"}},
        {"name": "no id"},
        {"id": "local", "max_model_len": 8192.0}
    ]}"#;
    let models = parse(body).unwrap();
    assert_eq!(models.len(), 3);
    assert_eq!(models[0].input_price, Some(1.25));
    assert_eq!(models[0].output_price, Some(10.0));
    assert_eq!(models[0].max_output_tokens, Some(128000));
    assert_eq!(models[0].supported_parameters, ["reasoning", "max_tokens"]);
    assert_eq!(models[0].cache_read_price, None);
    assert_eq!(models[1].input_price, None, "variable pricing is unknown");
    assert_eq!(models[2].context_window, Some(8192));
    assert!(parse(b"<html>").is_err());
    assert_eq!(parse(br#"[{"id": "a"}]"#).unwrap()[0].id, "a");
}

#[test]
fn prompt_cache_prices_are_read_from_the_pricing() {
    let body = br#"{"data": [{"id": "anthropic/claude-sonnet-4.5", "pricing": {
        "prompt": "0.000003", "completion": "0.000015",
        "input_cache_read": "0.0000003", "input_cache_write": "0.00000375"}}]}"#;
    let models = parse(body).unwrap();
    assert_eq!(models[0].cache_read_price, Some(0.3));
    assert_eq!(models[0].cache_write_price, Some(3.75));
}

#[test]
fn a_cache_file_is_outside_data() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.json");
    let url = url::Url::parse("http://example.test/v1").unwrap();
    for text in [
        format!(r#"{{"base_url": "{url}", "fetched_at": 18446744073709551615, "models": []}}"#),
        "not json".to_owned(),
        r#"{"base_url": "http://other.test/v1", "fetched_at": 1, "models": []}"#.to_owned(),
    ] {
        std::fs::write(&file, text).unwrap();
        assert!(read_cache(&file, "p", &url).is_none());
    }
    let catalog = Catalog {
        provider: "p".into(),
        models: parse(br#"[{"id": "a"}]"#).unwrap(),
        fetched_at: SystemTime::now(),
        origin: Origin::Fetched,
    };
    write_cache(&file, &url, &catalog);
    let read = read_cache(&file, "p", &url).unwrap();
    assert_eq!(read.models, catalog.models);
    assert_eq!(read.origin, Origin::Cached);
}

#[test]
fn the_closest_ids_are_named() {
    let listed = [
        "anthropic/claude-sonnet-4.5",
        "anthropic/claude-opus-4.1",
        "openai/gpt-5",
        "openai/gpt-5-mini",
        "x-ai/grok-4",
    ];
    assert_eq!(
        closest("anthropic/claude-sonnet-4", listed.iter().copied(), 2),
        ["anthropic/claude-sonnet-4.5", "anthropic/claude-opus-4.1"]
    );
    assert_eq!(
        closest("gpt-5", listed.iter().copied(), 2),
        ["openai/gpt-5", "openai/gpt-5-mini"]
    );
    assert_eq!(
        closest("gpt-5", listed.iter().copied(), 1),
        ["openai/gpt-5"]
    );
    assert!(closest("zzzzzzzzzzzz", listed.iter().copied(), 3).is_empty());
}

#[test]
fn an_offline_stand_in_is_retried_soon_then_less_often() {
    let catalog = |origin| {
        Ok(Arc::new(Catalog {
            provider: "p".into(),
            models: vec![],
            fetched_at: SystemTime::now(),
            origin,
        }))
    };
    let stale = || {
        catalog(Origin::Stale {
            error: "offline".into(),
        })
    };
    let slot = |result, keep| Slot {
        result,
        at: Instant::now(),
        keep,
    };
    let day = DEFAULT_TTL;
    let mut previous: Option<Slot> = None;
    let mut waits = vec![];
    for _ in 0..7 {
        let result = stale();
        let keep = keep_for(&result, previous.as_ref(), day);
        waits.push(keep.as_secs());
        previous = Some(slot(result, keep));
    }
    assert_eq!(waits, [60, 120, 240, 480, 960, 960, 960]);
    // Never longer than the expiry itself.
    assert_eq!(
        keep_for(&stale(), previous.as_ref(), Duration::from_secs(90)),
        Duration::from_secs(90)
    );
    // Back: the live list is kept its whole expiry, and the next outage
    // starts short again.
    let fetched = catalog(Origin::Fetched);
    assert_eq!(keep_for(&fetched, previous.as_ref(), day), day);
    let back = slot(fetched, day);
    assert_eq!(keep_for(&stale(), Some(&back), day), MEMORY_TTL);
    let failed = Err(Unavailable {
        message: "404".into(),
        unreachable: false,
    });
    assert_eq!(keep_for(&failed, Some(&back), day), MEMORY_TTL);
}

#[test]
fn litellm_proxy_lists_give_context_and_output_limits() {
    // As LiteLLM 1.108's proxy answers `GET /v1/models`.
    let body = br#"{"data": [
        {"id": "gw/alpha", "object": "model", "created": 1677610602, "owned_by": "openai",
         "max_input_tokens": 32000, "max_output_tokens": 4000},
        {"id": "gw/bare", "object": "model", "created": 1677610602, "owned_by": "openai"}
    ], "object": "list"}"#;
    let models = parse(body).unwrap();
    assert_eq!(models[0].context_window, Some(32000));
    assert_eq!(models[0].max_output_tokens, Some(4000));
    assert_eq!(models[0].input_price, None, "a LiteLLM list has no prices");
    assert_eq!(models[1].context_window, None);
}
