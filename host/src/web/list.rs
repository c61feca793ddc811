//! The runs, newest first, a page at a time, filtered as `chorus runs`
//! filters them (pipeline, client, text, since a date) and by kind (the
//! kind of answer, or how a run without one ended). A client that is not
//! an admin lists only its own runs. Runs still in flight are marked, and
//! the list follows them live while any is on the page. The filters are
//! the page's GET parameters: shareable links, no script needed.
//!
//! The store filters all but the kind; a kind is looked for here, [`PAGE`]
//! runs at a time, through at most [`SCAN`] of them per page — and the
//! page says so when it stopped there.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Query as Params, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::NaiveDate;
use maud::html;
use serde::Deserialize;

use super::Viewer;
use super::layout::{dollars, duration, problem, time};
use crate::client::Client;
use crate::record::{AnswerKind, RunStatus, RunSummary};
use crate::store::{Cursor, Query};

/// Runs on a page.
const PAGE: usize = 25;
/// Runs read, at most, to fill one page of a kind.
const SCAN: usize = 1000;

#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    #[serde(default)]
    pipeline: String,
    /// One of [`kinds`].
    #[serde(default)]
    kind: String,
    /// Whose runs (an admin's filter; others see only their own).
    #[serde(default)]
    client: String,
    #[serde(default)]
    text: String,
    /// `YYYY-MM-DD` (what `<input type=date>` sends), UTC.
    #[serde(default)]
    since: String,
    #[serde(default)]
    before: String,
}

/// What the list's Answer column says of a run, and what the kind filter
/// picks: the kind of answer of a finished run, else how it stands.
fn kind_of(run: &RunSummary) -> &'static str {
    match (run.status, run.kind) {
        (RunStatus::Done, Some(kind)) => kind.as_str(),
        (status, _) => status.as_str(),
    }
}

/// Every kind the filter offers: the kinds of answer, then how a run
/// without one ended (or that it is still running).
fn kinds() -> impl Iterator<Item = &'static str> {
    AnswerKind::ALL.into_iter().map(AnswerKind::as_str).chain(
        RunStatus::ALL
            .into_iter()
            .filter(|s| *s != RunStatus::Done)
            .map(RunStatus::as_str),
    )
}

