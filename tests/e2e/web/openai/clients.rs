//! Real clients of chorus's `/v1`: the official OpenAI SDKs (Python sync,
//! async, streaming and Responses; Node), LiteLLM's SDK, the `llm` CLI and
//! the Agents SDK's default model, installed at pinned versions by
//! tests/clients/setup.sh (PyPI and npm); each prints what it saw as JSON.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

/// Runs `program` with `args`, bounded; its stdout as JSON.
pub(crate) async fn client_output(
    program: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Value {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .output(),
    )
    .await
    .expect("the client finished within 120 s")
    .expect("run the client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{} failed:\n{stdout}\n{}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("not JSON: {stdout}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_openai_sdks_are_clients() {
    let clients = crate::mcp::clients::clients();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    // Node resolves packages from the script's own folder.
    std::fs::copy(
        root.join("tests/clients/openai_node.mjs"),
        clients.join("openai_node.mjs"),
    )
    .unwrap();
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::stream("Rayleigh scattering.")]);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let base = format!("{}/v1", server.origin());

    let python = client_output(
        &clients.join("venv/bin/python"),
        &[
            root.join("tests/clients/openai_client.py")
                .to_str()
                .unwrap(),
            &base,
            TOKEN,
        ],
        &[],
    )
    .await;
    eprintln!("openai (Python): {python}");
    assert_eq!(python["models"], json!(["ask"]));
    assert_eq!(python["sync"]["content"], "Rayleigh scattering.");
    assert_eq!(python["sync"]["finish_reason"], "stop");
    assert_eq!(python["sync"]["kind"], "synthesis");
    assert!(
        python["sync"]["id"]
            .as_str()
            .unwrap()
            .starts_with("chatcmpl-")
    );
    assert!(python["sync"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(python["async"], "Rayleigh scattering.");
    assert_eq!(python["stream"]["content"], "Rayleigh scattering.");
    // The synthesizer's own deltas, passed on as it wrote them.
    assert!(
        python["stream"]["content_pieces"].as_u64().unwrap() > 1,
        "{python}"
    );
    assert!(
        python["stream"]["reasoning"]
            .as_str()
            .unwrap()
            .contains("5 of 5 answered"),
        "{python}"
    );
    assert!(python["stream"]["usage"].as_u64().unwrap() > 0);
    assert_eq!(
        python["unknown_model"],
        json!({"status": 404, "code": "model_not_found"})
    );
    assert_eq!(python["n2"], json!({"status": 400, "param": "n"}));
    assert_eq!(python["wrong_token"], json!({"status": 401}));
    assert_eq!(
        python["responses"],
        json!({"text": "Rayleigh scattering.", "status": "completed"})
    );
    assert_eq!(python["responses_stream"]["text"], "Rayleigh scattering.");
    assert_eq!(python["responses_stream"]["final"], "Rayleigh scattering.");

    let node = client_output(
        std::path::Path::new("node"),
        &[
            clients.join("openai_node.mjs").to_str().unwrap(),
            &base,
            TOKEN,
        ],
        &[],
    )
    .await;
    eprintln!("openai (Node): {node}");
    assert_eq!(node["models"], json!(["ask"]));
    assert_eq!(node["whole"]["content"], "Rayleigh scattering.");
    assert_eq!(node["whole"]["kind"], "synthesis");
    assert_eq!(node["stream"]["content"], "Rayleigh scattering.");
    assert!(
        node["stream"]["content_pieces"].as_u64().unwrap() > 1,
        "{node}"
    );
    assert!(
        node["stream"]["reasoning"]
            .as_str()
            .unwrap()
            .contains("answered"),
        "{node}"
    );
    assert!(node["stream"]["usage"].as_u64().unwrap() > 0);
    assert_eq!(node["unknown_model"]["status"], 404);
    assert_eq!(node["unknown_model"]["code"], "model_not_found");
}

#[tokio::test(flavor = "multi_thread")]
async fn litellm_and_the_llm_cli_are_clients() {
    let clients = crate::mcp::clients::clients();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::stream("Rayleigh scattering.")]);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let base = format!("{}/v1", server.origin());
    let python = clients.join("venv/bin/python");

    let litellm = client_output(
        &python,
        &[
            root.join("tests/clients/litellm_client.py")
                .to_str()
                .unwrap(),
            &base,
            TOKEN,
        ],
        // Else LiteLLM fetches its model price list from GitHub on import.
        &[("LITELLM_LOCAL_MODEL_COST_MAP", "True")],
    )
    .await;
    eprintln!("litellm: {litellm}");
    assert_eq!(litellm["whole"]["content"], "Rayleigh scattering.");
    assert!(litellm["whole"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(litellm["stream"]["content"], "Rayleigh scattering.");
    assert!(
        litellm["stream"]["reasoning"]
            .as_str()
            .unwrap()
            .contains("5 of 5 answered"),
        "{litellm}"
    );
    assert_eq!(litellm["async"], "Rayleigh scattering.");

    // The `llm` CLI with chorus in its extra-openai-models.yaml and the
    // token as its stored key: a streamed prompt, then a continued
    // conversation (`-c`), not streamed.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("extra-openai-models.yaml"),
        format!("- model_id: chorus-ask\n  model_name: ask\n  api_base: \"{base}\"\n  api_key_name: chorus\n  can_stream: true\n"),
    )
    .unwrap();
    std::fs::write(
        home.path().join("keys.json"),
        json!({"chorus": TOKEN}).to_string(),
    )
    .unwrap();
    let llm = |args: &[&str]| {
        let mut command = std::process::Command::new(clients.join("venv/bin/llm"));
        command.args(args).env("LLM_USER_PATH", home.path());
        command
    };
    let first = llm(&["-m", "chorus-ask", "What is the capital of Italy?"])
        .output()
        .unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let first = String::from_utf8_lossy(&first.stdout).into_owned();
    assert_eq!(first.trim(), "Rayleigh scattering.");
    let again = llm(&["-c", "--no-stream", "And of Spain?"])
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    eprintln!(
        "llm: {first:?} then {:?}",
        String::from_utf8_lossy(&again.stdout)
    );
    // The second prompt's panel saw the first exchange.
    let last = mock.requests_for("m1").pop().unwrap();
    let text = last.text();
    assert!(
        text.contains("What is the capital of Italy?")
            && text.contains("Rayleigh scattering.")
            && text.contains("And of Spain?"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agents_sdks_default_model_runs_a_pipeline_through_responses() {
    let clients = crate::mcp::clients::clients();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::stream("Rayleigh scattering.")]);
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let base = format!("{}/v1", server.origin());
    let agents = client_output(
        &clients.join("venv/bin/python"),
        &[
            root.join("tests/clients/agents_client.py")
                .to_str()
                .unwrap(),
            &base,
            TOKEN,
        ],
        &[],
    )
    .await;
    eprintln!("openai-agents: {agents}");
    assert_eq!(agents["whole"], "Rayleigh scattering.");
    assert_eq!(agents["stream"]["deltas"], "Rayleigh scattering.");
    assert!(agents["stream"]["pieces"].as_u64().unwrap() > 1, "{agents}");
    assert_eq!(agents["stream"]["final"], "Rayleigh scattering.");
    let instructed = mock.requests_for("m1").pop().unwrap().text();
    assert!(instructed.contains("Be brief."), "{instructed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdks_parse_structured_outputs_from_a_pipeline() {
    let clients = crate::mcp::clients::clients();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let mock = Mock::start().await;
    for (i, model) in PANEL.iter().enumerate() {
        mock.script(model, [Step::answer(&format!("Dry on day {i}."))]);
    }
    // The SDK's parse, then the agent: each merge is prose once, so each
    // answer the clients parse is a repaired one.
    mock.script(
        SYNTH,
        [
            Step::answer(r#"{"city": "Oslo", "days": [1, 2]}"#),
            Step::answer("Bergen stays dry on day 3."),
            Step::answer(r#"{"city": "Bergen", "days": [3]}"#),
        ],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let base = format!("{}/v1", server.origin());
    let parsed = client_output(
        &clients.join("venv/bin/python"),
        &[
            root.join("tests/clients/structured_client.py")
                .to_str()
                .unwrap(),
            &base,
            TOKEN,
        ],
        &[],
    )
    .await;
    eprintln!("structured outputs: {parsed}");
    assert_eq!(
        parsed["parse"],
        json!({"city": "Oslo", "days": [1, 2], "type": "Weather"})
    );
    assert_eq!(
        parsed["agent"],
        json!({"city": "Bergen", "days": [3], "type": "Weather"})
    );
    // What each client asked for reached the merge, in words.
    let asked = mock.requests_for(SYNTH);
    assert!(asked[0].text().contains("JSON Schema `Weather`"));
    assert!(asked[1].text().contains("JSON Schema `final_output`"));
    assert!(asked[2].text().contains("it is not JSON"), "the repair");
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_call_tools_through_a_pipeline() {
    let clients = crate::mcp::clients::clients();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let mock = Mock::start().await;
    let taking: Vec<(&str, &[&str])> = PANEL
        .iter()
        .chain([&SYNTH])
        .map(|m| (*m, &["tools", "structured_outputs"][..]))
        .collect();
    catalog_taking(&mock, &taking);
    // The loop, then the agent: a call proposed by the whole panel, then
    // an answer once the result is back.
    for model in PANEL {
        mock.script(
            model,
            [
                Step::tool_call("get_weather", r#"{"city": "Oslo"}"#),
                Step::answer("Sunny, 21 C."),
                Step::tool_call("get_weather", r#"{"city": "Bergen"}"#),
                Step::answer(r#"{"city": "Bergen", "summary": "Sunny, 21 C."}"#),
                Step::tool_call("get_weather", r#"{"city": "Tromso"}"#),
                Step::answer("Sunny in Tromso."),
            ],
        );
    }
    mock.script(
        SYNTH,
        [
            Step::answer("It is sunny in Oslo, 21 C."),
            Step::answer(r#"{"city": "Bergen", "summary": "Sunny and 21 C."}"#),
            Step::answer("It is sunny in Tromso."),
        ],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let base = format!("{}/v1", server.origin());
    let seen = client_output(
        &clients.join("venv/bin/python"),
        &[
            root.join("tests/clients/tools_client.py").to_str().unwrap(),
            &base,
            TOKEN,
        ],
        &[],
    )
    .await;
    eprintln!("tools: {seen}");
    assert_eq!(
        seen["ran"],
        json!(["Oslo", "Bergen", "Tromso"]),
        "each call ran once"
    );
    assert_eq!(seen["responses"], "It is sunny in Tromso.");
    assert_eq!(
        seen["loop"],
        json!({
            "first_finish": "tool_calls",
            "called": ["get_weather"],
            "answer": "It is sunny in Oslo, 21 C.",
            "final_finish": "stop",
        })
    );
    assert_eq!(
        seen["agent"],
        json!({"city": "Bergen", "summary": "Sunny and 21 C.", "type": "Forecast"})
    );
    // Each agent's tool result reached every panel member.
    for model in PANEL {
        let sent = mock.requests_for(model);
        assert!(sent[3].text().contains("sunny in Bergen"), "{model}");
        assert!(sent[5].text().contains("sunny in Tromso"), "{model}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_frameworks_call_tools_and_parse_structured_outputs() {
    let clients = crate::mcp::clients::clients();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let mock = Mock::start().await;
    let taking: Vec<(&str, &[&str])> = PANEL
        .iter()
        .chain([&SYNTH])
        .map(|m| (*m, &["tools", "structured_outputs"][..]))
        .collect();
    catalog_taking(&mock, &taking);
    let dry = r#"{"city": "Oslo", "days": [1, 2]}"#;
    for model in PANEL {
        mock.script(
            model,
            [
                // LangChain: bind_tools, then with_structured_output.
                Step::tool_call("get_weather", r#"{"city": "Oslo"}"#),
                Step::answer(dry),
                // pydantic-ai: its tool, then its output as a tool call.
                Step::tool_call("get_weather", r#"{"city": "Bergen"}"#),
                Step::tool_call("final_result", r#"{"city": "Bergen", "days": [3]}"#),
                // The AI SDK: generateText's tool step, its answer, then
                // generateObject.
                Step::tool_call("get_weather", r#"{"city": "Tromso"}"#),
                Step::answer("Sunny in Tromso."),
                Step::answer(r#"{"city": "Tromso", "days": [4, 5]}"#),
            ],
        );
    }
    mock.script(
        SYNTH,
        [
            Step::answer(dry),
            Step::answer("It is sunny in Tromso."),
            Step::answer(r#"{"city": "Tromso", "days": [4, 5]}"#),
        ],
    );
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let base = format!("{}/v1", server.origin());
    let python = client_output(
        &clients.join("venv/bin/python"),
        &[
            root.join("tests/clients/frameworks_client.py")
                .to_str()
                .unwrap(),
            &base,
            TOKEN,
        ],
        // No LangSmith tracing leaves this machine.
        &[("LANGSMITH_TRACING", "false")],
    )
    .await;
    eprintln!("langchain, pydantic-ai: {python}");
    assert_eq!(
        python["langchain_tools"],
        json!([{"name": "get_weather", "args": {"city": "Oslo"}}])
    );
    assert_eq!(
        python["langchain_structured"],
        json!({"city": "Oslo", "days": [1, 2], "type": "Weather"})
    );
    assert_eq!(
        python["pydantic_ai"],
        json!({"city": "Bergen", "days": [3], "type": "Weather"})
    );
    assert_eq!(python["ran"], json!(["Bergen"]), "pydantic-ai ran its tool");

    let node = client_output(
        std::path::Path::new("node"),
        &[clients.join("ai_sdk.mjs").to_str().unwrap(), &base, TOKEN],
        &[],
    )
    .await;
    eprintln!("ai sdk: {node}");
    assert_eq!(node["ran"], json!(["Tromso"]));
    assert_eq!(
        node["text"],
        json!({"text": "It is sunny in Tromso.", "steps": 2})
    );
    assert_eq!(node["object"], json!({"city": "Tromso", "days": [4, 5]}));
}
