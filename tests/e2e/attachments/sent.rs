//! Attachments, end to end against the mock provider: the exact request
//! bodies each model received. An image reaches a model that sees images
//! as an `image_url` data URL (typed from its bytes: a GIF named `.png` is
//! `image/gif`), a PDF reaches a file-capable model as a `file` part, a
//! text-only model gets the describer's words (or nothing, with `skip`);
//! limits and `fail` refuse before any model is called; a stdio client's
//! paths are read only inside its roots; over HTTP no path is read.

use base64::Engine;
use serde_json::{Value, json};

use crate::support::http::{HttpServer, TOKEN, messages};
use crate::support::*;

pub(crate) const SEES: &str = "v/sees";
pub(crate) const BLIND: &str = "t/blind";
pub(crate) const EYE: &str = "v/eye";
pub(crate) const MERGER: &str = "t/merger";

/// A 1×1 GIF, whatever it is named.
pub(crate) const GIF: &[u8] = b"GIF89a\x01\0\x01\0\x80\0\0\0\0\0\xff\xff\xff!\xf9\x04\x01\0\0\0\0,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;";
const PDF: &[u8] = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n";

/// `chorus eval DATASET --config CONFIG --pipelines TARGETS --json`, one
/// item at a time: its report.
pub(crate) async fn eval_json(
    dataset: &std::path::Path,
    config: &std::path::Path,
    targets: &str,
) -> Value {
    let output = command(&[
        "eval",
        dataset.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--pipelines",
        targets,
        "--concurrency",
        "1",
        "--json",
    ])
    .output()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)))
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `SEES` takes images (by config), `EYE` images and files (by the
/// catalog, and is the cheapest such), `BLIND` and `MERGER` text alone.
pub(crate) fn config(mock: &Mock, pipeline_extra: &str, limits_extra: &str) -> String {
    format!(
        r#"
[limits]
run_timeout = "20s"
{limits_extra}

[providers.mock]
base_url = "{url}"
api_key_env = "{KEY_VAR}"

[providers.mock.retry]
max_attempts = 1

[models."{SEES}"]
input = ["text", "image"]
[models."{BLIND}"]
[models."{EYE}"]
[models."{MERGER}"]

[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["{SEES}", "{BLIND}"], synthesizers = ["{MERGER}"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"

[pipelines.ask]
description = "Two panel models, one merge."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
{pipeline_extra}
"#,
        url = mock.base_url,
    )
}

pub(crate) fn catalog(mock: &Mock) {
    let model = |id: &str, input: &[&str], price: &str| {
        json!({"id": id, "context_length": 100000,
            "pricing": {"prompt": price, "completion": price},
            "architecture": {"input_modalities": input}})
    };
    mock.catalog(json!([
        model(SEES, &["text"], "0.00001"),
        model(BLIND, &["text"], "0.000001"),
        model(EYE, &["text", "image", "file"], "0.0000001"),
        model(MERGER, &["text"], "0.000001"),
    ]));
}

pub(crate) fn script(mock: &Mock) {
    mock.script(SEES, [Step::answer("a square")]);
    mock.script(BLIND, [Step::answer("sounds square")]);
    mock.script(
        EYE,
        [Step::answer("One black pixel on white: a 1x1 image.")],
    );
    mock.script(MERGER, [Step::answer("merged: a square")]);
}

/// The content parts of the last user message of `body`.
pub(crate) fn last_user(body: &Value) -> &Value {
    let messages = body["messages"].as_array().unwrap();
    &messages.iter().rev().find(|m| m["role"] == "user").unwrap()["content"]
}

pub(crate) fn image_parts(content: &Value) -> Vec<&Value> {
    content
        .as_array()
        .map(|parts| parts.iter().filter(|p| p["type"] == "image_url").collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_reaches_seeing_models_as_itself_and_the_others_as_a_description() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let server = Server::start(&config(&mock, "", "")).await;
    let result = server
        .call(
            "ask",
            json!({"prompt": "What shape is this?", "attachments": [
                {"data": b64(GIF), "mime_type": "image/png", "name": "photo.png"}
            ]}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));

    // The model that sees images gets it, typed from its bytes.
    let sees = mock.requests_for(SEES);
    let content = last_user(&sees[0].body);
    assert_eq!(
        content[0],
        json!({"type": "text", "text": "What shape is this?"})
    );
    assert_eq!(
        image_parts(content),
        [
            &json!({"type": "image_url", "image_url": {"url": format!("data:image/gif;base64,{}", b64(GIF))}})
        ]
    );

    // The cheapest model that sees it described it once...
    let eye = mock.requests_for(EYE);
    assert_eq!(eye.len(), 1, "one description per attachment");
    assert_eq!(eye[0].body["max_tokens"], 2048);
    assert_eq!(image_parts(last_user(&eye[0].body)).len(), 1);
    // ...and the text-only member read that, marked as a description.
    let blind = mock.requests_for(BLIND);
    let said = last_user(&blind[0].body).as_str().unwrap();
    assert!(said.starts_with("What shape is this?"), "{said}");
    assert!(
        said.contains("#1 photo.png (image/gif")
            && said.contains(&format!("this description by {EYE} stands in for it"))
            && said.contains("One black pixel on white"),
        "{said}"
    );
    assert!(!blind[0].body.to_string().contains("image_url"));
    // So did the merger, which cannot see it either.
    let merger = mock.requests_for(MERGER);
    assert!(
        merger[0]
            .body
            .to_string()
            .contains("One black pixel on white")
    );

    let record = structured(&result);
    assert_eq!(record["attachments"][0]["name"], "photo.png", "{record:#}");
    assert_eq!(record["attachments"][0]["mime"], "image/gif");
    assert_eq!(record["attachments"][0]["bytes"], GIF.len());
    let describe = calls(record, "describe");
    assert_eq!(describe.len(), 1, "{record:#}");
    assert_eq!(describe[0]["model"], EYE);
    let notes = record["notes"].to_string();
    assert!(
        notes.contains(&format!("{EYE} described the attachments")),
        "{notes}"
    );
    assert!(
        notes.contains(&format!("{BLIND} cannot take image input (it takes: text)")),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn skip_leaves_text_models_out_and_a_pdf_goes_as_a_file_part() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let pipeline = format!(
        "attachments_for_text_models = \"skip\"\n[plugins.panel2]\nbuiltin = \"static-panel\"\nsettings = {{ panel = [\"{EYE}\", \"{BLIND}\"], synthesizers = [\"{MERGER}\"] }}\n[pipelines.pdf]\ndescription = \"PDF panel\"\nselector = \"panel2\"\nprompter = \"passthrough\"\nsynthesizer = \"synthesize\"\nattachments_for_text_models = \"skip\""
    );
    let server = Server::start(&config(&mock, &pipeline, "")).await;
    let result = server
        .call(
            "pdf",
            json!({"prompt": "Summarize the contract.", "attachments": [
                {"type": "resource", "resource": {"uri": "file:///w/contract.pdf", "mimeType": "application/pdf", "blob": b64(PDF)}}
            ]}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let eye = mock.requests_for(EYE);
    assert_eq!(
        eye.len(),
        1,
        "asked once, as a panel member: nobody needs a description"
    );
    assert_eq!(
        last_user(&eye[0].body)[1],
        json!({"type": "file", "file": {"filename": "contract.pdf", "file_data": format!("data:application/pdf;base64,{}", b64(PDF))}})
    );
    assert!(mock.requests_for(BLIND).is_empty(), "left out, never asked");
    let record = structured(&result);
    let fan_out = calls(record, "fan-out");
    let left_out = fan_out.iter().find(|c| c["model"] == BLIND).unwrap();
    assert_eq!(left_out["status"], "skipped", "{record:#}");
    assert_eq!(left_out["error"]["kind"], "unsupported-input");
    assert!(
        record["notes"].to_string().contains(
            "Left out of the panel (pipelines.pdf.attachments_for_text_models = \\\"skip\\\")"
        ),
        "{record:#}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_types_and_fail_refuse_before_any_model_is_called() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let pipeline = "attachments_for_text_models = \"fail\"";
    let server = Server::start(&config(&mock, pipeline, "max_attachment_bytes = 64")).await;
    let ask = |attachment: Value| {
        server.call(
            "ask",
            json!({"prompt": "Look.", "attachments": [attachment]}),
        )
    };

    let refused = ask(json!({"data": b64(&[b'a'; 65]), "name": "big.txt"})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused)
            .contains("over the limit of 64 bytes per attachment (limits.max_attachment_bytes)"),
        "{}",
        text(&refused)
    );

    let refused = ask(json!({"data": b64(b"PK\x03\x04\x14\0\0\0\x08\0"), "name": "a.docx"})).await;
    assert!(
        text(&refused).contains("`a.docx` is application/zip"),
        "{}",
        text(&refused)
    );
    assert!(
        text(&refused).contains("chorus takes images (PNG, JPEG, WebP, GIF), PDF"),
        "{}",
        text(&refused)
    );

    let refused = ask(json!({"data": b64(GIF)})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains(&format!("{BLIND} cannot take image input"))
            && text(&refused).contains("pipelines.ask.attachments_for_text_models = \"fail\""),
        "{}",
        text(&refused)
    );
    assert!(mock.requests().is_empty(), "nothing was sent, nothing paid");
}

/// A client on stdio (2025-11-25) that shares `root`: chorus asks it for
/// its roots when a call names a path, and reads only inside them.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_client_attaches_paths_only_inside_its_roots() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("shape.gif"), GIF).unwrap();
    std::fs::write(
        outside.path().join("id_rsa"),
        "-----BEGIN OPENSSH PRIVATE KEY-----",
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path().join("id_rsa"), root.path().join("key")).unwrap();
    let root_uri = url::Url::from_directory_path(root.path().canonicalize().unwrap()).unwrap();

    let mut raw = Raw::start(&config(&mock, "", "")).await;
    raw.initialize(json!({"roots": {"listChanged": true}}))
        .await;
    let call = |id: u64, path: String| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "ask", "arguments": {"prompt": "What is it?", "attachments": [{"path": path}]}}})
    };
    let answer = async |raw: &mut Raw, message: Value| {
        let id = message["id"].clone();
        raw.send(message).await;
        loop {
            let got = raw.recv().await;
            if got["method"] == "roots/list" {
                raw.send(json!({"jsonrpc": "2.0", "id": got["id"], "result": {"roots": [{"uri": root_uri.as_str(), "name": "work"}]}}))
                    .await;
            } else if got.get("method").is_none() && got["id"] == id {
                return got["result"].clone();
            }
        }
    };

    let inside = answer(&mut raw, call(1, "shape.gif".into())).await;
    assert_eq!(inside["isError"], false, "{inside:#}");
    let sees = mock.requests_for(SEES);
    assert_eq!(image_parts(last_user(&sees[0].body)).len(), 1);

    let real_root = root.path().canonicalize().unwrap().display().to_string();
    let out = answer(
        &mut raw,
        call(2, outside.path().join("id_rsa").display().to_string()),
    )
    .await;
    assert_eq!(out["isError"], true);
    let said = out["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("outside the directories chorus may read") && said.contains(&real_root),
        "{said}"
    );

    let link = answer(
        &mut raw,
        call(3, root.path().join("key").display().to_string()),
    )
    .await;
    let said = link["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("it resolves to"), "{said}");
    assert_eq!(
        mock.requests_for(SEES).len(),
        1,
        "the refused calls sent nothing"
    );
    assert!(!raw.stderr().contains("BEGIN OPENSSH"));
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_paths_are_refused_and_data_is_taken() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let file = write_config(&config(&mock, "", ""));
    let server = HttpServer::start(&file.path, Some(TOKEN), &[]).await;
    let call = |id: u64, attachment: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "ask", "arguments": {"prompt": "What is it?", "attachments": [attachment]}}})
    };
    let refused = messages(
        server
            .post(Some(TOKEN), &call(1, json!({"path": "/etc/hostname"})))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let said = refused.last().unwrap()["result"].to_string();
    assert!(said.contains("over HTTP chorus reads no paths"), "{said}");
    assert!(mock.requests().is_empty());

    let taken = messages(
        server
            .post(
                Some(TOKEN),
                &call(
                    2,
                    json!({"type": "image", "data": b64(GIF), "mimeType": "image/gif"}),
                ),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        taken.last().unwrap()["result"]["isError"],
        false,
        "{taken:?}"
    );
    assert_eq!(
        image_parts(last_user(&mock.requests_for(SEES)[0].body)).len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chorus_ask_attaches_what_its_user_names() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let file = write_config(&config(&mock, "", ""));
    let image = file.dir.path().join("diagram.png");
    std::fs::write(&image, GIF).unwrap();
    let notes = file.dir.path().join("notes.md");
    std::fs::write(&notes, "# Notes\nThe box is square.").unwrap();
    let output = command(&[
        "ask",
        "--config",
        file.path.to_str().unwrap(),
        "--quiet",
        "--json",
        "--attach",
        image.to_str().unwrap(),
        "--attach",
        notes.to_str().unwrap(),
        "what's wrong with this design?",
    ])
    .output()
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["answer"], "merged: a square", "{result:#}");
    assert_eq!(result["attachments"][1]["name"], "notes.md", "{result:#}");
    let run_id = result["run_id"].as_str().unwrap();
    let sees = &mock.requests_for(SEES)[0].body;
    let content = last_user(sees);
    let said = content[0]["text"].as_str().unwrap();
    assert!(
        said.contains("--- Attachment #2 notes.md (text/plain")
            && said.contains("The box is square."),
        "{said}"
    );
    assert_eq!(
        image_parts(content)[0]["image_url"]["url"],
        format!("data:image/gif;base64,{}", b64(GIF))
    );

    // The run store keeps what the question came with, and its bytes.
    let shown = command(&[
        "runs",
        "show",
        run_id,
        "--config",
        file.path.to_str().unwrap(),
    ])
    .output()
    .await
    .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("attachments\n  #1 diagram.png  image/gif  43 bytes"),
        "{shown}"
    );
    assert!(shown.contains("#2 notes.md  text/plain"), "{shown}");
}

