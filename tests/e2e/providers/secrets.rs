//! The canary key, attacked the ways providers leak it: echoed whole or in
//! part, cut at every offset, in retried 5xx and 429 errors (whose retry
//! notices are logged), in a stream's error chunk, in an answer — read back
//! from results, resources, `-vv` and trace logs. No run of 10 characters
//! of it may survive anywhere. Keys too short to be secret never alter
//! answers; an unusable key says so; redirects to another origin are not
//! followed.

use std::time::Duration;

use crate::support::*;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};

/// Every 10-character run of the canary that appears in `text`.
fn leaks(text: &str) -> Vec<&'static str> {
    (0..=CANARY.len() - 10)
        .map(|i| &CANARY[i..i + 10])
        .filter(|window| text.contains(window))
        .collect()
}

/// A pipeline over models `e0..eN`, each echoing a different cut of the key.
fn echo_config(mock: &Mock) -> (String, Vec<String>) {
    let n = CANARY.len();
    let mut cuts = Vec::new();
    for len in 10..=n {
        cuts.push((0, len)); // the start, truncated at every length
        cuts.push((n - len, len)); // the end, from every offset
    }
    cuts.push((3, 12));
    cuts.push((7, 14));
    let mut models = String::new();
    let mut names = Vec::new();
    for (i, (from, len)) in cuts.into_iter().enumerate() {
        let name = format!("e{i}");
        mock.script(
            &name,
            [Step::EchoKey {
                code: 401,
                from,
                len,
            }],
        );
        models.push_str(&format!("[models.{name}]\n"));
        names.push(name);
    }
    let panel: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    let extra = format!(
        r#"
{models}
[plugins.echoes]
builtin = "static-panel"
settings = {{ panel = [{}], synthesizers = ["{SYNTH}"] }}

[pipelines.echoes]
description = "Every model echoes part of the key."
selector = "echoes"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        panel.join(", ")
    );
    (config(mock, &extra), names)
}

