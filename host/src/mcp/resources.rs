//! Kept runs as MCP resources — also those made by other chorus processes
//! or before a restart — read through the `Chorus` API, so the store behind
//! it can change:
//!
//! - `chorus://runs`: the newest runs, as JSON, with a link to the next page
//!   (`chorus://runs?before=CURSOR`);
//! - `chorus://runs/{id}`: a run's full record;
//! - `chorus://runs/{id}/answer`: its final answer, as markdown;
//! - `chorus://runs/{id}/calls/{n}`: one model call, with the request sent
//!   and the answer or failure.
//!
//! `resources/list` pages through the runs, newest first.

use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use rmcp::service::Peer;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

use crate::app::Chorus;
use crate::record::{RunSummary, StoredRun};
use crate::store::{Cursor, Lookup, Query};

pub const RUNS_URI: &str = "chorus://runs";
pub const RUN_URI_PREFIX: &str = "chorus://runs/";

/// Runs per page of `resources/list` and of `chorus://runs`.
const PAGE: usize = 50;

const JSON: &str = "application/json";

pub fn uri(run_id: &str) -> String {
    format!("{RUN_URI_PREFIX}{run_id}")
}

/// The link a tool result carries to its run's record.
pub fn link(run_id: &str, summary: &str) -> Resource {
    Resource::new(uri(run_id), format!("run {run_id}"))
        .with_mime_type(JSON)
        .with_description(format!(
            "The full record of this run (every call, its answer or failure); \
             the answer alone at {}/answer. {summary}",
            uri(run_id)
        ))
}

