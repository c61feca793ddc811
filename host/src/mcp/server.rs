//! The MCP request handler: who chorus says it is, its tools (one per
//! pipeline), a tool call run synchronously with progress (and log
//! messages) or as a task, the task methods, the run resources, and the
//! client's log level.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams,
    GetTaskResult, Implementation, InitializeRequestParams, InitializeResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use super::logging::{self, CallLog, Levels};
use super::progress::Reporter;
use super::tasks::Tasks;
use super::tools::Call;
use super::transport::Session;
use super::{app, attachments, changes, resources, tools};
use crate::app::Chorus;
use crate::client::Client;

#[derive(Clone)]
pub struct Server {
    chorus: Arc<Chorus>,
    tasks: Arc<Tasks>,
    session: Session,
    /// Who a request is when its transport names no client (stdio).
    local: Arc<Client>,
    /// The log level each client set (`logging/setLevel`).
    levels: Arc<Levels>,
}

impl Server {
    /// The chorus this server serves.
    pub fn chorus(&self) -> &Arc<Chorus> {
        &self.chorus
    }

    pub fn new(chorus: Arc<Chorus>, session: Session) -> Self {
        let tasks = Tasks::new(chorus.runner().loaded.config.limits.task_ttl);
        Self {
            chorus,
            tasks: Arc::new(tasks),
            session,
            local: Client::local(),
            levels: Arc::default(),
        }
    }

    /// The client making the request: the one its HTTP token named (see
    /// `http::access`), or the local user.
    fn client(&self, context: &RequestContext<RoleServer>) -> Arc<Client> {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<Client>>())
            .cloned()
            .unwrap_or_else(|| self.local.clone())
    }

    /// Announces every change of the tool list to a client on stdio (see
    /// [`changes`]), and each reload's outcome to its log.
    pub fn announce_tool_changes(&self, peer: rmcp::service::Peer<RoleServer>) {
        changes::announce_to_session(&self.chorus, peer.clone(), self.session.clone());
        self.announce_reloads(peer);
    }

    /// Logs each reload to the stdio client, at its level: `notice` for a
    /// new configuration in force, `info` for one that changed nothing,
    /// `warning` for a change refused (the old one keeps serving).
    #[allow(deprecated)] // MCP logging: see `logging`.
    fn announce_reloads(&self, peer: rmcp::service::Peer<RoleServer>) {
        use rmcp::model::LoggingLevel;
        let mut reloads = self.chorus.reloads();
        let (session, levels, local) = (
            self.session.clone(),
            self.levels.clone(),
            self.local.clone(),
        );
        tokio::spawn(async move {
            loop {
                let notice = tokio::select! {
                    notice = reloads.recv() => notice,
                    () = session.ended() => return,
                };
                let notice = match notice {
                    Ok(notice) => notice,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let level = match (notice.refused, notice.swapped) {
                    (true, _) => LoggingLevel::Warning,
                    (false, true) => LoggingLevel::Notice,
                    (false, false) => LoggingLevel::Info,
                };
                if peer.peer_info().is_some() && logging::admits(levels.of(&local), level) {
                    logging::send(&peer, level, notice.text).await;
                }
            }
        });
    }

    /// Waits (at most `within`) until every task has ended and its end is
    /// in the store.
    pub async fn settle(&self, within: std::time::Duration) {
        self.tasks.settle(within).await;
    }

    /// Stops every task (the session is over).
    pub fn shutdown(&self) {
        self.tasks.shutdown();
    }

    /// A run answered in the call's response, with progress notifications
    /// when the client asked for them; none is sent with the response or
    /// after it (see [`progress`](super::progress)).
    async fn call_now(
        &self,
        call: Call,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = Instant::now();
        let reporter = Reporter::start(context.peer.clone(), context.meta.get_progress_token());
        let level = self
            .levels
            .for_request(&self.client(&context), &context.meta);
        let log = CallLog::start(context.peer.clone(), level);
        let tool = call.tool.clone();
        let progress = crate::events::fan(vec![reporter.progress(), log.progress()]);
        let run = call.execute(&self.chorus, progress);
        let outcome = tokio::select! {
            outcome = run => outcome,
            () = cancelled(&context) => {
                // Dropping `run` dropped every request in flight; rmcp sends
                // nothing for a cancelled request.
                tracing::info!(%tool, "call cancelled by the client");
                return Err(McpError::invalid_request("the call was cancelled", None));
            }
            () = self.session.ended() => {
                return Err(McpError::invalid_request(
                    "the call was stopped: the client went away, or this chorus is shutting down",
                    None,
                ));
            }
        };
        let kept = tools::kept(&outcome);
        let result = match outcome {
            Ok(record) => tools::success(&record),
            Err(error) => {
                tracing::info!(%tool, "run failed: {error}");
                log.failed(format!("{tool} failed: {error}"));
                tools::failure(&tool, &error, started.elapsed())
            }
        };
        log.finish().await;
        reporter.finish().await;
        if kept {
            resources::announce(&context.peer).await;
        }
        Ok(result.into())
    }
}

/// A transport's own way to stop one call, put in the request's HTTP
/// extensions (see `http::cancel`): the call ends as if rmcp had cancelled
/// it, while its response still takes rmcp's ordinary path.
#[derive(Clone, Debug, Default)]
pub struct StopCall(pub CancellationToken);

