//! Under a provider's `max_concurrency`, requests wait in an order that
//! finishes runs: a run already in flight gets its later stages through
//! before newer runs' first ones; the wait counts against the run's
//! deadline; progress says the call is queued.

use std::time::Duration;

use crate::support::*;

fn capped(mock: &Mock, extra: &str) -> String {
    config(mock, extra).replace(
        "read_timeout = \"10s\"",
        "read_timeout = \"10s\"\nmax_concurrency = 1",
    )
}

/// Which run (`run A`, …) each request the mock received belongs to, in
/// the order they arrived.
fn runs_in_arrival_order(mock: &Mock) -> Vec<char> {
    mock.requests()
        .iter()
        .map(|r| {
            let text = r.text();
            let at = text.find("run ").expect("every prompt names its run");
            text[at + 4..].chars().next().unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn under_a_cap_a_run_in_flight_finishes_before_newer_runs_start() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(150, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&capped(&mock, "")).await;

    let first = server.ask("ask", "run A");
    let later = async {
        // Run A holds the provider's one permit; B and C arrive while its
        // panel still waits.
        assert!(
            mock.wait_until(Duration::from_secs(10), |m| !m.requests().is_empty())
                .await
        );
        futures::join!(server.ask("ask", "run B"), server.ask("ask", "run C"))
    };
    let (a, (b, c)) = futures::join!(first, later);
    for result in [&a, &b, &c] {
        assert_eq!(result.is_error, Some(false), "{}", text(result));
        assert_eq!(structured(result)["answer"], "merged");
    }
    assert_eq!(mock.max_in_flight(), 1);

    // Each run's six requests (five panel calls, one synthesis) went out
    // together: A's synthesis did not wait behind B's and C's panels. (One
    // request of another run may come between a run's panel and its
    // synthesis — the permit its last panel call frees goes to whoever
    // waits at that moment, before the synthesis is asked for — so a run's
    // six span at most eight places.)
    let order = runs_in_arrival_order(&mock);
    assert_eq!(order.len(), 18, "{order:?}");
    for run in ['A', 'B', 'C'] {
        let first = order.iter().position(|r| *r == run).unwrap();
        let last = order.iter().rposition(|r| *r == run).unwrap();
        assert!(last - first <= 7, "{run}'s requests spread out: {order:?}");
    }
    assert!(
        order[..7].iter().filter(|r| **r == 'A').count() == 6,
        "{order:?}"
    );

    let messages: Vec<String> = server
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    assert!(
        messages.iter().any(|m| m.contains(" queued behind ")
            && m.ends_with(" requests for the provider (max_concurrency)")),
        "{messages:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_deadline_counts_its_wait_for_a_provider_permit() {
    let mock = Mock::start().await;
    let gate = Gate::default();
    mock.script(
        "held",
        [Step::Gated {
            gate: gate.clone(),
            text: "held".into(),
        }],
    );
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let extra = r#"
[models.held]
context_window = 100000

[plugins.hold-panel]
builtin = "static-panel"
settings = { panel = ["held"], synthesizers = ["synth"] }

[pipelines.hold]
description = "Holds the provider's one permit."
selector = "hold-panel"
prompter = "passthrough"
synthesizer = "synthesize"

[pipelines.quick]
description = "Must end within 2 s, waiting included."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
run_timeout = "2s"
"#;
    let server = Server::start(&capped(&mock, extra)).await;
    let hold = server.ask("hold", "run H");
    let quick = async {
        assert!(
            mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 1)
                .await
        );
        // Without the wait counted, this run would wait for the gate,
        // which opens only after it returns.
        let result = server.ask("quick", "run Q").await;
        gate.open();
        result
    };
    let (held, quick) = futures::join!(hold, quick);
    assert_eq!(held.is_error, Some(false), "{}", text(&held));
    let result = structured(&quick);
    let fan_out = calls(result, "fan-out");
    assert_eq!(fan_out.len(), 5, "{result}");
    assert!(
        fan_out.iter().all(|c| c["status"] != "ok"),
        "no panel call of the quick run got a permit: {result}"
    );
    for call in &fan_out {
        let message = call["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message
                .contains("it was still waiting for one of the provider's permits, queued behind ")
                && message.ends_with("providers.mock.max_concurrency)"),
            "the failure says the call never left the queue: {call}"
        );
    }
    assert!(
        runs_in_arrival_order(&mock).iter().all(|r| *r == 'H'),
        "nothing of the quick run reached the provider"
    );
}
