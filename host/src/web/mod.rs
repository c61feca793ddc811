//! The run viewer: the run history as web pages, served by `chorus serve
//! --http` at `/` beside MCP, and by `chorus ui` on its own. Server-made
//! HTML (maud) with a little embedded script; readable with script off.
//!
//! - [`auth`]: who may see it (Host/Origin rules, token, session, CSRF),
//!   and as which client;
//! - [`list`]: the runs, newest first, filtered and paged;
//! - [`run`]: one run — question, answer, each member's answer, analysis,
//!   timeline, notes, links — and its JSON export;
//! - [`actions`]: re-synthesis and sign-in, the POSTs;
//! - [`live`]: a run in flight, as Server-Sent Events;
//! - [`timeline`]: the SVG of a run's calls;
//! - [`experiments`]: where each experiment stands, with its plots (an
//!   admin's page);
//! - [`markdown`]: answers as sanitized HTML;
//! - [`layout`]: the page around each, the security headers, the assets.
//!
//! It reads runs through `Chorus` (the store's read API), only those the
//! signed-in client may see (`app::visible`, the rule MCP applies), and
//! starts re-syntheses through it for that client: the pipeline's own code,
//! recorded as any run.

mod actions;
mod auth;
mod experiments;
mod feedback;
mod layout;
mod list;
mod live;
mod markdown;
mod run;
mod sources;
mod timeline;

use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use crate::app::Chorus;
use crate::http::Access;
pub use auth::random;

/// What every page's handler gets.
pub struct Viewer {
    chorus: Arc<Chorus>,
    guard: Arc<auth::Guard>,
}

impl Viewer {
    /// `access`: the Host/Origin rules and the clients of the server it is
    /// part of; `one_time`: `chorus ui`'s sign-in token.
    pub fn new(
        chorus: Arc<Chorus>,
        access: Arc<Access>,
        one_time: Option<&str>,
    ) -> Result<Arc<Self>, String> {
        Ok(Arc::new(Self {
            chorus,
            guard: Arc::new(auth::Guard::new(access, one_time)?),
        }))
    }
}

/// The viewer's routes, behind its guard and with its security headers.
/// No fallback: `serve --http` merges them with its own.
pub fn router(viewer: Arc<Viewer>) -> Router {
    let guard = viewer.guard.clone();
    Router::new()
        .route("/", get(list::page))
        .route("/events", get(live::list_events))
        .route("/runs/{id}", get(run::page))
        .route("/runs/{id}/export.json", get(run::export))
        .route("/runs/{id}/events", get(live::events))
        .route(
            "/runs/{id}/resynthesize",
            axum::routing::post(actions::resynthesize),
        )
        .route("/runs/{id}/feedback", axum::routing::post(feedback::give))
        .route(
            "/sign-in",
            get(actions::sign_in_page).post(actions::sign_in),
        )
        .route("/experiments", get(experiments::page_of))
        .route("/assets/{file}", get(layout::asset))
        .with_state(viewer)
        .layer(axum::middleware::from_fn_with_state(guard, auth::check))
        .layer(axum::middleware::map_response(layout::secure))
}
