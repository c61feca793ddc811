//! `chorus serve --http ADDR`: the same MCP [`Server`] as on stdio, over
//! Streamable HTTP at `/mcp` — rmcp's service mounted in axum, stateless
//! (as MCP 2026-07-28 prefers): every POST is served on its own, so any
//! instance behind a load balancer can answer any request. Around it:
//!
//! - [`access`]: the Host and Origin checks and the bearer token;
//! - [`discovery`]: the OAuth discovery documents clients ask for after a
//!   401, saying chorus takes a static bearer token;
//! - [`clients`]: which client a token names;
//! - [`cancel`]: `notifications/cancelled` from pre-2026 clients;
//! - [`listen`]: accepting connections, with a header timeout and limits;
//! - [`message`]: what a POST carries, and errors for what is no message;
//! - [`setup`]: the listen address and what it takes to listen there (a
//!   token for anything but loopback);
//! - here: the routes, and the shutdown on SIGINT/SIGTERM — every run
//!   stops, the listener closes, the process exits.

use crate::notice::notice;
mod access;
mod cancel;
mod clients;
mod discovery;
mod drain;
mod listen;
mod message;
mod setup;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::Server;
use super::transport::Session;
use crate::app::Chorus;
use crate::client::Client;
pub use access::{Access, Hosts, Origins, Token, check};
pub use clients::Clients;
pub use listen::Proven;
pub use setup::{Options, SetupError, metrics_hosts};

/// The path MCP is served at.
pub const PATH: &str = "/mcp";
/// How long open connections get to finish after a shutdown signal, once
/// every run has been stopped.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// The smallest bound on a request body; a larger `max_prompt_bytes`
/// raises it (a prompt grows when escaped as JSON).
const MIN_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// Serves until SIGINT or SIGTERM, `pages` (the run viewer, OpenAI's API:
/// the doors mounted beside MCP, each behind `access` itself) beside MCP.
/// The address is printed on stderr once the listener is bound (port 0
/// picks a free port).
pub async fn serve(chorus: Arc<Chorus>, options: Options, pages: Router) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let local = listener.local_addr()?;
    let max_body =
        (chorus.runner().loaded.config.limits.max_prompt_bytes * 4).max(MIN_REQUEST_BYTES);
    let session = Session::new();
    let server = Server::new(chorus.clone(), session.clone());
    let stop = CancellationToken::new();
    let (signalled, drain) = (CancellationToken::new(), drain::Drain::default());
    let app = router(server.clone(), &options, max_body, pages).layer(
        axum::middleware::from_fn_with_state(drain.clone(), drain::refuse),
    );
    // Listening for SIGTERM before saying where it serves: a supervisor
    // that stops it as soon as it is up gets a graceful stop.
    tokio::spawn(super::signal::on_signal(signalled.clone()));
    notice!("chorus: serving MCP at http://{local}{PATH}");
    notice!("chorus: the run viewer is at http://{local}/");
    notice!("chorus: {}", options.describe());
    let drain_for = Duration::from_secs(chorus.runner().loaded.config.http.drain_seconds);

    let bounds = listen::Bounds::new(
        &chorus.runner().loaded.config.http,
        listen::descriptor_limit(),
    );
    let serving = listen::serve(listener, app, bounds, stop.clone());
    let stopped = async {
        signalled.cancelled().await;
        drain.begin();
        drain::runs_end(&chorus, drain_for).await;
        // Each call and task watches the session: every upstream request
        // still open is dropped now, and every open stream ends with its call.
        session.end("shutting down");
        server.settle(SHUTDOWN_GRACE).await;
        stop.cancel();
        server.shutdown();
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        () = serving => {}
        () = stopped => tracing::warn!("connections still open {SHUTDOWN_GRACE:?} after shutdown began; closing them"),
    }
    chorus.store.close().await;
    notice!("chorus: stopped");
    Ok(())
}

/// Serves `app` (the run viewer of `chorus ui`) on `listener` with the
/// same connection bounds as `serve --http`, until SIGINT or SIGTERM.
pub async fn serve_pages(listener: tokio::net::TcpListener, app: Router, chorus: &Chorus) {
    let stop = CancellationToken::new();
    tokio::spawn(super::signal::on_signal(stop.clone()));
    let bounds = listen::Bounds::new(
        &chorus.runner().loaded.config.http,
        listen::descriptor_limit(),
    );
    listen::serve(listener, app, bounds, stop).await;
}

fn router(server: Server, options: &Options, max_body: usize, pages: Router) -> Router {
    let chorus = server.chorus().clone();
    let metrics = chorus.metrics.clone();
    let gate = server.chorus().gate.clone();
    // rmcp gets no shutdown token of its own: ending the session stops
    // every call, whose response then ends its stream the ordinary way.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_max_request_body_bytes(max_body)
        // Checked by `access`, with messages that say what to do.
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let mcp = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let in_flight = Arc::new(cancel::InFlight::new(max_body));
    let access = options.access();
    let protected = Router::new()
        .route(
            "/metrics",
            get(move |Extension(client): Extension<Arc<Client>>| {
                let metrics = metrics.clone();
                async move {
                    // Every client's name, runs and spend are labels here.
                    if !client.admin {
                        return access::plain(
                            StatusCode::FORBIDDEN,
                            format!(
                                "chorus: /metrics shows every client's runs and spend: only an admin client may read it, and `{}` is not one.\n",
                                client.name
                            ),
                        );
                    }
                    (
                        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
                        metrics.render(),
                    )
                        .into_response()
                }
            }),
        )
        .route_service(PATH, mcp)
        .layer(axum::middleware::from_fn_with_state(
            gate,
            clients::per_minute,
        ))
        .layer(axum::middleware::from_fn_with_state(
            in_flight,
            cancel::track,
        ))
        .layer(axum::middleware::from_fn_with_state(
            access.clone(),
            access::check,
        ));
    let app = Router::new()
        .route("/health", get(health))
        .merge(discovery::routes(&access))
        .merge(protected)
        .merge(pages)
        .fallback(not_found);
    match cors(options) {
        Some(cors) => app.layer(cors),
        None => app,
    }
}

/// For load balancers and probes: no token needed, nothing revealed but
/// that the process is up.
async fn health() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        format!(
            "{{\"status\":\"ok\",\"version\":\"{}\"}}\n",
            env!("CARGO_PKG_VERSION")
        ),
    )
        .into_response()
}

async fn not_found() -> Response {
    access::plain(
        StatusCode::NOT_FOUND,
        format!("chorus: nothing here; MCP is served at {PATH}, the run viewer at /.\n"),
    )
}

/// CORS for the browser origins allowed with `--allow-origin`, so a web
/// app there can make its preflight and read the answer. None without any.
fn cors(options: &Options) -> Option<CorsLayer> {
    let origins: Vec<HeaderValue> = options
        .origins()
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::POST, Method::GET, Method::DELETE])
            // MCP's headers include `Mcp-Param-*`, named by each tool.
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers([
                HeaderName::from_static("mcp-session-id"),
                header::WWW_AUTHENTICATE,
            ])
            .max_age(Duration::from_secs(600)),
    )
}
