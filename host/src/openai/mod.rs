//! chorus as a model: an OpenAI-compatible endpoint on `serve --http`,
//! where every pipeline is a model. `GET /v1/models` lists the pipelines
//! the caller may run, `POST /v1/chat/completions` runs one (streamed or
//! not), `POST /v1/responses` does the same in the Responses API's shape.
//!
//! Mounted by the HTTP front door behind the same Host/Origin rules and
//! bearer tokens as `/mcp` (its `access::check`); every run goes through
//! `Chorus` and its one gate, whose typed refusals [`errors`] says the way
//! OpenAI's clients read them.
//!
//! - [`body`]: a request body, refused unread when the gate would refuse
//!   its client, bounded, parsed off the async workers;
//! - [`request`]: a request body, read into a run ([`parts`]: its
//!   content parts, text and attachments; [`format`]: `response_format`,
//!   the answer's structured output; [`tools`]: the tools the panel may
//!   call, and the tool exchange of the history);
//! - [`answer`]: a finished run as a `chat.completion`;
//! - [`stream`]: a run as server-sent events, progress and answer;
//! - [`responses`]: the Responses API over the same parts;
//! - [`feedback`]: `POST /v1/feedback`, a rating of a run;
//! - [`errors`]: errors in OpenAI's shape.

pub(crate) mod answer;
pub(crate) mod body;
pub(crate) mod errors;
mod feedback;
mod format;
mod parts;
pub(crate) mod request;
mod responses;
pub(crate) mod stream;
mod tools;

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde_json::{Value, json};

use crate::app::Chorus;
use crate::client::Client;
use crate::http::Access;
use errors::ApiError;
use request::Asked;

/// How a door reads a request body (its `model` taken out) into a run of
/// the pipeline it names, declared as given, its messages held to the
/// prompt limit: a chat request, or what one stands for.
pub(crate) type Parse = fn(
    serde_json::Map<String, Value>,
    String,
    &crate::config::Pipeline,
    usize,
) -> Result<Asked, ApiError>;

/// The header that names the run an answer came from.
pub const RUN_ID_HEADER: HeaderName = HeaderName::from_static("x-chorus-run-id");

/// What the handlers share.
struct Shared {
    chorus: Arc<Chorus>,
    /// When this server started: each model's `created`.
    started: u64,
    /// The request bodies being parsed.
    parses: body::Parses,
}

/// The routes, each request let in by `access` first (its refusals in
/// OpenAI's shape).
pub fn routes(chorus: Arc<Chorus>, access: Arc<Access>) -> Router {
    let shared = Arc::new(Shared {
        chorus,
        started: answer::now(),
        parses: body::Parses::default(),
    });
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/models/{*id}", get(model))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/responses", post(responses::create))
        .route("/v1/feedback", post(feedback::give))
        .with_state(shared)
        .layer(axum::middleware::from_fn_with_state(
            access,
            crate::http::check,
        ))
        .layer(axum::middleware::from_fn(errors::reshape))
}

/// The pipelines `client` may run, by name.
fn granted(chorus: &Chorus, client: &Client) -> Vec<String> {
    chorus
        .runner()
        .pipelines()
        .filter(|(name, _)| client.may_run(name))
        .map(|(name, _)| name.clone())
        .collect()
}

fn model_object(name: &str, created: u64) -> Value {
    json!({"id": name, "object": "model", "created": created, "owned_by": "chorus"})
}

