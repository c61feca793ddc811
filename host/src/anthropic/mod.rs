//! chorus as a model for Anthropic's clients: the Messages API on `serve
//! --http` — `POST /v1/messages` (whole or streamed) and `POST
//! /v1/messages/count_tokens` — where every pipeline is a model, so
//! Claude Code (`ANTHROPIC_BASE_URL`) and the Anthropic SDKs run chorus's
//! pipelines, tools included.
//!
//! A door of its own over the OpenAI door's run path: a Messages request
//! is read as the chat request it stands for ([`request`]) and then goes
//! where a chat request goes — the same body bounds and gate
//! (`openai::body`), the same reading (`openai::request`), the same run in
//! a task of its own under its deadline (`openai::start`), the same
//! stream machinery (`openai::stream`) — and is answered in the Messages
//! API's shape ([`reply`]), its errors too ([`errors`]). The token is
//! `x-api-key` or `Authorization: Bearer`, checked by the same access
//! rules as every door.

mod errors;
mod reply;
mod request;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use serde_json::json;

use crate::app::Chorus;
use crate::client::Client;
use crate::http::Access;
use crate::openai::{body, json_response};

/// What the handlers share.
struct Shared {
    chorus: Arc<Chorus>,
    parses: body::Parses,
}

/// The routes, behind the same access rules as every door; `x-api-key`
/// is read as the bearer token.
pub fn routes(chorus: Arc<Chorus>, access: Arc<Access>) -> Router {
    let shared = Arc::new(Shared {
        chorus,
        parses: body::Parses::default(),
    });
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .with_state(shared)
        .layer(axum::middleware::from_fn_with_state(
            access,
            crate::http::check,
        ))
        .layer(axum::middleware::from_fn(crate::openai::errors::reshape))
        .layer(axum::middleware::from_fn(errors::reshape))
        .layer(axum::middleware::from_fn(api_key_as_bearer))
}

/// Anthropic's clients send the key as `x-api-key`: it is the bearer
/// token when no `Authorization` is given.
async fn api_key_as_bearer(mut request: Request, next: axum::middleware::Next) -> Response {
    let headers = request.headers_mut();
    if !headers.contains_key(header::AUTHORIZATION)
        && let Some(key) = headers.get("x-api-key").and_then(|k| k.to_str().ok())
        && let Ok(bearer) = HeaderValue::from_str(&format!("Bearer {key}"))
    {
        headers.insert(header::AUTHORIZATION, bearer);
    }
    next.run(request).await
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    Extension(client): Extension<Arc<Client>>,
    request: Request,
) -> Response {
    crate::openai::answered(
        &shared.chorus,
        client,
        &shared.parses,
        request,
        |body, pipeline, declared, max| {
            crate::openai::request::chat(request::as_chat(body)?, pipeline, &declared.options, max)
        },
        |asked| reply::Events::new(asked.pipeline.clone(), asked.not_applied.clone()),
        |frames, record| reply::message(record, frames.not_applied()),
    )
    .await
}

/// The prompt tokens a request would send each model asked the question,
/// estimated as chorus estimates a call's worst case (four bytes a token,
/// attachments by their kind): a Messages client sizes its context with
/// it. A pipeline sends it to several models, and its merge more.
async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    Extension(client): Extension<Arc<Client>>,
    request: Request,
) -> Response {
    let chorus = &shared.chorus;
    let mut body = match body::read(chorus, &client, &shared.parses, request).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    body.remove("max_tokens");
    let chat = match request::as_chat(body) {
        Ok(chat) => chat,
        Err(e) => return e.into_response(),
    };
    let text: u64 = chat["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| crate::llm::estimate_tokens(&m.to_string()) + 4)
        .sum();
    let tools = chat
        .get("tools")
        .map_or(0, |t| crate::llm::estimate_tokens(&t.to_string()));
    let tokens = text + tools;
    json_response(&json!({"input_tokens": tokens, "chorus": {"estimated": true}}))
}