fn given(text: &str) -> Option<String> {
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

impl Filters {
    /// The store's query, or what is wrong with the filters.
    fn query(&self) -> Result<Query, String> {
        let since = match given(&self.since) {
            Some(date) => Some(
                NaiveDate::parse_from_str(&date, "%Y-%m-%d")
                    .ok()
                    .and_then(|d| d.and_hms_opt(0, 0, 0))
                    .map(|t| t.and_utc().timestamp_millis())
                    .ok_or_else(|| format!("`{date}` is not a date: write it as 2026-05-01"))?,
            ),
            None => None,
        };
        let before = match given(&self.before) {
            Some(cursor) => Some(cursor.parse::<Cursor>()?),
            None => None,
        };
        self.kind()?;
        Ok(Query {
            before,
            pipeline: given(&self.pipeline),
            text: given(&self.text),
            since,
            client: given(&self.client),
            limit: PAGE,
        })
    }

    /// The kind asked for, checked.
    fn kind(&self) -> Result<Option<&'static str>, String> {
        let Some(kind) = given(&self.kind) else {
            return Ok(None);
        };
        kinds().find(|k| *k == kind).map(Some).ok_or_else(|| {
            format!(
                "`{kind}` is not a kind of run: choose one of {}",
                kinds().collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// The query string of these filters with `before` set to `next`.
    fn next(&self, next: Cursor) -> String {
        let mut url = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in [
            ("pipeline", &self.pipeline),
            ("kind", &self.kind),
            ("client", &self.client),
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

/// A page of the runs `client` may see that the filters match; with a
/// kind, whether the search stopped at [`SCAN`] runs with more to read.
struct Found {
    runs: Vec<RunSummary>,
    next: Option<Cursor>,
    cut: bool,
}

async fn find(viewer: &Viewer, client: &Client, filters: &Filters) -> Result<Found, Response> {
    let bad = |why: String| problem(StatusCode::BAD_REQUEST, "Those filters do not work", &why);
    let mut query = filters.query().map_err(bad)?;
    let kind = filters.kind().map_err(bad)?;
    let unreadable = |e: crate::store::StoreError| {
        problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "The runs cannot be read",
            &e.to_string(),
        )
    };
    let Some(kind) = kind else {
        let page = viewer
            .chorus
            .list_runs_for(client, query)
            .await
            .map_err(unreadable)?;
        return Ok(Found {
            runs: page.runs,
            next: page.next,
            cut: false,
        });
    };
    // Read a page at a time until a page's worth matched: the next page
    // starts where reading stopped, so none is skipped or shown twice.
    let (mut runs, mut read) = (Vec::new(), 0);
    loop {
        let page = viewer
            .chorus
            .list_runs_for(client, query.clone())
            .await
            .map_err(unreadable)?;
        read += page.runs.len();
        runs.extend(page.runs.into_iter().filter(|r| kind_of(r) == kind));
        let Some(next) = page.next else {
            return Ok(Found {
                runs,
                next: None,
                cut: false,
            });
        };
        if runs.len() >= PAGE || read >= SCAN {
            let cut = runs.len() < PAGE;
            return Ok(Found {
                runs,
                next: Some(next),
                cut,
            });
        }
        query.before = Some(next);
    }
}

async fn page_of(
    viewer: &Viewer,
    client: &Client,
    filters: &Filters,
) -> Result<maud::Markup, Response> {
    let found = find(viewer, client, filters).await?;
    let pipelines: Vec<String> = viewer
        .chorus
        .runner()
        .loaded
        .config
        .pipelines
        .keys()
        .cloned()
        .collect();
    let in_flight = found.runs.iter().any(|r| r.status == RunStatus::Running);
    let admin = client.admin;
    let experiments = admin && !viewer.chorus.experiment_names().is_empty();
    Ok(html! {
        h1 { "Runs" }
        @if experiments {
            p { a href="/experiments" { "Experiments" } ": which variant of each does better" }
        }
        @if let Some(own) = client.only_own() {
            p class="muted" id="whose" { "Signed in as " strong { (own) } ": you see the runs your client made." }
        }
        form class="filters" method="get" action="/" role="search" {
            label { "Pipeline"
                select name="pipeline" {
                    option value="" { "any" }
                    @for name in &pipelines {
                        option value=(name) selected[*name == filters.pipeline] { (name) }
                    }
                }
            }
            label { "Kind"
                select name="kind" {
                    option value="" { "any" }
                    @for kind in kinds() {
                        option value=(kind) selected[kind == filters.kind] { (kind) }
                    }
                }
            }
            @if admin {
                label { "Client" input type="text" name="client" value=(filters.client) placeholder="any"; }
            }
            label { "Text" input type="search" name="text" value=(filters.text) placeholder="in prompt or answer"; }
            label { "Since" input type="date" name="since" value=(filters.since); }
            button type="submit" { "Filter" }
        }
        div id="runs" data-live=[in_flight.then_some("/events")] {
            @if found.runs.is_empty() && !found.cut {
                p { "No runs match. " (if admin { viewer.chorus.store.describe() } else { viewer.chorus.store.describe_for_clients() }) " keeps what `chorus serve` and `chorus ask` ran." }
            } @else if !found.runs.is_empty() {
                div class="scroll" {
                    table class="runs" {
                        thead { tr {
                            th scope="col" { "Started" }
                            th scope="col" { "Pipeline" }
                            @if admin { th scope="col" class="wide" { "Client" } }
                            th scope="col" { "Answer" }
                            th scope="col" class="wide" { "Cost" }
                            th scope="col" class="wide" { "Took" }
                            th scope="col" { "Prompt" }
                        } }
                        tbody {
                            @for run in &found.runs {
                                tr {
                                    td class="when" { (time(run.started_at)) }
                                    td { (run.pipeline) }
                                    @if admin { td class="wide" { (run.client.as_deref().unwrap_or("-")) } }
                                    td { span class=(format!("badge {}", run.status.as_str())) { (kind_of(run)) } }
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
            @if found.cut {
                p class="muted" { "Only the newest " (SCAN) " runs from here were searched for this kind; older runs may match." }
            }
            @if let Some(next) = found.next {
                p class="pager" { a href=(format!("/?{}", filters.next(next))) { "Older runs →" } }
            }
        }
    })
}

pub async fn page(
    State(viewer): State<Arc<Viewer>>,
    Extension(client): Extension<Arc<Client>>,
    Params(filters): Params<Filters>,
) -> Response {
    match page_of(&viewer, &client, &filters).await {
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
            kind: "failed".into(),
            client: " bob ".into(),
            text: "  rust ".into(),
            since: "2026-05-01".into(),
            before: String::new(),
        };
        let query = filters.query().unwrap();
        assert_eq!(query.pipeline.as_deref(), Some("ask"));
        assert_eq!(query.client.as_deref(), Some("bob"));
        assert_eq!(query.text.as_deref(), Some("rust"));
        assert_eq!(query.since, Some(1_777_593_600_000));
        assert_eq!(filters.kind(), Ok(Some("failed")));
        let bad = Filters {
            since: "yesterday".into(),
            ..Filters::default()
        };
        assert!(bad.query().unwrap_err().contains("2026-05-01"));
        let bad = Filters {
            kind: "great".into(),
            ..Filters::default()
        };
        let why = bad.query().unwrap_err();
        assert!(
            why.contains("synthesis") && why.contains("cancelled"),
            "{why}"
        );
        // Paging keeps every filter.
        let next = filters.next("42".parse().unwrap());
        assert_eq!(
            next,
            "pipeline=ask&kind=failed&client=+bob+&text=++rust+&since=2026-05-01&before=42"
        );
    }

    #[test]
    fn the_kind_is_the_answers_or_how_the_run_ended() {
        let mut run = RunSummary {
            run_id: "r".into(),
            pipeline: "ask".into(),
            status: RunStatus::Done,
            kind: Some(AnswerKind::Vote),
            started_at: 0,
            elapsed_ms: None,
            cost_usd: None,
            prompt: String::new(),
            summary: None,
            follow_up_of: None,
            resynthesis_of: None,
            client: None,
        };
        assert_eq!(kind_of(&run), "vote");
        run.status = RunStatus::Cancelled;
        assert_eq!(kind_of(&run), "cancelled");
        assert!(kinds().any(|k| k == "interrupted") && !kinds().any(|k| k == "done"));
    }
}
