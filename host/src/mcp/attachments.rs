//! A tool call's attachments, read before its run starts: which paths the
//! caller may name (none over HTTP; over stdio the client's MCP roots and
//! `[limits] attachment_dirs`), asking the client for its roots the way
//! its protocol version allows — `roots/list` before 2026-07-28, an
//! `input_required` result naming a `roots/list` input request from then
//! on (MCP forbids server-to-client requests there) — and the files read
//! off the async runtime.
// rmcp marks the roots API deprecated since SEP-2577; it is still how MCP
// clients share the directories a user opened, and what the issue asks.
#![expect(deprecated, reason = "roots are how clients share their directories")]

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, InputRequest, InputRequiredResult, ListRootsRequest, ListRootsResult,
    ProtocolVersion,
};
use rmcp::service::RequestContext;

use super::tools::{Call, Work};
use crate::attach::{self, Access, Source};

/// The key of the roots request in an `input_required` result.
const ROOTS: &str = "roots";

/// The longest chorus waits for a client's roots.
const ROOTS_WAIT: Duration = Duration::from_secs(10);

/// What to do with a call that names attachments.
pub enum Next {
    /// Read: run it.
    Ready(Call),
    /// Ask the client for its roots first, then it calls again.
    Ask(InputRequiredResult),
    /// Say what is wrong.
    Refuse(String),
}

/// Reads `call`'s attachments into its question, within what `context`'s
/// client may attach.
pub async fn load(
    mut call: Call,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    limits: &crate::config::Limits,
    over_http: bool,
) -> Next {
    let Work::Run {
        question, sources, ..
    } = &mut call.work
    else {
        return Next::Ready(call);
    };
    if sources.is_empty() {
        return Next::Ready(call);
    }
    let access = if over_http {
        Access::Remote
    } else if !sources.iter().any(|s| matches!(s, Source::Path(_))) {
        Access::Within(Vec::new())
    } else {
        match roots(request, context).await {
            Ok(roots) => {
                let uris: Vec<&str> = roots.roots.iter().map(|r| r.uri.as_str()).collect();
                Access::within(uris, &limits.attachment_dirs)
            }
            Err(Some(ask)) => return Next::Ask(ask),
            Err(None) => Access::within([], &limits.attachment_dirs),
        }
    };
    let sources = std::mem::take(sources);
    let limits = limits.attachments();
    let read = tokio::task::spawn_blocking(move || attach::load(sources, &access, &limits)).await;
    match read {
        Ok(Ok(attachments)) => {
            question.attachments = attachments;
            Next::Ready(call)
        }
        Ok(Err(message)) => Next::Refuse(message),
        Err(e) => Next::Refuse(format!("reading the attachments failed: {e}")),
    }
}

/// The client's roots; `Err(Some)` to ask for them in an `input_required`
/// result, `Err(None)` when the client shares none.
async fn roots(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<ListRootsResult, Option<InputRequiredResult>> {
    if let Some(answer) = request.input_responses.as_ref().and_then(|r| r.get(ROOTS)) {
        return serde_json::from_value(answer.clone()).map_err(|e| {
            tracing::info!("the client's roots answer is not a roots/list result ({e}); no roots");
            None
        });
    }
    let shares_roots = context
        .client_capabilities()
        .is_some_and(|c| c.roots.is_some());
    if !shares_roots {
        return Err(None);
    }
    let modern = context
        .protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
    if modern {
        let ask = [(
            ROOTS.to_owned(),
            InputRequest::ListRoots(ListRootsRequest::default()),
        )];
        return Err(Some(InputRequiredResult::from_input_requests(
            ask.into_iter().collect(),
        )));
    }
    // Before 2026-07-28 the server asks the client directly.
    let asked = context.peer.list_roots();
    match tokio::time::timeout(ROOTS_WAIT, asked).await {
        Ok(Ok(roots)) => Ok(roots),
        Ok(Err(e)) => {
            tracing::info!("the client did not answer roots/list ({e}); no roots");
            Err(None)
        }
        Err(_) => {
            tracing::info!("the client did not answer roots/list within {ROOTS_WAIT:?}; no roots");
            Err(None)
        }
    }
}
