use std::path::PathBuf;

use super::*;

fn parse(text: &str) -> Result<Loaded, ConfigError> {
    Loaded::parse(text, "test.toml", PathBuf::from("."))
}

const MINIMAL: &str = r#"
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
fn a_minimal_config_gets_defaults() {
    let loaded = parse(MINIMAL).unwrap();
    let provider = &loaded.config.providers["p"];
    assert_eq!(provider.max_concurrency, 8);
    assert_eq!(provider.retry.max_attempts, 3);
    assert_eq!(loaded.config.limits.max_calls_per_run, 64);
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
            "not both",
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
            MINIMAL.replace(
                "base_url = \"http://127.0.0.1:9/v1\"",
                "base_url = \"http://127.0.0.1:9/v1\"\nmax_concurrency = 0",
            ),
            "providers.p.max_concurrency",
            "at least 1",
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
            "zero or more",
        ),
    ];
    for (text, key, message) in cases {
        let error = parse(&text).unwrap_err();
        assert_eq!(error.key, key, "{error}");
        assert!(error.message.contains(message), "{error}");
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

#[test]
fn the_store_section_has_defaults_and_checked_bounds() {
    let store = &parse(MINIMAL).unwrap().config.store;
    assert!(store.enabled);
    assert_eq!(store.path, None);
    assert_eq!((store.max_runs, store.max_age), (10_000, None));

    let text = format!(
        "{MINIMAL}\n[store]\npath = \"runs.db\"\nmax_runs = 5\nmax_age = \"30days\"\nmax_bytes = 1000\n"
    );
    let store = parse(&text).unwrap().config.store;
    assert_eq!(store.path.as_deref(), Some(std::path::Path::new("runs.db")));
    assert_eq!(
        store.max_age,
        Some(std::time::Duration::from_secs(30 * 86400))
    );

    let cases = [
        (
            "[store]\nmax_runs = 0",
            "store.max_runs",
            "greater than zero",
        ),
        (
            "[store]\nmax_age = \"0s\"",
            "store.max_age",
            "greater than zero",
        ),
        ("[store]\npath = \"\"", "store.path", "must name a file"),
        ("[store]\nkeep = 3", "store.keep", "unknown field"),
        (
            "[pipelines.resynthesize]\ndescription = \"d\"\nselector = \"s\"\nprompter = \"r\"\nsynthesizer = \"y\"",
            "pipelines.resynthesize",
            "a tool chorus provides itself",
        ),
        (
            "[pipelines.ask.options.follow_up_of]\ntype = \"string\"\ndescription = \"d\"",
            "pipelines.ask.options.follow_up_of",
            "every pipeline takes already",
        ),
    ];
    for (extra, key, message) in cases {
        let error = parse(&format!("{MINIMAL}\n{extra}\n")).unwrap_err();
        assert_eq!(error.key, key, "{error}");
        assert!(error.message.contains(message), "{error}");
    }
}
