//! Task mode (MCP extension `io.modelcontextprotocol/tasks`, SEP-2663, part
//! of MCP 2026-07-28): for a client on 2026-07-28 that declares the
//! extension, a pipeline's `tools/call` returns a task at once and the run
//! goes on in the background, so no client timeout can cut it short. Built on rmcp's `TaskManager`, which keeps the tasks,
//! answers `tasks/get` and expires them after `limits.task_ttl`; this module
//! adds what chorus knows:
//!
//! - `tasks/get` shows a live status message ("3/5 answered; waiting on
//!   x-ai/grok-4 for 41 s") while the run works, and its summary after;
//! - `tasks/cancel` stops the run, dropping its upstream requests;
//! - a `notifications/tasks` goes out when a stage begins, a model answers
//!   or fails, and when the task reaches its end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, DetailedTask, JsonObject, Notification, ServerNotification, Task,
    TaskStatusNotificationParams,
};
use rmcp::service::Peer;
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};

use super::progress::Live;
use super::tools;
use super::transport::Session;
use crate::app::Chorus;

/// How often a client should poll `tasks/get`, in milliseconds.
const POLL_INTERVAL_MS: u64 = 1_000;

type Registry = Arc<Mutex<HashMap<String, Arc<Live>>>>;

pub struct Tasks {
    manager: TaskManager,
    /// The state of each task still running, for its status message.
    live: Registry,
    ttl: Duration,
}

/// What a task runs: one pipeline call.
pub struct Call {
    pub pipeline: String,
    pub prompt: String,
    pub options: JsonObject,
}

impl Tasks {
    pub fn new(ttl: Duration) -> Self {
        Self {
            manager: TaskManager::new(),
            live: Registry::default(),
            ttl,
        }
    }

    /// Starts `call` as a task and returns it (status `working`).
    pub fn start(
        &self,
        chorus: Arc<Chorus>,
        call: Call,
        peer: Peer<RoleServer>,
        session: Session,
    ) -> Task {
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let options = TaskOptions::new()
            .with_ttl_ms(ttl_ms)
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_status_message("starting");
        let (manager, registry) = (self.manager.clone(), self.live.clone());
        self.manager.spawn(options, move |context| {
            let live = Live::new();
            let id = context.task_id().to_owned();
            registry
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id.clone(), live.clone());
            let notifier = Notifier {
                id: id.clone(),
                manager,
                registry: registry.clone(),
                peer,
            };
            Box::pin(async move {
                let _forget = Forget { id, registry };
                run(context, chorus, call, live, session, notifier).await
            })
        })
    }

    /// `tasks/get`, with the live status message of a running task.
    pub fn get(&self, id: &str) -> Result<DetailedTask, McpError> {
        with_live_status(&self.manager, &self.live, id)
    }

    /// `tasks/cancel`: the run stops; the task ends `cancelled`.
    pub fn cancel(&self, id: &str) -> Result<(), McpError> {
        self.manager.cancel_task(id)
    }

    /// The session is over: every task stops and is forgotten.
    pub fn shutdown(&self) {
        self.manager.shutdown();
    }
}

fn with_live_status(
    manager: &TaskManager,
    registry: &Registry,
    id: &str,
) -> Result<DetailedTask, McpError> {
    let mut task = manager.get_task(id)?;
    if !task.status().is_terminal() {
        let live = registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned();
        if let Some(live) = live {
            task.task.status_message = Some(live.watch().status(Instant::now()));
        }
    }
    Ok(task)
}

async fn run(
    context: TaskContext,
    chorus: Arc<Chorus>,
    call: Call,
    live: Arc<Live>,
    session: Session,
    notifier: Notifier,
) -> Result<CallToolResult, TaskExit> {
    let started = Instant::now();
    let work = chorus.run(&call.pipeline, call.prompt, call.options, live.progress());
    let outcome = tokio::select! {
        outcome = work => outcome,
        never = notifier.follow(&live) => match never {},
        () = context.cancelled() => {
            tracing::info!(task = context.task_id(), "task cancelled by the client");
            notifier.when_settled();
            return Err(TaskExit::Cancelled);
        }
        () = session.ended() => return Err(TaskExit::Cancelled),
    };
    live.watch().finish();
    let result = match outcome {
        Ok(record) => {
            context.set_status_message(record.summary.clone());
            tools::success(&record)
        }
        Err(error) => {
            context.set_status_message(format!("failed: {error}"));
            tools::failure(&call.pipeline, &error, started.elapsed())
        }
    };
    notifier.when_settled();
    Ok(result)
}

/// Sends a task's `notifications/tasks`.
struct Notifier {
    id: String,
    manager: TaskManager,
    registry: Registry,
    peer: Peer<RoleServer>,
}

impl Notifier {
    /// One notification per change worth telling (not per heartbeat).
    async fn follow(&self, live: &Live) -> std::convert::Infallible {
        loop {
            live.changed().await;
            live.take_lines();
            if let Ok(task) = with_live_status(&self.manager, &self.registry, &self.id) {
                send(&self.peer, task).await;
            }
        }
    }

    /// The task's last notification, once the manager has recorded how it
    /// ended (just after the run's future returns).
    fn when_settled(&self) {
        let (id, manager, peer) = (self.id.clone(), self.manager.clone(), self.peer.clone());
        tokio::spawn(async move {
            for _ in 0..200 {
                match manager.get_task(&id) {
                    Ok(task) if task.status().is_terminal() => return send(&peer, task).await,
                    Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                    Err(_) => return,
                }
            }
        });
    }
}

async fn send(peer: &Peer<RoleServer>, task: DetailedTask) {
    let notification = ServerNotification::TaskStatusNotification(Notification::new(
        TaskStatusNotificationParams::new(task),
    ));
    if let Err(e) = peer.send_notification(notification).await {
        tracing::debug!("cannot send a task status notification: {e}");
    }
}

/// Drops a task's live state however its run ends (finished, cancelled,
/// expired, or the session gone).
struct Forget {
    id: String,
    registry: Registry,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}
