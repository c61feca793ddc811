//! MCP tasks kept in the store, so every instance on one store answers for
//! every task: the instance running a task (its owner) writes what
//! `tasks/get` would answer (at most once a second while it works, and
//! once when it ends); any instance reads it back, and asks the owner to
//! cancel it (PostgreSQL: `NOTIFY`, heard at once; any backend: a flag the
//! owner reads each second). A working task whose owner is gone (its lease
//! lapsed, or its process ended) reads as lost, as a run reads interrupted.

use super::{Store, StoreError};

/// What `tasks/get` says of a task whose instance was lost.
pub const LOST: &str = "the chorus instance running this task was lost (killed, or cut off \
     from the run store) before it finished: its run was interrupted; call the tool again";

/// One task as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub id: String,
    /// The client that started it (`[[http.clients]]` name, or the local user).
    pub client: String,
    /// The instance (PostgreSQL) or process (SQLite) running it.
    pub owner: String,
    /// The run whose record is its result, once it has one.
    pub run_id: Option<String>,
    /// working, completed, failed or cancelled.
    pub status: String,
    /// JSON: the task as `tasks/get` answers it on its owner.
    pub detail: String,
    /// Unix ms past which the task is forgotten.
    pub expires_at: i64,
}

/// A task read back, with what its owner cannot say itself.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTask {
    pub row: TaskRow,
    pub cancel_requested: bool,
    /// Working, but its owner is gone: it will never end.
    pub lost: bool,
}

impl Store {
    /// Who owns the tasks this process runs, as the store judges owners:
    /// this instance's lease (PostgreSQL) or this process (SQLite).
    pub fn task_owner(&self) -> String {
        self.backend.task_owner()
    }

    /// Writes `row` (made or replaced); returns whether another instance
    /// has asked for the task to be cancelled. Expired tasks are dropped
    /// on the way. Blocking. In memory, tasks live in the task manager only.
    pub fn put_task(&self, row: &TaskRow) -> Result<bool, StoreError> {
        self.backend.put_task(row)
    }

    /// The task `id`, unless unknown or expired. Blocking.
    pub fn task(&self, id: &str) -> Result<Option<StoredTask>, StoreError> {
        self.backend.task(id)
    }

    /// Asks the owner of task `id` to cancel it. Blocking.
    pub fn request_task_cancel(&self, id: &str) -> Result<(), StoreError> {
        self.backend.request_task_cancel(id)
    }

    /// Cancel requests as they are made on any instance (task ids), when
    /// the backend can tell at once (PostgreSQL `LISTEN`); else the owner
    /// finds them when it next writes the task.
    pub fn task_cancels(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        self.backend.task_cancels()
    }
}
