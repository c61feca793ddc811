//! Errors in OpenAI's shape — `{"error": {"message", "type", "code",
//! "param"}}` — with the status OpenAI's clients act on: 400 for a request
//! chorus cannot take, 401/403 from the access checks, 404
//! `model_not_found`, 429 `rate_limit_exceeded` (with `Retry-After`) or
//! `insufficient_quota`, 503 when no model answered. Every refusal of a
//! run comes from the one gate (`app`) as a typed [`RunError`]; this only
//! says it the way these clients read it.
//!
//! The access checks (`http::access`) answer in plain text or
//! JSON-RPC; [`reshape`] turns those refusals into this shape on the
//! OpenAI routes, keeping their status and headers.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::client::Refused;
use crate::pipeline::RunError;
use crate::record::{AnswerKind, RunRecord};

/// Tells the OpenAI SDKs not to retry a refusal that a retry cannot
/// change (a grant, an exhausted budget): they retry every 429 otherwise.
const SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");

/// The most of a refusal's body [`reshape`] reads: they are one line.
const MAX_REFUSAL_BYTES: usize = 16 * 1024;

/// One error, as the OpenAI API returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<String>,
    /// Seconds, for `Retry-After`.
    pub retry_after: Option<u64>,
    /// Whether a retry could change the answer (`x-should-retry`).
    pub retry: bool,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            kind,
            code: None,
            param: None,
            retry_after: None,
            retry: status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error(),
        }
    }

    /// 400: the request is not one chorus takes; `param` names the field.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        let mut error = Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message);
        error.param = (!param.is_empty()).then(|| param.to_owned());
        error
    }

    /// 400 for a feature chorus does not offer (`n` > 1, tools, logprobs).
    pub fn unsupported(param: &str, message: impl Into<String>) -> Self {
        Self {
            code: Some("unsupported_parameter"),
            ..Self::invalid(param, message)
        }
    }

    /// 404: no pipeline by that name.
    pub fn model_not_found(model: &str, available: &[String]) -> Self {
        let listed = if available.is_empty() {
            "none".to_owned()
        } else {
            available.join(", ")
        };
        Self {
            code: Some("model_not_found"),
            param: Some("model".into()),
            ..Self::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                format!(
                    "The model `{model}` does not exist: each chorus pipeline is a model, and this token may use {listed} (GET /v1/models lists them)."
                ),
            )
        }
    }

    /// A run that could not be made, or was refused by the gate.
    pub fn of_run(error: &RunError) -> Self {
        let message = format!("chorus: {error}");
        match error {
            RunError::UnknownPipeline { name, .. } => Self {
                message,
                ..Self::model_not_found(name, &[])
            },
            RunError::Refused(refusal) => match refusal.kind {
                Refused::NotGranted => Self {
                    code: Some("model_not_granted"),
                    param: Some("model".into()),
                    retry: false,
                    ..Self::new(StatusCode::FORBIDDEN, "permission_error", message)
                },
                Refused::PerMinute { retry_after_s } => Self {
                    code: Some("rate_limit_exceeded"),
                    retry_after: Some(retry_after_s),
                    ..Self::new(StatusCode::TOO_MANY_REQUESTS, "requests", message)
                },
                Refused::Concurrent => Self {
                    code: Some("rate_limit_exceeded"),
                    ..Self::new(StatusCode::TOO_MANY_REQUESTS, "requests", message)
                },
                Refused::Budget => Self {
                    code: Some("insufficient_quota"),
                    retry: false,
                    ..Self::new(StatusCode::TOO_MANY_REQUESTS, "insufficient_quota", message)
                },
                Refused::Unavailable => {
                    Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
                }
            },
            RunError::EmptyPrompt
            | RunError::PromptTooLarge { .. }
            | RunError::InvalidOptions(_)
            | RunError::UnknownRun { .. }
            | RunError::UnusableRun { .. }
            | RunError::Attachments(_) => Self::invalid("messages", message),
            RunError::Busy { .. } => Self {
                code: Some("server_busy"),
                ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
            },
            RunError::Timeout(_) => Self {
                code: Some("timeout"),
                ..Self::new(StatusCode::GATEWAY_TIMEOUT, "server_error", message)
            },
            // The caller's schema and the answer disagree: not a server
            // fault to retry blindly (each try is paid for), and not the
            // request's shape either.
            RunError::AnswerFormat(_) => Self {
                code: Some("answer_format_mismatch"),
                param: Some("response_format".into()),
                ..Self::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_response_error",
                    message,
                )
            },
            RunError::ToolCall(_) => Self {
                code: Some("tool_call_mismatch"),
                param: Some("tools".into()),
                ..Self::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_response_error",
                    message,
                )
            },
            RunError::Plugin(_) => Self {
                code: Some("strategy_failed"),
                ..Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
            },
        }
    }

    /// 503 for a run in which no model answered, each model's failure
    /// said; `None` for a run with an answer.
    pub fn of_unanswered(record: &RunRecord) -> Option<Self> {
        if record.kind != AnswerKind::None {
            return None;
        }
        let failures: Vec<String> = record
            .calls
            .iter()
            .filter_map(|call| {
                let error = call.error.as_ref()?;
                Some(format!(
                    "{}: {}",
                    call.model,
                    crate::text::ellipsized(&error.to_string(), 300)
                ))
            })
            .collect();
        let message = format!(
            "chorus: no model of pipeline `{}` answered (run {}): {}",
            record.pipeline,
            record.run_id,
            if failures.is_empty() {
                record.summary.clone()
            } else {
                failures.join("; ")
            }
        );
        Some(Self {
            code: Some("all_models_failed"),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
        })
    }

    /// The `error` object alone (a streamed error's event carries it too).
    pub fn body(&self) -> Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "code": self.code,
                "param": self.param,
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = Response::new(Body::from(self.body().to_string()));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        headers.insert(
            SHOULD_RETRY,
            HeaderValue::from_static(if self.retry { "true" } else { "false" }),
        );
        response.extensions_mut().insert(Shaped);
        response
    }
}

