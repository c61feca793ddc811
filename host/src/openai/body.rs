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
//! 3. its shape bounded before it is parsed, as on `/mcp`: at most
//!    [`MAX_VALUES`] JSON values (a body of a million `0,`s would otherwise
//!    parse into ~40 times its size);
//! 4. parsed on a blocking thread, at most [`PARSES`] at once, never on
//!    an async worker — and so is its reading into a run, which compiles
//!    the caller's JSON Schemas (`Parses::blocking`).
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
use crate::http::{MAX_VALUES, values_at_most};

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
    parses.blocking(move || request::object(&bytes)).await?
}

impl Parses {
    /// `work` on a blocking thread, once a turn among the parses is free:
    /// never on an async worker, at most [`PARSES`] at once.
    pub async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let _turn = self.0.clone().acquire_owned().await.map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "chorus is stopping.",
            )
        })?;
        tokio::task::spawn_blocking(work).await.map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                format!("chorus: reading the request body failed: {e}"),
            )
        })
    }
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
