//! Recent runs as MCP resources, `chorus://runs/{id}`: the full record of
//! each, read through the `Chorus` API so the store behind it can change.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};

use crate::app::Chorus;

pub const RUN_URI_PREFIX: &str = "chorus://runs/";

pub fn uri(run_id: &str) -> String {
    format!("{RUN_URI_PREFIX}{run_id}")
}

pub fn list(chorus: &Chorus) -> ListResourcesResult {
    let resources = chorus
        .runs
        .list()
        .iter()
        .map(|run| {
            Resource::new(uri(&run.run_id), format!("run {}", run.run_id))
                .with_mime_type("application/json")
                .with_description(format!("{}: {}", run.pipeline, run.summary))
        })
        .collect();
    ListResourcesResult::with_all_items(resources)
}

pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{RUN_URI_PREFIX}{{run_id}}"), "run")
            .with_mime_type("application/json")
            .with_description(
                "The full record of a recent run: answer, kind, every model call and its outcome.",
            ),
    ])
}

pub fn read(chorus: &Chorus, uri: &str) -> Result<ReadResourceResult, McpError> {
    let run = uri
        .strip_prefix(RUN_URI_PREFIX)
        .and_then(|id| chorus.runs.get(id))
        .ok_or_else(|| {
            McpError::resource_not_found(
                format!("no run at `{uri}` (runs are kept for a limited time; see resources/list)"),
                None,
            )
        })?;
    let text = serde_json::to_string_pretty(&*run)
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri.to_owned()).with_mime_type("application/json"),
    ]))
}
