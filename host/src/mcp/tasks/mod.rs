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
//!   or fails, and when the task reaches its end;
//! - a task expires on a timer at its TTL (the manager only checks when
//!   called), so an abandoned task's run and upstream requests stop then,
//!   and a finished one is forgotten a TTL later;
//! - a finished task's result is read back from the run store
//!   ([`results`]), not held in memory;
//! - a task is its client's: another client (not an admin) asking for it
//!   hears of an unknown task, as for an id that never was;
//! - a task is kept in the run store too ([`shared`]), so every instance
//!   on one store answers `tasks/get` and `tasks/cancel` for it.

mod results;
mod shared;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, DetailedTask, Notification, ServerNotification, Task,
    TaskStatusNotificationParams,
};
use rmcp::service::Peer;
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};

use results::Results;

use super::progress::Live;
use super::tools::{self, Call};
use super::transport::Session;
use crate::app::Chorus;
use crate::client::Client;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// How often a client should poll `tasks/get`, in milliseconds.
const POLL_INTERVAL_MS: u64 = 1_000;

type Registry = Arc<Mutex<HashMap<String, Arc<Live>>>>;

pub struct Tasks {
    manager: TaskManager,
    /// The client that started each task not yet forgotten.
    owners: Arc<Mutex<HashMap<String, String>>>,
    /// The state of each task still running, for its status message.
    live: Registry,
    results: Arc<Results>,
    ttl: Duration,
    /// Tasks whose state is still being mirrored into the store.
    mirrors: Arc<AtomicUsize>,
}

/// What a task stopped by the end of its session says.
const STOPPED: &str = "the task was stopped: this chorus is shutting down (or the client's \
     session ended) before its run finished; call the tool again";

impl Tasks {
    pub fn new(ttl: Duration) -> Self {
        Self {
            manager: TaskManager::new(),
            owners: Arc::default(),
            live: Registry::default(),
            results: Arc::default(),
            ttl,
            mirrors: Arc::default(),
        }
    }

    /// Starts `call` as a task and returns it (status `working`), once
    /// the store has it (or a bounded wait for the store has passed).
    pub async fn start(
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
        let (results, ttl) = (self.results.clone(), self.ttl);
        let (owners, owner) = (self.owners.clone(), call.client.name.clone());
        let mirror = (chorus.clone(), self.live.clone(), self.results.clone());
        let task = self.manager.spawn(options, move |context| {
            let live = Live::new();
            let id = context.task_id().to_owned();
            registry
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id.clone(), live.clone());
            let notifier_manager = manager.clone();
            let notifier = Notifier {
                id: id.clone(),
                manager,
                registry: registry.clone(),
                peer,
                chorus: chorus.clone(),
                results: results.clone(),
            };
            Box::pin(async move {
                let _forget = Forget {
                    id: id.clone(),
                    registry,
                };
                let ended = run(context, chorus, call, live, session, notifier, &results).await;
                // Forgotten (and its result freed) a TTL after it ends.
                expire_after(notifier_manager, ttl, move || {
                    results.forget(&id);
                    lock(&owners).remove(&id);
                });
                ended
            })
        });
        lock(&self.owners).insert(task.task_id.clone(), owner.clone());
        expire_after(self.manager.clone(), self.ttl, || ());
        let (chorus, registry, results) = mirror;
        shared::Mirror {
            chorus,
            manager: self.manager.clone(),
            registry,
            results,
            id: task.task_id.clone(),
            client: owner,
            ttl: self.ttl,
            mirrors: self.mirrors.clone(),
        }
        .start()
        .await;
        task
    }

    /// Refuses a task `client` did not start, as rmcp refuses an unknown id.
    fn owned(&self, client: &Client, id: &str) -> Result<(), McpError> {
        let owner = lock(&self.owners).get(id).cloned();
        if client.admin || owner.is_none_or(|owner| owner == client.name) {
            return Ok(());
        }
        Err(McpError::invalid_params(
            format!("unknown task: {id}"),
            None,
        ))
    }

    /// `tasks/get`, with the live status message of a running task, and
    /// a finished one's result read back from the store.
    pub async fn get(
        &self,
        chorus: &Chorus,
        client: &Client,
        id: &str,
    ) -> Result<DetailedTask, McpError> {
        self.owned(client, id)?;
        match with_live_status(&self.manager, &self.live, id) {
            Ok(mut task) => {
                self.results.fill(chorus, &mut task).await;
                Ok(task)
            }
            // Not run here: perhaps by another instance on the store.
            Err(unknown) => shared::get(chorus, &self.results, client, id)
                .await?
                .ok_or(unknown),
        }
    }

    /// `tasks/cancel`: the run stops (here, or on the instance running
    /// it); the task ends `cancelled`.
    pub async fn cancel(&self, chorus: &Chorus, client: &Client, id: &str) -> Result<(), McpError> {
        self.owned(client, id)?;
        match self.manager.cancel_task(id) {
            Ok(()) => Ok(()),
            Err(unknown) => shared::cancel(chorus, client, id).await?.ok_or(unknown),
        }
    }

    /// Waits (at most `within`) until no task runs and every task's end
    /// has been written to the store.
    pub async fn settle(&self, within: Duration) {
        let started = Instant::now();
        while started.elapsed() < within
            && (self.manager.running_task_count() > 0 || self.mirrors.load(Ordering::SeqCst) > 0)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The session is over: every task stops and is forgotten.
    pub fn shutdown(&self) {
        self.manager.shutdown();
    }
}

