//! The history of attachments, end to end: the store keeps a run's
//! attachment bytes, so a follow-up and a re-synthesis send the models the
//! same image without the caller sending it again (asserted on the exact
//! request bodies the mock received); `chorus runs show` says whether the
//! bytes are kept, `chorus runs export` includes them unless
//! `--no-attachments`; bytes the store could not keep are said to be gone,
//! and a pipeline whose rule is `fail` refuses the follow-up.

use serde_json::{Value, json};

use crate::attachments::sent::b64;
use crate::support::*;

const SEES: &str = "v/sees";
const OTHER: &str = "v/other";
const MERGER: &str = "v/merger";

/// A 1×1 GIF.
const GIF: &[u8] = b"GIF89a\x01\0\x01\0\x80\0\0\0\0\0\xff\xff\xff!\xf9\x04\x01\0\0\0\0,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;";

/// Two panel models and a merger, all taking images.
fn config(mock: &Mock, extra: &str) -> String {
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
input = ["text", "image"]
[models."{OTHER}"]
input = ["text", "image"]
[models."{MERGER}"]
input = ["text", "image"]

[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["{SEES}", "{OTHER}"], synthesizers = ["{MERGER}"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"

[pipelines.ask]
description = "Two panel models, one merge."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
{extra}
"#,
        url = mock.base_url,
    )
}

/// The `image_url` URLs of the last user message of `body`.
fn image_urls(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    last["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "image_url")
                .map(|p| p["image_url"]["url"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn first_run(server: &Server) -> String {
    let result = server
        .call(
            "ask",
            json!({"prompt": "What shape is this?", "attachments": [
                {"data": b64(GIF), "mime_type": "image/gif", "name": "photo.gif"}
            ]}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    structured(&result)["run_id"].as_str().unwrap().to_owned()
}

async fn runs(server: &Server, args: &[&str]) -> (bool, String) {
    let mut all = vec!["runs"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--config", server.config_path().to_str().unwrap()]);
    let output = command(&all)
        .env("XDG_DATA_HOME", server.data_dir())
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let err = String::from_utf8_lossy(&output.stderr);
    (output.status.success(), format!("{out}{err}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_and_a_resynthesis_send_the_kept_image_again() {
    let mock = Mock::start().await;
    mock.script(SEES, [Step::answer("a square")]);
    mock.script(OTHER, [Step::answer("a small square")]);
    mock.script(MERGER, [Step::answer("merged: a square")]);
    let server = Server::start(&config(&mock, "")).await;
    let data_url = format!("data:image/gif;base64,{}", b64(GIF));
    let first = first_run(&server).await;
    assert_eq!(
        image_urls(&mock.requests_for(SEES)[0].body),
        [data_url.as_str()]
    );

    // A follow-up without attachments: the model sees the same image.
    let second = server
        .call(
            "ask",
            json!({"prompt": "And what colour is it?", "follow_up_of": first}),
        )
        .await;
    assert_eq!(second.is_error, Some(false), "{}", text(&second));
    let panel = mock.requests_for(SEES);
    assert_eq!(panel.len(), 2);
    assert_eq!(image_urls(&panel[1].body), [data_url.as_str()]);
    let record = structured(&second);
    assert_eq!(record["attachments"][0]["name"], "photo.gif", "{record:#}");
    assert!(
        record["notes"]
            .to_string()
            .contains(&format!("Carried over from run {first}: #1 photo.gif")),
        "{record:#}"
    );
    let second_id = record["run_id"].as_str().unwrap().to_owned();

    // A re-synthesis: the merger's request carries it again.
    let merges_before = mock.requests_for(MERGER).len();
    let again = server.call("resynthesize", json!({"run_id": first})).await;
    assert_eq!(again.is_error, Some(false), "{}", text(&again));
    let merges = mock.requests_for(MERGER);
    assert_eq!(merges.len(), merges_before + 1);
    assert_eq!(
        image_urls(&merges.last().unwrap().body),
        [data_url.as_str()]
    );
    assert_eq!(mock.requests_for(SEES).len(), 2, "the panel is not asked");

    // `runs show` lists it, with its pixels measured when the first run
    // started and carried with it, and says the bytes are kept.
    let (ok, shown) = runs(&server, &["show", &second_id]).await;
    assert!(ok, "{shown}");
    assert!(
        shown.contains("#1 photo.gif  image/gif  43 bytes, 1×1 px  sha256:")
            && shown.contains("bytes kept"),
        "{shown}"
    );

    // `runs export` includes the bytes, unless told not to.
    let (ok, exported) = runs(&server, &["export", &second_id]).await;
    assert!(ok, "{exported}");
    let exported: Value = serde_json::from_str(&exported).unwrap();
    let attachment = &exported["attachments"][0];
    assert_eq!(attachment["data"], b64(GIF), "{exported:#}");
    assert_eq!(
        (&attachment["width"], &attachment["height"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(attachment["stored"]["state"], "kept");
    let (ok, bare) = runs(&server, &["export", &second_id, "--no-attachments"]).await;
    assert!(ok, "{bare}");
    let bare: Value = serde_json::from_str(&bare).unwrap();
    assert!(bare["attachments"][0].get("data").is_none(), "{bare:#}");
    assert_eq!(bare["attachments"][0]["name"], "photo.gif");
    assert_eq!(bare["attachments"][0]["stored"]["state"], "kept");
}

#[tokio::test(flavor = "multi_thread")]
async fn bytes_the_store_could_not_keep_are_said_to_be_gone() {
    let mock = Mock::start().await;
    mock.script(SEES, [Step::answer("a square")]);
    mock.script(OTHER, [Step::answer("a small square")]);
    mock.script(MERGER, [Step::answer("merged: a square")]);
    // Less than the image: its bytes are not kept.
    let extra = "[pipelines.strict]\ndescription = \"Refuses without the attachments.\"\nselector = \"panel\"\nprompter = \"passthrough\"\nsynthesizer = \"synthesize\"\nattachments_for_text_models = \"fail\"\n\n[store]\nmax_bytes = 30";
    let server = Server::start(&config(&mock, extra)).await;
    let first = first_run(&server).await;

    let (ok, shown) = runs(&server, &["show", &first]).await;
    assert!(ok, "{shown}");
    assert!(
        shown.contains("bytes not kept: 43 bytes is more than the run store may keep ([store] max_bytes = 30 bytes)"),
        "{shown}"
    );

    // The follow-up goes on text-only, and says so.
    let second = server
        .call(
            "ask",
            json!({"prompt": "And its colour?", "follow_up_of": first}),
        )
        .await;
    assert_eq!(second.is_error, Some(false), "{}", text(&second));
    assert!(image_urls(&mock.requests_for(SEES)[1].body).is_empty());
    let notes = structured(&second)["notes"].to_string();
    assert!(
        notes.contains("The models did not see these attachments")
            && notes.contains("#1 photo.gif (image/gif, 43 bytes): not kept"),
        "{notes}"
    );

    // Unless the pipeline says `fail`: refused before any model is asked.
    let asked = mock.requests().len();
    let refused = server
        .call(
            "strict",
            json!({"prompt": "And its colour?", "follow_up_of": first}),
        )
        .await;
    assert_eq!(refused.is_error, Some(true));
    let said = text(&refused);
    assert!(
        said.contains("are no longer all kept")
            && said.contains("pipelines.strict.attachments_for_text_models = \"fail\""),
        "{said}"
    );
    assert_eq!(mock.requests().len(), asked);
}
