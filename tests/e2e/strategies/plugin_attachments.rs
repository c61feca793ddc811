//! Plugins and attachments (contract 0.4), end to end against the mock
//! provider, by the exact request bodies it received: a prompter that
//! places an attachment gets it there and only there (a text-only model
//! gets the description in its place); an id the run does not have fails
//! that call, saying so; the shipped selectors choose models that can see
//! an image; plugins built for 0.2 and 0.3 run unchanged on a run with one;
//! the request lists an image's pixels and a PDF's pages, measured by the host.

use serde_json::{Value, json};

use crate::attachments::sent::b64;
use crate::support::*;

const SEES: &str = "v/sees";
const BLIND: &str = "t/blind";
const EYE: &str = "v/eye";
const MERGER: &str = "t/merger";

/// A 1×1 GIF.
const GIF: &[u8] = b"GIF89a\x01\0\x01\0\x80\0\0\0\0\0\xff\xff\xff!\xf9\x04\x01\0\0\0\0,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;";

fn gif_url() -> String {
    format!("data:image/gif;base64,{}", b64(GIF))
}

/// `SEES` and `EYE` take images (the catalog says; `EYE` is the cheaper),
/// `BLIND` and `MERGER` text alone (`BLIND` is the cheapest of all); the
/// `ask` pipeline's prompter is `prompter`; `extra` follows the `placing`
/// plugin's table (its settings, or more tables).
fn config(mock: &Mock, prompter: &str, extra: &str) -> String {
    let model = |id: &str, input: &[&str], price: &str| {
        json!({"id": id, "context_length": 100000,
            "pricing": {"prompt": price, "completion": price},
            "architecture": {"input_modalities": input}})
    };
    mock.catalog(json!([
        model(SEES, &["text", "image"], "0.00001"),
        model(BLIND, &["text"], "0.00000001"),
        model(EYE, &["text", "image"], "0.0000001"),
        model(MERGER, &["text"], "0.000001"),
    ]));
    format!(
        r#"
[limits]
run_timeout = "20s"

[providers.mock]
base_url = "{url}"
api_key_env = "{KEY_VAR}"

[providers.mock.retry]
max_attempts = 1

[models."{SEES}"]
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
[plugins.legacy]
path = "{dir}/contract_0_3.wasm"
[plugins.placing]
path = "{dir}/placing.wasm"
{extra}

[pipelines.ask]
description = "Two panel models, one merge."
selector = "panel"
prompter = "{prompter}"
synthesizer = "synthesize"
"#,
        url = mock.base_url,
        dir = plugin_dir().display(),
    )
}

fn script(mock: &Mock) {
    mock.script(SEES, [Step::answer("a square")]);
    mock.script(BLIND, [Step::answer("sounds square")]);
    mock.script(EYE, [Step::answer("One black pixel on white.")]);
    mock.script(MERGER, [Step::answer("merged: a square")]);
}

fn with_gif(prompt: &str) -> Value {
    json!({"prompt": prompt, "attachments": [
        {"data": b64(GIF), "mime_type": "image/gif", "name": "pixel.gif"}
    ]})
}

