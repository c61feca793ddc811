use std::path::PathBuf;

use super::*;

pub(super) fn parse(text: &str) -> Result<Loaded, ConfigError> {
    Loaded::parse(text, "test.toml", PathBuf::from("."))
}

pub(crate) const MINIMAL: &str = r#"
[providers.p]
base_url = "http://127.0.0.1:9/v1"
[models.m]
[plugins.s]
builtin = "static-panel"
[plugins.r]
builtin = "passthrough"
[plugins.y]
builtin = "synthesize"
[pipelines.ask]
description = "d"
selector = "s"
prompter = "r"
synthesizer = "y"
"#;

#[test]
fn the_builtin_default_is_valid() {
    let loaded = Loaded::builtin().unwrap();
    assert_eq!(loaded.default_pipeline(), Some("ask"));
    assert_eq!(loaded.config.models.len(), 5);
    assert_eq!(
        loaded.config.providers["openrouter"].api_key_env.as_deref(),
        Some("OPENROUTER_API_KEY")
    );
}

#[test]
fn a_builtin_is_shipped_only_as_the_builtin_default_configures_it() {
    let loaded = Loaded::builtin().unwrap();
    for (name, spec) in &loaded.config.plugins {
        assert!(spec.is_shipped(), "{name}");
    }
    let minimal = parse(MINIMAL).unwrap();
    let plugins = &minimal.config.plugins;
    // As shipped: no settings, default limits.
    assert!(plugins["r"].is_shipped() && plugins["y"].is_shipped());
    // The shipped static-panel has a panel: without one it is not the same.
    assert!(!plugins["s"].is_shipped());
    let mut changed = loaded.config.plugins["debate"].clone();
    changed.settings.insert("rounds".into(), 9.into());
    assert!(!changed.is_shipped(), "other settings");
    let mut changed = loaded.config.plugins["debate"].clone();
    changed.max_memory_mib = 1;
    assert!(!changed.is_shipped(), "other limits");
    let mut changed = loaded.config.plugins["debate"].clone();
    changed.builtin = None;
    changed.path = Some("debate.wasm".into());
    assert!(!changed.is_shipped(), "a file is never shipped");
}

#[test]
fn a_minimal_config_gets_defaults() {
    let loaded = parse(MINIMAL).unwrap();
    let provider = &loaded.config.providers["p"];
    assert_eq!(provider.max_concurrency, 8);
    assert_eq!(provider.retry.max_attempts, 3);
    assert_eq!(loaded.config.limits.max_calls_per_run, 64);
    assert_eq!(loaded.config.http.drain_seconds, 30);
    assert_eq!(
        loaded.default_pipeline(),
        Some("ask"),
        "the only pipeline is the default"
    );
    assert_eq!(loaded.provider_of(&loaded.config.models["m"]), "p");
}

#[test]
fn unknown_keys_are_errors_with_file_line_and_key() {
    let text = MINIMAL.replace("[models.m]", "[models.m]\ncontext = 5");
    let error = parse(&text).unwrap_err();
    assert_eq!(error.key, "models.m.context");
    assert_eq!(error.position.map(|p| p.0), Some(5));
    let shown = error.to_string();
    assert!(shown.starts_with("test.toml:5:"), "{shown}");
    assert!(
        shown.contains("unknown field `context`, expected one of `provider`, `context_window`"),
        "{shown}"
    );
}

