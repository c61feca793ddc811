//! MCP over Streamable HTTP: the same [`Server`] as on stdio, as a door of
//! the HTTP front door (`crate::http`) at its `MCP_PATH` — rmcp's service
//! mounted in axum, stateless (as MCP 2026-07-28 prefers): every POST is
//! served on its own, so any instance behind a load balancer can answer
//! any request. Around it, behind the front door's access check:
//!
//! - [`cancel`]: `notifications/cancelled` from pre-2026 clients;
//! - [`message`]: what a POST carries, and errors for what is no message;
//! - [`per_minute`]: a client's `max_runs_per_minute`, before MCP reads
//!   the call.

mod cancel;
mod message;
mod per_minute;

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::Server;
use super::transport::Session;
use crate::app::Chorus;
use crate::http::{Access, Door, MCP_PATH, SHUTDOWN_GRACE};

/// MCP at `MCP_PATH`, behind `access`. At a stop, its session ends: each
/// call and task watches it, so every upstream request still open is
/// dropped and every open stream ends with its call; then its tasks get
/// a grace to settle before they are stopped.
pub fn door(chorus: Arc<Chorus>, access: Arc<Access>) -> Door {
    let max_body = chorus.runner().loaded.config.limits.max_request_bytes();
    let session = Session::new();
    let server = Server::new(chorus.clone(), session.clone());
    let gate = chorus.gate.clone();
    let service = {
        let server = server.clone();
        // rmcp gets no shutdown token of its own: ending the session stops
        // every call, whose response then ends its stream the ordinary way.
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_max_request_body_bytes(max_body)
            // Checked by `access`, with messages that say what to do.
            .disable_allowed_hosts()
            .disable_allowed_origins();
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        )
    };
    let in_flight = Arc::new(cancel::InFlight::new(max_body));
    let routes = Router::new()
        .route_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(
            gate,
            per_minute::per_minute,
        ))
        .layer(axum::middleware::from_fn_with_state(
            in_flight,
            cancel::track,
        ))
        .layer(axum::middleware::from_fn_with_state(
            access,
            crate::http::check,
        ));
    Door {
        routes,
        closing: Some(Box::new(move || {
            Box::pin(async move {
                session.end("shutting down");
                server.settle(SHUTDOWN_GRACE).await;
                server.shutdown();
            })
        })),
    }
}
