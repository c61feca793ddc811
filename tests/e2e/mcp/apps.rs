//! The run viewer inside MCP clients (MCP Apps, `io.modelcontextprotocol/ui`):
//! a client that declares the extension — at `initialize`, or in a
//! 2026-07-28 request's `_meta` — sees every tool name `ui://chorus/run` and
//! can list and read that resource (`text/html;profile=mcp-app`, with a CSP
//! that allows no connection); a client that does not sees today's tools
//! and neither. In a real browser (Debian's chromium driven by Playwright,
//! tests/browser/apps.py): the MCP Apps SDK's own host bridge loads the app
//! read from a real chorus, delivers a real result, and the app shows it,
//! reads each model's reply and re-synthesizes through the bridge; model
//! markup stays text, nothing leaves 127.0.0.1, axe-core finds no serious
//! violation.
//!
//! `CHORUS_SCREENSHOTS=docs/images cargo test --test e2e apps::` makes the
//! README's picture of the app.

use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;
use crate::web::viewer::{CHROMIUM, browser_tools, root};

const APP: &str = "ui://chorus/run";
const MIME: &str = "text/html;profile=mcp-app";
/// The web source m1 cites in the browser test; the host is asked to open
/// it, and nothing goes there.
const SOURCE: &str = "https://paris.example/wiki";

fn ui_capability() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/ui": {}}})
}

async fn request(raw: &mut Raw, id: i64, method: &str, params: Value) -> Value {
    raw.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await;
    raw.response(&json!(id)).await.0
}

/// What a client sees of the app: the tools' `_meta`, the first page of
/// resources, and the read of the app.
async fn seen(raw: &mut Raw, meta: Option<Value>) -> (Vec<Value>, Vec<Value>, Value) {
    let params = |extra: Value| {
        let mut params = extra;
        if let Some(meta) = &meta {
            params["_meta"] = meta.clone();
        }
        params
    };
    let tools = request(raw, 1, "tools/list", params(json!({}))).await;
    let tools = tools["result"]["tools"].as_array().unwrap().clone();
    let resources = request(raw, 2, "resources/list", params(json!({}))).await;
    let resources = resources["result"]["resources"].as_array().unwrap().clone();
    let read = request(raw, 3, "resources/read", params(json!({"uri": APP}))).await;
    (tools, resources, read)
}

fn check_offered(tools: &[Value], resources: &[Value], read: &Value) {
    assert!(tools.len() >= 2, "{tools:?}");
    for tool in tools {
        assert_eq!(tool["_meta"]["ui"]["resourceUri"], APP, "{tool:#}");
        assert_eq!(tool["_meta"]["ui/resourceUri"], APP, "{tool:#}");
    }
    assert_eq!(resources[0]["uri"], APP, "{resources:?}");
    assert_eq!(resources[0]["mimeType"], MIME);
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["uri"], APP, "{read:#}");
    assert_eq!(contents["mimeType"], MIME);
    let csp = &contents["_meta"]["ui"]["csp"];
    assert_eq!(csp["connectDomains"], json!([]), "{contents:#}");
    assert_eq!(csp["resourceDomains"], json!([]));
    let html = contents["text"].as_str().unwrap();
    assert!(html.starts_with("<!doctype html>"), "{html:.200}");
    assert!(
        html.contains("ui/initialize") && html.contains("--panel"),
        "script and CSS inline"
    );
    assert!(
        !html.contains("<script src") && !html.contains("<link"),
        "loads nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_declaring_mcp_apps_sees_the_app_and_others_see_todays_tools() {
    let mock = Mock::start().await;
    let config = config(&mock, "");

    // Declared at initialize (2025-11-25).
    let mut raw = Raw::start(&config).await;
    raw.initialize(ui_capability()).await;
    let (tools, resources, read) = seen(&mut raw, None).await;
    check_offered(&tools, &resources, &read);

    // Declared in a 2026-07-28 request's `_meta`.
    let mut modern = Raw::start(&config).await;
    let meta = |capabilities: Value| {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        })
    };
    let (tools, resources, read) = seen(&mut modern, Some(meta(ui_capability()))).await;
    check_offered(&tools, &resources, &read);
    // The same session, a request without it: not offered.
    let (tools, _, read) = seen(&mut modern, Some(meta(json!({})))).await;
    assert!(tools.iter().all(|t| t.get("_meta").is_none()), "{tools:?}");
    assert!(read.get("error").is_some(), "{read:#}");

    // Not declared: today's tools exactly, no app resource, no read.
    let mut plain = Raw::start(&config).await;
    plain
        .initialize(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}))
        .await;
    let (tools, resources, read) = seen(&mut plain, None).await;
    for tool in &tools {
        assert!(tool.get("_meta").is_none(), "{tool:#}");
    }
    assert!(resources.iter().all(|r| r["uri"] != APP), "{resources:?}");
    let message = read["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("io.modelcontextprotocol/ui"),
        "the read is refused, saying why: {read:#}"
    );
    // And the app's tools are today's, apart from `_meta`.
    let mut marked = tools_without_meta(check_tools(&mut raw).await);
    marked.sort_by_key(|t| t["name"].as_str().unwrap_or_default().to_owned());
    let mut today = tools.clone();
    today.sort_by_key(|t| t["name"].as_str().unwrap_or_default().to_owned());
    assert_eq!(marked, today);
}

