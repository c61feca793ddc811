//! chorus without a config file, as a one-line install runs it: the
//! built-in default changed by `--models`, `--synthesizer`, `--pipeline`,
//! `--base-url` or their `CHORUS_*` variables, on `serve` and `ask`;
//! `chorus init` writing the default to edit; `chorus check` saying which
//! configuration it read and why.

use std::path::Path;

use serde_json::json;

use crate::support::*;

const BUILTIN: &str = include_str!("../../../plugins.toml");

/// A mock that answers two panel models and a synthesizer, only with the
/// canary key (passed as OPENROUTER_API_KEY, the built-in provider's).
async fn provider() -> Mock {
    let mock = Mock::start().await;
    mock.script("acme/one", [Step::answer("one")]);
    mock.script("acme/two", [Step::answer("two")]);
    mock.script("acme/merger", [Step::answer("merged")]);
    mock.require_key(CANARY);
    mock
}

fn answered(mock: &Mock) -> Vec<String> {
    let mut models: Vec<String> = mock.requests().iter().map(|r| r.model.clone()).collect();
    models.sort();
    models
}

#[tokio::test]
async fn serve_takes_the_panel_synthesizer_and_endpoint_from_its_flags() {
    let mock = provider().await;
    let server = Server::start_without_config(
        &[
            "serve",
            "--models",
            "acme/one,acme/two",
            "--synthesizer",
            "acme/merger",
            "--base-url",
            &mock.base_url,
        ],
        &[("OPENROUTER_API_KEY", CANARY)],
    )
    .await;
    let result = server.ask("ask", "q").await;
    let structured = result.structured_content.expect("a structured result");
    assert_eq!(structured["answer"], "merged", "{structured}");
    assert_eq!(structured["kind"], "synthesis", "{structured}");
    assert_eq!(answered(&mock), ["acme/merger", "acme/one", "acme/two"]);
}

#[tokio::test]
async fn a_bare_chorus_reads_the_same_from_the_environment_for_any_pipeline() {
    let mock = provider().await;
    // `self-moa` selects with a plugin that takes no panel: the panel
    // replaces its selector for that pipeline.
    let server = Server::start_without_config(
        &[],
        &[
            ("OPENROUTER_API_KEY", CANARY),
            ("CHORUS_MODELS", "acme/one, acme/two"),
            ("CHORUS_SYNTHESIZER", "acme/merger"),
            ("CHORUS_PIPELINE", "self-moa"),
            ("CHORUS_BASE_URL", &mock.base_url),
        ],
    )
    .await;
    let result = server
        .call("self-moa", json!({ "prompt": "q", "samples": 1 }))
        .await;
    let structured = result.structured_content.expect("a structured result");
    assert_eq!(structured["answer"], "merged", "{structured}");
    assert_eq!(answered(&mock), ["acme/merger", "acme/one", "acme/two"]);
}

async fn chorus(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let output = command(args)
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run chorus");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn an_endpoint_that_lists_no_models_at_all_checks_no_ids() {
    let mock = provider().await;
    mock.catalog(json!([]));
    let args = [
        "ask",
        "-q",
        "--models",
        "acme/one,acme/two",
        "--synthesizer",
        "acme/merger",
        "--base-url",
        mock.base_url.as_str(),
        "q",
    ];
    let (ok, stdout, stderr) = chorus(&args, &[("OPENROUTER_API_KEY", CANARY)]).await;
    assert!(ok, "an empty /models refuses nothing: {stderr}");
    assert_eq!(stdout.trim(), "merged");
    assert!(stderr.contains("lists no models at all"), "{stderr}");
}

#[tokio::test]
async fn ask_takes_the_flags_and_refuses_model_ids_the_provider_does_not_list() {
    let mock = provider().await;
    mock.catalog(json!([{ "id": "acme/one" }, { "id": "acme/two" }, { "id": "acme/merger" }]));
    let key = [("OPENROUTER_API_KEY", CANARY)];
    let base = ["--base-url", mock.base_url.as_str()];

    let mut args = vec![
        "ask",
        "-q",
        "--models",
        "acme/one,acme/two",
        "--synthesizer",
        "acme/merger",
    ];
    args.extend(base);
    args.push("q");
    let (ok, stdout, stderr) = chorus(&args, &key).await;
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "merged");

    let mut args = vec![
        "ask",
        "--models",
        "acme/one,acme/too",
        "--synthesizer",
        "acme/merger",
    ];
    args.extend(base);
    args.push("q");
    let before = mock.requests().len();
    let (ok, _, stderr) = chorus(&args, &key).await;
    assert!(!ok);
    assert!(stderr.contains("`acme/too` (closest: acme/two"), "{stderr}");
    assert_eq!(mock.requests().len(), before, "no model was called");

    let mut args = vec!["ask", "--pipeline", "nope", "--models", "acme/one"];
    args.extend(base);
    args.push("q");
    let (ok, _, stderr) = chorus(&args, &key).await;
    assert!(!ok);
    assert!(
        stderr.contains("there is no pipeline `nope` (there are: "),
        "{stderr}"
    );
}

#[tokio::test]
async fn init_writes_the_default_once_and_check_says_which_config_it_read() {
    let mock = provider().await;
    let home = tempfile::tempdir().unwrap();
    let config_home = home.path().to_str().unwrap();
    let env = [
        ("XDG_CONFIG_HOME", config_home),
        ("OPENROUTER_API_KEY", CANARY),
    ];
    let check = ["check", "--base-url", mock.base_url.as_str()];

    let (_, stdout, _) = chorus(&check, &env).await;
    assert!(
        stdout.contains("config: <built-in plugins.toml> (ok)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("read because: the built-in default"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("changed: base_url = {}", mock.base_url)),
        "{stdout}"
    );

    let (ok, stdout, stderr) = chorus(&["init"], &env).await;
    assert!(ok, "{stderr}");
    let written = home.path().join("chorus/plugins.toml");
    assert!(stdout.contains(&written.display().to_string()), "{stdout}");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), BUILTIN);

    std::fs::write(
        &written,
        BUILTIN.replace("default_pipeline = \"ask\"", "default_pipeline = \"moa\""),
    )
    .unwrap();
    let (ok, _, stderr) = chorus(&["init"], &env).await;
    assert!(!ok);
    assert!(
        stderr.contains("already exists") && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(
        std::fs::read_to_string(&written)
            .unwrap()
            .contains("\"moa\""),
        "left as it was"
    );

    let (_, stdout, _) = chorus(&check, &env).await;
    assert!(
        stdout.contains(&format!("config: {} (ok)", written.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains("read because: the user's config file"),
        "{stdout}"
    );

    let other = home.path().join("other.toml");
    let (ok, _, stderr) = chorus(&["init", other.to_str().unwrap()], &env).await;
    assert!(ok, "{stderr}");
    let mut with_env = env.to_vec();
    with_env.push(("CHORUS_CONFIG", other.to_str().unwrap()));
    let (_, stdout, _) = chorus(&check, &with_env).await;
    assert!(
        stdout.contains("read because: named by $CHORUS_CONFIG"),
        "{stdout}"
    );
    let mut flagged = check.to_vec();
    flagged.extend(["--config", other.to_str().unwrap()]);
    let (_, stdout, _) = chorus(&flagged, &with_env).await;
    assert!(
        stdout.contains("read because: given with --config"),
        "{stdout}"
    );

    let (ok, _, stderr) = chorus(&["init", "--force", written.to_str().unwrap()], &env).await;
    assert!(ok, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(Path::new(&written)).unwrap(),
        BUILTIN
    );
}
