//! What the viewer does besides reading: signing a browser in (as the
//! client whose token it gave), and re-synthesizing a run (the pipeline's
//! own re-synthesis, for the signed-in client — its grants, budgets and
//! the runs it may see — recorded as any run; the browser is sent to the
//! new run's page as soon as it exists).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use maud::html;
use serde::Deserialize;
use tokio::sync::oneshot;

use super::Viewer;
use super::auth::{Guard, Who, behind_tls};
use super::layout::{page, problem, stale_form};
use crate::client::Client;
use crate::events::{Event, Progress};
use crate::pipeline::Merger;

/// How long the browser waits for a re-synthesis to begin.
const START_WAIT: Duration = Duration::from_secs(30);

#[derive(Deserialize)]
pub struct SignIn {
    #[serde(default)]
    token: String,
}

fn sign_in_form(message: Option<&str>) -> Response {
    page(
        "Sign in",
        html! {
            h1 { "Sign in" }
            @if let Some(message) = message { p role="alert" class="failed" { (message) } }
            p { "Give your token (your client's token in this server's [[http.clients]], or the CHORUS_TOKEN it was started with), or open the link `chorus ui` printed. You see the runs your client made; an admin client sees every run." }
            form method="post" action="/sign-in" {
                label for="token" { "Token" }
                " "
                input id="token" type="password" name="token" autocomplete="current-password" required;
                " "
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// `GET /sign-in?token=…` (the link `chorus ui` prints) signs in with its
/// one-time token and goes on to the runs; without a token, the form. A
/// client's long-lived token is refused here: in a URL it would sign in
/// whoever follows a link someone else made, and sit in proxy logs.
pub async fn sign_in_page(
    State(viewer): State<Arc<Viewer>>,
    headers: HeaderMap,
    Query(given): Query<SignIn>,
) -> Response {
    if given.token.is_empty() {
        return sign_in_form(None);
    }
    let client = viewer.guard.signs_in_by_link(&given.token);
    signed_in(&viewer.guard, client, &headers)
}

/// `POST /sign-in` (the form): a client's token or the one-time one.
pub async fn sign_in(
    State(viewer): State<Arc<Viewer>>,
    headers: HeaderMap,
    Form(given): Form<SignIn>,
) -> Response {
    let client = viewer.guard.signs_in(&given.token);
    signed_in(&viewer.guard, client, &headers)
}

fn signed_in(guard: &Guard, client: Option<Arc<Client>>, headers: &HeaderMap) -> Response {
    let Some(client) = client else {
        tracing::info!("the run viewer refused a sign-in with a wrong or used token");
        let mut response = sign_in_form(Some(
            "That token is wrong, or was a one-time token already used (`chorus ui` prints a new link each time it starts). A client's own token is given in the form below, never in a link.",
        ));
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        return response;
    };
    tracing::info!(target: crate::app::AUDIT, client = %client.name, "signed in to the run viewer");
    match guard.new_session(client) {
        Ok(id) => {
            let mut response = Redirect::to("/").into_response();
            response
                .headers_mut()
                .insert(header::SET_COOKIE, Guard::cookie(&id, behind_tls(headers)));
            response
        }
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, "Cannot sign in", &e),
    }
}

#[derive(Deserialize)]
pub struct Resynthesis {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    merger: String,
}

fn merger(text: &str) -> Result<Merger, String> {
    match text.split_once(':') {
        _ if text.is_empty() || text == "as-before" => Ok(Merger::AsBefore),
        Some(("synthesizer", name)) if !name.is_empty() => Ok(Merger::Synthesizer(name.to_owned())),
        Some(("pipeline", name)) if !name.is_empty() => Ok(Merger::Pipeline(name.to_owned())),
        _ => Err(format!(
            "`{text}` is not a way to merge: choose `as-before`, `synthesizer:NAME` or `pipeline:NAME`"
        )),
    }
}

/// Starts a re-synthesis of run `id` for `client` and sends the browser to
/// the new run. A run the client may not see is not found, as on its page.
pub async fn resynthesize(
    State(viewer): State<Arc<Viewer>>,
    Extension(who): Extension<Who>,
    Extension(client): Extension<Arc<Client>>,
    Path(id): Path<String>,
    Form(form): Form<Resynthesis>,
) -> Response {
    if !viewer.guard.check_csrf(&who, &form.csrf) {
        return stale_form();
    }
    let merger = match merger(&form.merger) {
        Ok(merger) => merger,
        Err(why) => return problem(StatusCode::BAD_REQUEST, "Cannot re-synthesize", &why),
    };
    if let Err(not_found) = super::run::find(&viewer, &client, &id, false).await {
        return not_found;
    }
    let (started, new_id) = oneshot::channel::<String>();
    let started = Mutex::new(Some(started));
    let progress: Progress = Arc::new(move |event: Event| {
        if let Event::Started(request) = event
            && let Some(started) = started.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            let _ = started.send(request.run_id.clone());
        }
    });
    let chorus = viewer.chorus.clone();
    let source = id.clone();
    let run = tokio::spawn(async move {
        chorus
            .resynthesize(&client, &source, merger, progress)
            .await
    });
    let new_id = tokio::time::timeout(START_WAIT, new_id).await;
    match new_id {
        Ok(Ok(new_id)) => {
            // The new run is on the page it is sent to once written.
            let _ = viewer.chorus.store.flush().await;
            Redirect::to(&format!("/runs/{new_id}")).into_response()
        }
        // Refused before it began: the run cannot be merged again.
        Ok(Err(_)) => match run.await {
            Ok(Err(e)) => problem(StatusCode::CONFLICT, "Cannot re-synthesize", &e.to_string()),
            Ok(Ok(record)) => Redirect::to(&format!("/runs/{}", record.run_id)).into_response(),
            Err(e) => problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Cannot re-synthesize",
                &e.to_string(),
            ),
        },
        Err(_) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "Still waiting",
            &format!(
                "The re-synthesis has not begun after {START_WAIT:?} (chorus is busy); it will show in the runs list when it does."
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_merger_is_read_from_the_form() {
        assert_eq!(merger("as-before").unwrap(), Merger::AsBefore);
        assert_eq!(merger("").unwrap(), Merger::AsBefore);
        assert_eq!(
            merger("synthesizer:vote").unwrap(),
            Merger::Synthesizer("vote".into())
        );
        assert_eq!(
            merger("pipeline:ask").unwrap(),
            Merger::Pipeline("ask".into())
        );
        assert!(merger("pipeline:").is_err());
        assert!(merger("other").unwrap_err().contains("synthesizer:NAME"));
    }
}
