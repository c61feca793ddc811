//! Rating a run in the viewer: the run page's "Rate this answer" section —
//! a pair of buttons for each boolean metric, a number for each other one,
//! an optional comment, and the ratings given so far — and the form's
//! `POST /runs/{id}/feedback`, bound to the session's CSRF token like the
//! viewer's other forms, through the gate every door uses
//! (`Chorus::give_feedback`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use super::Viewer;
use super::auth::Who;
use super::layout::{problem, stale_form, time};
use crate::app::feedback::{FeedbackError, Rating};
use crate::client::Client;
use crate::config::{Metric, MetricKind};
use crate::store::Feedback;

/// The section of a run's page; nothing when no metric is declared.
pub fn section(
    run_id: &str,
    csrf: &str,
    metrics: &BTreeMap<String, Metric>,
    given: &[Feedback],
) -> Markup {
    if metrics.is_empty() {
        return html! {};
    }
    let action = format!("/runs/{run_id}/feedback");
    html! {
        section id="feedback" aria-label="Rate this answer" {
            h2 { "Rate this answer" }
            @for (name, metric) in metrics {
                form class="inline" method="post" action=(action) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="metric" value=(name);
                    @match metric.kind {
                        MetricKind::Boolean => {
                            span { (name) " " }
                            button type="submit" name="value" value="true" aria-label=(format!("{name}: yes")) { "👍" }
                            " "
                            button type="submit" name="value" value="false" aria-label=(format!("{name}: no")) { "👎" }
                        }
                        MetricKind::Float => {
                            label for=(format!("metric-{name}")) { (name) }
                            " "
                            input id=(format!("metric-{name}")) type="number" step="any" name="value"
                                min=[metric.min] max=[metric.max] required;
                            " "
                            button type="submit" { "Rate" }
                        }
                    }
                    " "
                    input type="text" name="comment" maxlength="4096" placeholder="why (optional)" aria-label=(format!("{name}: comment"));
                }
            }
            @if !given.is_empty() {
                ul class="feedback" {
                    @for f in given {
                        li {
                            strong { (f.metric) " = " (f.value) }
                            " by " (f.client) " " (time(f.at))
                            @if let Some(comment) = &f.comment { " — " q { (comment) } }
                        }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub struct Given {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    metric: String,
    #[serde(default)]
    value: String,
    #[serde(default)]
    comment: String,
}

/// `POST /runs/{id}/feedback`: keeps the rating and goes back to the run.
pub async fn give(
    State(viewer): State<Arc<Viewer>>,
    Extension(who): Extension<Who>,
    Extension(client): Extension<Arc<Client>>,
    Path(id): Path<String>,
    Form(form): Form<Given>,
) -> Response {
    if !viewer.guard.check_csrf(&who, &form.csrf) {
        return stale_form();
    }
    // A form's value is text: `true`/`false` or a number, as typed.
    let value = serde_json::from_str::<Value>(form.value.trim())
        .ok()
        .filter(|v| v.is_boolean() || v.is_number())
        .unwrap_or(Value::String(form.value));
    let rating = Rating {
        run: id.clone(),
        metric: form.metric,
        value,
        comment: Some(form.comment),
    };
    match viewer.chorus.give_feedback(&client, rating).await {
        Ok(recorded) => {
            Redirect::to(&format!("/runs/{}#feedback", recorded.feedback.run_id)).into_response()
        }
        Err(FeedbackError::Invalid(why)) => problem(StatusCode::BAD_REQUEST, "Cannot rate", &why),
        // As on its page: a run the client may not see is not found.
        Err(error @ (FeedbackError::UnknownRun(_) | FeedbackError::Ambiguous { .. })) => {
            problem(StatusCode::NOT_FOUND, "No such run", &error.to_string())
        }
        Err(error @ FeedbackError::TooMany { .. }) => problem(
            StatusCode::TOO_MANY_REQUESTS,
            "Cannot rate",
            &error.to_string(),
        ),
        Err(FeedbackError::Store(error)) => {
            tracing::warn!("feedback not kept: {error}");
            problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "Cannot rate",
                "The run store could not keep the rating: try again.",
            )
        }
    }
}
