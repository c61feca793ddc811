//! Streaming as real providers do it: deltas with keep-alive comments and
//! reasoning in between, CRLF, usage and cost in the last chunk, an error
//! chunk inside a 200 stream, a server that answers a streaming request
//! with plain JSON, and one that cannot stream at all.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

fn call<'a>(result: &'a serde_json::Value, model: &str) -> &'a serde_json::Value {
    calls(result, "fan-out")
        .into_iter()
        .find(|c| c["model"] == model)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn streamed_answers_are_assembled_without_their_reasoning() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream(&format!("{model} streams its view"))]);
    }
    mock.script(
        "m1",
        [Step::Sse {
            events: vec![
                Sse::Comment("OPENROUTER PROCESSING".into()),
                Sse::Reasoning("Let me think about the sky. ".into()),
                Sse::Reasoning("Rayleigh scattering!".into()),
                Sse::Content("Blue light ".into()),
                Sse::Comment("OPENROUTER PROCESSING".into()),
                Sse::Content("scatters most.".into()),
                Sse::Finish("stop".into()),
                Sse::Usage(
                    json!({"prompt_tokens": 9, "completion_tokens": 7, "cost": 0.00042,
                                  "completion_tokens_details": {"reasoning_tokens": 5}}),
                ),
                Sse::Done,
            ],
            crlf: true,
        }],
    );
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "Why is the sky blue?").await;
    let result = structured(&result);
    assert_eq!(result["kind"], "synthesis");
    assert_eq!(result["answer"], "merged");
    let m1 = call(result, "m1");
    assert_eq!(m1["status"], "ok");
    assert_eq!(m1["cost_usd"], 0.00042, "cost from the last chunk");
    assert_eq!(m1["reasoning_tokens"], 5);
    assert!(m1.get("cost_estimated").is_none(), "the provider's figure");
    let sent = mock.requests_for(SYNTH)[0].text();
    assert!(sent.contains("Blue light scatters most."), "{sent}");
    assert!(
        !sent.contains("Rayleigh"),
        "reasoning never enters the answer"
    );
    assert!(
        mock.requests_for("m2")[0].body["stream"] == true,
        "streaming is the default"
    );
    assert!(
        mock.requests_for("m2")[0].body.get("usage").is_none(),
        "nothing a provider may reject is sent"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_inside_a_200_stream_is_a_typed_failure_with_the_providers_words() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("fine")]);
    }
    let broken = Step::Sse {
        events: vec![
            Sse::Content("The answer is".into()),
            Sse::Error {
                code: 502,
                message: "Provider returned error: upstream overloaded".into(),
            },
        ],
        crlf: false,
    };
    mock.script("m1", [broken.clone(), Step::stream("second try worked")]);
    mock.script(
        "m2",
        [Step::Sse {
            events: vec![Sse::Error {
                code: 400,
                message: "This model does not support tools".into(),
            }],
            crlf: false,
        }],
    );
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    let m1 = call(result, "m1");
    assert_eq!(m1["status"], "ok", "a 5xx in the stream is retried: {m1}");
    assert_eq!(m1["attempts"], 2);
    let m2 = call(result, "m2");
    assert_eq!(m2["error"]["kind"], "http-status");
    assert_eq!(m2["error"]["status"], 400);
    assert_eq!(m2["error"]["message"], "This model does not support tools");
    assert_eq!(m2["attempts"], 1, "a 4xx is not retried");
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_json_to_a_streaming_request_and_stream_false_both_work() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("streamed or not")]);
    }
    // This server ignores `stream: true` and answers with one JSON body.
    mock.script(
        "m1",
        [Step::Raw {
            body: json!({"model": "m1", "choices": [{"message": {"content": "plain json"}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 12.0, "completion_tokens": "3", "cost": "0.0001"}})
            .to_string(),
        }],
    );
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    let m1 = call(structured(&result), "m1");
    assert_eq!(m1["status"], "ok", "{m1}");
    assert_eq!(
        m1["prompt_tokens"], 12,
        "odd usage types are read, not fatal"
    );
    assert_eq!(m1["cost_usd"], 0.0001);
    assert!(mock.requests_for(SYNTH)[0].text().contains("plain json"));

    let no_stream = config(&mock, "").replace(
        "connect_timeout = \"2s\"",
        "connect_timeout = \"2s\"\nstream = false",
    );
    let server = Server::start(&no_stream).await;
    let before = mock.requests().len();
    let result = server.ask("ask", "q").await;
    assert_eq!(structured(&result)["kind"], "synthesis");
    let sent = &mock.requests()[before..];
    assert!(sent.iter().all(|r| r.body["stream"] == false));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_spends_its_budget_thinking_says_so() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream("an answer")]);
    }
    mock.script(
        "m1",
        [Step::Sse {
            events: vec![
                Sse::Reasoning("hmm ".repeat(50)),
                Sse::Finish("length".into()),
                Sse::Usage(json!({"prompt_tokens": 10, "completion_tokens": 256,
                                  "completion_tokens_details": {"reasoning_tokens": 256}})),
                Sse::Done,
            ],
            crlf: false,
        }],
    );
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    let m1 = call(structured(&result), "m1");
    assert_eq!(m1["error"]["kind"], "token-limit", "{m1}");
    let said = m1["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("256 completion tokens, 256 of them reasoning")
            && said.contains("raise max_tokens (models.\"m1\".params"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chorus_ask_shows_when_each_model_starts_answering() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(
            model,
            [Step::keep_alive_then(
                Duration::from_millis(100),
                Duration::from_millis(300),
                "streamed",
            )],
        );
    }
    mock.script(SYNTH, [Step::stream("The merged answer.")]);
    let file = write_config(&config(&mock, ""));
    let output = command(&["ask", "--config", file.path.to_str().unwrap(), "q"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "The merged answer.\n"
    );
    for model in PANEL {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&format!("▸ {model} ")) && l.ends_with("first token")),
            "{stderr}"
        );
    }
}

