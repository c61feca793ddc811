//! The one interface every place runs are kept implements: SQLite
//! (`sqlite/`), PostgreSQL (`postgres/`) and this process's memory
//! (`memory.rs`). A backend answers single questions — resolve an id, read
//! a run, one call, one exchange, a page — and `Store` composes them
//! (find, the follow-up chain, a cached answer), once for every backend. A
//! new backend is a new module with one `impl Backend`.
//!
//! Every method but `flush` blocks: `Store` is called off the async
//! runtime's threads (see `Store::off_runtime`). The failed-batch policy of
//! the writers is in `event.rs`.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::recorder::Sink;
use super::retention::{Pruned, Retention};
use super::spend::{Ask, Verdict};
use super::tasks::{StoredTask, TaskRow};
use super::{CallLookup, Exchange, Lookup, Page, Query, StoreError, WriteLag};
use crate::record::{CallRef, StoredRun};

pub(super) trait Backend:
    super::feedback::Feedbacks + super::experiments::Experiments + Send + Sync + 'static
{
    /// Where runs are kept, for messages (a file path, a database without
    /// its password, or why runs are in memory).
    fn describe(&self) -> String;

    /// The store as a remote client may see it named: what kind of store,
    /// never where it lies.
    fn describe_for_clients(&self) -> String {
        "this server's run store".to_owned()
    }

    /// The file, when runs are kept in one.
    fn path(&self) -> Option<&Path> {
        None
    }

    /// How far writes trail the runs; `None` when nothing is written.
    fn write_lag(&self) -> Option<WriteLag> {
        None
    }

    /// Limits counted across every instance on this store.
    fn shared_limits(&self) -> Option<Arc<dyn crate::llm::limits::Shared>> {
        None
    }

    /// Where a run's recorder sends what happens.
    fn sink(&self) -> Sink;

    /// A full id, a unique prefix of one, or `last`, as a full id.
    fn resolve(&self, id: &str) -> Result<Lookup<String>, StoreError>;

    /// The run `id` (in full), with its calls; their requests too if asked.
    fn run(&self, id: &str, with_requests: bool) -> Result<Option<StoredRun>, StoreError>;

    /// Call `call_id` of run `run_id` (in full), without the run's others.
    fn call(
        &self,
        run_id: &str,
        call_id: u32,
        with_request: bool,
    ) -> Result<CallLookup, StoreError>;

    /// Run `id`'s (in full) question, answer and the run it followed up.
    fn exchange(&self, id: &str) -> Result<Option<Exchange>, StoreError>;

    /// When each call of run `id` was sent, unix ms, by call id; empty
    /// where that is not kept.
    fn call_starts(&self, id: &str) -> Result<Vec<(u32, i64)>, StoreError>;

    /// What is held of each attachment of run `id`; `None` where
    /// attachments' bytes are never kept (memory).
    fn attachment_rows(
        &self,
        id: &str,
        with_bytes: bool,
    ) -> Result<Option<Vec<super::attachments::Row>>, StoreError>;

    /// A page of runs, newest first.
    fn list(&self, query: &Query) -> Result<Page, StoreError>;

    /// Admits a run against its client's budgets, or says which it does
    /// not fit.
    fn reserve(&self, ask: &Ask) -> Result<Verdict, StoreError>;

    /// The run admitted as `id` ended having cost `cost_usd`.
    fn settle(&self, id: &str, cost_usd: f64) -> Result<(), StoreError>;

    /// Who owns the tasks this process runs.
    fn task_owner(&self) -> String {
        super::owner::this_process().to_owned()
    }

    /// Writes a task; says whether another instance asked to cancel it.
    fn put_task(&self, _row: &TaskRow) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// The task `id`, unless unknown or expired.
    fn task(&self, _id: &str) -> Result<Option<StoredTask>, StoreError> {
        Ok(None)
    }

    /// Asks the owner of task `id` to cancel it.
    fn request_task_cancel(&self, _id: &str) -> Result<(), StoreError> {
        Ok(())
    }

    /// Cancel requests as any instance makes them, where the backend can
    /// tell at once.
    fn task_cancels(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }

    /// Whether it keeps a response-cache index.
    fn keeps_answers(&self) -> bool {
        true
    }

    /// The response cache's entry of `key` at `now`, if any.
    fn cache_entry(&self, key: &str, now: i64) -> Result<Option<CallRef>, StoreError>;

    /// Adds `entry` to the response cache's index.
    fn remember_answer(&self, entry: &super::responses::CacheEntry) -> Result<(), StoreError>;

    /// Applies `retention` as if it were `now`.
    fn prune_at(&self, retention: &Retention, now: i64) -> Result<Pruned, StoreError>;

    /// At a graceful shutdown, once its runs are written.
    fn release(&self) {}

    /// Waits until everything recorded so far is written.
    fn flush(&self) -> BoxFuture<'_, Result<(), String>>;

    /// How many attachments' bytes are kept, and their size.
    #[cfg(test)]
    fn attachment_bytes_kept(&self) -> (u64, u64) {
        (0, 0)
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any;
}