fn script_leaky_panel(mock: &Mock) {
    mock.script(
        "m1",
        [Step::EchoKey {
            code: 500,
            from: 0,
            len: 100,
        }],
    );
    mock.script(
        "m2",
        [Step::EchoKey {
            code: 429,
            from: 2,
            len: 21,
        }],
    );
    mock.script(
        "m3",
        [Step::Sse {
            events: vec![
                Sse::Content("partial".into()),
                Sse::Error {
                    code: 502,
                    message: format!(
                        "upstream refused key {CANARY} (truncated: {})",
                        &CANARY[..18]
                    ),
                },
            ],
            crlf: false,
        }],
    );
    mock.script(
        "m4",
        [Step::stream(&format!("I saw your key {CANARY} in my logs"))],
    );
    mock.script("m5", [Step::stream("fine")]);
    mock.script(SYNTH, [Step::stream("merged")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_run_of_the_key_survives_in_results_resources_or_trace_logs() {
    let mock = Mock::start().await;
    script_leaky_panel(&mock);
    let (text, names) = echo_config(&mock);
    let server = Server::start_with_env(&text, &[("CHORUS_LOG", "trace,chorus=trace")]).await;

    let result = server.ask("ask", "q").await;
    assert_eq!(
        mock.requests_for("m1").len(),
        3,
        "the 500 echo was retried, so its retry notices were logged"
    );
    assert_eq!(mock.requests_for("m2").len(), 3, "and the 429's");
    let m1 = calls(structured(&result), "fan-out")[0];
    assert_eq!(
        m1["error"]["message"], "Invalid credentials: [redacted]…",
        "the provider's words stay, minus the key"
    );
    assert!(
        mock.requests_for(SYNTH)[0]
            .text()
            .contains("I saw your key [redacted] in my logs")
    );

    let echoes = server.ask("echoes", "q").await;
    let echoed = structured_text(&echoes);
    for name in &names {
        assert!(
            echoed.contains(&format!("\"model\":\"{name}\"")),
            "{name} ran"
        );
    }
    assert!(echoed.contains("Invalid credentials: [redacted]…"));

    let mut texts = vec![
        ("result", serde_json::to_string(&result).unwrap()),
        ("echoes result", echoed),
    ];
    for run in [&result, &echoes] {
        let run_id = structured(run)["run_id"].as_str().unwrap().to_owned();
        let resource = server
            .client
            .read_resource(ReadResourceRequestParams::new(format!(
                "chorus://runs/{run_id}"
            )))
            .await
            .unwrap();
        let ResourceContents::TextResourceContents { text, .. } = &resource.contents[0] else {
            panic!("a text resource")
        };
        texts.push(("resource", text.clone()));
    }
    let log = server.stderr();
    assert!(log.contains("TRACE"), "the log ran at trace level");
    assert!(log.contains("retrying in"), "retry notices were logged");
    texts.push(("trace log", log));
    for (place, text) in &texts {
        assert!(
            leaks(text).is_empty(),
            "the key leaked into the {place}: {:?}",
            leaks(text)
        );
    }
}

fn structured_text(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_string(structured(result)).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn chorus_ask_at_vv_leaks_nothing_either() {
    let mock = Mock::start().await;
    script_leaky_panel(&mock);
    let file = write_config(&config(&mock, ""));
    let output = command(&[
        "ask",
        "-vv",
        "--json",
        "--config",
        file.path.to_str().unwrap(),
        "q",
    ])
    .env_remove("CHORUS_LOG")
    .output()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DEBUG"), "-vv logs at debug: {stderr}");
    assert!(stderr.contains("retrying in"), "{stderr}");
    assert!(stdout.contains("[redacted]"), "{stdout}");
    assert!(leaks(&stdout).is_empty() && leaks(&stderr).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_too_short_to_be_secret_never_alters_answers() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(
            model,
            [Step::stream("run ollama locally, or leave the key EMPTY")],
        );
    }
    mock.script(SYNTH, [Step::stream("merged")]);
    let server = Server::start_with_env(&config(&mock, ""), &[(KEY_VAR, "ollama")]).await;
    let result = server.ask("ask", "q").await;
    assert_eq!(structured(&result)["kind"], "synthesis");
    assert_eq!(
        mock.requests_for("m1")[0].authorization.as_deref(),
        Some("Bearer ollama")
    );
    let sent = mock.requests_for(SYNTH)[0].text();
    assert!(
        sent.contains("run ollama locally, or leave the key EMPTY"),
        "{sent}"
    );
    assert!(!sent.contains("[redacted]"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_that_is_set_but_unusable_says_so_and_nothing_is_sent() {
    let mock = Mock::start().await;
    let server =
        Server::start_with_env(&config(&mock, ""), &[(KEY_VAR, "sk-abcdef\u{1b}123456789")]).await;
    let result = server.ask("ask", "q").await;
    let m1 = calls(structured(&result), "fan-out")[0];
    let said = m1["error"]["message"].as_str().unwrap();
    assert!(
        said.contains(&format!("the environment variable {KEY_VAR}"))
            && said.contains("is set, but it cannot be sent as an HTTP header: character 10 of 19 is a control character"),
        "{said}"
    );
    assert!(!said.contains("not set"));
    assert!(mock.requests().is_empty(), "nothing was sent");
    assert!(server.stderr().contains("is set, but it cannot be sent"));
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_to_another_origin_are_refused_naming_the_target() {
    let mock = Mock::start().await;
    let elsewhere = Mock::start().await;
    elsewhere.script(
        "m1",
        [Step::answer("an answer from a host nobody configured")],
    );
    for model in PANEL {
        mock.script(model, [Step::stream("fine")]);
    }
    let target = format!("{}/chat/completions", elsewhere.base_url);
    mock.script(
        "m1",
        [Step::Redirect {
            status: 307,
            location: target.clone(),
        }],
    );
    // Within one origin, a redirect is followed (the body is sent again).
    mock.script(
        "m2",
        [
            Step::Redirect {
                status: 307,
                location: "/v1/chat/completions".into(),
            },
            Step::stream("after a same-origin redirect"),
        ],
    );
    mock.script(SYNTH, [Step::stream("merged")]);
    let text = config(&mock, "").replace(
        "connect_timeout = \"2s\"",
        "connect_timeout = \"2s\"\nheaders = { \"X-Team-Secret\" = \"team-7\" }",
    );
    let server = Server::start(&text).await;
    let result = server.ask("ask", "q").await;
    let fan_out = calls(structured(&result), "fan-out");
    let m1 = fan_out[0];
    assert_eq!(m1["error"]["kind"], "http-status");
    assert_eq!(m1["error"]["status"], 307);
    let said = m1["error"]["message"].as_str().unwrap();
    assert!(
        said.contains(&format!("redirected to {target}, another origin")),
        "{said}"
    );
    assert_eq!(fan_out[1]["status"], "ok", "{}", fan_out[1]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        elsewhere.requests().is_empty(),
        "neither the prompt nor the headers went to the other origin"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_and_framing_headers_are_refused_in_the_config() {
    let mock = Mock::start().await;
    let text = config(&mock, "").replace(
        "connect_timeout = \"2s\"",
        "connect_timeout = \"2s\"\nheaders = { Authorization = \"Bearer sk-in-the-file\" }",
    );
    let file = write_config(&text);
    let output = command(&["check", "--config", file.path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("plugins.toml:11:")
            && stderr.contains("`providers.mock.headers.Authorization`")
            && stderr.contains("api_key_env"),
        "{stderr}"
    );
}