/// What a `chorus://` address names.
#[derive(Debug, PartialEq, Eq)]
enum Address<'a> {
    Runs { before: Option<Cursor> },
    Run(&'a str),
    Answer(&'a str),
    Call(&'a str, u32),
}

fn parse(uri: &str) -> Result<Address<'_>, String> {
    if let Some(query) = uri.strip_prefix(RUNS_URI) {
        match query {
            "" | "/" => return Ok(Address::Runs { before: None }),
            q if q.starts_with("?before=") => {
                let cursor = q["?before=".len()..].parse()?;
                return Ok(Address::Runs {
                    before: Some(cursor),
                });
            }
            _ => {}
        }
    }
    let path = uri
        .strip_prefix(RUN_URI_PREFIX)
        .ok_or_else(|| format!("`{uri}` is not a chorus resource (they start with {RUNS_URI})"))?;
    let mut parts = path.split('/');
    let id = parts.next().filter(|id| !id.is_empty());
    match (id, parts.next(), parts.next(), parts.next()) {
        (Some(id), None, ..) => Ok(Address::Run(id)),
        (Some(id), Some("answer"), None, _) => Ok(Address::Answer(id)),
        (Some(id), Some("calls"), Some(n), None) => n
            .parse()
            .map(|n| Address::Call(id, n))
            .map_err(|_| format!("`{n}` in `{uri}` is not a call number")),
        _ => Err(format!(
            "`{uri}` names nothing: use {RUNS_URI}, {RUN_URI_PREFIX}{{id}}, \
             {RUN_URI_PREFIX}{{id}}/answer or {RUN_URI_PREFIX}{{id}}/calls/{{n}}"
        )),
    }
}

/// One page of runs, newest first; `cursor` continues an earlier page.
pub async fn list(chorus: &Chorus, cursor: Option<&str>) -> Result<ListResourcesResult, McpError> {
    let before = cursor
        .map(str::parse::<Cursor>)
        .transpose()
        .map_err(|e| McpError::invalid_params(e, None))?;
    let (runs, next) = page(chorus, before).await?;
    let resources = runs
        .iter()
        .map(|run| {
            Resource::new(uri(&run.run_id), format!("run {}", run.run_id))
                .with_mime_type(JSON)
                .with_description(format!(
                    "{}: {}",
                    run.pipeline,
                    run.summary.as_deref().unwrap_or(run.status.as_str())
                ))
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = next.map(|c| c.to_string());
    Ok(result)
}

async fn page(
    chorus: &Chorus,
    before: Option<Cursor>,
) -> Result<(Vec<RunSummary>, Option<Cursor>), McpError> {
    let query = Query {
        before,
        limit: PAGE,
        ..Default::default()
    };
    let page = chorus
        .list_runs(query)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Ok((page.runs, page.next))
}

/// Tells the client that the list of runs changed (a run of this session
/// was kept; runs of other processes are not announced).
pub async fn announce(peer: &Peer<RoleServer>) {
    if let Err(e) = peer.notify_resource_list_changed().await {
        tracing::debug!("resources/list_changed not sent: {e}");
    }
}

pub fn templates() -> ListResourceTemplatesResult {
    let template = |uri: String, name: &str, mime: &str, what: &str| {
        ResourceTemplate::new(uri, name)
            .with_mime_type(mime)
            .with_description(what)
    };
    ListResourceTemplatesResult::with_all_items(vec![
        template(
            format!("{RUN_URI_PREFIX}{{run_id}}"),
            "run",
            JSON,
            "The full record of a run: prompt, answer, kind, every model call with its answer or failure.",
        ),
        template(
            format!("{RUN_URI_PREFIX}{{run_id}}/answer"),
            "answer",
            "text/markdown",
            "A run's final answer.",
        ),
        template(
            format!("{RUN_URI_PREFIX}{{run_id}}/calls/{{n}}"),
            "call",
            JSON,
            "One model call of a run: the request sent, the answer or failure, timing, tokens and cost.",
        ),
        template(
            RUNS_URI.to_owned(),
            "runs",
            JSON,
            "The newest runs, with a link to older ones.",
        ),
    ])
}

pub async fn read(chorus: &Chorus, uri: &str) -> Result<ReadResourceResult, McpError> {
    let address = parse(uri).map_err(|e| McpError::resource_not_found(e, None))?;
    let (text, mime) = match address {
        Address::Runs { before } => {
            let (runs, next) = page(chorus, before).await?;
            let listing = json!({
                "runs": runs,
                "next": next.map(|c| format!("{RUNS_URI}?before={c}")),
            });
            (pretty(&listing)?, JSON)
        }
        Address::Run(id) => (pretty(&run(chorus, uri, id, false).await?)?, JSON),
        Address::Answer(id) => {
            let run = run(chorus, uri, id, false).await?;
            let answer = run.answer.ok_or_else(|| {
                McpError::resource_not_found(
                    format!(
                        "run {id} has no answer: it is {}{}",
                        run.status.as_str(),
                        run.error.map(|e| format!(" ({e})")).unwrap_or_default()
                    ),
                    None,
                )
            })?;
            (answer, "text/markdown")
        }
        Address::Call(id, n) => {
            let run = run(chorus, uri, id, true).await?;
            let count = run.calls.len();
            let call = run.calls.into_iter().find(|c| c.call.id == n).ok_or_else(|| {
                McpError::resource_not_found(
                    format!("run {id} has no call {n}: its calls are numbered 0 to {count} (exclusive)"),
                    None,
                )
            })?;
            (pretty(&call)?, JSON)
        }
    };
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri.to_owned()).with_mime_type(mime),
    ]))
}

/// The run with exactly this id (a resource does not name runs by prefix).
async fn run(
    chorus: &Chorus,
    uri: &str,
    id: &str,
    with_requests: bool,
) -> Result<StoredRun, McpError> {
    match chorus.find_run(id, with_requests).await {
        Ok(Lookup::Found(run)) if run.run_id == id => Ok(run),
        Ok(_) => Err(McpError::resource_not_found(
            format!(
                "no run at `{uri}`: the id is unknown to {} (see resources/list)",
                chorus.store.describe()
            ),
            None,
        )),
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

fn pretty(value: &impl serde::Serialize) -> Result<String, McpError> {
    serde_json::to_string_pretty(value).map_err(|e| McpError::internal_error(e.to_string(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_say_what_is_valid() {
        assert_eq!(parse("chorus://runs"), Ok(Address::Runs { before: None }));
        assert_eq!(
            parse("chorus://runs?before=42"),
            Ok(Address::Runs {
                before: Some("42".parse().unwrap())
            })
        );
        assert_eq!(parse("chorus://runs/abc"), Ok(Address::Run("abc")));
        assert_eq!(
            parse("chorus://runs/abc/answer"),
            Ok(Address::Answer("abc"))
        );
        assert_eq!(
            parse("chorus://runs/abc/calls/3"),
            Ok(Address::Call("abc", 3))
        );
        for bad in [
            "chorus://runs/abc/calls/x",
            "chorus://runs/abc/what",
            "https://example.com",
            "chorus://runs?before=soon",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
