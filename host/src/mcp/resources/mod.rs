//! Kept runs as MCP resources — also those made by other chorus processes
//! or before a restart — read through the `Chorus` API, so the store behind
//! it can change:
//!
//! - `chorus://runs`: the newest runs, as JSON, with a link to the next page
//!   (`chorus://runs?before=CURSOR`);
//! - `chorus://runs/{id}`: a run's record;
//! - `chorus://runs/{id}/answer`: its final answer, as markdown;
//! - `chorus://runs/{id}/calls/{n}`: one model call, with the request sent
//!   and the answer or failure;
//! - `chorus://runs/{id}/calls/{n}/reply`: that call's answer, as text.
//!
//! Every read fits one message ([`fit`]): records show long texts cut, and
//! a long answer or reply comes in parts (`?part=2`, …), each saying which
//! part it is and where the next one is. `resources/list` pages through
//! the runs, newest first.

use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use rmcp::service::Peer;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

use crate::app::Chorus;
use crate::client::Client;
use crate::record::{RunSummary, StoredCall, StoredRun};
use crate::store::{CallLookup, Cursor, Lookup, Query};

mod fit;
pub use fit::MAX_TEXT_BYTES;

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

/// What a `chorus://` address names. Parts count from 1.
#[derive(Debug, PartialEq, Eq)]
enum Address<'a> {
    Runs { before: Option<Cursor> },
    Run(&'a str),
    Answer(&'a str, usize),
    Call(&'a str, u32),
    Reply(&'a str, u32, usize),
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
    let (path, part) = match path.split_once("?part=") {
        None => (path, None),
        Some((path, n)) => match n.parse::<usize>() {
            Ok(n) if n >= 1 => (path, Some(n)),
            _ => {
                return Err(format!(
                    "`{n}` in `{uri}` is not a part number (parts count from 1)"
                ));
            }
        },
    };
    let call = |n: &str| {
        n.parse::<u32>()
            .map_err(|_| format!("`{n}` in `{uri}` is not a call number"))
    };
    let mut parts = path.split('/');
    let id = parts.next().filter(|id| !id.is_empty());
    let address = match (id, parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(id), None, ..) => Address::Run(id),
        (Some(id), Some("answer"), None, ..) => Address::Answer(id, part.unwrap_or(1)),
        (Some(id), Some("calls"), Some(n), None, _) => Address::Call(id, call(n)?),
        (Some(id), Some("calls"), Some(n), Some("reply"), None) => {
            Address::Reply(id, call(n)?, part.unwrap_or(1))
        }
        _ => {
            return Err(format!(
                "`{uri}` names nothing: use {RUNS_URI}, {RUN_URI_PREFIX}{{id}}, \
                 {RUN_URI_PREFIX}{{id}}/answer, {RUN_URI_PREFIX}{{id}}/calls/{{n}} or \
                 {RUN_URI_PREFIX}{{id}}/calls/{{n}}/reply"
            ));
        }
    };
    if part.is_some() && !matches!(address, Address::Answer(..) | Address::Reply(..)) {
        return Err(format!(
            "`{uri}`: only an answer or a reply comes in parts (…/answer?part=N, …/reply?part=N)"
        ));
    }
    Ok(address)
}

/// One page of runs, newest first; `cursor` continues an earlier page.
pub async fn list(
    chorus: &Chorus,
    client: &Client,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, McpError> {
    let before = cursor
        .map(str::parse::<Cursor>)
        .transpose()
        .map_err(|e| McpError::invalid_params(e, None))?;
    let (runs, next) = page(chorus, client, before).await?;
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
    client: &Client,
    before: Option<Cursor>,
) -> Result<(Vec<RunSummary>, Option<Cursor>), McpError> {
    let query = Query {
        before,
        client: client.only_own().map(str::to_owned),
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
            "The record of a run: prompt, answer, kind, every model call with its answer or failure (long texts cut, each cut naming where it is whole).",
        ),
        template(
            format!("{RUN_URI_PREFIX}{{run_id}}/answer"),
            "answer",
            "text/markdown",
            "A run's final answer, whole; a long one comes in parts (?part=2, …).",
        ),
        template(
            format!("{RUN_URI_PREFIX}{{run_id}}/calls/{{n}}"),
            "call",
            JSON,
            "One model call of a run: the request sent, the answer or failure, timing, tokens and cost.",
        ),
        template(
            format!("{RUN_URI_PREFIX}{{run_id}}/calls/{{n}}/reply"),
            "reply",
            "text/plain",
            "One model call's answer, whole; a long one comes in parts (?part=2, …).",
        ),
        template(
            RUNS_URI.to_owned(),
            "runs",
            JSON,
            "The newest runs, with a link to older ones.",
        ),
    ])
}

pub async fn read(
    chorus: &Chorus,
    client: &Client,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let address = parse(uri).map_err(|e| McpError::resource_not_found(e, None))?;
    let contents = match address {
        Address::Runs { before } => {
            let (runs, next) = page(chorus, client, before).await?;
            let listing = json!({
                "runs": runs,
                "next": next.map(|c| format!("{RUNS_URI}?before={c}")),
            });
            json_contents(uri, fit::whole(&listing))?
        }
        Address::Run(id) => {
            let run = run(chorus, client, uri, id).await?;
            let feedback = chorus.feedback_of(&run.run_id).await.unwrap_or_else(|e| {
                tracing::warn!("the feedback on run {} could not be read: {e}", run.run_id);
                Vec::new()
            });
            let mut record = to_value(&run)?;
            if let (false, Some(object)) = (feedback.is_empty(), record.as_object_mut()) {
                object.insert("feedback".into(), to_value(&feedback)?);
            }
            json_contents(uri, fit::run(record, uri))?
        }
        Address::Answer(id, number) => {
            let run = run(chorus, client, uri, id).await?;
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
            text_part(&uri_of_text(uri), &answer, number, "text/markdown")?
        }
        Address::Call(id, n) => {
            let call = call(chorus, client, id, n, true).await?;
            let call_uri = format!("{}/calls/{n}", self::uri(id));
            json_contents(uri, fit::call(to_value(&call)?, &call_uri))?
        }
        Address::Reply(id, n, number) => {
            let call = call(chorus, client, id, n, false).await?;
            let reply = call.call.reply.ok_or_else(|| {
                McpError::resource_not_found(
                    format!(
                        "call {n} of run {id} has no reply: it is {}",
                        call.call.status
                    ),
                    None,
                )
            })?;
            text_part(&uri_of_text(uri), &reply, number, "text/plain")?
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// A record's JSON as a resource, or why it cannot be one.
fn json_contents(uri: &str, fitted: Result<String, String>) -> Result<ResourceContents, McpError> {
    let text = fitted.map_err(|e| McpError::internal_error(format!("{uri}: {e}"), None))?;
    Ok(ResourceContents::text(text, uri.to_owned()).with_mime_type(JSON))
}

/// The address of a long text without its `?part=`.
fn uri_of_text(uri: &str) -> String {
    uri.split_once("?part=")
        .map_or(uri, |(base, _)| base)
        .to_owned()
}

/// Part `number` of a long text at `base`. A text in several parts says
/// so at its end (for a model reading it) and in `_meta` (for a program):
/// which part this is, how many there are, and the next one's address.
fn text_part(
    base: &str,
    text: &str,
    number: usize,
    mime: &str,
) -> Result<ResourceContents, McpError> {
    let part = fit::part(text, number, MAX_TEXT_BYTES - 256).ok_or_else(|| {
        let parts = fit::part(text, 1, MAX_TEXT_BYTES - 256).map_or(1, |p| p.parts);
        McpError::resource_not_found(
            format!("`{base}` has {parts} part(s); there is no part {number}"),
            None,
        )
    })?;
    let this = if part.number == 1 {
        base.to_owned()
    } else {
        format!("{base}?part={}", part.number)
    };
    if part.parts == 1 {
        return Ok(ResourceContents::text(part.text, this).with_mime_type(mime));
    }
    let next = (part.number < part.parts).then(|| format!("{base}?part={}", part.number + 1));
    let footer = match &next {
        Some(next) => format!(
            "\n\n[part {} of {} of {} bytes; the text goes on at {next}]",
            part.number,
            part.parts,
            text.len()
        ),
        None => format!(
            "\n\n[part {} of {}: the end of {} bytes]",
            part.number,
            part.parts,
            text.len()
        ),
    };
    let mut meta = serde_json::Map::new();
    meta.insert("chorus/part".into(), json!(part.number));
    meta.insert("chorus/parts".into(), json!(part.parts));
    meta.insert("chorus/bytes".into(), json!(text.len()));
    if let Some(next) = next {
        meta.insert("chorus/next".into(), json!(next));
    }
    Ok(
        ResourceContents::text(format!("{}{footer}", part.text), this)
            .with_mime_type(mime)
            .with_meta(rmcp::model::MetaObject(meta)),
    )
}

/// One call of the run `id` (exact), read without the run's other calls.
async fn call(
    chorus: &Chorus,
    client: &Client,
    id: &str,
    n: u32,
    with_request: bool,
) -> Result<StoredCall, McpError> {
    if !client.admin {
        // Another client's run is unknown, its calls too.
        run(chorus, client, &uri(id), id).await?;
    }
    match chorus.find_call(id, n, with_request).await {
        Ok(CallLookup::Found(call)) => Ok(call),
        Ok(CallLookup::NoSuchCall { calls }) => Err(McpError::resource_not_found(
            format!("run {id} has no call {n}: its calls are numbered 0 to {calls} (exclusive)"),
            None,
        )),
        Ok(CallLookup::UnknownRun) => Err(unknown_run(chorus, &uri(id))),
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

fn unknown_run(chorus: &Chorus, uri: &str) -> McpError {
    McpError::resource_not_found(
        format!(
            "no run at `{uri}`: the id is unknown to {} (see resources/list)",
            chorus.store.describe_for_clients()
        ),
        None,
    )
}

/// The run with exactly this id (a resource does not name runs by prefix),
/// without its requests.
async fn run(chorus: &Chorus, client: &Client, uri: &str, id: &str) -> Result<StoredRun, McpError> {
    match chorus.find_run_for(client, id, false).await {
        Ok(Lookup::Found(run)) if run.run_id == id => Ok(run),
        Ok(_) => Err(unknown_run(chorus, uri)),
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

fn to_value(value: &impl serde::Serialize) -> Result<serde_json::Value, McpError> {
    serde_json::to_value(value).map_err(|e| McpError::internal_error(e.to_string(), None))
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
            Ok(Address::Answer("abc", 1))
        );
        assert_eq!(
            parse("chorus://runs/abc/answer?part=3"),
            Ok(Address::Answer("abc", 3))
        );
        assert_eq!(
            parse("chorus://runs/abc/calls/3"),
            Ok(Address::Call("abc", 3))
        );
        assert_eq!(
            parse("chorus://runs/abc/calls/3/reply?part=2"),
            Ok(Address::Reply("abc", 3, 2))
        );
        for bad in [
            "chorus://runs/abc/calls/x",
            "chorus://runs/abc/calls/x/reply",
            "chorus://runs/abc/answer?part=0",
            "chorus://runs/abc/answer?part=two",
            "chorus://runs/abc?part=2",
            "chorus://runs/abc/calls/1/reply/more",
            "chorus://runs/abc/what",
            "https://example.com",
            "chorus://runs?before=soon",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
