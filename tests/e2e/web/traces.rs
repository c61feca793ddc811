//! Traces: with `[telemetry] otlp_endpoint`, a run is exported as
//! OpenTelemetry spans over OTLP/HTTP to a real receiver built on the
//! official protobuf definitions (PyPI `opentelemetry-proto`, pinned in
//! tests/clients/requirements.txt and installed with the MCP clients, so a
//! missing one fails here as it does there): the run's span continues the
//! caller's `traceparent` from the request's `_meta`, with a span per
//! stage, plugin call and model call (GenAI attributes, the mock's token
//! counts); prompts and answers only with `capture_content`; a collector
//! that is down costs a warning, never the run.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::mcp::clients::clients;
use crate::support::http::{HttpServer, TOKEN, messages};
use crate::support::*;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00f067aa0ba902b7";
const PROMPT: &str = "What is the airspeed of an unladen swallow? xyzzy-prompt";
const ANSWER: &str = "About eleven metres a second, plugh-answer";

/// The receiver (tests/clients/otlp_receiver.py): its spans, as JSON lines
/// in a file.
struct Receiver {
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
    out: PathBuf,
    url: String,
}

impl Receiver {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("spans.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .join("tests/clients/otlp_receiver.py");
        let mut child = tokio::process::Command::new(clients().join("venv/bin/python"))
            .arg(script)
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the OTLP receiver");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the OTLP receiver starts within 30 s")
            .unwrap()
            .expect("the OTLP receiver says where it listens");
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_owned();
        Self {
            _child: child,
            _dir: dir,
            out,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// The spans received once the run span named `name` is among them
    /// (it ends last: every span of the run was sent with or before it).
    async fn run_spans(&self, name: &str) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let spans = self.spans();
            if spans.iter().any(|s| s["name"] == name) {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no span `{name}` within 30 s: {spans:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn answering(mock: &Mock) {
    for model in ["m1", "m2", "m3", "m4"] {
        mock.script(model, [Step::answer(ANSWER)]);
    }
    mock.script("m5", [Step::status(503, "overloaded")]);
    mock.script(SYNTH, [Step::answer(ANSWER)]);
}

async fn serve(mock: &Mock, telemetry: &str) -> (HttpServer, ConfigFile) {
    let config = write_config(&config(mock, &format!("\n[telemetry]\n{telemetry}\n")));
    // Batches every 100 ms rather than 5 s (a standard OTEL_BSP variable).
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let server =
        HttpServer::start_with_env("127.0.0.1:0", &config.path, Some(TOKEN), &[], &env).await;
    (server, config)
}

/// Asks `ask` with `meta` in the request's `_meta`; the run's id.
async fn ask(server: &HttpServer, meta: Value) -> String {
    let call = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "ask", "arguments": {"prompt": PROMPT}, "_meta": meta},
    });
    let response = server.post(Some(TOKEN), &call).send().await.unwrap();
    let messages = messages(response).await;
    let result = &messages.last().unwrap()["result"]["structuredContent"];
    assert_eq!(result["kind"], "synthesis", "{messages:?}");
    result["run_id"].as_str().unwrap().to_owned()
}

fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
    assert_eq!(found.len(), 1, "one span `{name}` in {spans:#?}");
    found[0]
}

