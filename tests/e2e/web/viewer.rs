//! The run viewer: `chorus serve --http` serves it at `/`, `chorus ui` on
//! its own. Over plain HTTP: the security headers, who is refused, the
//! one-time sign-in link. In a real browser (Debian's chromium driven by
//! Playwright for Python, tests/browser/viewer.py): sign-in, the runs list,
//! a run page with every member's answer, a failed member's reason and the
//! timeline; a hostile answer shown as text; a slow run filling in live;
//! re-synthesis; cross-site POSTs refused; no request leaving 127.0.0.1;
//! axe-core's accessibility check.
//!
//! The browser test needs /usr/bin/chromium (Debian `chromium`) and installs
//! Playwright and axe-core (pinned in tests/browser/) on first use. Without
//! chromium it is skipped, saying so — unless `CHORUS_REQUIRE_BROWSER=1`
//! (set by .ci/run, which installs it), which makes that a failure.
//!
//! The README's pictures of the viewer are made here, from these runs:
//! `CHORUS_SCREENSHOTS=docs/images cargo test --test e2e viewer::the_run_viewer_in_a_real_browser`.

mod sources;
mod team;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::http::{HttpServer, TOKEN, tool_call};
use crate::support::*;

pub const CHROMIUM: &str = "/usr/bin/chromium";
const HOSTILE: &str = "Hostile: <img src=x onerror=alert(1)> and <script>alert(2)</script>";

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// A config whose runs are kept in a store of the test's own.
fn viewer_config(mock: &Mock) -> ConfigFile {
    let file = write_config("");
    let store = file.dir.path().join("runs.db");
    // Room for a browser starting on a busy machine while a run is held.
    let text = format!(
        "{}\n[store]\npath = \"{}\"\n",
        config(mock, "").replace("run_timeout = \"20s\"", "run_timeout = \"120s\""),
        store.display()
    );
    std::fs::write(&file.path, text).unwrap();
    file
}

