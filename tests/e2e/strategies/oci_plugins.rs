//! Strategy plugins on a real OCI registry: Debian's `docker-registry`
//! (the CNCF distribution server), started on a free loopback port.
//! `chorus plugin push` publishes the test plugin in the Wasm artifact
//! layout (checked over the registry's own HTTP API), a configuration
//! pins it by digest and runs it, a tag is resolved and pinned with a
//! warning, the registry is stopped and chorus still starts from its cache,
//! bytes that do not match their digest are refused naming both, and an
//! unreachable registry fails only the pipelines of its plugin.
//!
//! Credentials stay with their registry: against small fake registries
//! (real HTTP on 127.0.0.1, and on 127.0.0.2 for the other host),
//! `CHORUS_REGISTRY_TOKEN` reaches only the registry `CHORUS_REGISTRY_HOST`
//! names, a token service on another host gets credentials only when
//! `registry_token_realms` lists it, and a push's upload `Location` on
//! another host gets none.
//!
//! Without `docker-registry` the tests are skipped, saying so, unless
//! `CHORUS_REQUIRE_REGISTRY=1` (set by .ci/run, which installs it).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::*;

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A `docker-registry serve` on 127.0.0.1, storing into a temporary
/// directory; killed when dropped.
struct Registry {
    host: String,
    storage: PathBuf,
    child: Option<std::process::Child>,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Option<Self> {
        if !Path::new(REGISTRY_BIN).exists() {
            assert!(
                std::env::var_os("CHORUS_REQUIRE_REGISTRY").is_none_or(|v| v != "1"),
                "CHORUS_REQUIRE_REGISTRY=1 but {REGISTRY_BIN} is missing (Debian: docker-registry)"
            );
            eprintln!(
                "skipped: {REGISTRY_BIN} is missing (CHORUS_REQUIRE_REGISTRY=1 makes this a failure)"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                storage.display()
            ),
        )
        .unwrap();
        let child = std::process::Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let registry = Self {
            host: format!("127.0.0.1:{port}"),
            storage,
            child: Some(child),
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let up = std::net::TcpStream::connect(&registry.host).is_ok();
            if up {
                return Some(registry);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the registry never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Where the registry keeps the blob `digest` (`sha256:HEX`).
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn chaos_wasm() -> PathBuf {
    plugin_dir().join("chaos.wasm")
}

fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// `chorus ARGS` with its plugin cache in `cache`: (code, stdout, stderr).
async fn chorus(args: &[&str], cache: &Path) -> (i32, String, String) {
    run_cli_with(args, &[("XDG_CACHE_HOME", cache.to_str().unwrap())]).await
}

/// Pushes the test plugin to `reference`; its digest.
async fn push(reference: &str, cache: &Path) -> String {
    push_file(&chaos_wasm(), reference, cache, "selector").await
}

/// Pushes `file` (a plugin of `kind`) to `reference`; its digest.
async fn push_file(file: &Path, reference: &str, cache: &Path, kind: &str) -> String {
    let (code, stdout, stderr) = chorus(
        &["plugin", "push", file.to_str().unwrap(), reference],
        cache,
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(kind), "says what it pushed: {stderr}");
    stdout.trim().to_owned()
}

/// A config whose pipeline `chaos` has the chaos selector from `source`.
fn with_source(mock: &Mock, source: &str) -> String {
    let pipeline = chaos_pipeline("chaos", "ok", "").replace(
        &format!("path = \"{}\"", chaos_wasm().display()),
        &format!("source = \"{source}\""),
    );
    assert!(pipeline.contains("source = "), "{pipeline}");
    config(mock, &pipeline)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_is_pushed_pinned_by_digest_run_and_started_from_cache_with_the_registry_down() {
    let Some(mut registry) = Registry::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let tagged = format!("oci://{}/team/chaos:1.0", registry.host);
    let digest = push(&tagged, cache.path()).await;

    // The manifest as the registry serves it: the Wasm artifact layout.
    let wasm = std::fs::read(chaos_wasm()).unwrap();
    let response = reqwest::Client::new()
        .get(format!(
            "http://{}/v2/team/chaos/manifests/1.0",
            registry.host
        ))
        .header("accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.bytes().await.unwrap();
    assert_eq!(
        sha256(&body),
        digest,
        "the printed digest is the manifest's"
    );
    let manifest: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(
        manifest["layers"].as_array().unwrap().len(),
        1,
        "{manifest}"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(manifest["layers"][0]["digest"], sha256(&wasm));
    assert_eq!(manifest["layers"][0]["size"], wasm.len());

    // Pinned by digest, run: a fresh cache, so it comes from the registry.
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("one")]);
    mock.script("m2", [Step::answer("two")]);
    mock.script(SYNTH, [Step::answer("merged")]);
    let pinned = format!("oci://{}/team/chaos@{digest}", registry.host);
    let pinned_config = with_source(&mock, &pinned);
    let config = write_config(&pinned_config);
    let (code, stdout, stderr) = chorus(
        &["check", "--config", config.path.to_str().unwrap()],
        cache.path(),
    )
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.contains("chaos-chaos"))
        .unwrap_or_default();
    assert!(
        line.contains("selector") && line.contains(&digest),
        "{stdout}"
    );

    // A damaged copy in the cache is noticed (checked against its digest
    // on every read), and fetched again.
    let layer = sha256(&wasm);
    let cached = cache
        .path()
        .join("chorus/oci/blobs/sha256")
        .join(layer.trim_start_matches("sha256:"));
    assert_eq!(std::fs::read(&cached).unwrap(), wasm, "cached by digest");
    std::fs::write(&cached, b"damaged").unwrap();
    let (code, stdout, stderr) = chorus(
        &["check", "--config", config.path.to_str().unwrap()],
        cache.path(),
    )
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains(&layer) && stderr.contains("fetching it from the registry again"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&cached).unwrap(), wasm, "fetched again");

    // The registry goes away: the cache still starts it, and it runs.
    registry.stop();
    let server = Server::start_with_env(
        &pinned_config,
        &[("XDG_CACHE_HOME", cache.path().to_str().unwrap())],
    )
    .await;
    let result = server
        .call("chaos", json!({"prompt": "from the cache"}))
        .await;
    assert_ne!(
        result.is_error,
        Some(true),
        "{}\n{}",
        text(&result),
        server.stderr()
    );
    assert!(text(&result).contains("merged"), "{}", text(&result));

    // `inspect` from the cache too.
    let (code, stdout, stderr) = chorus(&["plugin", "inspect", &pinned], cache.path()).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("kind:      selector"), "{stdout}");
    assert!(stdout.contains("contract:  chorus:strategy@"), "{stdout}");
    assert!(stdout.contains("the local cache"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tag_is_pinned_with_a_warning_and_a_wrong_digest_is_refused_naming_both() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let tagged = format!("oci://{}/team/chaos:1.2", registry.host);
    let digest = push(&tagged, cache.path()).await;
    let mock = Mock::start().await;

    let config = write_config(&with_source(&mock, &tagged));
    let (code, stdout, stderr) = chorus(
        &["check", "--config", config.path.to_str().unwrap()],
        cache.path(),
    )
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("tag") && stderr.contains(&digest),
        "a warning naming the pin: {stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("chaos-chaos"))
        .unwrap_or_default();
    assert!(
        line.contains(&digest),
        "check shows the pinned digest: {stdout}"
    );

    // `plugin pull` by tag names the same digest.
    let (code, pulled, stderr) = chorus(&["plugin", "pull", &tagged], cache.path()).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(pulled.trim(), digest);

    // The registry now serves other bytes for the component: a fresh cache
    // refuses them, naming the digest expected and the one found.
    let wasm = std::fs::read(chaos_wasm()).unwrap();
    let layer = sha256(&wasm);
    let mut altered = wasm.clone();
    let last = altered.len() - 1;
    altered[last] ^= 0xff;
    std::fs::write(registry.blob_file(&layer), &altered).unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let pinned = format!("oci://{}/team/chaos@{digest}", registry.host);
    let config = write_config(&with_source(&mock, &pinned));
    let (code, stdout, stderr) = chorus(
        &["check", "--config", config.path.to_str().unwrap()],
        fresh.path(),
    )
    .await;
    assert_ne!(code, 0, "{stdout}");
    assert!(
        stderr.contains(&layer) && stderr.contains(&sha256(&altered)),
        "both digests named: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_registry_fails_only_its_plugins_pipelines() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!(
        "oci://127.0.0.1:{port}/team/chaos@sha256:{}",
        "0".repeat(64)
    );
    let cache = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        &with_source(&mock, &nowhere),
        &[("XDG_CACHE_HOME", cache.path().to_str().unwrap())],
    )
    .await;
    let failed = server.call("chaos", json!({"prompt": "q"})).await;
    assert_eq!(failed.is_error, Some(true));
    let said = text(&failed);
    assert!(said.contains("cannot be reached"), "{said}");
    let answered = server.ask("ask", "q").await;
    assert_ne!(answered.is_error, Some(true), "{}", text(&answered));
    assert!(text(&answered).contains("merged"));
}

/// Changing the reference in plugins.toml pulls the new component and
/// swaps it in, as a changed file would be.
#[tokio::test(flavor = "multi_thread")]
async fn changing_the_reference_pulls_and_swaps_the_plugin_live() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let at = |tag: &str| format!("oci://{}/team/synth:{tag}", registry.host);
    let synthesize = push_file(
        &plugin_dir().join("synthesize.wasm"),
        &at("synthesize"),
        cache.path(),
        "synthesizer",
    )
    .await;
    let vote = push_file(
        &plugin_dir().join("vote.wasm"),
        &at("vote"),
        cache.path(),
        "synthesizer",
    )
    .await;
    let pinned = |digest: &str| format!("oci://{}/team/synth@{digest}", registry.host);
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("the same answer")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let before = config(
        &mock,
        &format!("\n[plugins.shared]\nsource = \"{}\"\n", pinned(&synthesize)),
    )
    .replace("synthesizer = \"synthesize\"", "synthesizer = \"shared\"");
    let server = Server::start_with_env(
        &before,
        &[("XDG_CACHE_HOME", cache.path().to_str().unwrap())],
    )
    .await;
    let first = server.ask("ask", "q").await;
    assert_eq!(
        structured(&first)["kind"],
        "synthesis",
        "{}",
        server.stderr()
    );

    let after = before.replace(&synthesize, &vote);
    let temporary = server.config_path().with_extension("toml.swp");
    std::fs::write(&temporary, &after).unwrap();
    std::fs::rename(&temporary, server.config_path()).unwrap();
    server.wait_for_stderr("reloaded plugins.toml", 1).await;
    let second = server.ask("ask", "q").await;
    assert_eq!(structured(&second)["kind"], "vote", "{}", server.stderr());
}

/// What a [`Fake`] server was asked.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    /// The path and query.
    path: String,
    authorization: Option<String>,
}

/// A registry, token service or upload host as small as a test needs: a
/// real HTTP server on `ip` (a loopback address) that records every
/// request and answers as `respond` says (given the request and its own
/// `HOST:PORT`): `(status, headers, body)`.
struct Fake {
    /// `HOST:PORT`
    host: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

type Answer = (u16, Vec<(&'static str, String)>, String);

impl Fake {
    async fn start(
        ip: &str,
        respond: impl Fn(&Seen, &str) -> Answer + Send + Sync + 'static,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let respond = std::sync::Arc::new(respond);
        let app = axum::Router::new().fallback({
            let (seen, host) = (seen.clone(), host.clone());
            move |request: axum::extract::Request| {
                let (seen, host, respond) = (seen.clone(), host.clone(), respond.clone());
                async move {
                    let asked = Seen {
                        method: request.method().to_string(),
                        path: request.uri().to_string(),
                        authorization: request
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned),
                    };
                    // Read the body (an upload) before answering, as a
                    // registry does.
                    let _ = axum::body::to_bytes(request.into_body(), 64 << 20).await;
                    seen.lock().unwrap().push(asked.clone());
                    let (status, headers, body) = respond(&asked, &host);
                    let mut response = axum::response::Response::builder().status(status);
                    for (name, value) in headers {
                        response = response.header(name, value);
                    }
                    response.body(axum::body::Body::from(body)).unwrap()
                }
            }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { host, seen, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The Authorization headers it received.
    fn authorizations(&self) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter_map(|s| s.authorization)
            .collect()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The team's token, which only its own registry may see.
const TEAM_SECRET: &str = "team-secret-5e1f0a93c7";

/// The Basic header for the user `chorus` and [`TEAM_SECRET`].
fn team_basic() -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("chorus:{TEAM_SECRET}"))
    )
}

/// `chorus ARGS` with the plugin cache in `cache`, the registry variables
/// as `env` sets them and no others (nothing inherited from the machine).
async fn chorus_with_registry_env(
    args: &[&str],
    cache: &Path,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let mut command = command(args);
    command
        .env("XDG_CACHE_HOME", cache)
        .env_remove("CHORUS_REGISTRY_TOKEN")
        .env_remove("CHORUS_REGISTRY_HOST")
        .env_remove("CHORUS_REGISTRY_USER")
        .env_remove("REGISTRY_AUTH_FILE")
        .env_remove("DOCKER_CONFIG")
        .envs(env.iter().copied());
    output_of(command).await
}

/// A registry whose token service is itself (`/token`): it hands out
/// `Bearer anonymous` without credentials and `Bearer team` with the
/// team's, and serves nothing (404) to the team, 401 to anyone else.
fn own_realm_registry(asked: &Seen, host: &str) -> Answer {
    if asked.path.starts_with("/token") {
        let token = if asked.authorization.as_deref() == Some(team_basic().as_str()) {
            "team"
        } else {
            "anonymous"
        };
        return (200, vec![], format!(r#"{{"token": "{token}"}}"#));
    }
    if asked.authorization.as_deref() == Some("Bearer team") {
        return (
            404,
            vec![],
            r#"{"errors":[{"code":"MANIFEST_UNKNOWN"}]}"#.into(),
        );
    }
    (
        401,
        vec![(
            "www-authenticate",
            format!(r#"Bearer realm="http://{host}/token",service="{host}""#),
        )],
        r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#.into(),
    )
}

/// `CHORUS_REGISTRY_TOKEN` is the team's: a community registry (on
/// another loopback address) that asks for credentials never gets it, and
/// the refusal says why; the registry `CHORUS_REGISTRY_HOST` names does.
#[tokio::test(flavor = "multi_thread")]
async fn the_registry_token_goes_only_to_the_registry_it_names() {
    let community = Fake::start("127.0.0.2", own_realm_registry).await;
    let cache = tempfile::tempdir().unwrap();
    let judge = format!("oci://{}/community/judge:1", community.host);

    // Named for the team's registry: not sent to the community's.
    let (code, _, stderr) = chorus_with_registry_env(
        &["plugin", "pull", &judge],
        cache.path(),
        &[
            ("CHORUS_REGISTRY_TOKEN", TEAM_SECRET),
            ("CHORUS_REGISTRY_HOST", "127.0.0.1:5000"),
        ],
    )
    .await;
    assert!(
        !community.authorizations().contains(&team_basic()),
        "the community registry was sent the team's token: {:?}",
        community.seen()
    );
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!(
            "CHORUS_REGISTRY_TOKEN is for registry 127.0.0.1:5000; not sent to {}",
            community.host
        )),
        "{stderr}"
    );

    // Named for no registry: sent to none, saying how to name one.
    let (code, _, stderr) = chorus_with_registry_env(
        &["plugin", "pull", &judge],
        cache.path(),
        &[("CHORUS_REGISTRY_TOKEN", TEAM_SECRET)],
    )
    .await;
    assert!(!community.authorizations().contains(&team_basic()));
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!(
            "CHORUS_REGISTRY_TOKEN names no registry, so it is not sent to {}",
            community.host
        )),
        "{stderr}"
    );

    // Named for this registry: its own token service gets it.
    let (_, _, stderr) = chorus_with_registry_env(
        &["plugin", "pull", &judge],
        cache.path(),
        &[
            ("CHORUS_REGISTRY_TOKEN", TEAM_SECRET),
            ("CHORUS_REGISTRY_HOST", &community.host),
        ],
    )
    .await;
    assert!(
        community.authorizations().contains(&team_basic()),
        "{:?}\n{stderr}",
        community.seen()
    );
    assert!(stderr.contains("no such manifest"), "{stderr}");
}

/// A registry on 127.0.0.1 whose token service is on another host
/// (127.0.0.2): the registry's own credentials go there only when
/// `registry_token_realms` lists it.
#[tokio::test(flavor = "multi_thread")]
async fn credentials_go_to_a_token_service_on_another_host_only_when_listed() {
    let realm = Fake::start("127.0.0.2", |asked, _| {
        let token = if asked.authorization.as_deref() == Some(team_basic().as_str()) {
            "team"
        } else {
            "anonymous"
        };
        (200, vec![], format!(r#"{{"token": "{token}"}}"#))
    })
    .await;
    let realm_host = realm.host.clone();
    let registry = Fake::start("127.0.0.1", move |asked, host| {
        if asked.authorization.as_deref() == Some("Bearer team") {
            return (404, vec![], String::new());
        }
        (
            401,
            vec![(
                "www-authenticate",
                format!(r#"Bearer realm="http://{realm_host}/token",service="{host}""#),
            )],
            String::new(),
        )
    })
    .await;
    let cache = tempfile::tempdir().unwrap();
    let judge = format!("oci://{}/team/judge:1", registry.host);
    let env = [
        ("CHORUS_REGISTRY_TOKEN", TEAM_SECRET),
        ("CHORUS_REGISTRY_HOST", registry.host.as_str()),
    ];

    let (code, _, stderr) =
        chorus_with_registry_env(&["plugin", "pull", &judge], cache.path(), &env).await;
    assert!(
        realm.authorizations().is_empty(),
        "a token service on another host was sent credentials: {:?}",
        realm.seen()
    );
    assert_eq!(realm.seen().len(), 1, "an anonymous token was asked for");
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!(
            "not sent to its token service at {}, another host: list it in `registry_token_realms`",
            realm.host
        )),
        "{stderr}"
    );

    // The operator lists it: it gets them.
    let mock = Mock::start().await;
    let listed = write_config(&format!(
        "registry_token_realms = [\"{}\"]\n{}",
        realm.host,
        config(&mock, "")
    ));
    let (_, _, stderr) = chorus_with_registry_env(
        &[
            "plugin",
            "pull",
            "--config",
            listed.path.to_str().unwrap(),
            &judge,
        ],
        cache.path(),
        &env,
    )
    .await;
    assert_eq!(realm.authorizations(), vec![team_basic()], "{stderr}");
    assert!(stderr.contains("no such manifest"), "{stderr}");
}

/// `plugin push` to a registry that answers the upload with a `Location`
/// on another host: the upload goes there, its credentials do not.
#[tokio::test(flavor = "multi_thread")]
async fn a_push_sends_credentials_only_to_the_registrys_own_origin() {
    let elsewhere = Fake::start("127.0.0.2", |_, _| (201, vec![], String::new())).await;
    let upload = format!("http://{}/upload/1?state=x", elsewhere.host);
    let registry = Fake::start("127.0.0.1", move |asked, _| {
        if asked.authorization.as_deref() != Some(team_basic().as_str()) {
            return (
                401,
                vec![("www-authenticate", r#"Basic realm="registry""#.into())],
                String::new(),
            );
        }
        match (asked.method.as_str(), asked.path.as_str()) {
            ("HEAD", _) => (404, vec![], String::new()),
            ("POST", path) if path.contains("/blobs/uploads/") => {
                (202, vec![("location", upload.clone())], String::new())
            }
            ("PUT", path) if path.contains("/manifests/") => (201, vec![], String::new()),
            _ => (400, vec![], "unexpected".into()),
        }
    })
    .await;
    let cache = tempfile::tempdir().unwrap();
    let (code, _, stderr) = chorus_with_registry_env(
        &[
            "plugin",
            "push",
            chaos_wasm().to_str().unwrap(),
            &format!("oci://{}/team/chaos:1", registry.host),
        ],
        cache.path(),
        &[
            ("CHORUS_REGISTRY_TOKEN", TEAM_SECRET),
            ("CHORUS_REGISTRY_HOST", registry.host.as_str()),
        ],
    )
    .await;
    let uploads = elsewhere.seen();
    assert_eq!(
        uploads.len(),
        2,
        "the config and the component: {uploads:?}"
    );
    assert!(
        uploads.iter().all(|u| u.authorization.is_none()),
        "the upload host was sent credentials: {uploads:?}"
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "are not sent to http://{}, which it named",
            elsewhere.host
        )),
        "{stderr}"
    );
    assert!(
        registry.authorizations().contains(&team_basic()),
        "the registry itself still gets them"
    );
}
