//! Money: each call's cost is the provider's figure, else an estimate from
//! prices marked as such; totals add up without float noise; and
//! `max_cost_usd` caps a run — calls whose worst case would cross it are
//! not made, and the result says which and why.

use serde_json::json;

use crate::support::*;

/// The test config with prices on every model.
fn priced(mock: &Mock, limits: &str) -> String {
    config(mock, "")
        .replace(
            "context_window = 100000\n",
            "context_window = 100000\ninput_price = 1.0\noutput_price = 2.0\n",
        )
        .replace(
            "run_timeout = \"20s\"",
            &format!("run_timeout = \"20s\"\n{limits}"),
        )
}

#[tokio::test(flavor = "multi_thread")]
async fn costs_are_the_providers_or_marked_estimates_and_add_up_without_noise() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("an answer")]); // cost 0.0005 reported
    }
    // No cost in the usage: estimated from the prices.
    mock.script(
        "m1",
        [Step::Sse {
            events: vec![
                Sse::Content("no cost given".into()),
                Sse::Finish("stop".into()),
                Sse::Usage(json!({"prompt_tokens": 1000, "completion_tokens": 100})),
                Sse::Done,
            ],
            crlf: false,
        }],
    );
    mock.script(
        "m2",
        [Step::Sse {
            events: vec![
                Sse::Content("a".into()),
                Sse::Finish("stop".into()),
                Sse::Usage(json!({"prompt_tokens": 1, "completion_tokens": 1, "cost": 0.0001})),
                Sse::Done,
            ],
            crlf: false,
        }],
    );
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start(&priced(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    let fan_out = calls(result, "fan-out");
    // 1000 × $1/M + 100 × $2/M
    assert_eq!(fan_out[0]["cost_usd"], 0.0012);
    assert_eq!(fan_out[0]["cost_estimated"], true);
    assert_eq!(fan_out[1]["cost_usd"], 0.0001);
    assert!(fan_out[1].get("cost_estimated").is_none());
    // 0.0012 + 0.0001 + 3 × 0.0005 + 0.0005 (synthesis): exactly, in JSON.
    assert_eq!(result["usage"]["cost_usd"], json!(0.0033));
    assert_eq!(result["usage"]["cost_estimated"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_cost_usd_skips_calls_whose_worst_case_would_cross_it() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("an answer")]);
    }
    mock.script(SYNTH, [Step::stream("merged")]);
    // Worst case per panel call: ~5 prompt tokens + the rest of the
    // 100000-token context at $2/M ≈ $0.20; a ceiling of $0.50 lets two start.
    let server = Server::start(&priced(&mock, "max_cost_usd = 0.5")).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    let statuses: Vec<&str> = calls(result, "fan-out")
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["ok", "ok", "skipped", "skipped", "skipped"],
        "{result}"
    );
    let skipped = calls(result, "fan-out")[2];
    assert_eq!(skipped["error"]["kind"], "over-budget");
    let why = skipped["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("not started: its worst case ($0.1999")
            && why.contains("over max_cost_usd = $0.50 (from limits.max_cost_usd"),
        "{why}"
    );
    assert!(
        mock.requests_for("m3").is_empty(),
        "a skipped call is never sent"
    );
    let notes = result["notes"].to_string();
    assert!(
        notes.contains("3 calls were not started: the run may spend at most $0.50 (max_cost_usd, from limits.max_cost_usd)"),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_calls_max_cost_usd_lowers_the_ceiling_but_never_raises_it() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("an answer")]);
    }
    mock.script(SYNTH, [Step::stream("merged")]);
    // With max_tokens set per model, the worst case is small and known.
    let config_text = priced(&mock, "max_cost_usd = 1.0").replace(
        "output_price = 2.0\n",
        "output_price = 2.0\nparams = { max_tokens = 1000 }\n",
    );
    let server = Server::start(&config_text).await;
    let all = server.ask("ask", "q").await;
    assert_eq!(structured(&all)["summary"], "Synthesis of 5 of 5 answers.");
    assert_eq!(
        mock.requests_for("m1")[0].body["max_tokens"],
        1000,
        "params reach the body"
    );

    let lowered = server
        .call("ask", json!({"prompt": "q", "max_cost_usd": 0.005}))
        .await;
    let lowered = structured(&lowered);
    let ok = calls(lowered, "fan-out")
        .iter()
        .filter(|c| c["status"] == "ok")
        .count();
    assert_eq!(
        ok, 2,
        "$0.002 worst case each: two fit under $0.005: {lowered}"
    );
    assert!(
        lowered["notes"]
            .to_string()
            .contains("(max_cost_usd, from the call's max_cost_usd option)")
    );

    let raised = server
        .call("ask", json!({"prompt": "q", "max_cost_usd": 5}))
        .await;
    assert_eq!(raised.is_error, Some(true));
    assert!(
        text(&raised).contains("`max_cost_usd` can lower the configured ceiling of $1.00 (limits.max_cost_usd), not raise it"),
        "{}",
        text(&raised)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_schema_offers_max_cost_usd() {
    let mock = Mock::start().await;
    let server = Server::start(&config(&mock, "")).await;
    let tools = server.client.list_all_tools().await.unwrap();
    let ask = tools.iter().find(|t| t.name == "ask").unwrap();
    let schema = serde_json::to_value(&ask.input_schema).unwrap();
    assert_eq!(schema["properties"]["max_cost_usd"]["type"], "number");
}

/// 500 deltas of "word " (2 tokens each, estimated), then the stream
/// closes without a finish: a broken attempt, retried.
fn broken_stream() -> Step {
    Step::Sse {
        events: (0..500).map(|_| Sse::Content("word ".into())).collect(),
        crlf: false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_streamed_by_broken_attempts_are_counted_and_priced() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("an answer")]); // 0.0005 reported
    }
    // Two broken attempts, then an answer.
    mock.script(
        "m1",
        [broken_stream(), broken_stream(), Step::stream("at last")],
    );
    // Every attempt broken.
    mock.script("m2", [broken_stream()]);
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start(&priced(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    let fan_out = calls(result, "fan-out");
    let (m1, m2) = (fan_out[0], fan_out[1]);
    assert_eq!(
        (&m1["status"], &m1["attempts"]),
        (&json!("ok"), &json!(3)),
        "{m1}"
    );
    // 34 from the answer's usage + 2 × 500 × 2 estimated.
    assert_eq!(m1["completion_tokens"], 2034, "{m1}");
    assert_eq!(m1["cost_estimated"], true, "{m1}");
    // 0.0005 reported + at least 2000 tokens × $2/M for what was lost.
    let cost = m1["cost_usd"].as_f64().unwrap();
    assert!(cost >= 0.0045, "{m1}");
    assert_eq!(m2["attempts"], 3, "{m2}");
    assert_ne!(m2["status"], "ok", "{m2}");
    // All three attempts' 3000 tokens, not the last one's.
    let cost = m2["cost_usd"].as_f64().unwrap();
    assert!(cost >= 0.006, "{m2}");
}

/// A PDF reader (`f/reader`) at $3 per million tokens either way beside a
/// free text-only member and merger, under `max_cost_usd = 0.05`: a page
/// (3,000 tokens, $0.009) fits, 300 pages ($2.70) do not.
pub(crate) fn reading(mock: &Mock) -> String {
    let free = "context_window = 100000\nmax_output_tokens = 100\ninput = [\"text\"]\ninput_price = 0.0\noutput_price = 0.0";
    format!(
        r#"
[limits]
run_timeout = "20s"
max_cost_usd = 0.05

[providers.mock]
base_url = "{url}"
api_key_env = "{KEY_VAR}"

[providers.mock.retry]
max_attempts = 1

[models."f/reader"]
context_window = 1000000
max_output_tokens = 100
input = ["text", "file"]
input_price = 3.0
output_price = 3.0
[models."t/free"]
{free}
[models."t/merger"]
{free}

[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["f/reader", "t/free"], synthesizers = ["t/merger"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"

[pipelines.ask]
description = "A PDF reader and a text model, one merge."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        url = mock.base_url,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pdf_sent_as_a_file_counts_its_pages_against_max_cost_usd() {
    use crate::attachments::pdf_text::pdf;
    use crate::attachments::sent::b64;
    let line: &[&str] = &["Clause: the tenant pays the rent."];
    for (pages, sent) in [(1, true), (40, false)] {
        let mock = Mock::start().await;
        for model in ["f/reader", "t/free", "t/merger"] {
            mock.script(model, [Step::answer("the tenant")]);
        }
        let server = Server::start(&reading(&mock)).await;
        let bytes = pdf(&vec![line; pages]);
        let result = server
            .call(
                "ask",
                json!({"prompt": "Who pays?", "attachments": [
                    {"data": b64(&bytes), "name": "lease.pdf"}
                ]}),
            )
            .await;
        assert_eq!(result.is_error, Some(false), "{}", text(&result));
        let result = structured(&result);
        let reader = calls(result, "fan-out")
            .into_iter()
            .find(|c| c["model"] == "f/reader")
            .unwrap_or_else(|| panic!("{result:#}"));
        let got = mock.requests_for("f/reader");
        if sent {
            // 1 page: ~3,000 tokens, under $0.01 with its answer.
            assert_eq!(reader["status"], "ok", "{result:#}");
            assert_eq!(got.len(), 1);
            continue;
        }
        // 40 pages: ~120,000 tokens at $3/M is $0.36, over the ceiling,
        // however few bytes the file is.
        assert!(bytes.len() < 40_000, "{}", bytes.len());
        assert_eq!(reader["status"], "skipped", "{result:#}");
        assert_eq!(reader["error"]["kind"], "over-budget");
        let why = reader["error"]["message"].as_str().unwrap();
        assert!(
            why.contains("not started: its worst case ($0.3")
                && why.contains("over max_cost_usd = $0.05"),
            "{why}"
        );
        assert!(got.is_empty(), "a skipped call is never sent");
        let notes = result["notes"].to_string();
        assert!(notes.contains("1 call was not started"), "{notes}");
    }
}