/// The answer, its finish and (maybe) usage, then a stream that never ends.
fn finished_then(usage: bool, after: Vec<Sse>) -> Step {
    let mut events = vec![
        Sse::Content("Complete ".into()),
        Sse::Content("answer.".into()),
        Sse::Finish("stop".into()),
    ];
    if usage {
        events.push(Sse::Usage(
            json!({"prompt_tokens": 12, "completion_tokens": 34, "cost": 0.0005}),
        ));
    }
    events.extend(after);
    Step::Sse {
        events,
        crlf: false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finished_stream_that_never_closes_keeps_its_answer() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::stream(&format!("{model} answers"))]);
    }
    // Silence after finish + usage: no [DONE], no close.
    mock.script("m1", [finished_then(true, vec![Sse::Hang])]);
    // Keep-alives after a finish without usage: idle_timeout never fires.
    let keep_alive = (0..100)
        .flat_map(|_| {
            [
                Sse::Comment("OPENROUTER PROCESSING".into()),
                Sse::Wait(Duration::from_millis(200)),
            ]
        })
        .collect();
    mock.script("m2", [finished_then(false, keep_alive)]);
    mock.script(SYNTH, [Step::stream("merged")]);
    // A short idle_timeout and request_timeout: before the fix, m1 failed
    // "went silent" after 3 s and m2 at request_timeout; both now end
    // well inside either.
    let config = config(&mock, "").replace(
        "request_timeout = \"10s\"\nread_timeout = \"10s\"",
        "request_timeout = \"6s\"\nidle_timeout = \"3s\"",
    );
    let server = Server::start(&config).await;
    let result = server.ask("ask", "Anything?").await;
    let result = structured(&result);
    for model in ["m1", "m2"] {
        let call = call(result, model);
        assert_eq!(call["status"], "ok", "{model}: {call}");
        assert_eq!(call["attempts"], 1, "{model}: {call}");
    }
    assert_eq!(result["kind"], "synthesis");
    assert_eq!(call(result, "m1")["cost_usd"], 0.0005, "the usage was kept");
    let sent = mock.requests_for(SYNTH)[0].text();
    assert_eq!(sent.matches("Complete answer.").count(), 2, "{sent}");
}
