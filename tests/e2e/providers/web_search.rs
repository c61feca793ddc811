//! Web search per member: the switch each provider understands reaches the
//! panel's requests (per pipeline, per call, per model, `chorus ask --web`),
//! a provider that cannot search is said out loud, the search's price
//! counts against `max_cost_usd`, and the models' `url_citation`s come back
//! merged and numbered — in the structured result, the text, the store and
//! `chorus runs show`.

use serde_json::{Value, json};

use crate::support::*;

fn cite(url: &str, title: &str, start: u32, end: u32) -> Value {
    json!({"type": "url_citation",
           "url_citation": {"url": url, "title": title, "content": "...",
                            "start_index": start, "end_index": end}})
}

fn cited(text: &str, annotations: Value) -> Step {
    Step::Cited {
        text: text.to_owned(),
        annotations,
    }
}

/// m1 and m2 cite (one source in common); the others answer plainly; the
/// synthesizer merges.
pub fn script_citations(mock: &Mock) {
    script_cited_answers(mock);
    mock.script(SYNTH, [Step::answer("THE SYNTHESIS")]);
}

/// m1 and m2 cite (one source in common); the others answer plainly.
fn script_cited_answers(mock: &Mock) {
    mock.script(
        "m1",
        [cited(
            "Rust is fast.",
            json!([cite(
                "https://a.example/rust?utm_source=openai",
                "Rust",
                0,
                4
            )]),
        )],
    );
    mock.script(
        "m2",
        [cited(
            "Rust and Go.",
            json!([
                cite("https://A.example/rust/", "Rust again", 0, 4),
                cite("https://b.example/go", "Go", 9, 11),
                {"type": "url_citation", "url_citation": "not an object"}
            ]),
        )],
    );
    for model in ["m3", "m4", "m5"] {
        mock.script(model, [Step::answer("no sources")]);
    }
}

const SOURCES_TEXT: &str = "THE SYNTHESIS\n\nSources:\n\
    1. [Rust](https://a.example/rust?utm_source=openai) — m1, m2\n\
    2. [Go](https://b.example/go) — m2";

