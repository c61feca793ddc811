//! What one POST carries, read once and cheaply before rmcp parses it:
//! the JSON-RPC envelope's `id`, `method` and (for a cancellation) its
//! `params.requestId`; everything else is skipped unallocated
//! ([`IgnoredAny`]), so a 200 MiB prompt costs one pass and no copy.
//!
//! A body that is not one JSON-RPC message is answered here, the way
//! JSON-RPC says — HTTP 400 with a JSON error: `-32700` for text that is not
//! JSON, `-32600` for a batch or an object that is no message — rather than
//! with rmcp's `415` and a line of plain text.

use std::borrow::Cow;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

/// JSON-RPC: the text is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;

/// What a POST carries, as far as the HTTP layer cares.
#[derive(Debug)]
pub enum Message {
    /// A request, with its id as JSON text (so `1` and `"1"` differ, as
    /// they do on the wire); `tool_call` when it is `tools/call` (which
    /// starts a run, and counts against a client's runs per minute).
    Request { id: String, tool_call: bool },
    /// `notifications/cancelled` naming a request.
    Cancelled { request_id: String },
    /// Any other notification, a response, or an error.
    Other,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    params: Option<Params>,
    #[serde(default)]
    result: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// Only a cancellation's `requestId` is kept; other members are skipped.
#[derive(Deserialize)]
struct Params {
    #[serde(rename = "requestId", default)]
    request_id: Option<Value>,
}

/// Why a body is no JSON-RPC message: the code and what to do.
#[derive(Debug, PartialEq)]
pub struct Invalid {
    pub code: i64,
    pub message: String,
}

impl Invalid {
    fn parse(error: &serde_json::Error) -> Self {
        Self {
            code: PARSE_ERROR,
            message: format!(
                "the request body is not JSON ({error}); send one JSON-RPC message per POST"
            ),
        }
    }

    fn request(message: impl Into<String>) -> Self {
        Self {
            code: INVALID_REQUEST,
            message: message.into(),
        }
    }

    /// HTTP 400 with the JSON-RPC error (a null id: no request was read).
    pub fn into_response(self) -> Response {
        error_response(StatusCode::BAD_REQUEST, None, self.code, &self.message)
    }
}

/// Reads the envelope of `body`.
pub fn classify(body: &[u8]) -> Result<Message, Invalid> {
    let start = body.iter().position(|b| !b.is_ascii_whitespace());
    if start.is_some_and(|at| body[at] == b'[') {
        // Still tell broken JSON from a batch.
        serde_json::from_slice::<IgnoredAny>(body).map_err(|e| Invalid::parse(&e))?;
        return Err(Invalid::request(
            "batches are not supported (MCP removed them in 2025-06-18): send one JSON-RPC message per POST",
        ));
    }
    let envelope: Envelope = serde_json::from_slice(body).map_err(|error| {
        if error.is_data() {
            Invalid::request(format!(
                "the request body is not a JSON-RPC message ({error}); expected an object with \"jsonrpc\": \"2.0\" and a \"method\""
            ))
        } else {
            Invalid::parse(&error)
        }
    })?;
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(Invalid::request(
            "the message has no \"jsonrpc\": \"2.0\"; send a JSON-RPC 2.0 message",
        ));
    }
    let id = envelope.id.filter(|id| !id.is_null());
    match (envelope.method.as_deref(), id) {
        (Some(method), Some(id)) => Ok(Message::Request {
            id: id.to_string(),
            tool_call: method == "tools/call",
        }),
        (Some("notifications/cancelled"), None) => Ok(envelope
            .params
            .and_then(|params| params.request_id)
            .filter(|id| !id.is_null())
            .map_or(Message::Other, |id| Message::Cancelled {
                request_id: id.to_string(),
            })),
        (Some(_), None) => Ok(Message::Other),
        (None, _) if envelope.result.is_some() || envelope.error.is_some() => Ok(Message::Other),
        (None, _) => Err(Invalid::request(
            "the message has no \"method\" (nor a \"result\" or \"error\"): send a JSON-RPC request or notification",
        )),
    }
}

/// A JSON-RPC error response with `status`; `id` is the request's id as
/// JSON text, when known.
pub fn error_response(status: StatusCode, id: Option<&str>, code: i64, message: &str) -> Response {
    let id = id
        .and_then(|id| serde_json::from_str::<Value>(id).ok())
        .unwrap_or(Value::Null);
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        let request =
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":[1,{"y":2}]}}"#;
        assert!(
            matches!(classify(request), Ok(Message::Request { id, tool_call: true }) if id == "7")
        );
        let string_id = br#"{"jsonrpc":"2.0","id":"7","method":"ping"}"#;
        assert!(matches!(classify(string_id), Ok(Message::Request { id, .. }) if id == "\"7\""));
        let cancel = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"x"}}"#;
        assert!(
            matches!(classify(cancel), Ok(Message::Cancelled { request_id }) if request_id == "7")
        );
        for other in [
            &br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#,
        ] {
            assert!(matches!(classify(other), Ok(Message::Other)), "{other:?}");
        }
    }

    #[test]
    fn what_is_no_message_gets_the_json_rpc_code_that_says_why() {
        let code = |body: &[u8]| classify(body).unwrap_err().code;
        assert_eq!(code(b"garbage"), PARSE_ERROR);
        assert_eq!(code(br#"{"jsonrpc":"2.0","#), PARSE_ERROR);
        assert_eq!(code(b""), PARSE_ERROR);
        assert_eq!(code(b"[1, 2"), PARSE_ERROR);
        assert_eq!(
            code(br#" [{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            INVALID_REQUEST
        );
        assert_eq!(code(b"{}"), INVALID_REQUEST);
        assert_eq!(code(b"42"), INVALID_REQUEST);
        assert_eq!(code(br#"{"id":1,"method":"ping"}"#), INVALID_REQUEST);
        assert_eq!(code(br#"{"jsonrpc":"2.0","method":7}"#), INVALID_REQUEST);
        let batch = classify(b"[]").unwrap_err();
        assert!(
            batch.message.contains("one JSON-RPC message per POST"),
            "{batch:?}"
        );
    }
}
