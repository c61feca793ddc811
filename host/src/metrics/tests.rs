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
        queued_ms: (status == "ok").then_some(300),
        ttft_ms: (status == "ok").then_some(120),
        prompt_tokens: Some(10),
        completion_tokens: Some(20),
        reasoning_tokens: None,
        cost_usd: Some(0.25),
        cost_estimated: false,
        tokens_estimated: false,
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
        experiment: None,
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
    let metrics = Metrics::new(Some(&crate::store::WriteLag::default()));
    let providers: ProviderOf = Arc::new(|model| (model == "m1").then(|| "p1".to_owned()));
    let watch = metrics.watcher("alice", providers);
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
        r#"chorus_model_calls_total{model="m1",provider="p1",outcome="ok"} 1"#,
        r#"chorus_model_calls_total{model="m2",provider="(unknown)",outcome="rate-limited"} 1"#,
        r#"chorus_tokens_total{model="m1",client="alice",kind="completion"} 20"#,
        r#"chorus_tokens_total{model="m1",client="alice",kind="cached"} 5"#,
        r#"chorus_cost_usd_total{model="m2",client="alice"} 0.25"#,
        r#"chorus_model_call_duration_seconds_bucket{le="1.6",model="m1"} 1"#,
        // 120 ms: in the 160 ms bucket, not the 80 ms one.
        r#"chorus_model_time_to_first_token_seconds_bucket{le="0.08",model="m1",provider="p1"} 0"#,
        r#"chorus_model_time_to_first_token_seconds_bucket{le="0.16",model="m1",provider="p1"} 1"#,
        r#"chorus_model_time_to_first_token_seconds_count{model="m1",provider="p1"} 1"#,
        // m1 waited 300 ms; m2's provider is not one the config knows.
        r#"chorus_provider_queue_wait_seconds_bucket{le="0.32",provider="p1"} 1"#,
        r#"chorus_provider_queue_wait_seconds_bucket{le="0.005",provider="(unknown)"} 1"#,
        "chorus_runs_in_flight 0",
        r#"chorus_build_info{version=""#,
    ] {
        assert!(text.contains(line), "no {line} in\n{text}");
    }
    assert!(
        !text.contains(r#"first_token_seconds_count{model="m2""#),
        "a failed call has no first token"
    );
    assert!(!text.contains("never"), "no run id or message as a label");
    assert!(!text.contains("nonsense"), "no caller's text as a label");
}

#[test]
fn a_run_is_in_flight_until_it_ends() {
    let metrics = Metrics::new(None);
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

#[test]
fn going_idle_is_signalled_when_the_last_run_in_flight_ends() {
    use futures::FutureExt;
    let metrics = Metrics::new(None);
    let (a, b) = (metrics.run("ask"), metrics.run("ask"));
    drop(a);
    assert!(
        metrics.went_idle().now_or_never().is_none(),
        "a run is still in flight"
    );
    drop(b);
    assert!(metrics.went_idle().now_or_never().is_some());
    assert!(metrics.went_idle().now_or_never().is_none(), "said once");
}

/// Every series a registered metric yields, by its OpenMetrics `# TYPE`
/// line: a counter's `_total`, a histogram's `_bucket`, `_sum` and
/// `_count`, a gauge's own name. A family is rendered once it has a
/// sample, so a call and a run go through first (a new metric fed by
/// something else needs feeding here too).
fn exported_series() -> std::collections::BTreeSet<String> {
    let metrics = Metrics::new(Some(&crate::store::WriteLag::default()));
    let providers: ProviderOf = Arc::new(|_| Some("p".to_owned()));
    let watch = metrics.watcher("c", providers);
    watch(Event::CallFinished(Arc::new(call("m", "ok", None))));
    watch(Event::PluginReturned {
        plugin: Arc::from("synthesize"),
        export: "synthesize",
        error: None,
        took: std::time::Duration::from_millis(3),
    });
    metrics.run("ask").end(&Ok(record(AnswerKind::Synthesis)));
    let text = metrics.render();
    let mut series = std::collections::BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').unwrap();
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        series.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    series
}

#[test]
fn the_grafana_dashboard_queries_only_metrics_chorus_exports() {
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/grafana/chorus.json"))
            .expect("docs/grafana/chorus.json is JSON");
    let exported = exported_series();
    assert!(
        exported.contains("chorus_model_time_to_first_token_seconds_bucket"),
        "{exported:?}"
    );
    let name = regex::Regex::new(r"\bchorus_[a-z0-9_]+").unwrap();
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut queried = std::collections::BTreeSet::new();
    for panel in panels {
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "each panel uses the datasource variable: {panel}"
        );
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("an expr");
            let names: Vec<&str> = name.find_iter(expr).map(|m| m.as_str()).collect();
            assert!(!names.is_empty(), "{expr} names no chorus metric");
            for name in names {
                assert!(
                    exported.contains(name),
                    "the dashboard queries {name}, which chorus does not export \
                     (it exports {exported:?})"
                );
                queried.insert(name.to_owned());
            }
        }
    }
    for needed in [
        "chorus_runs_total",
        "chorus_model_calls_total",
        "chorus_run_duration_seconds_bucket",
        "chorus_model_call_duration_seconds_bucket",
        "chorus_model_time_to_first_token_seconds_bucket",
        "chorus_provider_queue_wait_seconds_bucket",
        "chorus_cost_usd_total",
        "chorus_runs_in_flight",
        "chorus_store_write_lag_seconds_bucket",
        "chorus_plugin_call_duration_seconds_bucket",
    ] {
        assert!(queried.contains(needed), "no panel shows {needed}");
    }
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus datasource variable"
    );
}

#[test]
fn estimated_tokens_and_unknown_costs_are_counted_apart() {
    let metrics = Metrics::new(None);
    let providers: ProviderOf = Arc::new(|_| Some("gateway".to_owned()));
    let watch = metrics.watcher("alice", providers);
    let mut guessed = call("m1", "ok", None);
    guessed.tokens_estimated = true;
    guessed.cost_usd = None;
    watch(Event::CallFinished(Arc::new(guessed)));
    watch(Event::CallFinished(Arc::new(call("m2", "ok", None))));
    let text = metrics.render();
    for line in [
        r#"chorus_estimated_tokens_total{model="m1",client="alice",kind="prompt"} 10"#,
        r#"chorus_estimated_tokens_total{model="m1",client="alice",kind="completion"} 20"#,
        r#"chorus_unknown_cost_model_calls_total{model="m1",client="alice"} 1"#,
    ] {
        assert!(text.contains(line), "no {line} in\n{text}");
    }
    assert!(
        !text.contains(r#"chorus_estimated_tokens_total{model="m2""#),
        "reported tokens are not estimates:\n{text}"
    );
    assert!(
        !text.contains(r#"chorus_cost_usd_total{model="m1""#),
        "an unknown cost is not counted as $0:\n{text}"
    );
}
