//! One run: the question, the final answer and its web sources, each panel
//! member's answer (and what it cited) side by side (tabs on a narrow
//! screen, with script), the strategy's analysis, every call on a timeline
//! and in a table, the notes, the runs it builds on or that build on it,
//! and what can be done with it (copy, export as JSON, re-synthesize,
//! rate: `feedback.rs`). And the export itself, its feedback included. Only runs the signed-in client may see: another
//! client's run is not found.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, PreEscaped, html};
use serde_json::Value;

use super::Viewer;
use super::auth::Who;
use super::layout::{dollars, duration, page as frame, problem, time};
use super::{markdown, sources, timeline};
use crate::client::Client;
use crate::record::sources::Source;
use crate::record::{RunStatus, RunSummary, StoredCall, StoredRun};
use crate::store::{Lookup, Query};

/// Recent runs searched for those that follow up or re-synthesize this one.
const RELATED_WITHIN: usize = 200;
/// How deep and how wide the analysis is shown.
const ANALYSIS_DEPTH: usize = 4;
const ANALYSIS_ITEMS: usize = 50;

/// The run `id` (in full, a unique prefix, or `last`) among those `client`
/// may see, or a page saying why not: another client's run reads as
/// unknown, word for word as a run that does not exist.
pub async fn find(
    viewer: &Viewer,
    client: &Client,
    id: &str,
    with_requests: bool,
) -> Result<StoredRun, Response> {
    match viewer.chorus.find_run_for(client, id, with_requests).await {
        Ok(Lookup::Found(run)) => Ok(run),
        Ok(Lookup::Unknown) => Err(problem(
            StatusCode::NOT_FOUND,
            "No such run",
            &format!(
                "No run `{id}` is kept in {}.",
                viewer.chorus.store_as_shown_to(client)
            ),
        )),
        Ok(Lookup::Ambiguous(ids)) => Err(problem(
            StatusCode::NOT_FOUND,
            "Which run?",
            &format!(
                "`{id}` starts several runs' ids ({}, …): give more of it.",
                ids.join(", ")
            ),
        )),
        Err(e) => Err(problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "The run cannot be read",
            &e.to_string(),
        )),
    }
}

pub async fn page(
    State(viewer): State<Arc<Viewer>>,
    Extension(who): Extension<Who>,
    Extension(client): Extension<Arc<Client>>,
    Path(id): Path<String>,
) -> Response {
    let run = match find(&viewer, &client, &id, false).await {
        Ok(run) => run,
        Err(response) => return response,
    };
    let id = run.run_id.clone();
    let starts = viewer
        .chorus
        .store
        .off_runtime(move |store| store.call_starts(&id))
        .await
        .unwrap_or_default();
    let related = related(&viewer, &client, &run.run_id).await;
    let csrf = viewer.guard.csrf(&who);
    let mergers = mergers(&viewer);
    let given = viewer
        .chorus
        .feedback_of(&run.run_id)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!("the feedback on run {} could not be read: {e}", run.run_id);
            Vec::new()
        });
    let rating = super::feedback::section(
        &run.run_id,
        &csrf,
        &viewer.chorus.runner().loaded.config.metrics,
        &given,
    );
    let title = crate::text::ellipsized(run.prompt.lines().next().unwrap_or("A run"), 60);
    frame(
        &title,
        body(&run, &starts, &related, &csrf, &mergers, rating),
    )
}

/// What the re-synthesize form offers: synthesizer plugins, then pipelines.
fn mergers(viewer: &Viewer) -> Vec<(String, String)> {
    let runner = viewer.chorus.runner();
    let synthesizers = runner
        .synthesizer_names()
        .into_iter()
        .map(|name| (format!("synthesizer:{name}"), format!("synthesizer {name}")));
    let pipelines = runner
        .loaded
        .config
        .pipelines
        .keys()
        .map(|name| (format!("pipeline:{name}"), format!("pipeline {name}")));
    synthesizers.chain(pipelines).collect()
}

/// Recent runs, among those `client` may see, that follow up or
/// re-synthesize run `id`.
async fn related(viewer: &Viewer, client: &Client, id: &str) -> Vec<RunSummary> {
    let query = Query {
        limit: RELATED_WITHIN,
        ..Query::default()
    };
    let Ok(page) = viewer.chorus.list_runs_for(client, query).await else {
        return Vec::new();
    };
    page.runs
        .into_iter()
        .filter(|r| {
            r.follow_up_of.as_deref() == Some(id) || r.resynthesis_of.as_deref() == Some(id)
        })
        .collect()
}

