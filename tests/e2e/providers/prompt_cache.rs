//! Prompt caching: the models that cache only when told (Anthropic's and
//! Gemini through OpenRouter) get the end of the repeated prefix marked,
//! others get the same body as ever; cached tokens the provider reports
//! are kept per call and priced at the catalog's cache prices.

use serde_json::{Value, json};

use crate::support::*;

const CLAUDE: &str = "anthropic/claude-sonnet-4.5";
const GPT: &str = "openai/gpt-5";
const SYSTEM: &str = "You answer tersely.";

fn config(mock: &Mock) -> String {
    format!(
        r#"
[providers.mock]
base_url = "{url}"
api_key_env = "{KEY_VAR}"

[models."{CLAUDE}"]
[models."{GPT}"]
[models.synth]

[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["{CLAUDE}", "{GPT}"], synthesizers = ["synth"] }}
[plugins.passthrough]
builtin = "passthrough"
settings = {{ system = "{SYSTEM}" }}
[plugins.synthesize]
builtin = "synthesize"

[pipelines.ask]
description = "Two panel models behind one system prompt."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        url = mock.base_url,
    )
}

/// An answer whose usage says 800 of its 1000 prompt tokens were cached,
/// with no cost figure (so chorus prices it).
fn cached_answer(text: &str) -> Step {
    Step::Sse {
        events: vec![
            Sse::Content(text.into()),
            Sse::Finish("stop".into()),
            Sse::Usage(json!({"prompt_tokens": 1000, "completion_tokens": 10,
                "prompt_tokens_details": {"cached_tokens": 800, "cache_write_tokens": 0}})),
            Sse::Done,
        ],
        crlf: false,
    }
}

fn priced(id: &str, prompt: &str, completion: &str, cache_read: &str) -> Value {
    json!({"id": id, "context_length": 200000, "pricing": {
        "prompt": prompt, "completion": completion,
        "input_cache_read": cache_read, "input_cache_write": "0.00000375"}})
}

