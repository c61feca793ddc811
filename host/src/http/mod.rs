//! The HTTP front door: `chorus serve --http ADDR` and `chorus ui`. It
//! listens, bounds connections, drains on SIGINT/SIGTERM, and serves what
//! belongs to no single door — `/health`, `/metrics`, the OAuth discovery
//! documents, plain refusals — and mounts the doors it is handed, each
//! behind the same Host, Origin and token rules ([`check`]): MCP at
//! [`MCP_PATH`] (`mcp::http`), the run viewer (`web`), OpenAI's API
//! (`openai`). It sits below them: they use its [`Access`], and the command
//! (`cli::serve`) hands their routes to [`serve`] as [`Door`]s.
//!
//! - [`access`]: the Host and Origin checks and the bearer token, and the
//!   refusals in the form the client reads;
//! - [`challenge`]: the `WWW-Authenticate` of a 401;
//! - [`clients`]: which client a token names;
//! - [`discovery`]: the OAuth discovery documents clients ask for after a
//!   401, saying chorus takes a static bearer token;
//! - [`listen`]: accepting connections, with a header timeout and limits;
//! - [`drain`]: refusing new requests while runs finish, at a stop;
//! - [`setup`]: the listen address and what it takes to listen there (a
//!   token for anything but loopback);
//! - here: the routes around the doors, and the stop — every run ends or
//!   is stopped, each door closes, the listener closes, the process exits.

mod access;
mod challenge;
mod clients;
mod discovery;
mod drain;
mod listen;
mod setup;
mod shape;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use tokio_util::sync::CancellationToken;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use crate::app::Chorus;
use crate::client::Client;
use crate::notice::notice;
pub use access::{Access, Hosts, Origins, check, plain, refuse};
pub use clients::{Clients, Token};
pub use listen::Proven;
pub use setup::{Options, SetupError, metrics_hosts};
pub use shape::{MAX_VALUES, values_at_most};

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";
/// How long open connections get to finish after a shutdown signal, once
/// every run has been stopped.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What a door does at a stop, once the runs have ended (or been
/// stopped) and before the listener closes: end its open streams.
pub type Closing = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// A door mounted on the front door: its routes (each behind [`check`]
/// itself), and what it does at a stop.
pub struct Door {
    pub routes: Router,
    pub closing: Option<Closing>,
}

impl Door {
    /// A door with nothing to close (its requests end with the runs).
    pub fn routes(routes: Router) -> Self {
        Self {
            routes,
            closing: None,
        }
    }
}

/// Serves `doors` until SIGINT or SIGTERM. The address is printed on
/// stderr once the listener is bound (port 0 picks a free port).
pub async fn serve(chorus: Arc<Chorus>, options: Options, doors: Vec<Door>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let local = listener.local_addr()?;
    let stop = CancellationToken::new();
    let (signalled, drain) = (CancellationToken::new(), drain::Drain::default());
    let mut mounted = Router::new();
    let mut closings = Vec::new();
    for door in doors {
        mounted = mounted.merge(door.routes);
        closings.extend(door.closing);
    }
    let app = router(&chorus, &options, mounted).layer(axum::middleware::from_fn_with_state(
        drain.clone(),
        drain::refuse,
    ));
    // Listening for SIGTERM before saying where it serves: a supervisor
    // that stops it as soon as it is up gets a graceful stop.
    tokio::spawn(crate::signal::on_signal(signalled.clone()));
    notice!("chorus: serving MCP at http://{local}{MCP_PATH}");
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
        for closing in closings {
            closing().await;
        }
        stop.cancel();
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

/// Serves `app` (the run viewer of `chorus ui`, no MCP) on `listener` with
/// the same connection bounds as `serve --http`, until SIGINT or SIGTERM.
pub async fn serve_pages(listener: tokio::net::TcpListener, app: Router, chorus: &Chorus) {
    let stop = CancellationToken::new();
    tokio::spawn(crate::signal::on_signal(stop.clone()));
    let bounds = listen::Bounds::new(
        &chorus.runner().loaded.config.http,
        listen::descriptor_limit(),
    );
    listen::serve(listener, app, bounds, stop).await;
}

fn router(chorus: &Chorus, options: &Options, doors: Router) -> Router {
    let metrics = chorus.metrics.clone();
    let access = options.access();
    let protected = Router::new()
        .route(
            "/metrics",
            get(move |Extension(client): Extension<Arc<Client>>| {
                let metrics = metrics.clone();
                async move {
                    // Every client's name, runs and spend are labels here.
                    if !client.admin {
                        return plain(
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
        .layer(axum::middleware::from_fn_with_state(
            access.clone(),
            access::check,
        ));
    let app = Router::new()
        .route("/health", get(health))
        .merge(discovery::routes(&access))
        .merge(protected)
        .merge(doors)
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
    plain(
        StatusCode::NOT_FOUND,
        format!("chorus: nothing here; MCP is served at {MCP_PATH}, the run viewer at /.\n"),
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
