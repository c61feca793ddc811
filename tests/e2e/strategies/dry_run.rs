//! `chorus ask --dry-run` shows what a run would send — the selector's
//! plan, every fan-out request in full, the synthesizer's own requests over
//! placeholder answers, and the worst-case cost — and calls no model.

use serde_json::Value;

use crate::support::*;

fn priced(mock: &Mock) -> String {
    config(mock, "").replace(
        "context_window = 100000\n",
        "context_window = 100000\ninput_price = 1.0\noutput_price = 2.0\n",
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_shows_every_request_and_its_cost_and_calls_no_model() {
    let mock = Mock::start().await;
    let file = write_config(&priced(&mock));
    let config = file.path.to_str().unwrap();
    let output = command(&[
        "ask",
        "--dry-run",
        "--json",
        "--config",
        config,
        "Why is the sky blue?",
    ])
    // No key is needed: nothing is sent.
    .env_remove(KEY_VAR)
    .output()
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(mock.requests().is_empty(), "no model was called");

    let panel: Vec<&str> = plan["plan"]["panel"]
        .as_array()
        .unwrap()
        .iter()
        .map(|seat| seat["model"].as_str().unwrap())
        .collect();
    assert_eq!(panel, PANEL);
    assert_eq!(
        plan["plan"]["synthesizers"],
        serde_json::json!([SYNTH, SYNTH2])
    );

    let calls = plan["calls"].as_array().unwrap();
    assert_eq!(
        calls.len(),
        6,
        "five fan-out requests and the merge: {plan}"
    );
    for (call, model) in calls.iter().zip(PANEL) {
        assert_eq!(call["stage"], "fan-out");
        assert_eq!(call["model"], model);
        let messages = call["messages"].as_array().unwrap();
        assert_eq!(messages.last().unwrap()["content"], "Why is the sky blue?");
    }
    let merge = &calls[5];
    assert_eq!(merge["stage"], "synthesize");
    assert_eq!(merge["model"], SYNTH);
    let merged = merge["messages"].to_string();
    for (id, model) in PANEL.iter().enumerate() {
        assert!(
            merged.contains(&format!(
                "[dry run: {model}'s answer to call {id} would be here]"
            )),
            "{merged}"
        );
    }

    // Each call's worst case: its prompt plus the rest of the context
    // window, at the configured prices; the estimate is their sum.
    let worst: Vec<f64> = calls
        .iter()
        .map(|c| c["worst_case_usd"].as_f64().unwrap())
        .collect();
    assert!(
        worst.iter().all(|&usd| usd > 0.19 && usd < 0.21),
        "{worst:?}"
    );
    let total = plan["estimated_cost_usd"]["at_most"].as_f64().unwrap();
    assert!((total - worst.iter().sum::<f64>()).abs() < 1e-9);
    assert_eq!(plan["estimated_cost_usd"]["calls_with_unknown_cost"], 0);
    assert_eq!(plan["placeholder_answer"]["kind"], "synthesis");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_reads_as_text_and_says_what_it_cannot_price() {
    let mock = Mock::start().await;
    let file = write_config(&config(&mock, ""));
    let output = command(&[
        "ask",
        "--dry-run",
        "--config",
        file.path.to_str().unwrap(),
        "Why is the sky blue?",
    ])
    .output()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(mock.requests().is_empty(), "no model was called");
    for expected in [
        "Dry run of pipeline `ask`: no model was called",
        "panel: m1, m2, m3, m4, m5",
        "synthesizers, in order of preference: synth -> synth2",
        "Call 0 · fan-out · m1 · ",
        "Call 5 · synthesize · synth · ",
        "    Why is the sky blue?",
        "[dry run: m3's answer to call 2 would be here]",
        "worst case unknown: no prices for `m1`",
        "Estimated cost: at most $0 for 6 calls",
        "6 of them with no known worst case",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in:\n{stdout}");
    }
}
