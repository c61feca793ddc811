//! A client without the token, as a new user's client meets chorus: it
//! reads the 401 as the start of an OAuth sign-in and asks for the
//! discovery documents MCP's authorization spec names. chorus answers them
//! (with no token needed, behind the Host check) so that the client stops
//! and shows chorus's sentence — checked with plain HTTP, with the official
//! TypeScript SDK's sign-in, and with mcp-remote.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::mcp::clients::clients;
use crate::support::http::{HttpServer, TOKEN};
use crate::support::*;

/// What chorus says a client must do; every refusal of a sign-in says it.
const SENTENCE: &str = "chorus takes a static bearer token, not an OAuth sign-in";

async fn server() -> (Mock, ConfigFile, HttpServer) {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    (mock, config, server)
}

/// Status, content type and JSON body of `request`.
async fn read(request: reqwest::RequestBuilder) -> (u16, String, Value) {
    let response = request.send().await.expect("chorus answers");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, content_type, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_discovery_documents_say_chorus_takes_a_static_bearer_token() {
    let (_mock, _config, server) = server().await;
    let origin = server.origin();
    let http = reqwest::Client::new();

    // The 401 names the metadata and says what to do.
    let refused = server
        .post(
            None,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!(
            "error_description=\"No bearer token was sent. {SENTENCE}"
        )),
        "{challenge}"
    );
    assert!(
        challenge.contains("Authorization: Bearer <token>"),
        "{challenge}"
    );
    let metadata_url = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no resource_metadata: {challenge}"))
        .to_owned();
    assert_eq!(
        metadata_url,
        format!("{origin}/.well-known/oauth-protected-resource/mcp")
    );

    // RFC 9728: the resource is the URL the client used, and no
    // authorization server is named.
    for (path, resource) in [
        (
            "/.well-known/oauth-protected-resource/mcp",
            server.url.clone(),
        ),
        (
            "/mcp/.well-known/oauth-protected-resource",
            server.url.clone(),
        ),
        ("/.well-known/oauth-protected-resource", origin.clone()),
    ] {
        let (status, content_type, document) = read(http.get(format!("{origin}{path}"))).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(content_type, "application/json", "{path}");
        assert_eq!(document["resource"], resource.as_str(), "{path}");
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
        assert!(
            document.get("authorization_servers").is_none(),
            "{document}"
        );
        assert!(
            document["resource_documentation"]
                .as_str()
                .unwrap()
                .ends_with("docs/clients.md")
        );
    }

    // RFC 8414 / OpenID metadata and RFC 7591 registration: JSON errors
    // that say how to give the client the token.
    let not_here = [
        ("GET", "/.well-known/oauth-authorization-server"),
        ("GET", "/.well-known/oauth-authorization-server/mcp"),
        ("GET", "/.well-known/openid-configuration"),
        ("GET", "/.well-known/openid-configuration/mcp"),
        ("GET", "/mcp/.well-known/openid-configuration"),
        ("POST", "/register"),
    ];
    for (method, path) in not_here {
        let request = http
            .request(method.parse().unwrap(), format!("{origin}{path}"))
            .header("content-type", "application/json")
            .body(r#"{"redirect_uris":["http://127.0.0.1:9/callback"]}"#);
        let (status, content_type, error) = read(request).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(content_type, "application/json", "{path}");
        assert!(error["error"].is_string(), "{error}");
        let description = error["error_description"].as_str().unwrap();
        assert!(description.starts_with(SENTENCE), "{description}");
        assert!(description.contains("Authorization: Bearer <token>"));
    }

    // No token needed, but the Host check holds.
    let rebound = http
        .get(&metadata_url)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_without_a_token_has_nothing_to_discover() {
    let mock = Mock::start().await;
    let config = write_config(&config(&mock, ""));
    let server = HttpServer::start(&config.path, None, &[]).await;
    for path in ["/.well-known/oauth-protected-resource/mcp", "/register"] {
        let response = reqwest::get(format!("{}{path}", server.origin()))
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
        let body = response.text().await.unwrap();
        assert!(!body.contains(SENTENCE), "{body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_sdks_sign_in_stops_with_chorus_s_sentence() {
    let (_mock, _config, server) = server().await;
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg("ts_no_token.mjs")
            .current_dir(clients())
            .env("CHORUS_URL", &server.url)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finished")
    .expect("node ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no report ({e}): {stdout}"));
    let plain = report["plain"].as_str().unwrap();
    assert!(
        plain.contains("this server needs a bearer token"),
        "{plain}"
    );
    let oauth = report["oauth"].as_str().unwrap();
    assert!(oauth.contains(SENTENCE), "{oauth}");
    assert!(!oauth.contains("Invalid OAuth error response"), "{oauth}");
    assert_eq!(report["registered"], false);
    assert_eq!(
        report["redirected"],
        json!([]),
        "no browser is sent anywhere"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_remote_stops_with_chorus_s_sentence() {
    let (_mock, _config, server) = server().await;
    let home = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new("node")
        .arg(clients().join("node_modules/mcp-remote/dist/proxy.js"))
        .arg(&server.url)
        .env("HOME", home.path())
        .env("MCP_REMOTE_CONFIG_DIR", home.path().join("mcp-auth"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start mcp-remote");
    let stderr = capture(child.stderr.take());
    // What the local client (Claude Desktop, say) sends through it.
    let mut stdin = child.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    // It says why it stops, then waits for its client to hang up.
    let fatal = wait_for_lines(&stderr, "Fatal error", 1).await.remove(0);
    drop(stdin);
    child.kill().await.ok();
    assert!(fatal.contains(SENTENCE), "{fatal}");
    assert!(fatal.contains("Authorization: Bearer <token>"), "{fatal}");
    assert!(!fatal.contains("nothing here"), "{fatal}");
}