fn body(
    run: &StoredRun,
    starts: &[(u32, i64)],
    related: &[RunSummary],
    csrf: &str,
    mergers: &[(String, String)],
    rating: Markup,
) -> Markup {
    let running = run.status == RunStatus::Running;
    let members: Vec<&StoredCall> = run
        .calls
        .iter()
        .filter(|c| c.call.stage == "fan-out")
        .collect();
    let live = running.then(|| format!("/runs/{}/events", run.run_id));
    let cited = crate::record::sources::merged(run.calls.iter().map(|c| &c.call));
    html! {
        div id="run" data-live=[live] {
            h1 { "Run " code { (run.run_id) } }
            ul class="facts" {
                li { "pipeline " strong { (run.pipeline) } }
                li { span class=(format!("badge {}", run.status.as_str())) { (run.status.as_str()) } }
                @if let Some(kind) = run.kind { li { "answer: " strong { (kind.as_str()) } } }
                li { "started " (time(run.started_at)) }
                @if let Some(ms) = run.elapsed_ms { li { "took " (duration(ms)) } }
                li { "cost " (run.usage.cost_usd.map_or_else(|| "unknown".to_owned(), dollars)) @if run.usage.cost_estimated { " (estimated)" } }
                li { (run.usage.prompt_tokens) " prompt + " (run.usage.completion_tokens) " completion tokens" @if run.usage.tokens_estimated { " (estimated in part: the provider reported no usage)" } }
            }
            @if let Some(of) = &run.follow_up_of {
                p { "Follows up " a href=(format!("/runs/{of}")) { code { (of) } } }
            }
            @if let Some(of) = &run.resynthesis_of {
                p { "Merges again the answers of " a href=(format!("/runs/{of}")) { code { (of) } } }
            }
            @if let Some(served) = &run.experiment {
                p { "Serves the experiment " a href=(format!("/experiments#{}", served.experiment)) { code { (served.experiment) } } " as its variant " strong { (served.variant) } }
            }
            h2 { "Question" }
            div class="prompt" { (run.prompt) }
            @if !run.attachments.is_empty() {
                h3 { "Attachments" }
                ul class="attachments" {
                    @for a in &run.attachments {
                        li {
                            "#" (a.id) " " code { (a.name) } " — " (a.mime) ", "
                            (a.url.clone().unwrap_or_else(|| crate::text::show_bytes(a.bytes as u64)))
                            @if let Some(shape) = a.shape.describe() { ", " (shape) }
                        }
                    }
                }
            }
            h2 { "Answer" }
            @if let Some(summary) = &run.summary { p class="muted" { (summary) } }
            @match &run.answer {
                Some(answer) => {
                    // The sources are listed on their own below, with who cited them.
                    div class="answer" id="final-answer" data-text=(answer) {
                        (PreEscaped(markdown::render(crate::record::sources::without_list(answer, &cited))))
                    }
                }
                None if running => { p { "Not yet: the run is still working." } }
                None => { p role="alert" { "No answer: " (run.error.as_deref().unwrap_or(run.status.as_str())) } }
            }
            div class="actions" {
                @if run.answer.is_some() {
                    button type="button" data-copy="final-answer" hidden { "Copy answer" }
                }
                a class="button" href=(format!("/runs/{}/export.json", run.run_id)) download { "Export JSON" }
                @if !running && !members.is_empty() {
                    form class="inline" method="post" action=(format!("/runs/{}/resynthesize", run.run_id)) {
                        input type="hidden" name="csrf" value=(csrf);
                        label for="merger" { "Re-synthesize with" }
                        select id="merger" name="merger" {
                            option value="as-before" { "the same synthesizer" }
                            @for (value, label) in mergers { option value=(value) { (label) } }
                        }
                        button type="submit" { "Re-synthesize" }
                    }
                }
            }
            @if run.answer.is_some() { (rating) }
            (sources::list(&cited))
            @if !related.is_empty() {
                h2 { "Built on this run" }
                ul {
                    @for other in related {
                        li {
                            @if other.resynthesis_of.as_deref() == Some(run.run_id.as_str()) { "Re-synthesis " } @else { "Follow-up " }
                            a href=(format!("/runs/{}", other.run_id)) { code { (other.run_id) } }
                            " · " (time(other.started_at)) " · " (other.status.as_str())
                        }
                    }
                }
            }
            @if !run.notes.is_empty() || run.error.is_some() {
                h2 { "Notes" }
                ul {
                    @for note in &run.notes { li { (note) } }
                    @if let Some(error) = &run.error { li role="alert" { "Error: " (error) } }
                }
            }
            h2 { "The panel" }
            @if members.is_empty() {
                p class="muted" { "No panel member was asked." }
            } @else {
                nav class="member-tabs" aria-label="Panel members" {
                    @for (i, member) in members.iter().enumerate() {
                        a href=(format!("#member-{i}")) { (member.call.model) }
                    }
                }
                div class="members" {
                    @for (i, member) in members.iter().enumerate() { (member_card(i, member, &cited)) }
                }
            }
            @if let Some(details) = run.details.as_ref().filter(|d| !d.is_null()) {
                h2 { "Analysis" }
                (analysis(details, 0))
            }
            h2 { "Timeline" }
            @if run.calls.is_empty() { p class="muted" { "No calls were made." } }
            @else { div class="scroll" { (timeline::svg(run, starts)) } }
            h2 { "Calls" }
            (calls_table(run))
        }
    }
}

