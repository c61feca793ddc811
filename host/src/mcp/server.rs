//! The MCP request handler: who chorus says it is, its tools (one per
//! pipeline), a tool call run synchronously with progress or as a task,
//! the task methods, and the run resources.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams,
    GetTaskResult, Implementation, InitializeRequestParams, InitializeResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use super::progress::Reporter;
use super::tasks::{Call, Tasks};
use super::transport::Session;
use super::{resources, tools};
use crate::app::Chorus;

#[derive(Clone)]
pub struct Server {
    chorus: Arc<Chorus>,
    tools: Arc<Vec<Tool>>,
    tasks: Arc<Tasks>,
    session: Session,
}

impl Server {
    pub fn new(chorus: Arc<Chorus>, session: Session) -> Self {
        let tools = chorus
            .runner
            .pipelines()
            .map(|(name, pipeline)| tools::tool(name, pipeline))
            .collect();
        let tasks = Tasks::new(chorus.loaded().config.limits.task_ttl);
        Self {
            chorus,
            tools: Arc::new(tools),
            tasks: Arc::new(tasks),
            session,
        }
    }

    /// Stops every task (the session is over).
    pub fn shutdown(&self) {
        self.tasks.shutdown();
    }

    /// A run answered in the call's response, with progress notifications
    /// when the client asked for them; the last one is sent before the
    /// response.
    async fn call_now(
        &self,
        call: Call,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = Instant::now();
        let reporter = Reporter::start(context.peer.clone(), context.meta.get_progress_token());
        let run = self.chorus.run(
            &call.pipeline,
            call.prompt,
            call.options,
            reporter.progress(),
        );
        let outcome = tokio::select! {
            outcome = run => outcome,
            () = context.ct.cancelled() => {
                // Dropping `run` dropped every request in flight; rmcp sends
                // nothing for a cancelled request.
                tracing::info!(tool = %call.pipeline, "call cancelled by the client");
                return Err(McpError::invalid_request("the call was cancelled", None));
            }
            () = self.session.ended() => {
                return Err(McpError::invalid_request("the client went away", None));
            }
        };
        let (result, summary) = match outcome {
            Ok(record) => (tools::success(&record), record.summary.clone()),
            Err(error) => {
                tracing::info!(tool = %call.pipeline, "run failed: {error}");
                let summary = format!("failed: {error}");
                (
                    tools::failure(&call.pipeline, &error, started.elapsed()),
                    summary,
                )
            }
        };
        reporter.finish(summary).await;
        Ok(result.into())
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("chorus", env!("CARGO_PKG_VERSION")).with_title("chorus"))
            .with_instructions(
                "Each tool asks several LLMs the same question in parallel and merges their answers. \
                 Pass the complete question as `prompt`. The result says what kind of answer it is \
                 and which models failed and why.",
            )
    }

    /// The handshake, answered like rmcp's own (the session is served
    /// directly, so anything may arrive before it — see `mcp::serve`), with
    /// the negotiated version remembered for the rest of the session.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let result = self.negotiate_initialize(&request)?;
        let mut peer = request;
        peer.protocol_version = result.protocol_version.clone();
        context.peer.set_peer_info(peer);
        Ok(result)
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
        let (prompt, options) = match tools::split_arguments(request.arguments) {
            Ok(split) => split,
            Err(message) => return Ok(tools::refusal(&name, &message).into()),
        };
        let call = Call {
            pipeline: name,
            prompt,
            options,
        };
        // Tasks are part of MCP 2026-07-28: a client on an older version may
        // declare the extension (the Inspector CLI does) without being able
        // to read a task in place of a result, so it gets the result.
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        let wants_task = modern
            && context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks());
        if wants_task {
            let task = self.tasks.start(
                self.chorus.clone(),
                call,
                context.peer.clone(),
                self.session.clone(),
            );
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        self.call_now(call, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tasks.get(&request.task_id).map(GetTaskResult::new)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel(&request.task_id)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(resources::list(&self.chorus))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        resources::read(&self.chorus, &request.uri).map(Into::into)
    }
}
