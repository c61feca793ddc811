//! The fan-out never waits on one slow model while the others' answers sit
//! ready: with the default plugins.toml, four answers within a second and a
//! fifth that hangs make a synthesis of four in well under 20 s; the result
//! names who was cut and why, and the cut call's connection is closed.

use std::time::{Duration, Instant};

use crate::support::*;

/// The built-in plugins.toml, pointed at the mock.
fn default_config(mock: &Mock) -> String {
    chorus::config::BUILTIN_TOML
        .replace("https://openrouter.ai/api/v1", &mock.base_url)
        .replace("OPENROUTER_API_KEY", KEY_VAR)
}

const DEFAULT_PANEL: [&str; 5] = [
    "anthropic/claude-sonnet-4.5",
    "openai/gpt-5",
    "google/gemini-2.5-pro",
    "x-ai/grok-4",
    "deepseek/deepseek-chat-v3.1",
];

#[tokio::test(flavor = "multi_thread")]
async fn with_the_default_config_four_quick_answers_and_a_hang_give_a_synthesis_of_four_fast() {
    let mock = Mock::start().await;
    for (i, model) in DEFAULT_PANEL.iter().enumerate() {
        mock.script(
            model,
            [Step::answer_after(
                100 + 200 * i as u64,
                &format!("view {i}"),
            )],
        );
    }
    mock.script("x-ai/grok-4", [Step::Hang]);
    // The synthesizer is the first panel model: its second request merges.
    mock.script(
        "anthropic/claude-sonnet-4.5",
        [
            Step::answer_after(100, "view 0"),
            Step::answer("merged four"),
        ],
    );
    let server = Server::start(&default_config(&mock)).await;
    let started = Instant::now();
    let result = server.ask("ask", "q").await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    let result = structured(&result);
    assert_eq!(result["kind"], "synthesis", "{result}");
    assert_eq!(result["answer"], "merged four");
    assert_eq!(
        result["summary"],
        "Synthesis of 4 of 5 answers. Cut as stragglers: x-ai/grok-4."
    );
    let grok = calls(result, "fan-out")
        .into_iter()
        .find(|c| c["model"] == "x-ai/grok-4")
        .unwrap();
    assert_eq!(grok["status"], "cut");
    let reason = grok["error"]["message"].as_str().unwrap();
    assert!(
        reason.contains("4 of 5 calls had answered (quorum = majority, fan_out.quorum)")
            && reason.contains("straggler_grace = 10s (fan_out.straggler_grace)"),
        "{reason}"
    );
    let notes = result["notes"].to_string();
    assert!(
        notes.contains("1 call was cut (x-ai/grok-4): 4 of 5 calls had answered"),
        "{notes}"
    );
    assert!(
        mock.wait_until(Duration::from_secs(5), |m| m.in_flight() == 0)
            .await,
        "the cut call's connection is closed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_can_wait_for_everyone() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("quick")]);
    }
    mock.script("m5", [Step::answer_after(2500, "slow but awaited")]);
    mock.script(SYNTH, [Step::answer("merged")]);
    let text = config(&mock, "")
        .replace(
            "[limits]",
            "[fan_out]\nstraggler_grace = \"500ms\"\n\n[limits]",
        )
        .replace(
            "synthesizer = \"synthesize\"\n",
            "synthesizer = \"synthesize\"\nfan_out = { quorum = \"all\" }\n",
        );
    let server = Server::start(&text).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    assert_eq!(
        result["summary"], "Synthesis of 5 of 5 answers.",
        "{result}"
    );
    assert!(
        mock.requests_for(SYNTH)[0]
            .text()
            .contains("slow but awaited")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_batches_get_the_same_policy() {
    let mock = Mock::start().await;
    // Layer 1 answers; in layer 2 (the mixture plugin's own host.complete
    // batch) m5 hangs.
    for model in PANEL {
        mock.script(model, [Step::answer("draft"), Step::answer("refined")]);
    }
    mock.script("m5", [Step::answer("draft"), Step::Hang]);
    mock.script(SYNTH, [Step::answer("aggregated")]);
    let extra = r#"
[plugins.mixture]
builtin = "mixture"
settings = { layers = 2 }

[pipelines.moa]
description = "moa"
selector = "panel"
prompter = "passthrough"
synthesizer = "mixture"
"#;
    let text = config(&mock, extra).replace(
        "[limits]",
        "[fan_out]\nstraggler_grace = \"1s\"\n\n[limits]",
    );
    let server = Server::start(&text).await;
    let started = Instant::now();
    let result = server.ask("moa", "q").await;
    assert!(started.elapsed() < Duration::from_secs(12));
    let result = structured(&result);
    let cut: Vec<_> = result["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "cut")
        .collect();
    assert_eq!(cut.len(), 1, "{result}");
    assert_eq!(cut[0]["model"], "m5");
    assert_eq!(cut[0]["stage"], "mixture");
    assert_eq!(result["answer"], "aggregated");
}