#[test]
fn semantic_errors_name_the_key_and_what_is_valid() {
    let cases = [
        (
            MINIMAL.replace("prompter = \"r\"", "prompter = \"nope\""),
            "pipelines.ask.prompter",
            "no plugin named `nope` (defined: r, s, y)",
        ),
        (
            MINIMAL.replace("[pipelines.ask]", "[pipelines.\"has space\"]"),
            "pipelines.has space",
            "MCP tool name",
        ),
        (
            format!("default_pipeline = \"other\"\n{MINIMAL}"),
            "default_pipeline",
            "no pipeline named `other` (defined: ask)",
        ),
        (
            MINIMAL.replace("http://127.0.0.1:9/v1", "ftp://x"),
            "providers.p.base_url",
            "http:// or https://",
        ),
        (
            MINIMAL.replace(
                "builtin = \"passthrough\"",
                "builtin = \"passthrough\"\npath = \"x.wasm\"",
            ),
            "plugins.r",
            "not several",
        ),
        (
            MINIMAL.replace("builtin = \"passthrough\"", "source = \"ghcr.io/acme/p:1\""),
            "plugins.r.source",
            "not an OCI reference",
        ),
        (
            MINIMAL.replace("[plugins.r]\nbuiltin = \"passthrough\"", "[plugins.r]"),
            "plugins.r",
            "set `builtin",
        ),
        (
            MINIMAL.replace("[models.m]", "[models.m]\nprovider = \"q\""),
            "models.\"m\".provider",
            "no provider named `q`",
        ),
        (
            format!("{MINIMAL}\n[providers.two]\nbase_url = \"http://127.0.0.1:9\"\n"),
            "models.\"m\".provider",
            "required when there is more than one provider",
        ),
        (
            MINIMAL.replace("[models.m]", "[models.m]\nweb_search_max_results = 0"),
            "models.\"m\".web_search_max_results",
            "must be from 1 to 25, got 0",
        ),
        (
            format!("{MINIMAL}web_search_max_results = 26\n"),
            "pipelines.ask.web_search_max_results",
            "must be from 1 to 25, got 26",
        ),
        (
            MINIMAL.replace(
                "base_url = \"http://127.0.0.1:9/v1\"",
                "base_url = \"http://127.0.0.1:9/v1\"\nweb_search_usd_per_request = -1.0",
            ),
            "providers.p.web_search_usd_per_request",
            "must be a price in USD per searching request",
        ),
        (
            MINIMAL.replace(
                "base_url = \"http://127.0.0.1:9/v1\"",
                "base_url = \"http://127.0.0.1:9/v1\"\nmax_concurrency = 0",
            ),
            "providers.p.max_concurrency",
            "must be from 1 to 1024, got 0",
        ),
        (
            MINIMAL.replace(
                "base_url = \"http://127.0.0.1:9/v1\"",
                "base_url = \"http://127.0.0.1:9/v1\"\nrequests_per_minute = 0",
            ),
            "providers.p.requests_per_minute",
            "must be from 1 to 1000000000, got 0 (leave it out for no limit)",
        ),
        (
            MINIMAL.replace(
                "base_url = \"http://127.0.0.1:9/v1\"",
                "base_url = \"http://127.0.0.1:9/v1\"\ntokens_per_minute = 2000000000",
            ),
            "providers.p.tokens_per_minute",
            "must be from 1 to 1000000000, got 2000000000",
        ),
        (
            format!("{MINIMAL}\n[http]\ndrain_seconds = 7200\n"),
            "http.drain_seconds",
            "must be from 0 to 3600, got 7200",
        ),
        (
            MINIMAL.replace(
                "base_url = \"http://127.0.0.1:9/v1\"",
                "base_url = \"http://127.0.0.1:9/v1\"\nheaders = { \"bad header\" = \"x\" }",
            ),
            "providers.p.headers.bad header",
            "not a valid HTTP header name",
        ),
        (
            MINIMAL.replace("[models.m]", "[models.m]\ninput_price = -1.0"),
            "models.\"m\".input_price",
            "from 0 to 1000000",
        ),
    ];
    for (text, key, message) in cases {
        let error = parse(&text).unwrap_err();
        assert_eq!(error.key, key, "{error}");
        assert!(error.message.contains(message), "{error}");
    }
}

