//! Kept runs as MCP resources, `chorus://runs/{id}`: the full record of
//! each — also of runs made by other chorus processes or earlier sessions —
//! read through the `Chorus` API, so the store behind it can change.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};

use crate::app::Chorus;
use crate::store::{Lookup, Query};

pub const RUN_URI_PREFIX: &str = "chorus://runs/";

/// How many of the newest runs `resources/list` shows.
const LISTED: usize = 100;

pub fn uri(run_id: &str) -> String {
    format!("{RUN_URI_PREFIX}{run_id}")
}

/// The newest runs; older ones stay readable by id (and through
/// `chorus runs`).
pub async fn list(chorus: &Chorus) -> Result<ListResourcesResult, McpError> {
    let query = Query {
        limit: LISTED,
        ..Default::default()
    };
    let page = chorus
        .list_runs(query)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let resources = page
        .runs
        .iter()
        .map(|run| {
            Resource::new(uri(&run.run_id), format!("run {}", run.run_id))
                .with_mime_type("application/json")
                .with_description(format!(
                    "{}: {}",
                    run.pipeline,
                    run.summary.as_deref().unwrap_or(run.status.as_str())
                ))
        })
        .collect();
    Ok(ListResourcesResult::with_all_items(resources))
}

pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{RUN_URI_PREFIX}{{run_id}}"), "run")
            .with_mime_type("application/json")
            .with_description(
                "The full record of a run: prompt, answer, kind, every model call with its answer or failure.",
            ),
    ])
}

pub async fn read(chorus: &Chorus, uri: &str) -> Result<ReadResourceResult, McpError> {
    let id = uri.strip_prefix(RUN_URI_PREFIX).unwrap_or_default();
    let run = match chorus.find_run(id, false).await {
        // A resource names a run by its full id, not a prefix.
        Ok(Lookup::Found(run)) if !id.is_empty() && run.run_id == id => run,
        Ok(_) => {
            return Err(McpError::resource_not_found(
                format!(
                    "no run at `{uri}`: the id is unknown to {} (see resources/list)",
                    chorus.store.describe()
                ),
                None,
            ));
        }
        Err(e) => return Err(McpError::internal_error(e.to_string(), None)),
    };
    let text = serde_json::to_string_pretty(&run)
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri.to_owned()).with_mime_type("application/json"),
    ]))
}