/// Sweeps `manager` once `ttl` has passed (just after), which is when a
/// task started now expires, or one ending now is forgotten: rmcp's
/// manager looks only when it is called, and an abandoned task is not.
fn expire_after(manager: TaskManager, ttl: Duration, then: impl FnOnce() + Send + 'static) {
    tokio::spawn(async move {
        tokio::time::sleep(ttl + Duration::from_millis(20)).await;
        manager.running_task_count();
        then();
    });
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
    results: &Results,
) -> Result<CallToolResult, TaskExit> {
    let started = Instant::now();
    let tool = call.tool.clone();
    let work = call.execute(&chorus, live.progress());
    let outcome = tokio::select! {
        outcome = work => outcome,
        never = notifier.follow(&live) => match never {},
        () = context.cancelled() => {
            tracing::info!(task = context.task_id(), "task cancelled by the client");
            notifier.when_settled();
            return Err(TaskExit::Cancelled);
        }
        () = session.ended() => {
            context.set_status_message(STOPPED.to_owned());
            notifier.when_settled();
            return Err(TaskExit::Error(McpError::internal_error(STOPPED, None)));
        }
    };
    live.watch().finish();
    if tools::kept(&outcome) {
        super::resources::announce(&notifier.peer).await;
    }
    let result = match outcome {
        Ok(record) => {
            context.set_status_message(record.summary.clone());
            results.hold(&chorus, context.task_id(), &record).await
        }
        Err(error) => {
            context.set_status_message(format!("failed: {error}"));
            tools::failure(&tool, &error, started.elapsed())
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
    /// To put the whole result in the last notification.
    chorus: Arc<Chorus>,
    results: Arc<Results>,
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
        let (chorus, results) = (self.chorus.clone(), self.results.clone());
        tokio::spawn(async move {
            for _ in 0..200 {
                match manager.get_task(&id) {
                    Ok(mut task) if task.status().is_terminal() => {
                        results.fill(&chorus, &mut task).await;
                        return send(&peer, task).await;
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::task_manager::TaskOptions;
    use tokio::sync::oneshot;

    /// Tells when the future holding it is dropped.
    struct Dropped(Option<oneshot::Sender<()>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }

    #[tokio::test]
    async fn an_abandoned_task_stops_at_its_ttl_with_nobody_asking() {
        let manager = TaskManager::new();
        let (tx, stopped) = oneshot::channel();
        let guard = Dropped(Some(tx));
        let task = manager.spawn(TaskOptions::new().with_ttl_ms(50), move |_| {
            Box::pin(async move {
                let _guard = guard;
                std::future::pending().await
            })
        });
        expire_after(manager.clone(), Duration::from_millis(50), || ());
        tokio::time::timeout(Duration::from_secs(5), stopped)
            .await
            .expect("the run stops at its TTL without a tasks/get")
            .unwrap();
        let expired = manager.get_task(&task.task_id).unwrap();
        assert!(
            expired.task.status.is_terminal(),
            "{:?}",
            expired.task.status
        );
    }
}