/// The content of the last user message of `body`.
fn last_user(body: &Value) -> &Value {
    let messages = body["messages"].as_array().unwrap();
    &messages.iter().rev().find(|m| m["role"] == "user").unwrap()["content"]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_placed_attachment_goes_where_it_was_placed_once_and_is_described_for_the_blind() {
    let mock = Mock::start().await;
    script(&mock);
    let server = Server::start(&config(&mock, "placing", "")).await;
    let result = server.call("ask", with_gif("What shape?")).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));

    // Between the two texts, as placed; not again at the end.
    let sees = &mock.requests_for(SEES)[0].body;
    assert_eq!(
        sees["messages"],
        json!([
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": [
                {"type": "text", "text": "Look at this:"},
                {"type": "image_url", "image_url": {"url": gif_url()}},
                {"type": "text", "text": "Then: What shape?"}
            ]}
        ])
    );
    // The text-only model reads the description in the image's place.
    let blind = &mock.requests_for(BLIND)[0].body;
    let said = last_user(blind).as_str().unwrap();
    assert!(
        said.starts_with(
            "Look at this:\n\n--- Attachment #1 pixel.gif (image/gif, 43 bytes): you cannot see it; \
             this description by v/eye stands in for it ---\nOne black pixel on white.\n"
        ),
        "{said}"
    );
    assert!(
        said.ends_with("--- end of the description of attachment #1 ---\n\nThen: What shape?"),
        "{said}"
    );
    assert!(!blind.to_string().contains("image_url"));

    // The prompter saw the attachment listed, without its bytes.
    let record = structured(&result);
    let notes = record["notes"].to_string();
    assert!(
        notes.contains("The request listed: #1 image/gif 43 1×1 px."),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_see_an_images_pixels_and_a_pdfs_pages_measured_from_the_bytes() {
    let mock = Mock::start().await;
    script(&mock);
    let page: &[&str] = &["A page of text."];
    let pdf = crate::attachments::pdf_text::pdf(&[page; 3]);
    let server = Server::start(&config(&mock, "placing", "")).await;
    let args = json!({"prompt": "What shape?", "attachments": [
        {"data": b64(GIF), "mime_type": "image/gif", "name": "pixel.gif"},
        {"data": b64(&pdf), "mime_type": "application/pdf", "name": "three.pdf"}
    ]});
    let result = server.call("ask", args).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let record = structured(&result);
    let notes = record["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "The request listed: #1 image/gif 43 1×1 px, #2 application/pdf {} 3 pages.",
            pdf.len()
        )),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn placing_an_attachment_the_run_does_not_have_fails_that_call_naming_the_ids() {
    let mock = Mock::start().await;
    script(&mock);
    let extra = "settings = { ids = [7] }";
    let server = Server::start(&config(&mock, "placing", extra)).await;
    let result = server.call("ask", with_gif("What shape?")).await;
    assert_eq!(result.is_error, Some(true), "no model was asked");
    let record = structured(&result);
    let fan_out = calls(record, "fan-out");
    assert_eq!(fan_out.len(), 2, "{record:#}");
    for call in &fan_out {
        assert_eq!(call["status"], "skipped", "{call:#}");
        assert_eq!(call["error"]["kind"], "unsupported-input");
        let message = call["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(
                "the request places attachment #7, which this run does not have (its attachments: #1)"
            ),
            "{message}"
        );
    }
    for model in [SEES, BLIND, EYE] {
        assert!(mock.requests_for(model).is_empty(), "{model} was asked");
    }

    // Without attachments at all, the same.
    let result = server.call("ask", json!({"prompt": "What shape?"})).await;
    let record = structured(&result);
    let message = calls(record, "fan-out")[0]["error"]["message"].to_string();
    assert!(message.contains("(its attachments: none)"), "{record:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_0_3_prompter_runs_unchanged_on_a_run_with_an_image() {
    let mock = Mock::start().await;
    script(&mock);
    let server = Server::start(&config(&mock, "legacy", "")).await;
    let result = server.call("ask", with_gif("What shape?")).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    // As before 0.4: the image after the last user message's text.
    assert_eq!(
        last_user(&mock.requests_for(SEES)[0].body),
        &json!([
            {"type": "text", "text": "What shape?"},
            {"type": "image_url", "image_url": {"url": gif_url()}}
        ])
    );
    let asked = mock.requests_for(BLIND);
    let blind = last_user(&asked[0].body);
    assert!(
        blind
            .as_str()
            .unwrap()
            .contains("One black pixel on white."),
        "{blind}"
    );
    assert_eq!(structured(&result)["answer"], "merged: a square");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_0_2_synthesizer_runs_unchanged_on_a_run_with_an_image() {
    let mock = Mock::start().await;
    script(&mock);
    let extra = format!(
        r#"
[plugins.first]
path = "{dir}/contract_0_2.wasm"
[pipelines.first]
description = "A synthesizer built for contract 0.2."
selector = "panel"
prompter = "passthrough"
synthesizer = "first"
"#,
        dir = plugin_dir().display()
    );
    let server = Server::start(&config(&mock, "passthrough", &extra)).await;
    let result = server.call("first", with_gif("What shape?")).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let record = structured(&result);
    assert_eq!(record["kind"], "pick", "{record:#}");
    assert_eq!(record["answer"], "a square");
    let notes = record["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "The first answer, {SEES}'s, to a prompt of 11 characters."
        )),
        "{notes}"
    );
    assert_eq!(
        last_user(&mock.requests_for(SEES)[0].body),
        &json!([
            {"type": "text", "text": "What shape?"},
            {"type": "image_url", "image_url": {"url": gif_url()}}
        ])
    );
}