async fn check_tools(raw: &mut Raw) -> Vec<Value> {
    let tools = request(raw, 9, "tools/list", json!({})).await;
    tools["result"]["tools"].as_array().unwrap().clone()
}

fn tools_without_meta(tools: Vec<Value>) -> Vec<Value> {
    tools
        .into_iter()
        .map(|mut t| {
            t.as_object_mut().unwrap().remove("_meta");
            t
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_app_in_a_real_browser_through_the_sdk_host_bridge() {
    let Some(tools) = browser_tools() else {
        return;
    };
    let mock = Mock::start().await;
    let replies = json!({
        "m1": "**Paris** is the capital of France.",
        "m2": "Hostile: <img src=x onerror=alert(1)> and <script>alert(2)</script>",
        "m3": "Paris.",
        "m4": "It is Paris, on the Seine.",
        "m5": "Paris, France.",
    });
    for model in PANEL {
        mock.script(model, [Step::answer(replies[model].as_str().unwrap())]);
    }
    // m1 searched the web: its answer cites a source the app lists.
    mock.script(
        "m1",
        [Step::Cited {
            text: replies["m1"].as_str().unwrap().to_owned(),
            annotations: json!([{"type": "url_citation",
                "url_citation": {"url": SOURCE, "title": "Paris — Wikipedia",
                                 "start_index": 2, "end_index": 7}}]),
        }],
    );
    let answer = "The capital is **Paris**.";
    let again = "Merged again: Paris.";
    mock.script(SYNTH, [Step::answer(answer), Step::answer(again)]);
    let file = write_config(&config(&mock, ""));
    let server = HttpServer::start(&file.path, Some(TOKEN), &[]).await;

    let arguments = json!({
        "endpoint": format!("{}/mcp", server.origin()),
        "token": TOKEN,
        "answer": answer,
        "resynthesized": again,
        "replies": replies,
        "source": SOURCE,
        "chromium": CHROMIUM,
        "bridge": tools.join("app-bridge.js"),
        "axe": tools.join("node_modules/axe-core/axe.min.js"),
        "host_page": root().join("tests/browser/apps_host.html"),
        "screenshots": std::env::var("CHORUS_SCREENSHOTS").ok().map(|dir| root().join(dir)),
    });
    crate::web::viewer::browser_script("apps.py", &arguments, &server, |_| {}).await;
    assert_eq!(
        mock.requests_for(SYNTH).len(),
        2,
        "the app's re-synthesis asked the synthesizer"
    );
}