/// Where Playwright and axe-core are, installing them on first use; `None`
/// (after saying why) when the browser test cannot run here.
pub fn browser_tools() -> Option<PathBuf> {
    let required = std::env::var_os("CHORUS_REQUIRE_BROWSER").is_some_and(|v| v == "1");
    let skip = |why: String| {
        assert!(!required, "CHORUS_REQUIRE_BROWSER=1 but {why}");
        eprintln!("skipped: {why} (CHORUS_REQUIRE_BROWSER=1 makes this a failure)");
        None
    };
    if !Path::new(CHROMIUM).exists() {
        return skip(format!(
            "{CHROMIUM} is missing: install Debian's `chromium` to run the browser tests"
        ));
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    let output = std::process::Command::new("bash")
        .arg(root().join("tests/browser/setup.sh"))
        .arg(&dir)
        .output()
        .expect("run tests/browser/setup.sh");
    if !output.status.success() {
        return skip(format!(
            "installing Playwright and axe-core failed (needs python3-venv, npm, PyPI and npm):\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Some(dir)
}

/// Makes a run through MCP over HTTP and returns its id, read from the
/// runs list (with the bearer token, as a script would).
pub async fn run_id_of(server: &HttpServer, marker: &str) -> String {
    let client = reqwest::Client::new();
    for _ in 0..200 {
        let page = client
            .get(format!("{}/?text={marker}", server.origin()))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        if let Some(at) = html.find("href=\"/runs/") {
            let rest = &html[at + "href=\"/runs/".len()..];
            return rest[..rest.find('"').unwrap()].to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no run with `{marker}` in the runs list");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_viewer_sends_its_security_headers_and_refuses_strangers() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("an answer")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let config = viewer_config(&mock);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let response = server
        .post(Some(TOKEN), &tool_call(1, "ask", "headers question"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let _ = response.text().await;
    let id = run_id_of(&server, "headers").await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let origin = server.origin();

    let page = client
        .get(format!("{origin}/runs/{id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("headers question") && html.contains("merged"),
        "{html}"
    );
    assert!(!html.contains("<script>"), "no inline script: {html}");

    // Without the token: sent to sign in; with a wrong one: refused.
    let anonymous = client.get(format!("{origin}/")).send().await.unwrap();
    assert_eq!(anonymous.status(), 303);
    assert_eq!(anonymous.headers()["location"], "/sign-in");
    let wrong = client
        .get(format!("{origin}/"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let wrong = client
        .get(format!("{origin}/sign-in?token=wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    // A Host this server does not go by (DNS rebinding), and a POST from
    // another site, even with the token.
    let rebound = client
        .get(format!("{origin}/"))
        .bearer_auth(TOKEN)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let cross_site = client
        .post(format!("{origin}/runs/{id}/resynthesize"))
        .header("origin", "https://evil.example")
        .bearer_auth(TOKEN)
        .form(&[("merger", "as-before")])
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);

    // Signed in with the server's token: a session cookie, HttpOnly and
    // SameSite=Strict; a POST with it but without the page's CSRF token
    // is refused.
    // A client's long-lived token in a URL signs nobody in: a link could
    // sign a victim in as the attacker, and URLs land in proxy logs.
    let by_link = client
        .get(format!("{origin}/sign-in?token={TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_link.status(), 401);
    assert!(by_link.headers().get("set-cookie").is_none());
    let signed_in = client
        .post(format!("{origin}/sign-in"))
        .form(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    let list = client
        .get(format!("{origin}/"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
    let no_csrf = client
        .post(format!("{origin}/runs/{id}/resynthesize"))
        .header("cookie", &session)
        .form(&[("merger", "as-before"), ("csrf", "guess")])
        .send()
        .await
        .unwrap();
    assert_eq!(no_csrf.status(), 403);
    assert_eq!(
        mock.requests_for(SYNTH).len(),
        1,
        "nothing was re-synthesized"
    );

    // The export is the run as JSON, every request included.
    let export = client
        .get(format!("{origin}/runs/{id}/export.json"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let run: serde_json::Value = export.json().await.unwrap();
    assert_eq!(run["run_id"], id.as_str());
    assert!(run["calls"][0]["request"].is_object(), "{run}");
    assert!(
        !server.stderr().contains(TOKEN),
        "the token is never logged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chorus_ui_prints_a_sign_in_link_that_works_once() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("an answer")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let config = viewer_config(&mock);
    let ask = command(&[
        "ask",
        "--config",
        config.path.to_str().unwrap(),
        "ui question",
    ])
    .stdin(Stdio::null())
    .output()
    .await
    .unwrap();
    assert!(
        ask.status.success(),
        "{}",
        String::from_utf8_lossy(&ask.stderr)
    );

    let mut ui = command(&["ui", "--config", config.path.to_str().unwrap()])
        .env_remove("CHORUS_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _stderr = capture(ui.stderr.take());
    let mut lines = BufReader::new(ui.stdout.take().unwrap()).lines();
    let link = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("chorus ui prints its link")
        .unwrap()
        .expect("a line");
    assert!(
        link.starts_with("http://127.0.0.1:") && link.contains("/sign-in?token="),
        "{link}"
    );
    let origin = link[..link.find("/sign-in").unwrap()].to_owned();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    assert_eq!(
        client
            .get(format!("{origin}/"))
            .send()
            .await
            .unwrap()
            .status(),
        303
    );
    let first = client.get(&link).send().await.unwrap();
    assert_eq!(first.status(), 303);
    let session = first.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let again = client.get(&link).send().await.unwrap();
    assert_eq!(again.status(), 401, "the link works once");
    let list = client
        .get(format!("{origin}/"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
    assert!(list.text().await.unwrap().contains("ui question"));
    ui.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_run_viewer_in_a_real_browser() {
    let Some(tools) = browser_tools() else {
        return;
    };
    let mock = Mock::start().await;
    let gate = Gate::default();
    let answers = [
        "**Paris** is the capital of France.",
        HOSTILE,
        "",
        "Paris.",
        "It is Paris, on the Seine.",
    ];
    for (model, answer) in PANEL.iter().zip(answers) {
        if answer.is_empty() {
            mock.script(model, [Step::status(400, "model m3 is not available")]);
        } else {
            mock.script(
                model,
                [
                    Step::answer(answer),
                    Step::Gated {
                        gate: gate.clone(),
                        text: format!("{model} answers late"),
                    },
                ],
            );
        }
    }
    mock.script(
        SYNTH,
        [
            Step::answer("The capital is **Paris**."),
            Step::answer("Live answer arrived."),
            Step::answer("Merged again: Paris."),
        ],
    );
    let config = viewer_config(&mock);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let response = server
        .post(
            Some(TOKEN),
            &tool_call(1, "ask", "What is the capital of France?"),
        )
        .send()
        .await
        .unwrap();
    let _ = response.text().await;
    let run = run_id_of(&server, "capital").await;
    // A slow run, held by the gate until the browser is looking at it.
    let slow_call = server.post(Some(TOKEN), &tool_call(2, "ask", "A SLOW question"));
    // The whole response is read: a client that hangs up cancels its run.
    let slow_task = tokio::spawn(async move {
        let response = slow_call.send().await?;
        let status = response.status();
        response.text().await.map(|_| status)
    });
    let slow = run_id_of(&server, "SLOW").await;

    let arguments = serde_json::json!({
        "origin": server.origin(),
        "token": TOKEN,
        "run": run,
        "slow": slow,
        "hostile": HOSTILE,
        "chromium": CHROMIUM,
        "axe": tools.join("node_modules/axe-core/axe.min.js"),
        // `CHORUS_SCREENSHOTS=docs/images` makes the README's pictures.
        "screenshots": std::env::var("CHORUS_SCREENSHOTS").ok().map(|dir| root().join(dir)),
    });
    browser_script("viewer.py", &arguments, &server, |line| {
        if line == "open-gate" {
            gate.open();
        }
    })
    .await;
    gate.open();
    assert_eq!(slow_task.await.unwrap().unwrap(), 200);
    assert_eq!(
        mock.requests_for(SYNTH).len(),
        3,
        "the re-synthesis asked the synthesizer"
    );
}

/// Runs `tests/browser/SCRIPT` with `arguments` (JSON) in the browser
/// tools' venv, handing each line it prints to `on_line`, and asserts that
/// it finished within 240 s and said `ok` last; its stderr and chorus's
/// are in the message when it did not.
pub async fn browser_script(
    script: &str,
    arguments: &serde_json::Value,
    server: &HttpServer,
    mut on_line: impl FnMut(&str),
) {
    let tools = browser_tools().expect("the browser tools are installed");
    let mut python = tokio::process::Command::new(tools.join("venv/bin/python"))
        .arg(root().join("tests/browser").join(script))
        .arg(arguments.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start tests/browser/{script}: {e}"));
    let stderr = capture(python.stderr.take());
    let mut lines = BufReader::new(python.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    let finished = tokio::time::timeout(Duration::from_secs(240), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            on_line(&line);
            said.push(line);
        }
        python.wait().await.unwrap()
    })
    .await;
    let status = finished.unwrap_or_else(|_| {
        panic!(
            "{script} did not finish in 240 s; it said {said:?}\n{}\nchorus:\n{}",
            stderr.text(),
            server.stderr()
        )
    });
    assert!(
        status.success() && said.last().map(String::as_str) == Some("ok"),
        "{script} failed; it said {said:?}\n{}\nchorus:\n{}",
        stderr.text(),
        server.stderr()
    );
}
