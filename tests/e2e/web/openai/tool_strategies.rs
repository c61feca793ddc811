//! Strategies that decide on the panel's tool calls (contract 0.6,
//! issue 52): `vote` counts a proposal as a ballot, `judge` picks among
//! calls and texts alike, a plugin of an older contract leaves the call to
//! chorus and the run says so, and a strategy's hostile call — of a tool
//! nobody offered, of the wrong kind, with arguments that do not match —
//! never reaches the caller as such.

use serde_json::{Value, json};

use super::completed;
use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": false
        }
    }})
}

fn asking(pipeline: &str) -> Value {
    json!({
        "model": pipeline,
        "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        "tools": [weather_tool()],
    })
}

fn taking_tools(mock: &Mock) {
    let all: &[&str] = &["tools"];
    catalog_taking(
        mock,
        &[
            ("m1", all),
            ("m2", all),
            ("m3", all),
            ("m4", all),
            ("m5", all),
            (SYNTH, all),
        ],
    );
}

/// A pipeline `name` of the test panel, merged by the plugin `name`.
fn pipeline(name: &str, plugin: &str) -> String {
    format!(
        r#"
[plugins.{name}]
{plugin}
[pipelines.{name}]
description = "tool calls decided by {name}"
selector = "panel"
prompter = "passthrough"
synthesizer = "{name}"
"#
    )
}

fn notes_of(completion: &Value) -> String {
    completion["chorus"]["notes"].to_string()
}

fn call_of(completion: &Value) -> (String, Value) {
    let call = &completion["choices"][0]["message"]["tool_calls"][0]["function"];
    let arguments = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    (call["name"].as_str().unwrap().to_owned(), arguments)
}