#[tokio::test(flavor = "multi_thread")]
async fn the_prefix_is_marked_only_where_needed_and_cached_tokens_are_priced_as_such() {
    let mock = Mock::start().await;
    mock.catalog(json!([
        priced(CLAUDE, "0.000003", "0.000015", "0.0000003"),
        priced(GPT, "0.00000125", "0.00001", "0.000000125"),
        {"id": "synth", "context_length": 200000},
    ]));
    mock.script(CLAUDE, [cached_answer("claude says")]);
    mock.script(GPT, [cached_answer("gpt says")]);
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock)).await;
    let result = server.ask("ask", "What is 2 + 2?").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));

    // The request bodies, exactly as sent.
    let claude = mock.requests_for(CLAUDE);
    assert_eq!(claude.len(), 1);
    assert_eq!(
        claude[0].body["messages"],
        json!([
            {"role": "system", "content": [{"type": "text", "text": SYSTEM,
                "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "content": "What is 2 + 2?"},
        ])
    );
    let gpt = mock.requests_for(GPT);
    assert_eq!(
        gpt[0].body["messages"],
        json!([
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is 2 + 2?"},
        ]),
        "a model that caches by itself gets nothing new"
    );
    assert!(!gpt[0].body.to_string().contains("cache_control"));

    let result = structured(&result);
    let fan_out = calls(result, "fan-out");
    // 200 tokens at $3/M, 800 cached at $0.30/M, 10 out at $15/M.
    assert_eq!(fan_out[0]["model"], CLAUDE);
    assert_eq!(fan_out[0]["cached_tokens"], 800);
    assert_eq!(fan_out[0]["cost_usd"], 0.00099, "{result}");
    assert_eq!(fan_out[0]["cost_estimated"], true);
    // 200 at $1.25/M, 800 at $0.125/M, 10 at $10/M.
    assert_eq!(fan_out[1]["cached_tokens"], 800);
    assert_eq!(fan_out[1]["cost_usd"], 0.00045, "{result}");
    // The synthesis reported no cache use: no such field.
    let synthesis = &result["calls"].as_array().unwrap()[2];
    assert!(synthesis.get("cached_tokens").is_none(), "{result}");
}

/// A vote of five samples of one model that caches when told, behind a
/// long system prompt: 2,000 prompt tokens a call, 1,900 of them the
/// shared prefix. With `cached` the mock reports what a provider with a
/// prompt cache reports — the first sample writes the prefix, the other
/// four read it — else no cache use at all.
async fn vote_of_five(cached: bool) -> (Value, Vec<Value>) {
    let mock = Mock::start().await;
    mock.catalog(json!([
        priced(CLAUDE, "0.000003", "0.000015", "0.0000003"),
        {"id": "synth", "context_length": 200000},
    ]));
    let usage = |read: u32, written: u32| Step::Sse {
        events: vec![
            Sse::Content("4".into()),
            Sse::Finish("stop".into()),
            Sse::Usage(json!({"prompt_tokens": 2000, "completion_tokens": 5,
                    "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": written}})),
            Sse::Done,
        ],
        crlf: false,
    };
    let steps: Vec<Step> = (0..5)
        .map(|i| match (cached, i) {
            (false, _) => usage(0, 0),
            (true, 0) => usage(0, 1900),
            (true, _) => usage(1900, 0),
        })
        .collect();
    mock.script(CLAUDE, steps);
    let system = "Answer with the number only. ".repeat(250);
    let config = format!(
        r#"
[providers.mock]
base_url = "{url}"
api_key_env = "{KEY_VAR}"
stream = true

[models."{CLAUDE}"]
[models.synth]

[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["{CLAUDE}"], synthesizers = ["synth"] }}
[plugins.samples]
builtin = "passthrough"
settings = {{ system = "{system}", samples = 5 }}
[plugins.vote]
builtin = "vote"
settings = {{ samples_per_model = 5 }}

[pipelines.vote]
description = "Five samples of one model, the most votes win."
selector = "panel"
prompter = "samples"
synthesizer = "vote"
"#,
        url = mock.base_url,
    );
    let server = Server::start(&config).await;
    let result = server.ask("vote", "What is 2 + 2?").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let bodies = mock
        .requests_for(CLAUDE)
        .into_iter()
        .map(|r| r.body)
        .collect();
    (structured(&result).clone(), bodies)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vote_of_five_samples_is_priced_with_its_cached_prefix() {
    let (plain, _) = vote_of_five(false).await;
    let (cached, bodies) = vote_of_five(true).await;

    // Every sample marks the end of the shared prefix: the system prompt.
    assert_eq!(bodies.len(), 5, "{cached}");
    for body in &bodies {
        let system = &body["messages"][0];
        assert_eq!(system["role"], "system");
        assert_eq!(
            system["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
    }

    // Without the cache: 5 × (2,000 in at $3/M + 5 out at $15/M).
    let plain_usd = plain["usage"]["cost_usd"].as_f64().unwrap();
    assert!((plain_usd - 0.030375).abs() < 1e-9, "{plain}");
    // With it: 5 × (100 in at $3/M + 5 out at $15/M), one write of 1,900
    // at $3.75/M and four reads of 1,900 at $0.30/M.
    let cached_usd = cached["usage"]["cost_usd"].as_f64().unwrap();
    assert!((cached_usd - 0.01128).abs() < 1e-9, "{cached}");
    let fan_out = calls(&cached, "fan-out");
    assert_eq!(fan_out.len(), 5);
    assert_eq!(
        fan_out
            .iter()
            .filter(|c| c["cached_tokens"] == 1900)
            .count(),
        4
    );

    if std::env::var_os("CHORUS_MEASURE").is_some() {
        eprintln!(
            "vote of 5 samples, 2,000 prompt tokens each (1,900 shared): \
             ${plain_usd:.6} without the prompt cache, ${cached_usd:.6} with it ({:.0} % less)",
            (1.0 - cached_usd / plain_usd) * 100.0
        );
    }
}