/// Resolves when the call is cancelled: by rmcp (`notifications/cancelled`
/// on stdio), or through its [`StopCall`].
async fn cancelled(context: &RequestContext<RoleServer>) {
    let stop = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<StopCall>())
        .map(|stop| stop.0.clone());
    match stop {
        Some(stop) => tokio::select! {
            () = context.ct.cancelled() => {}
            () = stop.cancelled() => {}
        },
        None => context.ct.cancelled().await,
    }
}

/// The caller's trace context: `traceparent` (and `tracestate`) in the
/// request's `_meta` (SEP-414), else in its HTTP headers.
fn caller_trace(context: &RequestContext<RoleServer>) -> Option<opentelemetry::Context> {
    if let Some(traceparent) = context.meta.get_traceparent() {
        return crate::telemetry::parent(Some(traceparent), context.meta.get_tracestate());
    }
    let headers = &context
        .extensions
        .get::<axum::http::request::Parts>()?
        .headers;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    crate::telemetry::parent(header("traceparent"), header("tracestate"))
}

/// The tools `client` may call: the pipelines granted to it, and
/// `resynthesize` and `feedback` (over its own runs).
fn granted(tools: &[Tool], client: &Client) -> Vec<Tool> {
    tools
        .iter()
        .filter(|t| over_own_runs(&t.name) || client.may_run(&t.name))
        .cloned()
        .collect()
}

/// A tool that works on the caller's own runs, not a pipeline's.
fn over_own_runs(tool: &str) -> bool {
    tool == tools::RESYNTHESIZE || tool == tools::feedback::FEEDBACK
}

impl ServerHandler for Server {
    #[allow(deprecated)] // MCP logging: see `logging`.
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
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

    /// The client's log level from now on (see `logging`): for this stdio
    /// session, or over HTTP for the client the token names.
    #[allow(deprecated)] // MCP logging: see `logging`.
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.levels.set(&self.client(&context), request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let client = self.client(&context);
        let tools = granted(&changes::current(&self.chorus), &client);
        let tools = if app::wanted(&context) {
            app::mark(tools)
        } else {
            tools
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        changes::current(&self.chorus)
            .iter()
            .find(|t| t.name == name)
            .cloned()
    }

    /// A 2026-07-28 client hears of tool list changes on a
    /// `subscriptions/listen` stream.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        changes::listen(&self.chorus, subscription, &self.session).await;
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let client = self.client(&context);
        let all = changes::current(&self.chorus);
        // A tool this client may not call is a protocol error here (it is
        // not in its `tools/list`); the message is the gate's own.
        if name == tools::feedback::FEEDBACK && all.iter().any(|t| t.name == name) {
            let result = tools::feedback::call(&self.chorus, &client, request.arguments).await;
            return Ok(result.into());
        }
        if all.iter().any(|t| t.name == name)
            && !over_own_runs(&name)
            && let Some(why) = client.refusal_to_run(&name)
        {
            tracing::info!(target: crate::app::AUDIT, client = %client.name, pipeline = %name, reason = %why, "refused a run");
            return Err(McpError::invalid_params(why, None));
        }
        if !all.iter().any(|t| t.name == name) {
            let tools = granted(&all, &client);
            let known: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool: no tool named `{name}` (tools: {})",
                    known.join(", ")
                ),
                None,
            ));
        }
        let mut call = match Call::parse(name.clone(), request.arguments.clone(), client) {
            Ok(call) => call,
            Err(message) => return Ok(tools::refusal(&name, &message).into()),
        };
        if self.chorus.telemetry.is_on() {
            call.trace = caller_trace(&context);
        }
        let over_http = context
            .extensions
            .get::<axum::http::request::Parts>()
            .is_some();
        let limits = &self.chorus.runner().loaded.config.limits;
        let call = match attachments::load(call, &request, &context, limits, over_http).await {
            attachments::Next::Ready(call) => call,
            attachments::Next::Ask(ask) => return Ok(CallToolResponse::InputRequired(ask)),
            attachments::Next::Refuse(message) => {
                return Ok(tools::refusal(&name, &message).into());
            }
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
            let task = self
                .tasks
                .start(
                    self.chorus.clone(),
                    call,
                    context.peer.clone(),
                    self.session.clone(),
                )
                .await;
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        self.call_now(call, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let client = self.client(&context);
        self.tasks
            .get(&self.chorus, &client, &request.task_id)
            .await
            .map(GetTaskResult::new)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let client = self.client(&context);
        self.tasks
            .cancel(&self.chorus, &client, &request.task_id)
            .await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let client = self.client(&context);
        let mut page = resources::list(&self.chorus, &client, cursor).await?;
        if cursor.is_none() && app::wanted(&context) {
            page.resources.insert(0, app::resource());
        }
        Ok(page)
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
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if request.uri == app::URI {
            return if app::wanted(&context) {
                Ok(app::read().into())
            } else {
                Err(app::not_offered())
            };
        }
        let client = self.client(&context);
        resources::read(&self.chorus, &client, &request.uri)
            .await
            .map(Into::into)
    }
}