fn with_provider_keys(keys: &str) -> String {
    MINIMAL.replace(
        "base_url = \"http://127.0.0.1:9/v1\"",
        &format!("base_url = \"http://127.0.0.1:9/v1\"\n{keys}"),
    )
}

#[test]
fn absurd_values_are_refused_at_load_with_file_line_and_key() {
    let cases = [
        (
            MINIMAL.replace(
                "[providers.p]",
                "[limits]\nrun_timeout = \"18446744073709551615s\"\n[providers.p]",
            ),
            "limits.run_timeout",
        ),
        (
            MINIMAL.replace(
                "[providers.p]",
                "[limits]\nrun_timeout = \"30days\"\n[providers.p]",
            ),
            "limits.run_timeout",
        ),
        (
            with_provider_keys("max_concurrency = 9223372036854775807"),
            "providers.p.max_concurrency",
        ),
        (
            with_provider_keys("max_response_bytes = 9223372036854775807"),
            "providers.p.max_response_bytes",
        ),
        (
            with_provider_keys("first_token_timeout = \"400days\""),
            "providers.p.first_token_timeout",
        ),
        (
            with_provider_keys("idle_timeout = \"0s\""),
            "providers.p.idle_timeout",
        ),
        (
            with_provider_keys("[providers.p.retry]\nmax_attempts = 4000000000"),
            "providers.p.retry.max_attempts",
        ),
        (
            with_provider_keys("[providers.p.retry]\nmax_backoff = \"3days\""),
            "providers.p.retry.max_backoff",
        ),
        (
            MINIMAL.replace(
                "[providers.p]",
                "[limits]\nmax_calls_per_run = 4294967295\n[providers.p]",
            ),
            "limits.max_calls_per_run",
        ),
        (
            MINIMAL.replace(
                "[providers.p]",
                "[limits]\nmax_cost_usd = -1.0\n[providers.p]",
            ),
            "limits.max_cost_usd",
        ),
        (
            MINIMAL.replace(
                "[providers.p]",
                "[limits]\nmax_cost_usd = nan\n[providers.p]",
            ),
            "limits.max_cost_usd",
        ),
        (
            MINIMAL.replace(
                "[providers.p]",
                "[fan_out]\nstraggler_grace = \"99999days\"\n[providers.p]",
            ),
            "fan_out.straggler_grace",
        ),
    ];
    for (text, key) in cases {
        let error = parse(&text).unwrap_err();
        assert_eq!(error.key, key, "{error}");
        assert!(error.position.is_some(), "{error}");
        assert!(error.to_string().starts_with("test.toml:"), "{error}");
    }
}

#[test]
fn framing_and_auth_headers_are_refused() {
    for header in [
        "Authorization",
        "content-length",
        "Transfer-Encoding",
        "Host",
    ] {
        let error = parse(&with_provider_keys(&format!(
            "headers = {{ \"{header}\" = \"x\" }}"
        )))
        .unwrap_err();
        assert_eq!(
            error.key,
            format!("providers.p.headers.{header}"),
            "{error}"
        );
        assert!(error.message.contains("may not be set"), "{error}");
        assert_eq!(error.position.map(|p| p.0), Some(4), "{error}");
    }
    let error = parse(&with_provider_keys(
        "headers = { Authorization = \"Bearer x\" }",
    ))
    .unwrap_err();
    assert!(error.message.contains("api_key_env"), "{error}");
}

#[test]
fn params_and_extra_body_may_not_take_over_the_request() {
    let error = parse(&MINIMAL.replace("[models.m]", "[models.m]\nparams = { stream = false }"))
        .unwrap_err();
    assert_eq!(error.key, "models.\"m\".params.stream");
    assert!(
        error.message.contains("providers.NAME.stream = false"),
        "{error}"
    );
    let error = parse(&with_provider_keys("extra_body = { model = \"x\" }")).unwrap_err();
    assert_eq!(error.key, "providers.p.extra_body.model");
    let loaded = parse(&MINIMAL.replace(
        "[models.m]",
        "[models.m]\nparams = { reasoning = { effort = \"high\" }, max_tokens = 8000 }",
    ))
    .unwrap();
    assert_eq!(
        loaded.config.models["m"].params["max_tokens"].as_integer(),
        Some(8000)
    );
}