fn assert_child(child: &Value, parent: &Value) {
    assert_eq!(child["trace_id"], parent["trace_id"], "{child} in {parent}");
    assert_eq!(
        child["parent_span_id"], parent["span_id"],
        "{child} under {parent}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_continues_the_callers_trace_with_spans_for_stages_plugins_and_model_calls() {
    let receiver = Receiver::start().await;
    let mock = Mock::start().await;
    answering(&mock);
    let (server, _config) = serve(&mock, &format!("otlp_endpoint = \"{}\"", receiver.url)).await;
    let run_id = ask(
        &server,
        json!({"traceparent": format!("00-{TRACE}-{CALLER}-01"), "tracestate": "caller=1"}),
    )
    .await;
    let spans = receiver.run_spans("run ask").await;

    let run = named(&spans, "run ask");
    assert_eq!(run["trace_id"], TRACE, "the caller's trace goes on");
    assert_eq!(run["parent_span_id"], CALLER, "under the caller's span");
    assert_eq!(run["resource"]["service.name"], "chorus");
    let attributes = &run["attributes"];
    assert_eq!(attributes["chorus.pipeline"], "ask");
    assert_eq!(attributes["chorus.run.id"], run_id.as_str());
    assert_eq!(attributes["chorus.client"], "admin");
    assert_eq!(attributes["chorus.outcome"], "synthesis");
    assert!(
        attributes["chorus.cost_usd"].as_f64().unwrap() > 0.0,
        "{run}"
    );

    for (stage, plugin) in [
        ("select", Some("select panel")),
        ("prompt", Some("prompt passthrough")),
        ("fan-out", None),
        ("synthesize", Some("synthesize synthesize")),
    ] {
        let stage_span = named(&spans, &format!("stage {stage}"));
        assert_child(stage_span, run);
        if let Some(plugin) = plugin {
            let plugin_span = named(&spans, plugin);
            assert_child(plugin_span, stage_span);
            let (export, name) = plugin.split_once(' ').unwrap();
            assert_eq!(plugin_span["attributes"]["chorus.plugin.export"], export);
            assert_eq!(plugin_span["attributes"]["chorus.plugin.name"], name);
        }
    }

    let fan_out = named(&spans, "stage fan-out");
    for model in ["m1", "m2", "m3", "m4"] {
        let call = named(&spans, &format!("chat {model}"));
        assert_child(call, fan_out);
        assert_eq!(call["kind"], 3, "a client span: {call}");
        let a = &call["attributes"];
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.provider.name"], "mock");
        assert_eq!(a["gen_ai.request.model"], model);
        // What the mock reported.
        assert_eq!(a["gen_ai.usage.input_tokens"], 12, "{call}");
        assert_eq!(a["gen_ai.usage.output_tokens"], 34, "{call}");
        assert_eq!(a["chorus.call.attempts"], 1);
        assert_eq!(a["chorus.call.status"], "ok");
        assert!(a["chorus.cost_usd"].as_f64().is_some(), "{call}");
        assert!(a["chorus.call.ttft_ms"].as_i64().is_some(), "{call}");
        assert_eq!(call["status"]["code"], 0, "unset: {call}");
    }
    let failed = named(&spans, "chat m5");
    assert_child(failed, fan_out);
    assert_eq!(failed["attributes"]["error.type"], "http-status");
    assert_eq!(failed["attributes"]["http.response.status_code"], 503);
    assert_eq!(failed["status"]["code"], 2, "an error: {failed}");
    let merge = named(&spans, "chat synth");
    assert_child(merge, named(&spans, "synthesize synthesize"));
    assert_eq!(merge["attributes"]["gen_ai.usage.output_tokens"], 34);

    let all = serde_json::to_string(&spans).unwrap();
    for secret in ["xyzzy-prompt", "plugh-answer"] {
        assert!(
            !all.contains(secret),
            "no prompt or answer without capture_content: {all}"
        );
    }
    assert!(!all.contains("gen_ai.input.messages"));
}

#[tokio::test(flavor = "multi_thread")]
async fn capture_content_exports_prompts_and_answers_and_a_malformed_traceparent_starts_a_trace() {
    let receiver = Receiver::start().await;
    let mock = Mock::start().await;
    answering(&mock);
    let telemetry = format!(
        "otlp_endpoint = \"{}\"\ncapture_content = true",
        receiver.url
    );
    let (server, _config) = serve(&mock, &telemetry).await;
    ask(&server, json!({"traceparent": "00-not-a-trace-01"})).await;
    let spans = receiver.run_spans("run ask").await;

    let run = named(&spans, "run ask");
    assert_eq!(run["parent_span_id"], "", "a trace of its own: {run}");
    assert_eq!(run["trace_id"].as_str().unwrap().len(), 32);
    assert_eq!(run["attributes"]["chorus.prompt"], PROMPT);
    let call = named(&spans, "chat m1");
    let input: Value = serde_json::from_str(
        call["attributes"]["gen_ai.input.messages"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(
        input.as_array().unwrap().iter().any(|m| m["role"] == "user"
            && m["parts"][0]["content"]
                .as_str()
                .unwrap()
                .contains("xyzzy-prompt")),
        "{input}"
    );
    let output: Value = serde_json::from_str(
        call["attributes"]["gen_ai.output.messages"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["content"], ANSWER);
    assert!(server.stderr().contains("OpenTelemetry traces to"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_is_down_costs_one_warning_and_never_the_run() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mock = Mock::start().await;
    answering(&mock);
    let (server, _config) = serve(
        &mock,
        &format!("otlp_endpoint = \"http://127.0.0.1:{port}\""),
    )
    .await;
    ask(&server, json!({})).await;
    server.wait_for_stderr("cannot export traces", 1).await;
    ask(&server, json!({})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stderr = server.stderr();
    assert_eq!(
        stderr.matches("cannot export traces").count(),
        1,
        "said once a minute at most:\n{stderr}"
    );
}