/// A 2026-07-28 client (no server-to-client requests): a call naming a
/// path gets an `input_required` result asking for its roots, and the
/// same call again with the client's answer runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_2026_client_is_asked_for_its_roots_in_an_input_required_result() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("shape.gif"), GIF).unwrap();
    let root_uri = url::Url::from_directory_path(root.path().canonicalize().unwrap()).unwrap();
    let mut raw = Raw::start(&config(&mock, "", "")).await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
    });
    let params = |extra: Value| {
        let mut params = json!({"_meta": meta, "name": "ask",
            "arguments": {"prompt": "What is it?", "attachments": [{"path": "shape.gif"}]}});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        params
    };
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params(json!({}))}),
    )
    .await;
    let (asked, _) = raw.response(&json!(1)).await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked:#}");
    assert_eq!(
        result["inputRequests"]["roots"]["method"], "roots/list",
        "{asked:#}"
    );
    assert!(mock.requests().is_empty());

    let answer = json!({"inputResponses": {"roots": {"roots": [{"uri": root_uri.as_str()}]}}});
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params(answer)}))
        .await;
    let (done, _) = raw.response(&json!(2)).await;
    assert_eq!(done["result"]["isError"], false, "{done:#}");
    assert_eq!(
        image_parts(last_user(&mock.requests_for(SEES)[0].body)).len(),
        1
    );
}