#[test]
fn read_timeout_is_still_accepted_as_the_idle_timeout() {
    let loaded = parse(&with_provider_keys("read_timeout = \"7s\"")).unwrap();
    let provider = &loaded.config.providers["p"];
    assert_eq!(provider.idle_timeout, std::time::Duration::from_secs(7));
    assert!(provider.stream, "streaming is the default");
    assert_eq!(
        provider.first_token_timeout,
        std::time::Duration::from_secs(300)
    );
    let error = parse(&with_provider_keys(
        "read_timeout = \"7s\"\nidle_timeout = \"8s\"",
    ))
    .unwrap_err();
    assert!(error.message.contains("duplicate"), "{error}");
}

#[test]
fn builtin_option_names_are_reserved() {
    let error = parse(&format!(
        "{MINIMAL}\noptions.max_cost_usd = {{ type = \"number\", description = \"d\" }}\n"
    ))
    .unwrap_err();
    assert_eq!(error.key, "pipelines.ask.options.max_cost_usd");
}

#[test]
fn a_directory_a_device_or_a_fifo_as_config_fails_at_once() {
    for path in ["/", "/dev/zero"] {
        let error = Loaded::from_file(std::path::Path::new(path)).unwrap_err();
        assert!(
            error.message.contains("cannot read the config file: it is"),
            "{error}"
        );
    }
}

#[test]
fn durations_are_human_readable_and_wrong_types_say_so() {
    let text = MINIMAL.replace(
        "base_url = \"http://127.0.0.1:9/v1\"",
        "base_url = \"http://127.0.0.1:9/v1\"\nrequest_timeout = \"90s\"",
    );
    assert_eq!(
        parse(&text).unwrap().config.providers["p"].request_timeout,
        std::time::Duration::from_secs(90)
    );
    let text = MINIMAL.replace(
        "base_url = \"http://127.0.0.1:9/v1\"",
        "base_url = \"http://127.0.0.1:9/v1\"\nrequest_timeout = \"soon\"",
    );
    let error = parse(&text).unwrap_err();
    assert_eq!(error.key, "providers.p.request_timeout");
}

#[test]
fn toml_syntax_errors_have_a_position() {
    let error = parse("[providers.p\nbase_url = 1").unwrap_err();
    assert!(error.position.is_some());
    assert!(error.to_string().starts_with("test.toml:1:"), "{error}");
}

#[test]
fn a_missing_file_is_named() {
    let error = Loaded::from_file(std::path::Path::new("/nonexistent/chorus.toml")).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("/nonexistent/chorus.toml: cannot read the config file"),
        "{error}"
    );
}

#[test]
fn duplicate_names_are_errors_with_a_position() {
    let text = format!("{MINIMAL}\n[plugins.s]\nbuiltin = \"route\"\n");
    let error = parse(&text).unwrap_err();
    assert!(error.position.is_some(), "{error}");
    assert!(error.message.contains("duplicate"), "{error}");
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_text_is_a_config_or_a_located_error(text in "\\PC{0,400}") {
            if let Err(error) = parse(&text) {
                prop_assert!(error.to_string().starts_with("test.toml"));
            }
        }

        #[test]
        fn edits_of_the_default_config_never_panic(at in 0usize..BUILTIN_TOML.len(), cut in 0usize..40, insert in "\\PC{0,12}") {
            let mut text = BUILTIN_TOML.to_owned();
            let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            let end = (at + cut..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
            text.replace_range(at..end, &insert);
            if let Err(error) = parse(&text) {
                prop_assert!(!error.message.is_empty());
            }
        }
    }
}