fn member_card(i: usize, member: &StoredCall, cited: &[Source]) -> Markup {
    let call = &member.call;
    html! {
        section class="member" id=(format!("member-{i}")) aria-label=(call.model) data-model=(call.model) {
            h3 { (call.model) @if call.label != call.model { " " span class="muted" { "(" (call.label) ")" } } }
            ul class="facts" {
                li { span class=(format!("badge {}", call.status)) { (call.status) } }
                li { (duration(u64::from(call.latency_ms))) }
                @if let Some(ttft) = call.ttft_ms {
                    li class="ttft" { "first token " (duration(u64::from(ttft))) }
                }
                @if let Some(queued) = call.queued_ms.filter(|&ms| ms > 0) {
                    li { (duration(u64::from(queued))) " queued" }
                }
                @if let Some(tokens) = call.completion_tokens { li { @if call.tokens_estimated { "~" } (tokens) " tokens" @if call.tokens_estimated { " (estimated)" } } }
                @if let Some(cost) = call.cost_usd { li { (dollars(cost)) @if call.cost_estimated { " (estimated)" } } }
                @if call.cost_unknown() { li { "cost unknown" } }
                @if call.attempts > 1 { li { (call.attempts) " attempts" } }
                @if let Some(from) = &call.reused_from {
                    li { "reused from " a href=(format!("/runs/{}", from.run_id)) { "its run" } }
                }
                @if let Some(from) = &call.cached_from {
                    li class="cached" { "cached: answered by " a href=(format!("/runs/{}", from.run_id)) { "an earlier run" } " (call #" (from.call) "), cost $0" }
                }
            }
            @if let Some(error) = &call.error {
                p class="reason" { "Failed: " (error.to_string()) }
            }
            @if let Some(reply) = &call.reply {
                div class="answer" { (PreEscaped(markdown::render(reply))) }
            }
            (sources::cited_by(call, cited))
        }
    }
}

