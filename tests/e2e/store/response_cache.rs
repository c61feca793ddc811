//! The response cache (`[cache] responses`): a second identical run at
//! temperature 0 asks the provider nothing and says where each answer came
//! from; sampled requests are asked again unless their pipeline opts in;
//! an expired entry is not used; `chorus eval --cached` reruns with a new
//! synthesizer without asking the panel again; and with the cache off
//! (the default) every request reaches the provider.

use serde_json::Value;

use crate::support::*;

const TRIO: [&str; 3] = ["m1", "m2", "m3"];

/// `[cache]` as given, and pipelines over three panel models: `det` at
/// temperature 0, `sampled` at the provider's default temperature with
/// `cache_sampled = true`; `ask` (support's) is sampled and does not opt in.
fn cache_config(mock: &Mock, cache: &str) -> String {
    config(
        mock,
        &format!(
            r#"
[plugins.det-panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3"], synthesizers = ["{SYNTH}"], temperature = 0.0 }}
[plugins.sampled-panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3"], synthesizers = ["{SYNTH}"] }}

[pipelines.det]
description = "Three models at temperature 0."
selector = "det-panel"
prompter = "passthrough"
synthesizer = "synthesize"

[pipelines.sampled]
description = "Three models, sampled, cached by choice."
selector = "sampled-panel"
prompter = "passthrough"
synthesizer = "synthesize"
cache_sampled = true
{cache}
"#
        ),
    )
}

fn script(mock: &Mock) {
    for model in PANEL {
        mock.script(model, [Step::answer(&format!("{model} answers"))]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
}

fn panel_requests(mock: &Mock) -> usize {
    TRIO.iter().map(|m| mock.requests_for(m).len()).sum()
}

async fn run(server: &Server, pipeline: &str, prompt: &str) -> Value {
    let result = server.ask(pipeline, prompt).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    structured(&result).clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_identical_run_at_temperature_zero_asks_the_panel_nothing() {
    let mock = Mock::start().await;
    script(&mock);
    let server = Server::start(&cache_config(&mock, "[cache]\nresponses = \"24h\"")).await;

    let first = run(&server, "det", "What is 2 + 2?").await;
    assert_eq!(panel_requests(&mock), 3);
    assert!(
        first["calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.get("cached_from").is_none()),
        "{first}"
    );
    let first_cost = first["usage"]["cost_usd"].as_f64().unwrap();
    assert!(first_cost > 0.0, "{first}");

    let second = run(&server, "det", "What is 2 + 2?").await;
    assert_eq!(panel_requests(&mock), 3, "no panel request went upstream");
    let first_id = first["run_id"].as_str().unwrap();
    let fan_out = calls(&second, "fan-out");
    assert_eq!(fan_out.len(), 3);
    for (i, call) in fan_out.iter().enumerate() {
        assert_eq!(call["status"], "ok", "{second}");
        assert_eq!(call["cached_from"]["run_id"], first_id, "{second}");
        assert_eq!(call["cached_from"]["call"], i, "{second}");
        assert_eq!(call["cost_usd"], 0.0, "{second}");
        assert_eq!(call["latency_ms"], 0, "{second}");
    }
    // The merge is sampled (the synthesizer sets no temperature): asked again.
    assert_eq!(mock.requests_for(SYNTH).len(), 2);
    let synthesis = &calls(&second, "synthesize")[0];
    assert!(synthesis.get("cached_from").is_none(), "{second}");
    assert!(
        second["usage"]["cost_usd"].as_f64().unwrap() < first_cost,
        "only the merge was paid for: {second}"
    );
    assert_eq!(second["answer"], first["answer"]);

    // A different question is asked.
    run(&server, "det", "What is 3 + 3?").await;
    assert_eq!(panel_requests(&mock), 6);

    // `chorus runs show` says where the answers came from.
    let second_id = second["run_id"].as_str().unwrap();
    let output = command(&[
        "runs",
        "show",
        second_id,
        "--config",
        server.config_path().to_str().unwrap(),
    ])
    .env("XDG_DATA_HOME", server.data_dir())
    .output()
    .await
    .unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{shown}");
    assert!(
        shown.contains(&format!("(cached from {first_id}/0, cost $0)")),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sampled_requests_are_asked_again_unless_their_pipeline_opts_in() {
    let mock = Mock::start().await;
    script(&mock);
    let server = Server::start(&cache_config(&mock, "[cache]\nresponses = \"24h\"")).await;

    // `ask`: five sampled panel requests, no opt-in: all asked twice.
    run(&server, "ask", "Name a colour.").await;
    run(&server, "ask", "Name a colour.").await;
    assert_eq!(mock.requests_for("m1").len(), 2);
    assert_eq!(mock.requests_for("m5").len(), 2);

    // `sampled` opts in: the second run is answered from the cache.
    let first = run(&server, "sampled", "Name a fruit.").await;
    let second = run(&server, "sampled", "Name a fruit.").await;
    assert_eq!(mock.requests_for("m1").len(), 3);
    assert_eq!(mock.requests_for("m3").len(), 3);
    for call in calls(&second, "fan-out") {
        assert_eq!(call["cached_from"]["run_id"], first["run_id"], "{second}");
    }
    // The opt-in is the pipeline's: its merge (sampled too) is reused.
    assert_eq!(second["usage"]["cost_usd"], 0.0, "{second}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_entry_is_not_used() {
    let mock = Mock::start().await;
    script(&mock);
    let server = Server::start(&cache_config(&mock, "[cache]\nresponses = \"300ms\"")).await;
    run(&server, "det", "What is 2 + 2?").await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let second = run(&server, "det", "What is 2 + 2?").await;
    assert_eq!(
        panel_requests(&mock),
        6,
        "asked again once the entry expired"
    );
    assert!(
        calls(&second, "fan-out")
            .iter()
            .all(|c| c.get("cached_from").is_none()),
        "{second}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_cache_off_every_request_reaches_the_provider() {
    let mock = Mock::start().await;
    script(&mock);
    let server = Server::start(&cache_config(&mock, "")).await;
    run(&server, "det", "What is 2 + 2?").await;
    let second = run(&server, "det", "What is 2 + 2?").await;
    assert_eq!(panel_requests(&mock), 6);
    assert_eq!(mock.requests_for(SYNTH).len(), 2);
    assert!(
        second["calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.get("cached_from").is_none()),
        "{second}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn check_says_whether_the_cache_is_on_and_refuses_an_unreadable_lifetime() {
    let mock = Mock::start().await;
    let check = |cache: &str| {
        let file = write_config(&cache_config(&mock, cache));
        async move {
            // The whole file, not just its path: its directory lives as long.
            let file = file;
            let output = command(&["check", "--config", file.path.to_str().unwrap()])
                .output()
                .await
                .unwrap();
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        }
    };
    let (_, stdout, stderr) = check("[cache]\nresponses = \"24h\"").await;
    assert!(stdout.contains("response cache: on"), "{stdout}{stderr}");
    assert!(stdout.contains("pipeline(s) sampled"), "{stdout}");
    let (_, stdout, stderr) = check("").await;
    assert!(stdout.contains("response cache: off"), "{stdout}{stderr}");

    let (code, _, stderr) = check("[cache]\nresponses = \"a day\"").await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cache.responses"), "{stderr}");
}

const DATASET: &str = r#"
{"id": "capital", "question": "Capital of France?", "expected": "Paris"}
{"id": "product", "question": "6 times 7?", "expected": "42", "grader": "numeric"}
"#;

/// The eval's pipeline: the three panel models, sampled (no temperature),
/// merged by `synthesizer`; no `[cache]` at all.
fn eval_config(mock: &Mock, synthesizer: &str) -> String {
    config(
        mock,
        &format!(
            r#"
[plugins.eval-panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3"], synthesizers = ["{synthesizer}"] }}

[pipelines.bench]
description = "Three sampled models and a merge."
selector = "eval-panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#
        ),
    )
}

/// What an eval run asked upstream and what it cost.
struct Measured {
    panel: usize,
    merges: usize,
    cost_usd: f64,
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_cached_reruns_with_a_new_synthesizer_without_asking_the_panel() {
    let mock = Mock::start().await;
    script(&mock);
    mock.script(SYNTH, [Step::answer("Paris"), Step::answer("42")]);
    mock.script(SYNTH2, [Step::answer("Paris"), Step::answer("42")]);
    let dir = tempfile::tempdir().unwrap();
    let dataset = dir.path().join("questions.jsonl");
    std::fs::write(&dataset, DATASET).unwrap();
    let data = dir.path().join("data");
    let eval = |synthesizer: &'static str| {
        let file = dir.path().join(format!("{synthesizer}.toml"));
        std::fs::write(&file, eval_config(&mock, synthesizer)).unwrap();
        let (dataset, data) = (dataset.clone(), data.clone());
        let before = (panel_requests(&mock), mock.requests().len());
        async move {
            let output = command(&[
                "eval",
                dataset.to_str().unwrap(),
                "--config",
                file.to_str().unwrap(),
                "--pipelines",
                "bench",
                "--cached",
                "--fresh",
                "--concurrency",
                "1",
                "--json",
            ])
            .env("XDG_DATA_HOME", &data)
            .output()
            .await
            .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            assert!(output.status.success(), "{stderr}");
            let report: Value = serde_json::from_slice(&output.stdout).unwrap();
            (report, before)
        }
    };

    let (first, before) = eval(SYNTH).await;
    let first = Measured {
        panel: panel_requests(&mock) - before.0,
        merges: mock.requests().len() - before.1 - (panel_requests(&mock) - before.0),
        cost_usd: first["summaries"][0]["cost_usd"].as_f64().unwrap(),
    };
    assert_eq!((first.panel, first.merges), (6, 2));

    let (second_report, before) = eval(SYNTH2).await;
    let second = Measured {
        panel: panel_requests(&mock) - before.0,
        merges: mock.requests().len() - before.1 - (panel_requests(&mock) - before.0),
        cost_usd: second_report["summaries"][0]["cost_usd"].as_f64().unwrap(),
    };
    assert_eq!(second.panel, 0, "the rerun asked the panel nothing");
    assert_eq!(second.merges, 2, "only the new synthesizer was asked");
    assert_eq!(mock.requests_for(SYNTH2).len(), 2);
    assert_eq!(second_report["summaries"][0]["correct"], 2);
    assert!(second.cost_usd < first.cost_usd, "{second_report}");
    if std::env::var_os("CHORUS_MEASURE").is_some() {
        eprintln!(
            "eval --cached, 2 questions x (3 panel + 1 merge): first run {} upstream requests \
             ({} panel), ${:.6}; rerun with another synthesizer {} upstream requests ({} panel), ${:.6}",
            first.panel + first.merges,
            first.panel,
            first.cost_usd,
            second.panel + second.merges,
            second.panel,
            second.cost_usd
        );
    }
}
