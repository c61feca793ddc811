//! The MCP server over stdio (rmcp): one tool per pipeline, progress
//! notifications while a run works, cancellation that drops the run's
//! in-flight requests, and recent runs as `chorus://runs/{id}` resources.
//! Nothing here writes to stdout but rmcp's JSON-RPC.

mod progress;
mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};

use crate::app::Chorus;

const RUN_URI_PREFIX: &str = "chorus://runs/";

#[derive(Clone)]
pub struct Server {
    chorus: Arc<Chorus>,
    tools: Arc<Vec<Tool>>,
}

impl Server {
    pub fn new(chorus: Arc<Chorus>) -> Self {
        let mut tools: Vec<Tool> = chorus
            .runner
            .pipelines()
            .map(|(name, pipeline)| tools::tool(name, pipeline))
            .collect();
        let synthesizers: Vec<&str> = chorus
            .runner
            .registry
            .iter()
            .filter(|p| p.kind == crate::plugins::Kind::Synthesizer)
            .map(|p| p.name.as_str())
            .collect();
        let pipelines: Vec<&str> = chorus.runner.pipelines().map(|(n, _)| n.as_str()).collect();
        tools.push(tools::resynthesize_tool(&synthesizers, &pipelines));
        Self {
            chorus,
            tools: Arc::new(tools),
        }
    }
}

/// Serves MCP on stdin/stdout until the client closes the connection.
pub async fn serve(chorus: Arc<Chorus>) -> anyhow::Result<()> {
    let running = Server::new(chorus).serve(rmcp::transport::stdio()).await?;
    let reason = running.waiting().await?;
    tracing::debug!("MCP session ended: {reason:?}");
    Ok(())
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("chorus", env!("CARGO_PKG_VERSION")).with_title("chorus"))
            .with_instructions(
                "Each tool asks several LLMs the same question in parallel and merges their answers. \
                 Pass the complete question as `prompt`. The result says what kind of answer it is \
                 and which models failed and why.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        if self.get_tool(&name).is_none() {
            let known: Vec<&str> = self.tools.iter().map(|t| &*t.name).collect();
            return Err(McpError::invalid_params(
                format!("no tool named `{name}` (tools: {})", known.join(", ")),
                None,
            ));
        }
        let progress =
            || progress::forwarder(context.peer.clone(), context.meta.get_progress_token());
        let run: futures::future::BoxFuture<'_, _> = if name == tools::RESYNTHESIZE {
            let (run_id, merger) = match tools::resynthesis_arguments(request.arguments) {
                Ok(arguments) => arguments,
                Err(message) => return Ok(tools::failure_text(&message).into()),
            };
            let progress = progress();
            Box::pin(async move { self.chorus.resynthesize(&run_id, merger, progress).await })
        } else {
            let (prompt, options) = match tools::split_arguments(request.arguments) {
                Ok(split) => split,
                Err(message) => return Ok(tools::failure_text(&message).into()),
            };
            Box::pin(self.chorus.run(&name, prompt, options, progress()))
        };
        let outcome = tokio::select! {
            outcome = run => outcome,
            () = context.ct.cancelled() => {
                // Dropping `run` above dropped every in-flight request.
                tracing::info!(tool = %name, "call cancelled by the client");
                return Err(McpError::invalid_request("the call was cancelled", None));
            }
        };
        Ok(match outcome {
            Ok(result) => tools::success(&result),
            Err(error) => {
                tracing::warn!(tool = %name, "run failed: {error}");
                tools::failure(&error)
            }
        }
        .into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        // The newest runs; paging through older ones comes with the MCP
        // side of the run store.
        let query = crate::store::Query {
            limit: 100,
            ..Default::default()
        };
        let page = self
            .chorus
            .list_runs(query)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let resources = page
            .runs
            .iter()
            .map(|run| {
                Resource::new(
                    format!("{RUN_URI_PREFIX}{}", run.run_id),
                    format!("run {}", run.run_id),
                )
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

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{RUN_URI_PREFIX}{{run_id}}"), "run")
                .with_mime_type("application/json")
                .with_description("The full record of a run: prompt, answer, kind, every model call with its answer or failure."),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let id = request.uri.strip_prefix(RUN_URI_PREFIX).unwrap_or_default();
        let run = match self.chorus.find_run(id, false).await {
            // A resource names a run by its full id.
            Ok(crate::store::Lookup::Found(run)) if run.run_id == id => run,
            Ok(_) => {
                return Err(McpError::resource_not_found(
                    format!(
                        "no run at `{}`: the id is unknown to {} (see resources/list)",
                        request.uri,
                        self.chorus.store.describe()
                    ),
                    None,
                ));
            }
            Err(e) => return Err(McpError::internal_error(e.to_string(), None)),
        };
        let text = serde_json::to_string_pretty(&run)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, request.uri.clone()).with_mime_type("application/json"),
        ])
        .into())
    }
}
