//! The synthesis as its model writes it: the built-in synthesizer asks for
//! its merge with `host.complete-answer` (contract 0.5), and the OpenAI
//! endpoint passes the merge's text on while the synthesizer model is still
//! writing. The mock holds the rest of the merge behind a gate the test
//! opens, so "arrived before the model finished" is a fact, not a timing.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::{ask, events, post};
use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

/// Reads `response`'s events until one matches `seen`; what was read.
async fn read_until(
    body: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    text: &mut String,
    seen: impl Fn(&Value) -> bool,
) -> bool {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if events(text).iter().any(&seen) {
                return true;
            }
            match body.next().await {
                Some(Ok(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return false,
            }
        }
    })
    .await;
    found.unwrap_or(false)
}

async fn answered_panel(mock: &Mock) {
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_synthesis_reaches_the_client_while_its_model_is_still_writing() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    // Chat Completions.
    answered_panel(&mock).await;
    let gate = Gate::default();
    mock.script(SYNTH, [Step::stream_gated("The merged ", &gate, "answer.")]);
    let mut body = ask("q");
    body["stream"] = json!(true);
    let response = post(&server, "/v1/chat/completions", Some(TOKEN), &body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let first_words = |e: &Value| e["choices"][0]["delta"]["content"] == "The merged ";
    assert!(
        read_until(&mut stream, &mut text, first_words).await,
        "the merge's first words did not arrive while the synthesizer was held:\n{text}"
    );
    gate.open();
    while let Some(Ok(chunk)) = stream.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let all = events(&text);
    let content: String = all
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "The merged answer.");
    let finish = all
        .iter()
        .find(|e| e["choices"][0]["finish_reason"] == "stop")
        .unwrap();
    assert_eq!(finish["chorus"]["streamed"], "live");
    assert_eq!(finish["chorus"]["kind"], "synthesis");
    assert_eq!(all.last().unwrap(), "[DONE]");

    // The Responses API.
    answered_panel(&mock).await;
    let gate = Gate::default();
    mock.script(SYNTH, [Step::stream_gated("The merged ", &gate, "answer.")]);
    let request = json!({"model": "ask", "input": "q", "stream": true});
    let response = post(&server, "/v1/responses", Some(TOKEN), &request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let first_words =
        |e: &Value| e["type"] == "response.output_text.delta" && e["delta"] == "The merged ";
    assert!(
        read_until(&mut stream, &mut text, first_words).await,
        "the merge's first words did not arrive while the synthesizer was held:\n{text}"
    );
    gate.open();
    while let Some(Ok(chunk)) = stream.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let all = events(&text);
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    assert!(at("response.output_item.added") < at("response.output_text.delta"));
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "response.output_item.added")
            .count(),
        1,
        "{kinds:?}"
    );
    let deltas: String = all
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(deltas, "The merged answer.");
    let completed = all
        .iter()
        .find(|e| e["type"] == "response.completed")
        .unwrap();
    assert_eq!(completed["response"]["output_text"], "The merged answer.");
    assert_eq!(completed["response"]["chorus"]["streamed"], "live");
}

/// A streamed `ask` against `mock`, read whole: the content the client
/// was sent, and the chunk that finished it.
async fn streamed_answer(mock: &Mock) -> (String, Value) {
    let config = write_config(&config(mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let mut body = ask("q");
    body["stream"] = json!(true);
    let text = post(&server, "/v1/chat/completions", Some(TOKEN), &body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let all = events(&text);
    let content = all
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    let finish = all
        .iter()
        .find(|e| e["choices"][0]["finish_reason"] == "stop")
        .cloned()
        .unwrap_or_else(|| panic!("no finishing chunk in {text}"));
    (content, finish)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_that_breaks_off_is_marked_and_the_client_ends_with_the_answer() {
    let mock = Mock::start().await;
    answered_panel(&mock).await;
    // The first attempt's stream ends mid-answer (no finish, no [DONE]):
    // the host tries again, and the second attempt answers.
    mock.script(
        SYNTH,
        [
            Step::Sse {
                events: vec![Sse::Content("The merged ".into())],
                crlf: false,
            },
            Step::stream("The merged answer."),
        ],
    );
    let (content, finish) = streamed_answer(&mock).await;
    assert_eq!(
        content,
        "The merged \n\n[chorus: the answer above broke off; it is being written again]\n\nThe merged answer."
    );
    assert_eq!(finish["chorus"]["streamed"], "replaced");
    assert_eq!(mock.requests_for(SYNTH).len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_that_fails_falls_back_and_the_answer_says_what_replaced_it() {
    let mock = Mock::start().await;
    answered_panel(&mock).await;
    // Every attempt of the first synthesizer breaks off part-way; the
    // second synthesizer merges. What went out is marked, then the answer.
    let broken = || Step::Sse {
        events: vec![Sse::Content("Half a ".into())],
        crlf: false,
    };
    mock.script(SYNTH, [broken(), broken(), broken()]);
    mock.script(SYNTH2, [Step::stream("The second merge.")]);
    let (content, finish) = streamed_answer(&mock).await;
    assert!(
        content.ends_with("\n\nThe second merge."),
        "the client's text ends with the answer: {content:?}"
    );
    assert!(content.starts_with("Half a "), "{content:?}");
    assert!(
        content.contains("[chorus: the answer above broke off"),
        "{content:?}"
    );
    assert_eq!(finish["chorus"]["streamed"], "replaced");
    assert_eq!(finish["chorus"]["kind"], "synthesis");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_that_asks_for_an_answer_call_cannot_write_into_the_answer() {
    let mock = Mock::start().await;
    // The chaos selector's own complete-answer call goes to m1 first.
    mock.script(
        "m1",
        [
            Step::stream("INJECTED BY THE SELECTOR "),
            Step::answer("ok"),
        ],
    );
    mock.script("m2", [Step::answer("ok")]);
    mock.script(SYNTH, [Step::stream("The merged answer.")]);
    let config = write_config(&config(
        &mock,
        &chaos_pipeline("chaotic", "answer-call", ""),
    ));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let body =
        json!({"model": "chaotic", "stream": true, "messages": [{"role": "user", "content": "q"}]});
    let text = post(&server, "/v1/chat/completions", Some(TOKEN), &body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let all = events(&text);
    let content: String = all
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "The merged answer.", "{text}");
    assert_eq!(
        mock.requests_for("m1").len(),
        2,
        "the selector's call was made"
    );
}