fn search_fields(body: &Value) -> (Value, Value) {
    (body["plugins"].clone(), body["web_search_options"].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_searching_pipeline_sends_openrouters_plugin_and_returns_numbered_sources() {
    let mock = Mock::start().await;
    script_citations(&mock);
    let toml = config(
        &mock,
        "web_search = true\nweb_search_max_results = 3\nweb_search_context = \"high\"\n",
    )
    .replace(
        "[providers.mock]\n",
        "[providers.mock]\nweb_search = \"openrouter-plugin\"\n",
    );
    let server = Server::start(&toml).await;
    let result = server.ask("ask", "Which language?").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    for model in PANEL {
        let body = &mock.requests_for(model)[0].body;
        assert_eq!(
            search_fields(body),
            (
                json!([{"id": "web", "max_results": 3}]),
                json!({"search_context_size": "high"})
            ),
            "{model}"
        );
    }
    // The synthesizer merges; it does not search. It reads each answer's
    // sources under it, numbered as the run's list is, and is asked to
    // cite them so.
    let synth = &mock.requests_for(SYNTH)[0].body;
    assert_eq!(search_fields(synth), (Value::Null, Value::Null));
    let system = synth["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.ends_with("Cite the sources you rely on with their numbers in brackets, like [1], exactly as numbered there; cite no others and do not list them at the end."),
        "{system}"
    );
    let merge = synth["messages"][1]["content"].as_str().unwrap();
    assert!(
        merge.contains(
            "--- Answer 1 ---\nRust is fast.\n\nSources this answer cites:\n\
             [1] Rust <https://a.example/rust?utm_source=openai>\n\n\
             --- Answer 2 ---\nRust and Go.\n\nSources this answer cites:\n\
             [1] Rust <https://a.example/rust?utm_source=openai>\n\
             [2] Go <https://b.example/go>\n\n\
             --- Answer 3 ---\nno sources\n\n"
        ),
        "{merge}"
    );

    let result_json = structured(&result);
    assert_eq!(
        result_json["sources"],
        json!([
            {"number": 1, "url": "https://a.example/rust?utm_source=openai", "title": "Rust",
             "cited_by": ["m1", "m2"], "calls": [0, 1]},
            {"number": 2, "url": "https://b.example/go", "title": "Go",
             "cited_by": ["m2"], "calls": [1]}
        ])
    );
    assert!(text(&result).starts_with(SOURCES_TEXT), "{}", text(&result));
    assert_eq!(result_json["answer"], SOURCES_TEXT);
    let fan_out = calls(result_json, "fan-out");
    assert_eq!(fan_out[0]["citations"][0]["cited"], "Rust");
    assert_eq!(fan_out[1]["citations"][1]["cited"], "Go");
    assert_eq!(fan_out[1]["citations"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_judge_reads_each_candidates_sources_numbered_as_the_run_numbers_them() {
    let mock = Mock::start().await;
    script_cited_answers(&mock);
    // Every score equal: the tie goes to the first answer of the fan-out.
    mock.script(
        SYNTH,
        [Step::answer(
            r#"{"scores": {"A": 5, "B": 5, "C": 5, "D": 5, "E": 5}}"#,
        )],
    );
    let toml = config(
        &mock,
        "\n[plugins.judge]\nbuiltin = \"judge\"\n\n\
         [pipelines.best-of]\ndescription = \"best of\"\nselector = \"panel\"\n\
         prompter = \"passthrough\"\nsynthesizer = \"judge\"\nweb_search = true\n",
    );
    let server = Server::start(&toml).await;
    let result = server.ask("best-of", "Which language?").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));

    // Each candidate, in whatever order the judge sees them, carries the
    // sources it cites with the run's numbers; the plain ones none.
    let judged = mock.requests_for(SYNTH)[0].text();
    let candidate = |answer: &str| {
        judged
            .split("--- Candidate ")
            .filter_map(|block| block.split_once(" ---\n").map(|(_, rest)| rest))
            .find(|rest| rest.starts_with(answer))
            .unwrap_or_else(|| panic!("no candidate {answer:?} in {judged}"))
    };
    assert!(
        candidate("Rust is fast.").starts_with(
            "Rust is fast.\n\nSources this answer cites:\n\
         [1] Rust <https://a.example/rust?utm_source=openai>\n\n"
        ),
        "{judged}"
    );
    assert!(
        candidate("Rust and Go.").starts_with(
            "Rust and Go.\n\nSources this answer cites:\n\
         [1] Rust <https://a.example/rust?utm_source=openai>\n\
         [2] Go <https://b.example/go>\n\n"
        ),
        "{judged}"
    );
    assert!(
        candidate("no sources").starts_with("no sources\n\n"),
        "{judged}"
    );
    assert!(
        judged.contains("Under some candidates are the web sources they cite, numbered [1], [2]"),
        "{judged}"
    );
    // The pick, verbatim, with the run's sources numbered the same.
    let result_json = structured(&result);
    assert_eq!(result_json["kind"], "pick");
    assert_eq!(result_json["sources"][0]["number"], 1);
    assert_eq!(result_json["sources"][0]["title"], "Rust");
    assert_eq!(result_json["sources"][1]["number"], 2);
    assert_eq!(result_json["sources"][1]["url"], "https://b.example/go");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_call_argument_and_a_models_own_switch_send_web_search_options_unstreamed() {
    let mock = Mock::start().await;
    // Twice: a run without the argument, then one with it.
    for _ in 0..2 {
        script_citations(&mock);
    }
    let toml = config(&mock, "")
        .replace("[providers.mock]\n", "[providers.mock]\nstream = false\n")
        .replace(
            "[models.m1]\ncontext_window = 100000\n",
            "[models.m1]\ncontext_window = 100000\nweb_search = true\nweb_search_context = \"low\"\n",
        );
    let server = Server::start(&toml).await;

    let plain = server.ask("ask", "q").await;
    assert_eq!(plain.is_error, Some(false), "{}", text(&plain));
    let low = json!({"search_context_size": "low"});
    assert_eq!(
        search_fields(&mock.requests_for("m1")[0].body),
        (Value::Null, low.clone())
    );
    for model in ["m2", "m3", "m4", "m5", SYNTH] {
        let body = &mock.requests_for(model)[0].body;
        assert_eq!(search_fields(body), (Value::Null, Value::Null), "{model}");
    }

    let searched = server
        .call("ask", json!({"prompt": "q", "web_search": true}))
        .await;
    assert_eq!(searched.is_error, Some(false), "{}", text(&searched));
    assert_eq!(
        search_fields(&mock.requests_for("m1")[1].body),
        (Value::Null, low)
    );
    for model in ["m2", "m3", "m4", "m5"] {
        let body = &mock.requests_for(model)[1].body;
        assert_eq!(search_fields(body), (Value::Null, json!({})), "{model}");
    }
    assert_eq!(
        search_fields(&mock.requests_for(SYNTH)[1].body),
        (Value::Null, Value::Null)
    );
    // Not streamed: the citations came on the message.
    assert!(
        text(&searched).starts_with(SOURCES_TEXT),
        "{}",
        text(&searched)
    );

    let bad = server
        .call("ask", json!({"prompt": "q", "web_search": "yes"}))
        .await;
    assert_eq!(bad.is_error, Some(true));
    assert!(text(&bad).contains("web_search"), "{}", text(&bad));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_that_cannot_search_is_said_and_search_counts_against_max_cost_usd() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("plain")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let toml = config(&mock, "web_search = true\n").replace(
        "[providers.mock]\n",
        "[providers.mock]\nweb_search = \"none\"\n",
    );
    let server = Server::start(&toml).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let notes = structured(&result)["notes"].to_string();
    assert!(
        notes.contains("provider `mock` cannot search (providers.mock.web_search = \\\"none\\\")"),
        "{notes}"
    );
    for model in PANEL {
        let body = &mock.requests_for(model)[0].body;
        assert_eq!(search_fields(body), (Value::Null, Value::Null), "{model}");
    }
    drop(server);

    // $1 a search, and $1.50 to spend: one searching panel call fits.
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("plain")]);
    mock.script(SYNTH, [Step::answer("merged")]);
    let toml = config(&mock, "")
        .replace(
            "[providers.mock]\n",
            "[providers.mock]\nweb_search_usd_per_request = 1.0\n",
        )
        .replace(
            "context_window = 100000\n",
            "context_window = 100000\ninput_price = 0.0\noutput_price = 0.0\nmax_output_tokens = 100\n",
        );
    let server = Server::start(&toml).await;
    let result = server
        .call(
            "ask",
            json!({"prompt": "q", "web_search": true, "max_cost_usd": 1.5}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let fan_out = calls(structured(&result), "fan-out");
    let statuses: Vec<&str> = fan_out
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "skipped", "skipped", "skipped", "skipped"]);
    let message = fan_out[1]["error"]["message"].as_str().unwrap();
    assert!(message.contains("+ $1.00 of web search"), "{message}");
    for model in ["m2", "m3", "m4", "m5"] {
        assert!(mock.requests_for(model).is_empty(), "{model} was called");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn chorus_ask_web_searches_and_runs_show_lists_the_sources_from_the_store() {
    let mock = Mock::start().await;
    script_citations(&mock);
    let dir = tempfile::tempdir().unwrap();
    let toml = config(
        &mock,
        &format!(
            "\n[store]\npath = \"{}\"\n",
            dir.path().join("runs.sqlite3").display()
        ),
    );
    let file = write_config(&toml);
    let config = file.path.to_str().unwrap();
    let (code, stdout, stderr) =
        run_cli(&["ask", "--web", "-q", "--config", config, "Which language?"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim_end(), SOURCES_TEXT);
    for model in PANEL {
        let body = &mock.requests_for(model)[0].body;
        assert_eq!(search_fields(body), (Value::Null, json!({})), "{model}");
    }

    let (code, stdout, stderr) = run_cli(&["runs", "show", "last", "--config", config]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            "sources\n  1. Rust — https://a.example/rust?utm_source=openai (cited by m1, m2)\n  \
             2. Go — https://b.example/go (cited by m2)\n"
        ),
        "{stdout}"
    );
    let (code, stdout, _) = run_cli(&["runs", "show", "last", "--json", "--config", config]).await;
    assert_eq!(code, 0);
    let run: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(run["sources"][1]["url"], "https://b.example/go");
    assert_eq!(run["sources"][0]["cited_by"], json!(["m1", "m2"]));
    assert_eq!(run["calls"][1]["citations"][1]["cited"], "Go");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_counts_the_search_in_each_panel_calls_worst_case() {
    let mock = Mock::start().await;
    let toml = config(&mock, "")
        .replace(
            "[providers.mock]\n",
            "[providers.mock]\nweb_search_usd_per_request = 1.0\n",
        )
        .replace(
            "context_window = 100000\n",
            "context_window = 100000\ninput_price = 0.0\noutput_price = 0.0\nmax_output_tokens = 100\n",
        );
    let file = write_config(&toml);
    let config = file.path.to_str().unwrap();
    let (code, stdout, stderr) = run_cli(&[
        "ask",
        "--web",
        "--dry-run",
        "--json",
        "--config",
        config,
        "q",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let run: Value = serde_json::from_str(&stdout).unwrap();
    let worst: Vec<(String, f64)> = run["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["stage"].as_str().unwrap().to_owned(),
                c["worst_case_usd"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(worst.len(), 6, "{worst:?}");
    for (stage, usd) in &worst {
        let expected = if stage == "fan-out" { 1.0 } else { 0.0 };
        assert_eq!(*usd, expected, "{stage}");
    }
    assert_eq!(run["estimated_cost_usd"]["at_most"], 5.0);
    assert!(mock.requests().is_empty(), "a dry run calls no model");
}
