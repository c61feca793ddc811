//! The runs, newest first, a page at a time, filtered as `chorus runs`
//! filters them (pipeline, text, since a date). Runs still in flight are
//! marked, and the list follows them live while any is on the page.

use std::sync::Arc;

use axum::extract::{Query as Params, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::NaiveDate;
use maud::html;
use serde::Deserialize;

use super::Viewer;
use super::layout::{dollars, duration, problem, time};
use crate::record::RunStatus;
use crate::store::{Cursor, Query};

/// Runs on a page.
const PAGE: usize = 25;

#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    #[serde(default)]
    pipeline: String,
    #[serde(default)]
    text: String,
    /// `YYYY-MM-DD` (what `<input type=date>` sends), UTC.
    #[serde(default)]
    since: String,
    #[serde(default)]
    before: String,
}

impl Filters {
    /// The store's query, or what is wrong with the filters.
    fn query(&self) -> Result<Query, String> {
        let text = |t: &str| Some(t.trim().to_owned()).filter(|t| !t.is_empty());
        let since = match text(&self.since) {
            Some(date) => Some(
                NaiveDate::parse_from_str(&date, "%Y-%m-%d")
                    .ok()
                    .and_then(|d| d.and_hms_opt(0, 0, 0))
                    .map(|t| t.and_utc().timestamp_millis())
                    .ok_or_else(|| format!("`{date}` is not a date: write it as 2026-05-01"))?,
            ),
            None => None,
        };
        let before = match text(&self.before) {
            Some(cursor) => Some(cursor.parse::<Cursor>()?),
            None => None,
        };
        Ok(Query {
            before,
            pipeline: text(&self.pipeline),
            text: text(&self.text),
            since,
            client: None,
            limit: PAGE,
        })
    }

    /// The query string of these filters with `before` set to `next`.
    fn next(&self, next: Cursor) -> String {
        let mut url = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in [
            ("pipeline", &self.pipeline),
            ("text", &self.text),
            ("since", &self.since),
        ] {
            if !value.is_empty() {
                url.append_pair(key, value);
            }
        }
        url.append_pair("before", &next.to_string());
        url.finish()
    }
}

pub async fn page_of(viewer: &Viewer, filters: &Filters) -> Result<maud::Markup, Response> {
    let query = filters
        .query()
        .map_err(|why| problem(StatusCode::BAD_REQUEST, "Those filters do not work", &why))?;
    let runs = viewer.chorus.list_runs(query).await.map_err(|e| {
        problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "The runs cannot be read",
            &e.to_string(),
        )
    })?;
    let pipelines: Vec<String> = viewer
        .chorus
        .runner()
        .loaded
        .config
        .pipelines
        .keys()
        .cloned()
        .collect();
    let in_flight = runs.runs.iter().any(|r| r.status == RunStatus::Running);
    Ok(html! {
        h1 { "Runs" }
        form class="filters" method="get" action="/" role="search" {
            label { "Pipeline"
                select name="pipeline" {
                    option value="" { "any" }
                    @for name in &pipelines {
                        option value=(name) selected[*name == filters.pipeline] { (name) }
                    }
                }
            }
            label { "Text" input type="search" name="text" value=(filters.text) placeholder="in prompt or answer"; }
            label { "Since" input type="date" name="since" value=(filters.since); }
            button type="submit" { "Filter" }
        }
        div id="runs" data-live=[in_flight.then_some("/events")] {
            @if runs.runs.is_empty() {
                p { "No runs match. " (viewer.chorus.store.describe()) " keeps what `chorus serve` and `chorus ask` ran." }
            } @else {
                div class="scroll" {
                    table class="runs" {
                        thead { tr {
                            th scope="col" { "Started" }
                            th scope="col" { "Pipeline" }
                            th scope="col" { "Answer" }
                            th scope="col" class="wide" { "Cost" }
                            th scope="col" class="wide" { "Took" }
                            th scope="col" { "Prompt" }
                        } }
                        tbody {
                            @for run in &runs.runs {
                                @let answer = match (run.status, run.kind) {
                                    (RunStatus::Done, Some(kind)) => kind.as_str(),
                                    (status, _) => status.as_str(),
                                };
                                tr {
                                    td class="when" { (time(run.started_at)) }
                                    td { (run.pipeline) }
                                    td { span class=(format!("badge {}", run.status.as_str())) { (answer) } }
                                    td class="num wide" { (run.cost_usd.map_or("-".to_owned(), dollars)) }
                                    td class="num wide" { (run.elapsed_ms.map_or("-".to_owned(), duration)) }
                                    td {
                                        @if run.resynthesis_of.is_some() { span title="a re-synthesis" { "⟲ " } }
                                        @else if run.follow_up_of.is_some() { span title="a follow-up" { "↳ " } }
                                        a href=(format!("/runs/{}", run.run_id)) {
                                            @if run.prompt.is_empty() { "(no prompt)" } @else { (run.prompt) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = runs.next {
                p class="pager" { a href=(format!("/?{}", filters.next(next))) { "Older runs →" } }
            }
        }
    })
}

pub async fn page(State(viewer): State<Arc<Viewer>>, Params(filters): Params<Filters>) -> Response {
    match page_of(&viewer, &filters).await {
        Ok(body) => super::layout::page("Runs", body),
        Err(response) => response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_become_the_stores_query() {
        let filters = Filters {
            pipeline: "ask".into(),
            text: "  rust ".into(),
            since: "2026-05-01".into(),
            before: String::new(),
        };
        let query = filters.query().unwrap();
        assert_eq!(query.pipeline.as_deref(), Some("ask"));
        assert_eq!(query.text.as_deref(), Some("rust"));
        assert_eq!(query.since, Some(1_777_593_600_000));
        let bad = Filters {
            since: "yesterday".into(),
            ..Filters::default()
        };
        assert!(bad.query().unwrap_err().contains("2026-05-01"));
        let next = filters.next("42".parse().unwrap());
        assert_eq!(next, "pipeline=ask&text=++rust+&since=2026-05-01&before=42");
    }
}
