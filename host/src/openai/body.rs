//! A request body, read no further than it is wanted. A body may be
//! megabytes, and a parsed JSON value costs tens of bytes for every value
//! in its text, so an unchecked body is the cheapest way for one tenant
//! to spend the server's memory and its async workers. In order:
//!
//! 1. the gate first ([`Chorus::admit_unread`]): a client past its runs
//!    per minute or its runs in progress is refused before a byte of its
//!    body is read;
//! 2. the bound `/mcp` has too ([`Limits::max_request_bytes`]): a
//!    `Content-Length` over it is refused unread, a body that grows past
//!    it is cut off where it crosses;
//! 3. its shape bounded before it is parsed: at most [`MAX_VALUES`] JSON
//!    values (a body of a million `0,`s would otherwise parse into ~40
//!    times its size);
//! 4. parsed on a blocking thread, at most [`PARSES`] at once, never on
//!    an async worker.
//!
//! [`Limits::max_request_bytes`]: crate::config::Limits::max_request_bytes

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{StatusCode, header};
use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use super::errors::ApiError;
use super::request;
use crate::app::Chorus;
use crate::client::Client;

/// JSON values one body may hold: a conversation of a thousand messages
/// with a few parts each is a few thousand.
pub const MAX_VALUES: usize = 1 << 16;

/// Bodies parsed at once; more wait for a turn (their bytes are already
/// bounded, their parse is what costs).
pub const PARSES: usize = 4;

/// The parses in progress, shared by every request of one endpoint.
pub struct Parses(Arc<Semaphore>);

impl Default for Parses {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(PARSES)))
    }
}

/// `request`'s body as a JSON object, for `client`, or the error that says
/// why it was not read.
pub async fn read(
    chorus: &Chorus,
    client: &Arc<Client>,
    parses: &Parses,
    request: Request,
) -> Result<Map<String, Value>, ApiError> {
    chorus
        .admit_unread(client)
        .map_err(|e| ApiError::of_run(&e))?;
    let max = chorus.runner().loaded.config.limits.max_request_bytes();
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large(max));
    }
    let bytes = axum::body::to_bytes(request.into_body(), max)
        .await
        .map_err(|_| too_large(max))?;
    let values = values_at_most(&bytes);
    if values > MAX_VALUES {
        return Err(ApiError::invalid(
            "",
            format!(
                "The request body holds more than {MAX_VALUES} JSON values; a chat request needs a few thousand at most."
            ),
        ));
    }
    let _turn = parses.0.clone().acquire_owned().await.map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "chorus is stopping.",
        )
    })?;
    tokio::task::spawn_blocking(move || request::object(&bytes))
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                format!("chorus: reading the request body failed: {e}"),
            )
        })?
}

fn too_large(max: usize) -> ApiError {
    let mut error = ApiError::invalid(
        "",
        format!(
            "The request body is over {} (4 × limits.max_prompt_bytes, at least 4 MiB, as on /mcp). Send large attachments by https URL.",
            crate::text::show_bytes(max as u64)
        ),
    );
    error.status = StatusCode::PAYLOAD_TOO_LARGE;
    error.code = Some("request_too_large");
    error
}

/// An upper bound on the JSON values `text` holds, counted without parsing
/// it: one for the first, one more for each `,` and each opening bracket
/// outside a string. Wrong JSON may count anything; the parse refuses it.
pub fn values_at_most(text: &[u8]) -> usize {
    let mut count = 1;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b',' | b'[' | b'{' => count += 1,
            _ => {}
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values `text` holds, as a parse counts them.
    fn parsed(text: &str) -> usize {
        fn count(value: &Value) -> usize {
            1 + match value {
                Value::Array(items) => items.iter().map(count).sum(),
                Value::Object(pairs) => pairs.values().map(count).sum(),
                _ => 0,
            }
        }
        count(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn the_count_is_never_below_what_a_parse_makes() {
        for text in [
            r#"{}"#,
            r#"[]"#,
            r#"0"#,
            r#"[0,1,[2,{"a":[3,4]}],"x,[{"]"#,
            r#"{"model":"ask","messages":[{"role":"user","content":"a \" , [ { b"}]}"#,
            r#"[[[[[]]]],{},{"k":{"k":{"k":null}}}]"#,
        ] {
            let bound = values_at_most(text.as_bytes());
            assert!(bound >= parsed(text), "{text}: {bound} < {}", parsed(text));
        }
    }

    #[test]
    fn commas_and_brackets_inside_strings_are_not_counted() {
        let text = r#"{"content":"[,{,[,{,\",\\"}"#;
        assert_eq!(values_at_most(text.as_bytes()), 2);
    }

    #[test]
    fn a_body_of_tiny_values_is_counted_as_many() {
        let text = format!("[{}0]", "0,".repeat(100_000));
        assert!(values_at_most(text.as_bytes()) > MAX_VALUES);
    }
}
