//! chorus behind a real OpenAI-compatible gateway that is not OpenRouter:
//! LiteLLM's proxy in front of the mock provider (tests/support/litellm.rs),
//! driven the way the README tells a new user to — the built-in
//! configuration with `--base-url`, `--models` and a key under chorus's own
//! name — and with a file of one's own. Through it a run reports the
//! provider's own tokens and cost, streamed and not; a failing upstream is
//! typed with LiteLLM's message; `chorus models` and `chorus check` read
//! the gateway's `/models`; and a client's budget counts the real cost.
//!
//! One test, because the proxy takes seconds to start (its Python imports).

use serde_json::{Value, json};

use crate::support::http::HttpServer;
use crate::support::litellm::{COST_PER_CALL, LiteLlm, MASTER_KEY};
use crate::support::*;
use crate::web::teams::{ALICE, call, client};

fn answering(mock: &Mock) {
    for model in ["alpha", "beta", "merger"] {
        mock.script(model, [Step::answer(&format!("{model} says hi"))]);
    }
    mock.script("broken", [Step::status(503, "upstream is down")]);
}

/// `chorus ARGS` with the gateway's key under chorus's own name, and no
/// OpenRouter or OpenAI key anywhere: (exit code, stdout, stderr).
async fn chorus(args: &[&str]) -> (i32, String, String) {
    let output = command(args)
        .env("CHORUS_API_KEY", MASTER_KEY)
        .env_remove("OPENROUTER_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .await
        .expect("run chorus");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn calls(result: &Value) -> Vec<&Value> {
    result["calls"].as_array().expect("calls").iter().collect()
}

/// Every call answered with the provider's own usage and cost: reported,
/// not estimated.
fn reported(result: &Value) {
    for call in calls(result) {
        assert_eq!(call["status"], "ok", "{call}");
        assert_eq!(call["prompt_tokens"], 12, "the provider's tokens: {call}");
        assert_eq!(call["completion_tokens"], 34, "{call}");
        assert_eq!(
            call["cost_usd"], COST_PER_CALL,
            "the provider's cost: {call}"
        );
        assert!(call.get("tokens_estimated").is_none(), "{call}");
        assert!(call.get("cost_estimated").is_none(), "{call}");
    }
    let n = calls(result).len() as f64;
    let total = result["usage"]["cost_usd"].as_f64().expect("a known cost");
    assert!(
        (total - n * COST_PER_CALL).abs() < 1e-9,
        "{}",
        result["usage"]
    );
    assert!(result["usage"].get("tokens_estimated").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn through_litellm_usage_cost_failures_models_checks_and_budgets_are_the_gateways() {
    let mock = Mock::start().await;
    answering(&mock);
    let Some(proxy) = LiteLlm::start(&mock).await else {
        return; // not installed, and not required (see support::litellm)
    };
    let url = proxy.base_url.as_str();
    let logs = || proxy.logs();

    // `chorus models --base-url` lists the gateway's ids, with the context
    // and output limits LiteLLM gives; so does CHORUS_BASE_URL.
    let (code, stdout, stderr) = chorus(&["models", "--json", "--base-url", url]).await;
    assert_eq!(code, 0, "{stderr}\n{}", logs());
    let listed: Vec<Value> = serde_json::from_str(&stdout).expect("models --json");
    let ids: Vec<&str> = listed.iter().filter_map(|m| m["id"].as_str()).collect();
    for id in crate::support::litellm::MODELS {
        assert!(ids.contains(&id), "{id} not in {ids:?}");
    }
    let alpha = listed.iter().find(|m| m["id"] == "gw/alpha").unwrap();
    assert_eq!(alpha["context_window"], 32000, "{alpha}");
    assert_eq!(alpha["max_output_tokens"], 4000, "{alpha}");
    let output = command(&["models", "gw/"])
        .env("CHORUS_BASE_URL", url)
        .env("CHORUS_API_KEY", MASTER_KEY)
        .output()
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("gw/beta"), "CHORUS_BASE_URL: {table}");

    // The README's one line checks clean, says which key it read, and
    // knows the gateway's context size.
    let gateway = [
        "--base-url",
        url,
        "--models",
        "gw/alpha,gw/beta",
        "--synthesizer",
        "gw/merger",
    ];
    let (code, stdout, _) = chorus(&[&["check"][..], &gateway].concat()).await;
    assert_eq!(
        code, 0,
        "the one-line gateway recipe checks clean:\n{stdout}"
    );
    assert!(
        stdout.contains("key: $CHORUS_API_KEY (set; used in place of $OPENROUTER_API_KEY)"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("gw/alpha") && l.contains("32000 tokens")),
        "{stdout}"
    );
    // OPENAI_API_KEY, the name a gateway's users have set, is read too off
    // OpenRouter (and never sent to it).
    let output = command(&[&["check"][..], &gateway].concat())
        .env("OPENAI_API_KEY", MASTER_KEY)
        .env_remove("CHORUS_API_KEY")
        .env_remove("OPENROUTER_API_KEY")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("key: $OPENAI_API_KEY (set; used in place of $OPENROUTER_API_KEY)"),
        "{stdout}"
    );
    // An id the gateway lacks is blamed on the flag that named it.
    let (code, stdout, _) = chorus(&[
        "check",
        "--base-url",
        url,
        "--models",
        "gw/alpha,gw/alfa",
        "--synthesizer",
        "gw/merger",
    ])
    .await;
    assert_eq!(code, 1, "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.contains("`gw/alfa` is"))
        .unwrap_or_else(|| panic!("gw/alfa is not flagged:\n{stdout}"));
    assert!(line.contains("(--models / $CHORUS_MODELS)"), "{line}");
    assert!(line.contains("closest: gw/alpha"), "{line}");
    assert!(!stdout.contains("<built-in plugins.toml>:"), "{stdout}");

    // Streamed (the built-in provider streams): the provider's usage and
    // cost arrive because chorus asks for them.
    let (code, stdout, stderr) =
        chorus(&[&["ask", "--json", "-q"][..], &gateway, &["hello"]].concat()).await;
    assert_eq!(code, 0, "{stderr}\n{}", logs());
    let streamed: Value = serde_json::from_str(&stdout).expect("ask --json");
    assert_eq!(streamed["kind"], "synthesis", "{streamed}");
    assert_eq!(calls(&streamed).len(), 3);
    reported(&streamed);
    // LiteLLM passes chorus's request for usage on upstream.
    let sent = &mock.requests_for("alpha")[0].body;
    assert_eq!(sent["stream"], true);
    assert_eq!(
        sent["stream_options"],
        json!({"include_usage": true}),
        "{sent}"
    );

    // Under a cost ceiling, models with no prices (a LiteLLM list has
    // none) are not sent: the summary says they were skipped and why,
    // not that they failed.
    let (_, stdout, stderr) = chorus(
        &[
            &["ask", "--json", "-q", "-o", "max_cost_usd=0.01"][..],
            &gateway,
            &["hello"],
        ]
        .concat(),
    )
    .await;
    let skipped: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let summary = skipped["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("No answer: none of the 2 model calls was made; all were skipped.")
            && summary.contains("worst-case cost is unknown"),
        "{skipped}"
    );

    // Not streamed, with a file of one's own, and one upstream failing:
    // its failure is typed with LiteLLM's own message; the others' usage
    // is the provider's; a call refused before any model ran costs nothing.
    let file = write_config(&format!(
        r#"
default_pipeline = "ask"
[store]
enabled = false
[providers.gateway]
base_url = "{url}"
api_key_env = "GATEWAY_KEY"
stream = false
[providers.gateway.retry]
max_attempts = 1
[models."gw/alpha"]
[models."gw/broken"]
[models."gw/merger"]
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["gw/alpha", "gw/broken"], synthesizers = ["gw/merger"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"
[pipelines.ask]
description = "Through the gateway."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#
    ));
    let output = command(&[
        "--config",
        file.path.to_str().unwrap(),
        "ask",
        "--json",
        "-q",
        "hello",
    ])
    .env("GATEWAY_KEY", MASTER_KEY)
    .output()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let plain: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {stdout}\n{}\n{}",
            String::from_utf8_lossy(&output.stderr),
            logs()
        )
    });
    let broken = calls(&plain)
        .into_iter()
        .find(|c| c["model"] == "gw/broken")
        .expect("the broken model's call");
    assert_eq!(broken["error"]["kind"], "http-status", "{broken}");
    assert_eq!(broken["error"]["status"], 503, "{broken}");
    let message = broken["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("ServiceUnavailableError") && message.contains("upstream is down"),
        "LiteLLM's own message: {message}"
    );
    let answered: Vec<Value> = calls(&plain)
        .into_iter()
        .filter(|c| c["status"] == "ok")
        .cloned()
        .collect();
    // One answer left: it is the answer, and no synthesizer is asked.
    assert_eq!(answered.len(), 1, "{plain}");
    assert_eq!(plain["kind"], "single", "{plain}");
    reported(&json!({"calls": answered, "usage": plain["usage"]}));
    // What LiteLLM passed on (it leaves `"stream": false` out).
    let sent = mock.requests_for("alpha").pop().unwrap().body;
    assert_ne!(sent["stream"], true, "{sent}");
    assert!(sent.get("stream_options").is_none(), "{sent}");

    // A gateway told not to report a stream's usage (as one that refuses
    // the field is configured): the tokens are chorus's estimates, marked
    // as such, and with no prices the cost is unknown — null, never $0.
    let silent = write_config(&format!(
        r#"
default_pipeline = "ask"
[store]
enabled = false
[providers.gateway]
base_url = "{url}"
api_key_env = "GATEWAY_KEY"
extra_body = {{ stream_options = {{ include_usage = false }} }}
[models."gw/alpha"]
[models."gw/merger"]
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["gw/alpha"], synthesizers = ["gw/merger"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"
[pipelines.ask]
description = "Through the gateway, without usage."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#
    ));
    let output = command(&[
        "--config",
        silent.path.to_str().unwrap(),
        "ask",
        "--json",
        "-q",
        "hello",
    ])
    .env("GATEWAY_KEY", MASTER_KEY)
    .output()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let guessed: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    // (LiteLLM asks its upstream for usage anyway; it keeps it from a
    // client that said no, as from one that did not ask.)
    for call in calls(&guessed) {
        assert_eq!(call["status"], "ok", "{call}");
        assert_eq!(call["tokens_estimated"], true, "{call}");
        assert!(call["prompt_tokens"].as_u64().unwrap() > 0, "{call}");
        assert!(call.get("cost_usd").is_none(), "no cost, no $0: {call}");
    }
    assert_eq!(guessed["usage"]["tokens_estimated"], true, "{guessed}");
    assert!(
        guessed["usage"]["cost_usd"].is_null(),
        "an unknown cost is null: {}",
        guessed["usage"]
    );

    // A client's daily budget counts what the gateway reported: three runs
    // of three calls fit in it, a fourth (its worst case reserved on top
    // of what was spent) does not. Counted as $0 (usage lost), every run
    // would fit; counted as unknown, only the first.
    let ceiling = 0.01;
    let per_run = 3.0 * COST_PER_CALL;
    let budget = ceiling + 2.0 * per_run + COST_PER_CALL;
    let store = tempfile::tempdir().unwrap();
    let served = write_config(&format!(
        r#"
default_pipeline = "ask"
[limits]
max_cost_usd = {ceiling}
[store]
path = "{store}"
[providers.gateway]
base_url = "{url}"
api_key_env = "GATEWAY_KEY"
[models."gw/alpha"]
input_price = 1.0
output_price = 2.0
max_output_tokens = 100
[models."gw/beta"]
input_price = 1.0
output_price = 2.0
max_output_tokens = 100
[models."gw/merger"]
input_price = 1.0
output_price = 2.0
max_output_tokens = 100
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["gw/alpha", "gw/beta"], synthesizers = ["gw/merger"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"
[pipelines.ask]
description = "Through the gateway."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
{clients}
"#,
        store = store.path().join("runs.sqlite3").display(),
        clients = client("alice", ALICE, &format!("max_usd_per_day = {budget}")),
    ));
    let server = HttpServer::start_with_env(
        "127.0.0.1:0",
        &served.path,
        None,
        &[],
        &[("GATEWAY_KEY", MASTER_KEY)],
    )
    .await;
    for run in 1..=3 {
        let reply = call(&server, ALICE, "ask", json!({"prompt": format!("q{run}")})).await;
        let result = &reply["result"]["structuredContent"];
        assert_eq!(
            result["kind"],
            "synthesis",
            "run {run}: {reply}\n{}",
            logs()
        );
        reported(result);
    }
    let refused = call(&server, ALICE, "ask", json!({"prompt": "q4"})).await;
    let text = refused.to_string();
    assert!(
        text.contains("daily budget") && text.contains("max_usd_per_day"),
        "the fourth run is over the budget: {text}"
    );
}
