//! The MCP server (rmcp), on stdio or over Streamable HTTP: one tool per
//! pipeline, runs answered in the call with progress or as tasks,
//! cancellation that drops a run's in-flight requests, and recent runs as
//! `chorus://runs/{id}` resources. Nothing here writes to stdout but
//! JSON-RPC.
//!
//! - [`transport`]: stdio framing, malformed input, request ids, the end of
//!   the session;
//! - [`http`]: the same server over Streamable HTTP, a door of the HTTP
//!   front door (`crate::http`, which checks access);
//! - [`server`]: the handler; [`tools`], [`resources`], [`tasks`] and
//!   [`progress`] what it serves; [`logging`] the log messages it sends
//!   (`logging/setLevel`); [`changes`] tells clients when a reload
//!   changed the tools; [`app`] is the run viewer for clients that render
//!   MCP Apps.

mod app;
mod attachments;
mod changes;
pub mod http;
mod logging;
mod progress;
mod resources;
mod server;
mod tasks;
mod tools;
pub mod transport;

use std::sync::Arc;

use crate::app::Chorus;
pub use server::Server;
use transport::{LineTransport, Session};

/// Serves MCP on stdin/stdout until the client goes away (closes stdin, or
/// closes our stdout) or chorus is told to stop (SIGTERM, Ctrl-C); every
/// run still going then is stopped at once and recorded as cancelled, the
/// store written out and this instance's lease given back — a client that
/// sends SIGTERM is about to send SIGKILL, so nothing waits for runs.
///
/// The session is served directly: `initialize` is an ordinary request,
/// answered by [`Server`] with rmcp's negotiation, so a notification (or
/// anything else) arriving before it does not end the session.
pub async fn serve(chorus: Arc<Chorus>) -> anyhow::Result<()> {
    let session = Session::new();
    transport::watch_stdout(session.clone());
    let (stdin, stdout) = transport::stdio::streams();
    let transport = LineTransport::new(stdin, stdout, session.clone());
    let server = Server::new(chorus.clone(), session.clone());
    let signalled = tokio_util::sync::CancellationToken::new();
    tokio::spawn(crate::signal::on_signal(signalled.clone()));
    // The transport ends rmcp's loop as soon as the session ends; every
    // call and task watches the session too, so rmcp's drain of in-flight
    // responses finds them already stopped.
    let running = rmcp::service::serve_directly(server.clone(), transport, None);
    server.announce_tool_changes(running.peer().clone());
    tokio::select! {
        reason = running.waiting() => {
            let reason = reason?;
            tracing::debug!("MCP session ended: {reason:?}");
        }
        () = signalled.cancelled() => {}
    }
    session.end("chorus was stopped");
    server.shutdown();
    // Each stopped run's end reaches the store before the process ends:
    // the calls see the session end, drop their runs (whose recorders hand
    // the store their ends), and tasks write theirs.
    let left = chorus.runs_end(STOP_GRACE).await;
    if left > 0 {
        tracing::warn!(
            "{left} runs were still stopping after {STOP_GRACE:?}; they may read as interrupted"
        );
    }
    server.settle(STOP_GRACE).await;
    chorus.store.close().await;
    Ok(())
}

/// How long the end of a stdio session waits for its runs' ends to be
/// recorded.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(3);