fn calls_table(run: &StoredRun) -> Markup {
    html! {
        div class="scroll" {
            table class="calls" {
                thead { tr {
                    th scope="col" { "#" } th scope="col" { "Stage" } th scope="col" { "Model" }
                    th scope="col" { "Status" } th scope="col" { "Latency" }
                    th scope="col" { "First token" } th scope="col" { "Queued" } th scope="col" { "Attempts" }
                    th scope="col" { "Tokens in/out" } th scope="col" { "Cost" } th scope="col" { "Failure or source" }
                } }
                tbody {
                    @for stored in &run.calls {
                        @let call = &stored.call;
                        tr {
                            td { (call.id) } td { (call.stage) } td { (call.model) }
                            td class=(call.status) { (call.status) }
                            td { (duration(u64::from(call.latency_ms))) }
                            td { (call.ttft_ms.map_or("-".to_owned(), |ms| duration(u64::from(ms)))) }
                            td { (call.queued_ms.map_or("-".to_owned(), |ms| duration(u64::from(ms)))) }
                            td { (call.attempts) }
                            td { @if call.tokens_estimated { "~" } (call.prompt_tokens.map_or("-".into(), |t| t.to_string())) " / "
                                 @if call.tokens_estimated { "~" } (call.completion_tokens.map_or("-".into(), |t| t.to_string())) }
                            td { @if call.cost_estimated { "~" } (call.cost_usd.map_or_else(|| if call.cost_unknown() { "unknown".to_owned() } else { "-".to_owned() }, dollars)) }
                            td {
                                @if let Some(error) = &call.error { (error.to_string()) }
                                @if let Some(from) = &call.cached_from {
                                    "cached from " a href=(format!("/runs/{}", from.run_id)) { (from.run_id) "/" (from.call) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A strategy's structured analysis (any JSON), as nested lists.
fn analysis(value: &Value, depth: usize) -> Markup {
    if depth >= ANALYSIS_DEPTH {
        return html! { code { (crate::text::ellipsized(&value.to_string(), 200)) } };
    }
    match value {
        Value::Object(map) => html! {
            dl class="analysis" {
                @for (key, value) in map.iter().take(ANALYSIS_ITEMS) {
                    dt { (key.replace('_', " ")) }
                    dd { (analysis(value, depth + 1)) }
                }
            }
        },
        Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => html! {
            (items.iter().take(ANALYSIS_ITEMS).map(scalar).collect::<Vec<_>>().join(", "))
        },
        Value::Array(items) => html! {
            ol { @for item in items.iter().take(ANALYSIS_ITEMS) { li { (analysis(item, depth + 1)) } } }
        },
        other => html! { (scalar(other)) },
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "—".to_owned(),
        other => other.to_string(),
    }
}

/// Everything kept about the run, every request sent included: what
/// `chorus runs export` prints.
pub async fn export(
    State(viewer): State<Arc<Viewer>>,
    Extension(client): Extension<Arc<Client>>,
    Path(id): Path<String>,
) -> Response {
    let run = match find(&viewer, &client, &id, true).await {
        Ok(run) => run,
        Err(response) => return response,
    };
    let mut value = serde_json::to_value(&run).unwrap_or_default();
    match viewer.chorus.feedback_of(&run.run_id).await {
        Ok(given) if !given.is_empty() => {
            if let Some(object) = value.as_object_mut() {
                object.insert(
                    "feedback".into(),
                    serde_json::to_value(given).unwrap_or_default(),
                );
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("the feedback on run {} could not be read: {e}", run.run_id),
    }
    let json = serde_json::to_string_pretty(&value).unwrap_or_default();
    let disposition = format!("attachment; filename=\"chorus-run-{}.json\"", run.run_id);
    (
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        json,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::record::{CallRecord, CallRef};

    #[test]
    fn a_members_card_and_the_calls_table_show_its_time_to_first_token() {
        let run = super::timeline::tests::run(1, Some(120), Some(340));
        let card = super::member_card(0, &run.calls[0], &[]).into_string();
        assert!(card.contains("first token 340 ms"), "{card}");
        assert!(card.contains("120 ms queued"), "{card}");
        let table = super::calls_table(&run).into_string();
        assert!(table.contains("First token"), "{table}");
        assert!(table.contains("<td>340 ms</td>"), "{table}");
    }

    #[test]
    fn a_cached_answer_says_where_it_came_from_and_that_it_cost_nothing() {
        let call = CallRecord {
            id: 0,
            stage: "fan-out".into(),
            label: "panel".into(),
            model: "m1".into(),
            status: "ok".into(),
            latency_ms: 0,
            attempts: 0,
            prompt_tokens: Some(10),
            completion_tokens: Some(20),
            cost_usd: Some(0.0),
            reply: Some(Arc::new("four".into())),
            cached_from: Some(CallRef {
                run_id: "run-a".into(),
                call: 2,
            }),
            ..CallRecord::default()
        };
        let card = member_card(
            0,
            &StoredCall {
                call,
                request: None,
            },
            &[],
        )
        .into_string();
        assert!(card.contains("cached: answered by"), "{card}");
        assert!(card.contains("href=\"/runs/run-a\""), "{card}");
        assert!(card.contains("(call #2), cost $0"), "{card}");
    }

    #[test]
    fn estimated_tokens_and_an_unknown_cost_are_shown_as_such() {
        let mut run = super::timeline::tests::run(1, None, None);
        let call = &mut run.calls[0].call;
        call.tokens_estimated = true;
        call.cost_usd = None;
        call.error = None;
        call.status = "ok".into();
        let card = member_card(0, &run.calls[0], &[]).into_string();
        assert!(card.contains(" tokens (estimated)"), "{card}");
        assert!(card.contains("cost unknown"), "{card}");
        let table = calls_table(&run).into_string();
        assert!(table.contains("unknown"), "{table}");
        assert!(table.contains('~'), "{table}");
    }
}
