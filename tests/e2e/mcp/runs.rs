//! Happy paths: the tool list, a full run, progress, parallelism, resources.

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_has_one_tool_per_pipeline_and_the_server_names_itself() {
    let mock = Mock::start().await;
    let extra = r#"
[pipelines.second]
description = "Another pipeline."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#;
    let server = Server::start(&config(&mock, extra)).await;
    let info = server.client.peer_info().expect("server info");
    let implementation = info.server_info.as_ref().expect("the server names itself");
    assert_eq!(implementation.name, "chorus");
    assert_eq!(implementation.version, env!("CARGO_PKG_VERSION"));

    let tools = server.client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["ask", "resynthesize", "second"]);
    let ask = tools.iter().find(|t| t.name == "ask").unwrap();
    assert_eq!(
        ask.description.as_deref(),
        Some("Ask the panel; get one synthesized answer.")
    );
    assert_eq!(ask.input_schema["required"], json!(["prompt"]));
    assert!(
        ask.output_schema.is_some(),
        "the structured result is described"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_run_synthesizes_every_answer_and_reports_every_model() {
    let mock = Mock::start().await;
    for (i, model) in PANEL.iter().enumerate() {
        mock.script(
            model,
            [Step::answer_after(
                20 * i as u64,
                &format!("answer number {i} from {model}"),
            )],
        );
    }
    mock.script(SYNTH, [Step::answer("THE SYNTHESIS")]);
    let server = Server::start(&config(&mock, "")).await;

    let result = server
        .ask("ask", "What is the best sorting algorithm?")
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert!(text(&result).starts_with("THE SYNTHESIS"));

    let synth_requests = mock.requests_for(SYNTH);
    assert_eq!(synth_requests.len(), 1);
    let synthesis_prompt = synth_requests[0].text();
    assert!(synthesis_prompt.contains("What is the best sorting algorithm?"));
    for (i, model) in PANEL.iter().enumerate() {
        assert!(
            synthesis_prompt.contains(&format!("answer number {i} from {model}")),
            "missing {model}'s answer"
        );
    }
    for model in PANEL {
        let sent = mock.requests_for(model);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].text(), "What is the best sorting algorithm?");
        assert_eq!(
            sent[0].authorization.as_deref(),
            Some(format!("Bearer {CANARY}").as_str())
        );
    }

    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    assert_eq!(structured["answer"], "THE SYNTHESIS");
    assert_eq!(structured["summary"], "Synthesis of 5 of 5 answers.");
    let fan_out = calls(structured, "fan-out");
    assert_eq!(fan_out.len(), 5);
    for call in &fan_out {
        assert_eq!(call["status"], "ok");
        assert_eq!(call["completion_tokens"], 34);
        assert_eq!(call["cost_usd"], 0.0005);
        assert!(call["latency_ms"].is_u64());
    }
    let synthesis = calls(structured, "synthesize");
    assert_eq!(synthesis.len(), 1);
    assert_eq!(synthesis[0]["model"], SYNTH);
    assert!((structured["usage"]["cost_usd"].as_f64().unwrap() - 0.003).abs() < 1e-9);
    assert!(
        structured["run_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_fan_out_is_parallel() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(300, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(false));
    // All five were in flight at the same moment: the panel is asked at
    // once, not one after another. (Timing is measured in the bench.)
    assert_eq!(mock.max_in_flight(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_notifications_arrive_as_models_answer() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(50, "ok")]);
    }
    mock.script("m4", [Step::status(400, "context too long")]);
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(result.is_error, Some(false));

    // rmcp's client hands each notification to its own task: give the
    // last ones a moment to land.
    let landed = mock
        .wait_until(std::time::Duration::from_secs(5), |_| {
            let progress = server.progress.lock().unwrap();
            let said = |start: &str| {
                progress
                    .iter()
                    .any(|p| p.message.as_deref().is_some_and(|m| m.starts_with(start)))
            };
            [
                "m1 answered",
                "m2 answered",
                "m3 answered",
                "m4 failed",
                "m5 answered",
            ]
            .into_iter()
            .all(said)
        })
        .await;
    assert!(landed, "{:?}", server.progress.lock().unwrap());
    let progress = server.progress.lock().unwrap().clone();
    let messages: Vec<String> = progress.iter().filter_map(|p| p.message.clone()).collect();
    for model in ["m1", "m2", "m3", "m5"] {
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with(&format!("{model} answered"))),
            "{model}: {messages:?}"
        );
    }
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("m4 failed") && m.contains("context too long")),
        "{messages:?}"
    );
    // Arrival order is not wire order (the raw-stdout test checks that);
    // the values are still all different, on a total of 100 that none
    // reaches (the response says the call is done).
    let mut steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    steps.sort_by(f64::total_cmp);
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    assert!(steps.iter().all(|p| *p < 100.0), "{steps:?}");
    assert!(progress.iter().all(|p| p.total == Some(100.0)));
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_runs_are_readable_as_resources() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    let run_id = structured(&result)["run_id"].as_str().unwrap().to_owned();

    let resources = server.client.list_all_resources().await.unwrap();
    let uri = format!("chorus://runs/{run_id}");
    assert!(resources.iter().any(|r| r.uri == uri), "{resources:?}");
    let read = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("a text resource")
    };
    let record: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(record["run_id"], run_id.as_str());
    assert_eq!(record["answer"], "merged");

    let missing = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "chorus://runs/nope",
        ))
        .await;
    assert!(missing.is_err());
}
