//! Several providers in one configuration, in one pipeline: an
//! OpenRouter-like one that needs a key and a local server without one,
//! each with its own concurrency, timeouts and key.

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn two_providers_serve_one_pipeline_each_with_its_own_key_limits_and_timeouts() {
    let router = Mock::start().await;
    router.require_key(CANARY);
    let local = Mock::start().await;
    for model in ["m1", "m2", "m3"] {
        router.script(
            model,
            [Step::answer_after(300, &format!("{model} via the router"))],
        );
    }
    for model in ["m4", "m5"] {
        local.script(
            model,
            [Step::answer_after(300, &format!("{model} on this machine"))],
        );
    }
    // The local server's slow model outlives the local first_token_timeout.
    local.script("m5", [Step::answer_after(3000, "too slow")]);
    router.script(SYNTH, [Step::answer("merged")]);
    let text = format!(
        r#"
[limits]
run_timeout = "30s"

[fan_out]
quorum = "all"

[providers.router]
base_url = "{router}"
api_key_env = "{KEY_VAR}"
max_concurrency = 1
first_token_timeout = "20s"
[providers.router.retry]
max_attempts = 1

[providers.local]
base_url = "{local}"
max_concurrency = 2
first_token_timeout = "1s"
[providers.local.retry]
max_attempts = 1

[models.m1]
provider = "router"
[models.m2]
provider = "router"
[models.m3]
provider = "router"
[models.m4]
provider = "local"
[models.m5]
provider = "local"
[models.synth]
provider = "router"

[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3", "m4", "m5"], synthesizers = ["synth"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"

[pipelines.ask]
description = "Two providers, one panel."
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        router = router.base_url,
        local = local.base_url,
    );
    let server = Server::start(&text).await;
    let result = server.ask("ask", "q").await;
    let result = structured(&result);
    assert_eq!(
        result["summary"], "Synthesis of 4 of 5 answers.",
        "{result}"
    );
    let m5 = calls(result, "fan-out")[4];
    assert_eq!(
        m5["error"]["message"], "no token within first_token_timeout = 1s (providers.local)",
        "the local provider's own timeout, named"
    );
    for request in router.requests() {
        assert_eq!(
            request.authorization.as_deref(),
            Some(format!("Bearer {CANARY}").as_str())
        );
    }
    for request in local.requests() {
        assert_eq!(
            request.authorization, None,
            "no key goes to the local server"
        );
    }
    assert_eq!(
        router.max_in_flight(),
        1,
        "the router's own concurrency cap"
    );
    assert!(local.max_in_flight() <= 2);
    assert_eq!(local.max_in_flight(), 2, "both local calls ran at once");
    let router_latency: Vec<u64> = calls(result, "fan-out")[..3]
        .iter()
        .map(|c| c["latency_ms"].as_u64().unwrap())
        .collect();
    assert!(
        router_latency.iter().any(|&l| l >= 850),
        "one at a time through the router: {router_latency:?}"
    );
}
