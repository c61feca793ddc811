//! The providers' model lists: `chorus check` flags ids a provider does not
//! list (in `[models]` and in plugin settings) naming the closest ones, and
//! fills prices and windows the config leaves out; `chorus models` lists
//! them; the list is cached on disk and used offline; plugins see it
//! through `host.models`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

fn listed(id: &str, prompt: &str, completion: &str) -> Value {
    json!({
        "id": id, "name": format!("Model {id}"), "context_length": 64000,
        "pricing": {"prompt": prompt, "completion": completion},
        "top_provider": {"max_completion_tokens": 8000},
        "supported_parameters": ["max_tokens", "temperature"]
    })
}

/// A list with every test model but m5, which was renamed m5-v2.
fn catalog(mock: &Mock) {
    mock.catalog(json!([
        listed("m1", "0.000003", "0.000015"),
        listed("m2", "0.000003", "0.000015"),
        listed("m3", "0.000003", "0.000015"),
        listed("m4", "0.0000001", "0.0000002"),
        listed("m5-v2", "0.0000001", "0.0000002"),
        listed("synth", "0.000001", "0.000002"),
        listed("synth2", "0.000001", "0.000002"),
    ]));
}

#[tokio::test(flavor = "multi_thread")]
async fn check_flags_model_ids_the_provider_does_not_list_and_names_the_closest() {
    let mock = Mock::start().await;
    catalog(&mock);
    let extra = r#"
[plugins.cheapest]
builtin = "cheapest"
settings = { budget_usd = 1.0, synthesizers = ["vendor/sythn"] }
"#;
    let file = write_config(&config(&mock, extra));
    let path = file.path.to_str().unwrap();
    let (code, stdout, stderr) = run_cli(&["check", "--config", path]).await;
    assert_eq!(code, 1, "unknown ids fail the check: {stdout}{stderr}");
    for expected in [
        "mock             7 models, fetched now",
        "`models.\"m5\"`: `m5` is not listed by provider `mock`; used by pipeline(s) ask; closest: m5-v2",
        "`plugins.cheapest.settings.synthesizers[0]`: `vendor/sythn` is not in [models], so no plugin may use it; closest: synth",
        "2 model id(s) will fail as written",
        // Prices the config leaves out come from the list.
        "m1                                       mock  100000 tokens  $3/$15 per M (from the catalog)",
    ] {
        assert!(
            stdout.contains(expected),
            "missing `{expected}` in:\n{stdout}"
        );
    }
    assert!(
        stdout.contains(&format!("{path}:")),
        "flags carry the file and line: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chorus_models_lists_the_catalog_and_works_offline_from_the_cache() {
    let mock = Mock::start().await;
    catalog(&mock);
    let cache = tempfile::tempdir().unwrap();
    let text = config(&mock, "")
        .replace(
            "connect_timeout = \"2s\"",
            "connect_timeout = \"2s\"\ncatalog_ttl = \"1s\"",
        )
        .replace(
            "[limits]",
            &format!("[cache]\ndir = \"{}\"\n\n[limits]", cache.path().display()),
        );
    let file = write_config(&text);
    let path = file.path.to_str().unwrap();

    let (code, stdout, stderr) = run_cli(&["models", "--config", path, "M5"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("mock (7 models, fetched now)"), "{stdout}");
    assert!(stdout.contains("  m5-v2 "), "{stdout}");
    assert!(!stdout.contains("m1 "), "filtered by the query: {stdout}");
    let (_, stdout, _) = run_cli(&["models", "--config", path]).await;
    assert!(
        stdout.contains("* m1") && stdout.contains("$3") && stdout.contains("$15"),
        "configured models are marked, prices per million: {stdout}"
    );
    let (_, json_out, _) = run_cli(&["models", "--json", "--config", path, "synth2"]).await;
    let rows: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(rows[0]["id"], "synth2");
    assert_eq!(rows[0]["input_price"], 1.0);
    assert_eq!(rows[0]["configured"], true);
    let fetched = mock.catalog_requests();

    // The provider goes away; the list is past its catalog_ttl, so chorus
    // tries, fails to connect, and says it is using the old list.
    drop(mock);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (code, stdout, stderr) = run_cli(&["models", "--config", path, "m5"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("mock (7 models from a cache")
            && stdout.contains("the provider is unreachable"),
        "{stdout}"
    );
    assert!(fetched >= 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_cached_list_saves_the_fetch() {
    let mock = Mock::start().await;
    catalog(&mock);
    let cache = tempfile::tempdir().unwrap();
    let text = config(&mock, "")
        .replace(
            "connect_timeout = \"2s\"",
            "connect_timeout = \"2s\"\ncatalog_ttl = \"1h\"",
        )
        .replace(
            "[limits]",
            &format!("[cache]\ndir = \"{}\"\n\n[limits]", cache.path().display()),
        );
    let file = write_config(&text);
    let path = file.path.to_str().unwrap();
    run_cli(&["models", "--config", path]).await;
    assert_eq!(mock.catalog_requests(), 1);
    let (_, stdout, _) = run_cli(&["models", "--config", path]).await;
    assert!(stdout.contains("mock (7 models, cached"), "{stdout}");
    assert_eq!(mock.catalog_requests(), 1, "served from the disk cache");
    let (_, stdout, _) = run_cli(&["models", "--refresh", "--config", path]).await;
    assert!(stdout.contains("fetched now"), "{stdout}");
    assert_eq!(mock.catalog_requests(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_see_the_catalogs_prices_through_host_models() {
    let mock = Mock::start().await;
    catalog(&mock);
    for model in PANEL {
        mock.script(model, [Step::stream(&format!("{model} answers"))]);
    }
    mock.script(SYNTH, [Step::stream("merged")]);
    // No prices in the config: the `cheapest` selector can only choose by
    // what the provider's list says (m4 is the cheapest listed model).
    let extra = r#"
[plugins.cheapest]
builtin = "cheapest"
settings = { budget_usd = 1.0, count = 1, synthesizers = ["synth"] }

[pipelines.cheap]
description = "cheap"
selector = "cheapest"
prompter = "passthrough"
synthesizer = "synthesize"
"#;
    let server = Server::start(&config(&mock, extra)).await;
    let result = server.ask("cheap", "q").await;
    let result = structured(&result);
    let asked: Vec<&str> = calls(result, "fan-out")
        .iter()
        .map(|c| c["model"].as_str().unwrap())
        .collect();
    assert_eq!(asked, ["m4"], "{result}");
}
