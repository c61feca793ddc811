use std::sync::Arc;

use super::*;
use crate::record::{AnswerKind, CallError, Totals};

fn call(model: &str, status: &str, error: Option<&str>) -> CallRecord {
    CallRecord {
        id: 0,
        stage: "fan-out".into(),
        label: model.into(),
        model: model.into(),
        status: status.into(),
        latency_ms: 1_500,
        attempts: 1,
        prompt_tokens: Some(10),
        completion_tokens: Some(20),
        reasoning_tokens: None,
        cost_usd: Some(0.25),
        cost_estimated: false,
        error: error.map(|kind| CallError {
            kind: kind.into(),
            status: None,
            message: "the model's message, never a label".into(),
        }),
        reply: None,
        reused_from: None,
        cached_from: None,
        format_sent: None,
        fallback_from: Vec::new(),
        citations: Vec::new(),
        cached_tokens: Some(5),
        cache_write_tokens: None,
    }
}

fn record(kind: AnswerKind) -> Arc<RunRecord> {
    Arc::new(RunRecord {
        run_id: "a-run-id-never-a-label".into(),
        pipeline: "ask".into(),
        kind,
        summary: String::new(),
        answer: String::new(),
        notes: Vec::new(),
        calls: Vec::new(),
        usage: Totals::default(),
        elapsed_ms: 0,
        details: None,
        follow_up_of: None,
        resynthesis_of: None,
        sources: Vec::new(),
        attachments: Vec::new(),
    })
}

#[test]
fn runs_calls_tokens_and_cost_are_counted_with_bounded_labels() {
    let metrics = Metrics::new();
    let watch = metrics.watcher();
    watch(Event::CallFinished(Arc::new(call("m1", "ok", None))));
    watch(Event::CallFinished(Arc::new(call(
        "m2",
        "failed",
        Some("rate-limited"),
    ))));
    metrics.run("ask").end(&Ok(record(AnswerKind::Synthesis)));
    metrics
        .run("nonsense-from-a-caller")
        .end(&Err(RunError::UnknownPipeline {
            name: "nonsense-from-a-caller".into(),
            available: "ask".into(),
        }));
    drop(metrics.run("ask")); // dropped in flight: cancelled
    let text = metrics.render();
    for line in [
        r#"chorus_runs_total{pipeline="ask",outcome="synthesis"} 1"#,
        r#"chorus_runs_total{pipeline="ask",outcome="cancelled"} 1"#,
        r#"chorus_runs_total{pipeline="(unknown)",outcome="refused"} 1"#,
        r#"chorus_model_calls_total{model="m1",outcome="ok"} 1"#,
        r#"chorus_model_calls_total{model="m2",outcome="rate-limited"} 1"#,
        r#"chorus_tokens_total{model="m1",kind="completion"} 20"#,
        r#"chorus_tokens_total{model="m1",kind="cached"} 5"#,
        r#"chorus_cost_usd_total{model="m2"} 0.25"#,
        r#"chorus_model_call_duration_seconds_bucket{le="1.6",model="m1"} 1"#,
        "chorus_runs_in_flight 0",
        r#"chorus_build_info{version=""#,
    ] {
        assert!(text.contains(line), "no {line} in\n{text}");
    }
    assert!(!text.contains("never"), "no run id or message as a label");
    assert!(!text.contains("nonsense"), "no caller's text as a label");
}

#[test]
fn a_run_is_in_flight_until_it_ends() {
    let metrics = Metrics::new();
    let flight = metrics.run("ask");
    assert!(metrics.render().contains("chorus_runs_in_flight 1"));
    flight.end(&Err(RunError::Timeout(std::time::Duration::from_secs(1))));
    let text = metrics.render();
    assert!(text.contains("chorus_runs_in_flight 0"), "{text}");
    assert!(
        text.contains(r#"chorus_runs_total{pipeline="ask",outcome="timeout"} 1"#),
        "{text}"
    );
}
