//! Errors in the Messages API's shape: `{"type": "error", "error":
//! {"type", "message"}}`, with Anthropic's error types for the status
//! (the SDKs raise by status; Claude Code reads the type). Every refusal
//! is decided once, by the OpenAI door's rules (`openai::errors`), and
//! only reshaped here: one gate, two dialects.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};

/// The most of an error body read to reshape it: they are one object.
const MAX_ERROR_BYTES: usize = 64 * 1024;

/// Anthropic's error type for `status`.
pub fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// The middleware outside the OpenAI door's own (`openai::errors::reshape`,
/// which makes every error OpenAI's shape): each error response becomes
/// Anthropic's shape, its status and headers kept.
pub async fn reshape(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_ERROR_BYTES)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let message = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned());
    let body =
        json!({"type": "error", "error": {"type": anthropic_type(status), "message": message}});
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}