/// The fan-out's models of a run of pipeline `pipeline`.
async fn panel_of(server: &Server, pipeline: &str, args: Value) -> Vec<String> {
    let result = server.call(pipeline, args).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    calls(structured(&result), "fan-out")
        .iter()
        .map(|c| c["model"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn cheapest_route_and_diverse_choose_models_that_see_the_image() {
    let mock = Mock::start().await;
    for _ in 0..6 {
        script(&mock);
    }
    let selectors = format!(
        r#"
[plugins.cheapest]
builtin = "cheapest"
settings = {{ budget_usd = 1.0, count = 1, synthesizers = ["{MERGER}"] }}
[plugins.route]
builtin = "route"
settings = {{ routes = [], default = ["{BLIND}", "{SEES}"], max_panel = 1, synthesizers = ["{MERGER}"] }}
[plugins.diverse]
builtin = "diverse"
settings = {{ count = 2, synthesizers = ["{MERGER}"] }}
[pipelines.cheap]
description = "cheapest"
selector = "cheapest"
prompter = "passthrough"
synthesizer = "synthesize"
[pipelines.routed]
description = "route"
selector = "route"
prompter = "passthrough"
synthesizer = "synthesize"
[pipelines.spread]
description = "diverse"
selector = "diverse"
prompter = "passthrough"
synthesizer = "synthesize"
"#
    );
    let server = Server::start(&config(&mock, "passthrough", &selectors)).await;
    let plain = json!({"prompt": "What shape?"});
    let image = with_gif("What shape?");

    assert_eq!(panel_of(&server, "cheap", plain.clone()).await, [BLIND]);
    assert_eq!(panel_of(&server, "cheap", image.clone()).await, [EYE]);
    assert_eq!(panel_of(&server, "routed", plain.clone()).await, [BLIND]);
    assert_eq!(panel_of(&server, "routed", image.clone()).await, [SEES]);
    assert_eq!(panel_of(&server, "spread", plain).await, [SEES, BLIND]);
    assert_eq!(panel_of(&server, "spread", image).await, [SEES, EYE]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_that_must_take_a_blind_model_says_so() {
    let mock = Mock::start().await;
    // Twice: EYE answers on the panel and describes for BLIND.
    script(&mock);
    script(&mock);
    let selectors = format!(
        r#"
[plugins.cheapest]
builtin = "cheapest"
settings = {{ budget_usd = 1.0, count = 3, synthesizers = ["{MERGER}"] }}
[pipelines.cheap]
description = "cheapest"
selector = "cheapest"
prompter = "passthrough"
synthesizer = "synthesize"
"#
    );
    let server = Server::start(&config(&mock, "passthrough", &selectors)).await;
    let result = server.call("cheap", with_gif("What shape?")).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let record = structured(&result);
    let models: Vec<&str> = calls(record, "fan-out")
        .iter()
        .map(|c| c["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, [EYE, SEES, BLIND]);
    let notes = record["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "Chose models that cannot take the image attachments, for want of enough that can: {BLIND}"
        )),
        "{notes}"
    );
}
