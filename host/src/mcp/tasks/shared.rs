//! Tasks shared through the run store (see `store::tasks`), so a task is
//! answered for on every instance on one store: the owner mirrors each of
//! its tasks into the store — at once when it starts, then at most once a
//! second while it works (the last state always lands), never per
//! progress event — and hears cancels made elsewhere (at once by
//! PostgreSQL `NOTIFY`, else when it next writes, within a second). Any
//! other instance answers `tasks/get` and `tasks/cancel` from the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::model::{DetailedTask, JsonObject, TaskPayload, TaskStatus};
use rmcp::task_manager::TaskManager;
use tokio::sync::broadcast;

use super::results::Results;
use super::{Registry, with_live_status};
use crate::app::Chorus;
use crate::client::Client;
use crate::store::{StoredTask, TASK_LOST, TaskRow};

/// How often a working task's state is written (and a cancel flag read).
const EVERY: Duration = Duration::from_secs(1);
/// How often the owner looks (in memory) for its task's end.
const LOOK: Duration = Duration::from_millis(100);
/// The longest a task's start waits for its first write.
const FIRST_WRITE: Duration = Duration::from_secs(2);

/// Keeps one task's row in the store in step with the task manager.
pub struct Mirror {
    pub chorus: Arc<Chorus>,
    pub manager: TaskManager,
    pub registry: Registry,
    pub results: Arc<Results>,
    pub id: String,
    pub client: String,
    pub ttl: Duration,
    /// Mirrors following a task, for a shutdown to wait for.
    pub mirrors: Arc<AtomicUsize>,
}

/// Counts a mirror following its task.
struct Following(Arc<AtomicUsize>);

impl Drop for Following {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Mirror {
    /// Writes the task as it starts (so any instance knows it when its
    /// creator hears of it), then follows it in the background.
    pub async fn start(self) {
        let owner = self.chorus.store.task_owner();
        let expires_at = crate::store::now_ms()
            .saturating_add(i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX));
        if let Some(row) = self.row(&owner, expires_at) {
            let _ = tokio::time::timeout(FIRST_WRITE, self.put(row)).await;
        }
        self.mirrors.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(self.follow(owner, expires_at));
    }

    async fn follow(self, owner: String, expires_at: i64) {
        let _following = Following(self.mirrors.clone());
        let mut cancels = self.chorus.store.task_cancels();
        let mut written = Instant::now();
        loop {
            let Some(row) = self.row(&owner, expires_at) else {
                return;
            };
            let ended = row.status != "working";
            if ended || written.elapsed() >= EVERY {
                written = Instant::now();
                if self.put(row).await {
                    tracing::info!(task = %self.id, "task cancelled from another instance");
                    let _ = self.manager.cancel_task(&self.id);
                }
                if ended {
                    return;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(LOOK) => {}
                id = heard(&mut cancels) => if id == self.id {
                    tracing::info!(task = %self.id, "task cancelled from another instance");
                    let _ = self.manager.cancel_task(&self.id);
                },
            }
        }
    }

    /// The task as `tasks/get` answers it here; `None` once forgotten.
    fn row(&self, owner: &str, expires_at: i64) -> Option<TaskRow> {
        let task = with_live_status(&self.manager, &self.registry, &self.id).ok()?;
        Some(TaskRow {
            id: self.id.clone(),
            client: self.client.clone(),
            owner: owner.to_owned(),
            run_id: self.results.run_of(&self.id),
            status: status_name(task.status()),
            detail: serde_json::to_string(&task).ok()?,
            expires_at,
        })
    }

    /// Writes `row`; whether a cancel was asked for elsewhere. A store that
    /// cannot be written is said in the log; the task goes on.
    async fn put(&self, row: TaskRow) -> bool {
        let put = self
            .chorus
            .store
            .off_runtime(move |store| store.put_task(&row));
        put.await.unwrap_or_else(|e| {
            tracing::debug!(task = %self.id, "the task's state was not written: {e}");
            false
        })
    }
}

/// The next cancel heard, or never when the backend cannot tell at once.
async fn heard(cancels: &mut Option<broadcast::Receiver<String>>) -> String {
    loop {
        match cancels.as_mut() {
            None => std::future::pending::<()>().await,
            Some(receiver) => match receiver.recv().await {
                Ok(id) => return id,
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => *cancels = None,
            },
        }
    }
}

fn status_name(status: TaskStatus) -> String {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "working".into(),
    }
}

/// Task `id` as the store has it, when `client` may see it: what another
/// instance answers for a task it does not run.
async fn stored(
    chorus: &Chorus,
    client: &Client,
    id: &str,
) -> Result<Option<StoredTask>, McpError> {
    let key = id.to_owned();
    let found = chorus
        .store
        .off_runtime(move |store| store.task(&key))
        .await
        .map_err(|e| {
            McpError::internal_error(
                format!("task {id} is not run here, and the run store cannot be read: {e}"),
                None,
            )
        })?;
    Ok(found.filter(|task| client.admin || task.row.client == client.name))
}

/// `tasks/get` for a task another instance runs (or ran); `None` when the
/// store does not know it either (or it is another client's).
pub async fn get(
    chorus: &Chorus,
    results: &Results,
    client: &Client,
    id: &str,
) -> Result<Option<DetailedTask>, McpError> {
    let Some(found) = stored(chorus, client, id).await? else {
        return Ok(None);
    };
    let mut task: DetailedTask = serde_json::from_str(&found.row.detail).map_err(|e| {
        McpError::internal_error(
            format!("task {id} in the run store is unreadable: {e}"),
            None,
        )
    })?;
    if found.lost {
        task.task.status_message = Some(TASK_LOST.into());
        let mut error = JsonObject::new();
        error.insert("code".into(), (-32603).into());
        error.insert("message".into(), TASK_LOST.into());
        task = DetailedTask::new(task.task, TaskPayload::Failed { error });
    }
    if let Some(run_id) = &found.row.run_id {
        results.fill_from(chorus, &mut task, run_id).await;
    }
    Ok(Some(task))
}

/// `tasks/cancel` for a task another instance runs: flagged in the store
/// and announced; `None` when the store does not know it.
pub async fn cancel(chorus: &Chorus, client: &Client, id: &str) -> Result<Option<()>, McpError> {
    let Some(found) = stored(chorus, client, id).await? else {
        return Ok(None);
    };
    if found.row.status != "working" || found.lost {
        return Ok(Some(()));
    }
    let key = id.to_owned();
    chorus
        .store
        .off_runtime(move |store| store.request_task_cancel(&key))
        .await
        .map_err(|e| {
            McpError::internal_error(
                format!(
                    "task {id} runs on another instance, and the cancel could not be written: {e}"
                ),
                None,
            )
        })?;
    Ok(Some(()))
}
