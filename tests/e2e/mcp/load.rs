//! Many calls at once over one stdio connection, and secrets under load of
//! every kind: all answered, none mixed up, concurrency capped, nothing kept
//! without bound, and the API key nowhere.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::join_all;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn five_hundred_concurrent_calls_are_all_answered_each_with_its_own_result() {
    let mock = Mock::start().await;
    for model in PANEL.iter().chain(&[SYNTH]) {
        mock.script(
            model,
            [Step::Echo {
                prefix: format!("{model} heard: "),
                delay: Duration::from_millis(2),
            }],
        );
    }
    // Every answer is needed to check for mix-ups: no straggler is cut
    // (calls wait their turn behind max_concurrency), however loaded the
    // machine.
    let config_text = config(&mock, "")
        .replace(
            "read_timeout = \"10s\"",
            "read_timeout = \"10s\"\nmax_concurrency = 4",
        )
        .replace(
            "[limits]\nrun_timeout = \"20s\"",
            "[fan_out]\nquorum = \"all\"\nmerge_reserve = \"0%\"\n\n[limits]\nrun_timeout = \"200s\"",
        );
    let server = Server::start(&config_text).await;

    let calls = (0..500).map(|i| {
        let peer = server.client.peer().clone();
        async move {
            let arguments = json!({"prompt": format!("request {i} end")})
                .as_object()
                .cloned()
                .unwrap();
            let result = peer
                .call_tool(CallToolRequestParams::new("ask").with_arguments(arguments))
                .await;
            (i, result)
        }
    });
    let results = tokio::time::timeout(Duration::from_secs(240), join_all(calls))
        .await
        .expect("all answered in time");
    let mut run_ids = BTreeSet::new();
    for (i, result) in results {
        let result = result.unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(result.is_error, Some(false), "call {i}: {}", text(&result));
        let structured = structured(&result);
        let answer = structured["answer"].as_str().unwrap();
        // The synthesizer echoed its prompt: the question and five answers,
        // every one of which must be this call's own.
        let ids: BTreeSet<&str> = answer
            .split("request ")
            .skip(1)
            .filter_map(|s| s.split(" end").next())
            .collect();
        assert_eq!(
            ids,
            BTreeSet::from([i.to_string().as_str()]),
            "call {i} got someone else's answer"
        );
        assert_eq!(answer.matches(&format!("request {i} end")).count(), 6);
        run_ids.insert(structured["run_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(run_ids.len(), 500, "every run has its own id");
    assert!(
        mock.max_in_flight() <= 4,
        "max_concurrency holds: {} in flight",
        mock.max_in_flight()
    );
    assert_eq!(mock.requests().len(), 3000);
    let kept = server.client.list_all_resources().await.unwrap();
    assert_eq!(
        kept.len(),
        500,
        "resources/list pages through every kept run"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_key_never_appears_in_logs_results_resources_or_errors() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("fine")]);
    }
    mock.script(
        "m1",
        [Step::status(401, &format!("Invalid API key: {CANARY}"))],
    );
    mock.script(
        "m2",
        [Step::answer(&format!("I saw your key {CANARY} in my logs"))],
    );
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start_with_env(&config(&mock, ""), &[("CHORUS_LOG", "trace")]).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(
        mock.requests_for("m3")[0].authorization.as_deref(),
        Some(format!("Bearer {CANARY}").as_str())
    );

    let everything = serde_json::to_string(&result).unwrap();
    assert!(
        everything.contains("Invalid API key: [redacted]"),
        "the provider's message stays, minus the key"
    );
    assert!(
        mock.requests_for(SYNTH)[0]
            .text()
            .contains("I saw your key [redacted]")
    );
    let run_id = structured(&result)["run_id"].as_str().unwrap().to_owned();
    let resource = server
        .client
        .read_resource(ReadResourceRequestParams::new(format!(
            "chorus://runs/{run_id}"
        )))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text: record, .. } = &resource.contents[0] else {
        panic!()
    };
    let bad = server.call("ask", json!({"prompt": 7})).await;
    let log = server.stderr();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "the log ran at trace level"
    );
    for (place, text) in [
        ("result", &everything),
        ("resource", record),
        ("error", &serde_json::to_string(&bad).unwrap()),
        ("log", &log),
    ] {
        assert!(!text.contains(CANARY), "the key leaked into the {place}");
    }
}