#[tokio::test(flavor = "multi_thread")]
async fn vote_counts_a_proposal_as_a_ballot_where_chorus_would_have_merged() {
    let mock = Mock::start().await;
    taking_tools(&mock);
    // Two equal calls (keys and spacing differ) against three different
    // texts: chorus's own rule merges (2 of 5 is no majority of callers);
    // the vote's plurality is the call.
    mock.script(
        "m1",
        [Step::tool_call("get_weather", r#"{"city": "Oslo"}"#)],
    );
    mock.script(
        "m2",
        [Step::tool_call("get_weather", "{ \"city\" :\"Oslo\" }")],
    );
    mock.script("m3", [Step::answer("Sunny.")]);
    mock.script("m4", [Step::answer("Rainy, I think.")]);
    mock.script("m5", [Step::answer("I cannot look it up.")]);
    let extra = pipeline("voting", r#"builtin = "vote""#);
    let config = write_config(&config(&mock, &extra));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let completion = completed(&server, &asking("voting")).await;
    assert_eq!(completion["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(completion["chorus"]["kind"], "tool-call", "{completion}");
    let notes = notes_of(&completion);
    assert!(
        notes.contains("Plurality: the winner got 2 of 5 votes"),
        "{notes}"
    );
    assert!(
        notes.contains("the synthesizer `voting` chose it"),
        "{notes}"
    );
    assert_eq!(
        call_of(&completion),
        ("get_weather".to_owned(), json!({"city": "Oslo"}))
    );
    // The run keeps the vote and the calls proposed, chosen and why.
    let run = completion["chorus"]["run_id"].as_str().unwrap();
    let details = &record(&server, run).await["details"];
    assert_eq!(details["votes"][0]["votes"], 2, "{details}");
    assert_eq!(details["votes"].as_array().unwrap().len(), 4, "{details}");
    let proposed = details["tool_calls"]["proposed"].as_array().unwrap();
    assert_eq!(proposed.len(), 2, "{details}");
    assert_eq!(details["tool_calls"]["chosen"][0]["name"], "get_weather");
}

/// The run record `id`, as the MCP resource gives it.
async fn record(server: &HttpServer, id: &str) -> Value {
    let read = crate::web::teams::rpc(
        server,
        TOKEN,
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
               "params": {"uri": format!("chorus://runs/{id}")}}),
    )
    .await;
    let text = read["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no run record: {read}"));
    serde_json::from_str(text).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn vote_answers_in_text_when_a_text_wins_and_judge_picks_a_call() {
    let mock = Mock::start().await;
    taking_tools(&mock);
    // The vote: one call against four equal texts.
    mock.script(
        "m1",
        [
            Step::tool_call("get_weather", r#"{"city": "Oslo"}"#),
            // The judge's run: m1 calls, m2 answers; the rest fail.
            Step::tool_call("get_weather", r#"{"city": "Oslo"}"#),
        ],
    );
    for model in ["m2", "m3", "m4", "m5"] {
        mock.script(model, [Step::answer("Sunny.")]);
    }
    mock.script("m2", [Step::answer("Sunny."), Step::answer("Sunny.")]);
    // Equal scores: the judge's tie goes to the first of the fan-out, m1.
    mock.script(SYNTH, [Step::answer(r#"{"scores": {"A": 5, "B": 5}}"#)]);
    let extra = format!(
        "{}{}",
        pipeline("voting", r#"builtin = "vote""#),
        r#"
[plugins.two]
builtin = "static-panel"
settings = { panel = ["m1", "m2"], synthesizers = ["synth"] }
[plugins.judge]
builtin = "judge"
[pipelines.judging]
description = "a judge over a call and a text"
selector = "two"
prompter = "passthrough"
synthesizer = "judge"
"#
    );
    let config = write_config(&config(&mock, &extra));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let voted = completed(&server, &asking("voting")).await;
    assert_eq!(voted["choices"][0]["finish_reason"], "stop", "{voted}");
    assert_eq!(voted["choices"][0]["message"]["content"], "Sunny.");
    assert_eq!(voted["chorus"]["kind"], "vote");

    let judged = completed(&server, &asking("judging")).await;
    assert_eq!(judged["chorus"]["kind"], "tool-call", "{judged}");
    assert_eq!(
        call_of(&judged),
        ("get_weather".to_owned(), json!({"city": "Oslo"}))
    );
    let notes = notes_of(&judged);
    assert!(notes.contains("Judge synth picked m1's answer"), "{notes}");
    // The judge saw the call in words beside the text.
    let ballot = mock.requests_for(SYNTH).pop().unwrap().text();
    assert!(
        ballot.contains(r#"Call `get_weather` with {"city": "Oslo"}."#)
            && ballot.contains("Sunny."),
        "{ballot}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_of_an_older_contract_sees_text_and_the_run_says_chorus_chose() {
    let mock = Mock::start().await;
    taking_tools(&mock);
    for model in ["m1", "m2", "m3"] {
        mock.script(
            model,
            [Step::tool_call("get_weather", r#"{"city": "Oslo"}"#)],
        );
    }
    for model in ["m4", "m5"] {
        mock.script(model, [Step::answer("Sunny.")]);
    }
    let extra = pipeline(
        "first",
        &format!(r#"path = "{}/contract_0_2.wasm""#, plugin_dir().display()),
    );
    let config = write_config(&config(&mock, &extra));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;

    let completion = completed(&server, &asking("first")).await;
    assert_eq!(completion["chorus"]["kind"], "tool-call", "{completion}");
    let notes = notes_of(&completion);
    assert!(
        notes.contains(
            "The synthesizer `first` (contract 0.2.0) sees tool calls as text only: chorus chose the call."
        ),
        "{notes}"
    );
    assert!(notes.contains("3 of 3 proposals agree"), "{notes}");
}

/// A run of a pipeline whose synthesizer is the chaos plugin in `mode`.
async fn chaotic(mock: &Mock, mode: &str) -> Value {
    let extra = pipeline(
        "chaotic",
        &format!(
            "path = \"{}/chaos_synthesizer.wasm\"\nsettings = {{ mode = \"{mode}\" }}",
            plugin_dir().display()
        ),
    );
    let config = write_config(&config(mock, &extra));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    completed(&server, &asking("chaotic")).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_strategys_hostile_calls_never_reach_the_caller() {
    let mock = Mock::start().await;
    taking_tools(&mock);
    let panel = |mock: &Mock| {
        for model in ["m1", "m2"] {
            mock.script(
                model,
                [Step::tool_call("get_weather", r#"{"city": "Bergen"}"#)],
            );
        }
        for model in ["m3", "m4", "m5"] {
            mock.script(model, [Step::answer("Sunny.")]);
        }
    };

    // A call of a tool the caller never offered: chorus makes the panel's
    // call instead (the strategy meant a call), and says why.
    panel(&mock);
    let completion = chaotic(&mock, "unoffered-call").await;
    assert_eq!(
        call_of(&completion),
        ("get_weather".to_owned(), json!({"city": "Bergen"})),
        "{completion}"
    );
    let notes = notes_of(&completion);
    assert!(
        notes.contains(
            "The synthesizer `chaotic` called `delete_everything`, which was not offered: chorus chose the call."
        ),
        "{notes}"
    );
    assert!(!completion.to_string().contains(r#"\"path\""#));

    // A call in an answer that says it is a pick: the plugin's answer is
    // refused, and chorus decides (2 of 5 answers call: text, merged).
    panel(&mock);
    mock.script(SYNTH, [Step::answer("Sunny in Bergen, they say.")]);
    let completion = chaotic(&mock, "call-of-wrong-kind").await;
    assert_eq!(
        completion["choices"][0]["finish_reason"], "stop",
        "{completion}"
    );
    let notes = notes_of(&completion);
    assert!(
        notes.contains("could not decide on the calls")
            && notes.contains("an answer that makes calls is of kind `tool-call`"),
        "{notes}"
    );

    // Arguments that match no city: one repair by the synthesizer model.
    panel(&mock);
    mock.script(
        SYNTH,
        [Step::tool_call("get_weather", r#"{"city": "Oslo"}"#)],
    );
    let completion = chaotic(&mock, "bad-arguments").await;
    assert_eq!(
        call_of(&completion),
        ("get_weather".to_owned(), json!({"city": "Oslo"})),
        "{completion}"
    );
    let notes = notes_of(&completion);
    assert!(notes.contains("synth corrected them"), "{notes}");
    let repair = mock.requests_for(SYNTH).pop().unwrap();
    assert!(repair.text().contains("town"), "{}", repair.text());
}