/// Marks a response that is already in OpenAI's shape.
#[derive(Debug, Clone, Copy)]
struct Shaped;

/// The middleware around the access checks: an error response that is
/// not already OpenAI's shape (a refusal of `access`, a 413 from the body
/// limit) becomes one, with its status and headers kept.
pub async fn reshape(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || response.extensions().get::<Shaped>().is_some()
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, MAX_REFUSAL_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    };
    // A JSON-RPC refusal carries its words in `error.message`.
    let message = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or(text);
    let message = message.trim();
    let message = if message.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        message.to_owned()
    };
    let (kind, code) = match status {
        StatusCode::UNAUTHORIZED => ("invalid_request_error", Some("invalid_api_key")),
        StatusCode::FORBIDDEN => ("permission_error", None),
        StatusCode::PAYLOAD_TOO_LARGE => ("invalid_request_error", Some("request_too_large")),
        StatusCode::TOO_MANY_REQUESTS => ("requests", Some("rate_limit_exceeded")),
        s if s.is_server_error() => ("server_error", None),
        _ => ("invalid_request_error", None),
    };
    let error = ApiError {
        code,
        ..ApiError::new(status, kind, message)
    };
    let mut shaped = error.into_response();
    for name in [header::WWW_AUTHENTICATE, header::RETRY_AFTER] {
        if let Some(value) = parts.headers.remove(&name) {
            shaped.headers_mut().insert(name, value);
        }
    }
    // `Proven` and the like stay with the response.
    std::mem::swap(shaped.extensions_mut(), &mut parts.extensions);
    shaped.extensions_mut().insert(Shaped);
    shaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Refusal;

    #[test]
    fn each_refusal_of_the_gate_has_the_status_openai_clients_act_on() {
        let refused = |kind| RunError::Refused(Refusal::new(kind, "why"));
        let per_minute = ApiError::of_run(&refused(Refused::PerMinute { retry_after_s: 7 }));
        assert_eq!(per_minute.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(per_minute.code, Some("rate_limit_exceeded"));
        let response = per_minute.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "7");
        let budget = ApiError::of_run(&refused(Refused::Budget));
        assert_eq!(
            (budget.status, budget.code, budget.retry),
            (
                StatusCode::TOO_MANY_REQUESTS,
                Some("insufficient_quota"),
                false
            )
        );
        assert_eq!(
            ApiError::of_run(&refused(Refused::NotGranted)).status,
            StatusCode::FORBIDDEN
        );
        let unknown = RunError::UnknownPipeline {
            name: "nope".into(),
            available: "ask".into(),
        };
        let error = ApiError::of_run(&unknown);
        assert_eq!(
            (error.status, error.code),
            (StatusCode::NOT_FOUND, Some("model_not_found"))
        );
        assert_eq!(error.body()["error"]["param"], "model");
    }
}