pub(crate) fn json_response(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

async fn models(
    State(shared): State<Arc<Shared>>,
    Extension(client): Extension<Arc<Client>>,
) -> Response {
    let data: Vec<Value> = granted(&shared.chorus, &client)
        .iter()
        .map(|name| model_object(name, shared.started))
        .collect();
    json_response(&json!({"object": "list", "data": data}))
}

async fn model(
    State(shared): State<Arc<Shared>>,
    Extension(client): Extension<Arc<Client>>,
    Path(id): Path<String>,
) -> Response {
    let name = request::pipeline_of(&id);
    let granted = granted(&shared.chorus, &client);
    if granted.iter().any(|g| g == name) {
        return json_response(&model_object(name, shared.started));
    }
    // A pipeline this client may not run is one it does not see: the
    // same 404 as for one that does not exist, so a tenant cannot learn
    // which pipelines others have.
    ApiError::model_not_found(name, &granted).into_response()
}

/// A request read into a run for `client`: its pipeline found (404 if
/// there is none), its body read, its attachments loaded under the same
/// limits as MCP's.
async fn read(
    chorus: &Chorus,
    client: &Client,
    parses: &body::Parses,
    mut body: serde_json::Map<String, Value>,
    parse: Parse,
) -> Result<Asked, ApiError> {
    let pipeline = request::model(&body)?;
    body.remove("model");
    let runner = chorus.runner();
    if !runner.loaded.config.pipelines.contains_key(&pipeline) {
        return Err(ApiError::model_not_found(
            &pipeline,
            &granted(chorus, client),
        ));
    }
    // Reading compiles the caller's schemas (a tool's parameters, a
    // response format): up to milliseconds each, so off the async workers,
    // a few at once, as the body's parse is.
    let reading = runner.clone();
    let mut asked = parses
        .blocking(move || {
            let config = &reading.loaded.config;
            let declared = &config.pipelines[&pipeline];
            parse(
                body,
                pipeline.clone(),
                declared,
                config.limits.max_prompt_bytes,
            )
        })
        .await??;
    let config = &runner.loaded.config;
    if !asked.sources.is_empty() {
        let sources = std::mem::take(&mut asked.sources);
        let limits = config.limits.attachments();
        let read = tokio::task::spawn_blocking(move || {
            crate::attach::load(sources, &crate::attach::Access::Remote, &limits)
        })
        .await;
        asked.question.attachments = match read {
            Ok(Ok(attachments)) => attachments,
            Ok(Err(message)) => {
                return Err(ApiError::invalid("messages", format!("chorus: {message}")));
            }
            Err(e) => {
                return Err(ApiError::invalid(
                    "messages",
                    format!("chorus: reading the attachments failed: {e}"),
                ));
            }
        };
    }
    Ok(asked)
}

/// The run `asked` describes, for `client`, in a task of its own: it runs
/// under its own deadline whatever its reader does (a client that stops
/// reading a stream cannot stop the run's clock and hold its slot), and
/// stops when the response awaiting it is dropped (a client that hangs
/// up). Its events reach `progress`, which must never wait.
fn start(
    chorus: Arc<Chorus>,
    client: Arc<Client>,
    asked: Asked,
    progress: crate::events::Progress,
) -> stream::Run {
    let run = tokio::spawn(async move {
        chorus
            .run_in_conversation(
                &client,
                &asked.pipeline,
                asked.question,
                asked.options,
                asked.conversation,
                progress,
            )
            .await
    });
    let run = tokio_util::task::AbortOnDropHandle::new(run);
    Box::pin(async move {
        match run.await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only a runtime shutting down cancels it while it is awaited.
            Err(_) => Err(crate::pipeline::RunError::Refused(
                crate::client::Refusal::new(
                    crate::client::Refused::Unavailable,
                    "chorus is stopping",
                ),
            )),
        }
    })
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    Extension(client): Extension<Arc<Client>>,
    request: Request,
) -> Response {
    answered(
        &shared.chorus,
        client,
        &shared.parses,
        request,
        |body, pipeline, declared, max| request::chat(body, pipeline, &declared.options, max),
        |asked| {
            stream::Chunks::new(
                asked.pipeline.clone(),
                asked.include_usage,
                asked.not_applied.clone(),
            )
        },
        |frames, record| answer::completion(record, &frames.not_applied),
    )
    .await
}

/// The one path of every model-API door (chat completions, Responses,
/// Anthropic's Messages): `request`'s body read within its bounds and
/// the gate's (`body`), read as a chat request by `parse` (`read`), run
/// in a task of its own (`start`), and answered — as the stream of
/// `frames` when it asked for one, else as `whole` writes the finished
/// run — or refused as `ApiError` says.
pub(crate) async fn answered<F: stream::Frames>(
    chorus: &Arc<Chorus>,
    client: Arc<Client>,
    parses: &body::Parses,
    request: Request,
    parse: Parse,
    frames: impl FnOnce(&Asked) -> F,
    whole: impl FnOnce(F, &crate::record::RunRecord) -> Value,
) -> Response {
    let body = match body::read(chorus, &client, parses, request).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let asked = match read(chorus, &client, parses, body, parse).await {
        Ok(asked) => asked,
        Err(e) => return e.into_response(),
    };
    let frames = frames(&asked);
    if asked.stream {
        let (progress, events) = stream::watcher();
        let run = start(chorus.clone(), client, asked, progress);
        return stream::respond(run, events, frames).await;
    }
    let outcome = start(chorus.clone(), client, asked, crate::events::ignore()).await;
    match outcome {
        Err(error) => ApiError::of_run(&error).into_response(),
        Ok(record) => match ApiError::of_unanswered(&record) {
            Some(error) => error.into_response(),
            None => with_run_id(json_response(&whole(frames, &record)), &record.run_id),
        },
    }
}

pub(crate) fn with_run_id(mut response: Response, run_id: &str) -> Response {
    if let Ok(id) = HeaderValue::from_str(run_id) {
        response.headers_mut().insert(RUN_ID_HEADER, id);
    }
    response
}
