//! `POST /v1/feedback`: a rating of a run, for programs that call chorus
//! as a model — `{"run_id" | "response_id", "metric", "value", "comment"}`,
//! where an id this endpoint gave (`chatcmpl-…`, `resp_…`) names its run.
//! Through the one gate every door uses (`Chorus::give_feedback`): the
//! client's own runs only, metrics the configuration declares.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::errors::ApiError;
use super::{Shared, json_response};
use crate::app::feedback::{FeedbackError, Rating};
use crate::client::Client;
use crate::store::{Given, MAX_COMMENT_BYTES};

/// The most a rating's body may be: its comment and a few fields.
const MAX_BODY_BYTES: usize = MAX_COMMENT_BYTES * 4 + 4096;

pub async fn give(
    State(shared): State<Arc<Shared>>,
    Extension(client): Extension<Arc<Client>>,
    request: Request,
) -> Response {
    match rated(&shared, &client, request).await {
        Ok(answer) => json_response(&answer),
        Err(error) => error.into_response(),
    }
}

async fn rated(shared: &Shared, client: &Client, request: Request) -> Result<Value, ApiError> {
    let bytes = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                format!("A rating's body is at most {MAX_BODY_BYTES} bytes."),
            )
        })?;
    let body: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid("", format!("The body is not a JSON object: {e}.")))?;
    let rating = rating(body)?;
    let recorded =
        shared
            .chorus
            .give_feedback(client, rating)
            .await
            .map_err(|error| match error {
                FeedbackError::Invalid(message) => ApiError::invalid("", message),
                error @ (FeedbackError::UnknownRun(_) | FeedbackError::Ambiguous { .. }) => {
                    let mut refused = ApiError::new(
                        StatusCode::NOT_FOUND,
                        "invalid_request_error",
                        error.to_string(),
                    );
                    refused.param = Some("run_id".to_owned());
                    refused
                }
                FeedbackError::TooMany { retry_after } => {
                    let message = FeedbackError::TooMany { retry_after }.to_string();
                    ApiError {
                        code: Some("rate_limit_exceeded"),
                        retry_after: Some(retry_after.as_secs() + 1),
                        ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "requests", message)
                    }
                }
                // Where the store lies is for the server's log, not a tenant.
                FeedbackError::Store(error) => {
                    tracing::warn!("feedback not kept: {error}");
                    ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "server_error",
                        "The run store could not keep the rating: try again.",
                    )
                }
            })?;
    let f = &recorded.feedback;
    Ok(json!({
        "object": "feedback",
        "run_id": f.run_id,
        "metric": f.metric,
        "value": f.value,
        "replaced": matches!(recorded.given, Given::Replaced { .. }),
        "created": f.at / 1000,
    }))
}

/// The rating a body gives, or a 400 naming what is wrong.
fn rating(mut body: Map<String, Value>) -> Result<Rating, ApiError> {
    let mut text = |name: &str| match body.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ApiError::invalid(
            name,
            format!("`{name}` must be a string, not {other}."),
        )),
    };
    let run = match (text("run_id")?, text("response_id")?) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "run_id",
                "Give `run_id` or `response_id`, not both.",
            ));
        }
        (Some(id), None) | (None, Some(id)) => id,
        (None, None) => {
            return Err(ApiError::invalid(
                "run_id",
                "Missing `run_id` (or `response_id`): the run to rate, as `x-chorus-run-id` or the response's `id` gave it.",
            ));
        }
    };
    let metric = text("metric")?
        .ok_or_else(|| ApiError::invalid("metric", "Missing `metric`: what is rated."))?;
    let comment = text("comment")?;
    let value = body
        .remove("value")
        .ok_or_else(|| ApiError::invalid("value", "Missing `value`: the rating."))?;
    if let Some(unknown) = body.keys().next() {
        return Err(ApiError::invalid(
            unknown,
            format!(
                "Unknown field `{unknown}`: a rating takes `run_id` (or `response_id`), `metric`, `value` and `comment`."
            ),
        ));
    }
    Ok(Rating {
        run,
        metric,
        value,
        comment,
    })
}
