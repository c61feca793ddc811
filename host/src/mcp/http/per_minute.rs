//! A client's `max_runs_per_minute` on `/mcp`: a `tools/call` past it is
//! answered 429 with `Retry-After` before MCP reads the call, as a
//! JSON-RPC error an MCP client shows.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::message::error_response;
use crate::app::AUDIT;
use crate::budget::Gate;
use crate::client::Client;

/// A `tools/call` request (its id as JSON text), marked by `cancel::track`
/// that reads each message's envelope.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub id: String,
}

/// JSON-RPC's range for errors a server defines: the per-minute limit.
const RATE_LIMITED: i64 = -32029;

/// The middleware: a `tools/call` past its client's `max_runs_per_minute`
/// is answered 429 with `Retry-After`, before MCP reads it. The count is
/// the gate's (`budget::Gate`): the run this call becomes is not counted
/// twice, and every other door is held to the same limit at admission.
pub async fn per_minute(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let asked = match (
        request.extensions().get::<ToolCall>(),
        request.extensions().get::<Arc<Client>>(),
    ) {
        (Some(call), Some(client)) => Some((call.id.clone(), client.clone())),
        _ => None,
    };
    let over = match asked {
        Some((id, client)) => gate
            .per_minute_early(&client)
            .await
            .err()
            .map(|over| (id, over)),
        None => None,
    };
    let Some((id, over)) = over else {
        return next.run(request).await;
    };
    let seconds = over.retry_after_s();
    tracing::info!(target: AUDIT, client = %over.client, reason = "max_runs_per_minute", retry_after_s = seconds, "refused a run");
    let mut response = error_response(
        StatusCode::TOO_MANY_REQUESTS,
        Some(&id),
        RATE_LIMITED,
        &over.to_string(),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}