/// The official Python SDK sends an MCP image content block as the
/// argument, and the run comes back.
#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_sends_an_image_block_and_gets_the_run_back() {
    use crate::mcp::clients::{python, python_script, run_client};
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let file = write_config(&config(&mock, "", ""));
    let report = run_client(&python(), &[&python_script(), "image", "legacy"], &file).await;
    assert_eq!(report["answer"], "merged: a square", "{report}");
    let sees = mock.requests_for(SEES);
    let url = &image_parts(last_user(&sees[0].body))[0]["image_url"]["url"];
    assert!(
        url.as_str()
            .unwrap()
            .starts_with("data:image/gif;base64,R0lGODlh"),
        "{url}"
    );
}

/// `chorus eval` items carry attachments, named relative to the dataset.
#[tokio::test(flavor = "multi_thread")]
async fn eval_items_carry_their_attachments() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let file = write_config(&config(&mock, "", ""));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("images")).unwrap();
    std::fs::write(dir.path().join("images/shape.gif"), GIF).unwrap();
    let dataset = dir.path().join("shapes.jsonl");
    std::fs::write(
        &dataset,
        r#"{"id": "shape", "question": "What shape?", "expected": "square", "grader": "regex", "attachments": ["images/shape.gif"]}
{"id": "lost", "question": "And this?", "expected": "x", "attachments": ["images/missing.png"]}
"#,
    )
    .unwrap();
    let report = eval_json(&dataset, &file.path, "ask").await;
    let outcomes = report["outcomes"].as_array().unwrap();
    let shape = outcomes.iter().find(|o| o["item"] == "shape").unwrap();
    assert_eq!(shape["grade"]["pass"], true, "{report:#}");
    let lost = outcomes.iter().find(|o| o["item"] == "lost").unwrap();
    assert!(
        lost["error"].as_str().unwrap().contains("missing.png"),
        "{report:#}"
    );
    let sees = mock.requests_for(SEES);
    assert_eq!(
        sees.len(),
        1,
        "only the item whose attachment was read was asked"
    );
    assert_eq!(image_parts(last_user(&sees[0].body)).len(), 1);
}
