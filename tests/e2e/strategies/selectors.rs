//! The selectors end to end: which models each one puts on the panel, and
//! the note it leaves in the result saying why.

use serde_json::{Value, json};

use crate::support::*;

const CATALOG: [&str; 4] = ["openai/a", "openai/b", "anthropic/c", "google/d"];

fn selector_config(mock: &Mock) -> String {
    format!(
        r#"
[providers.mock]
base_url = "{url}"
api_key_env = "{KEY_VAR}"

[models."openai/a"]
input_price = 1.0
output_price = 2.0
tags = ["code"]
[models."openai/b"]
input_price = 0.1
output_price = 0.2
[models."anthropic/c"]
input_price = 5.0
output_price = 10.0
tags = ["code"]
[models."google/d"]
tags = ["long-context"]

[plugins.route]
builtin = "route"
settings = {{ default = ["openai/b"], synthesizers = ["anthropic/c"], routes = [
  {{ name = "code", keywords = ["rust", "compile"], tags = ["code"] }},
  {{ name = "documents", keywords = ["summarize"], tags = ["long-context"] }},
] }}
[plugins.cheapest]
builtin = "cheapest"
settings = {{ budget_usd = 0.01, count = 2, expected_output_tokens = 1000 }}
[plugins.diverse]
builtin = "diverse"
settings = {{ count = 3 }}
[plugins.self-moa]
builtin = "self-moa"
settings = {{ model = "anthropic/c", temperature = 0.9 }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"

[pipelines.routed]
description = "routed"
selector = "route"
prompter = "passthrough"
synthesizer = "synthesize"
[pipelines.cheap]
description = "cheap"
selector = "cheapest"
prompter = "passthrough"
synthesizer = "synthesize"
[pipelines.diverse]
description = "diverse"
selector = "diverse"
prompter = "passthrough"
synthesizer = "synthesize"
[pipelines.self-moa]
description = "self-moa"
selector = "self-moa"
prompter = "passthrough"
synthesizer = "synthesize"
options.samples = {{ type = "integer", description = "Samples.", minimum = 1, maximum = 16, default = 4 }}
"#,
        url = mock.base_url
    )
}

async fn server(mock: &Mock) -> Server {
    for model in CATALOG {
        mock.script(model, [Step::answer(&format!("{model} answers"))]);
    }
    Server::start(&selector_config(mock)).await
}

fn panel(result: &Value) -> Vec<String> {
    calls(result, "fan-out")
        .iter()
        .map(|c| c["model"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn routing_sends_code_questions_to_code_models() {
    let mock = Mock::start().await;
    let server = server(&mock).await;
    let code = server
        .ask("routed", "Why does my Rust code not compile?")
        .await;
    let code = structured(&code);
    assert_eq!(panel(code), ["openai/a", "anthropic/c"]);
    assert_eq!(
        code["notes"][0],
        "Routed to the `code` panel (the prompt mentions \"rust\")."
    );

    let other = server.ask("routed", "What should I cook tonight?").await;
    assert_eq!(panel(structured(&other)), ["openai/b"]);
    assert_eq!(structured(&other)["kind"], "single");
}

#[tokio::test(flavor = "multi_thread")]
async fn cheapest_takes_the_cheapest_models_within_the_budget() {
    let mock = Mock::start().await;
    let server = server(&mock).await;
    let result = server.ask("cheap", "q").await;
    let result = structured(&result);
    // Estimated per call: b ~$0.0002, a ~$0.002, c ~$0.01; budget $0.01, count 2.
    assert_eq!(panel(result), ["openai/b", "openai/a"]);
    let notes = result["notes"].to_string();
    assert!(notes.contains("Chose the 2 cheapest models"), "{notes}");
    assert!(
        notes.contains("Left out for lack of prices: google/d."),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn diverse_spreads_the_panel_across_vendors() {
    let mock = Mock::start().await;
    let server = server(&mock).await;
    let result = server.ask("diverse", "q").await;
    assert_eq!(
        panel(structured(&result)),
        ["openai/a", "anthropic/c", "google/d"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn self_moa_samples_one_model_and_merges_with_it() {
    let mock = Mock::start().await;
    let server = server(&mock).await;
    let result = server
        .call("self-moa", json!({"prompt": "q", "samples": 3}))
        .await;
    let result = structured(&result);
    assert_eq!(panel(result), ["anthropic/c"; 3]);
    let sent = mock.requests_for("anthropic/c");
    assert_eq!(sent.len(), 4, "three samples and the merge");
    let mut seeds: Vec<u64> = sent[..3]
        .iter()
        .map(|r| r.body["seed"].as_u64().unwrap())
        .collect();
    seeds.sort();
    assert_eq!(seeds, [1, 2, 3], "distinct seeds, so the samples differ");
    assert!(sent[..3].iter().all(|r| {
        r.body["temperature"]
            .as_f64()
            .is_some_and(|t| (t - 0.9).abs() < 1e-6)
    }));
    assert_eq!(result["kind"], "synthesis");
}
