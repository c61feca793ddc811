//! PostgreSQL as a store `Backend`: each read on a pooled connection of
//! the backend's own runtime; while the database is down, a run that ended
//! meanwhile is read from memory (`unwritten`).

use std::sync::Arc;

use futures::future::BoxFuture;

use super::Postgres;
use super::{attachments, read, responses, retention, spend, tasks};
use crate::record::{CallRef, StoredRun};
use crate::store::backend::Backend;
use crate::store::event::now_ms;
use crate::store::recorder::Sink;
use crate::store::responses::CacheEntry;
use crate::store::retention::{Pruned, Retention};
use crate::store::spend::{Ask, Verdict};
use crate::store::tasks::{StoredTask, TaskRow};
use crate::store::{CallLookup, Exchange, Lookup, Page, Query, StoreError};

/// While the database is down, a run that ended meanwhile is read from
/// memory (`unwritten`): reads of runs fall back to it on an error.
impl Backend for Postgres {
    fn describe(&self) -> String {
        match self.down() {
            None => format!("the run store at {}", self.shown),
            Some(why) => format!(
                "the run store at {} (unreachable: {why}; runs are kept in memory until it is back)",
                self.shown
            ),
        }
    }

    fn write_lag(&self) -> Option<crate::store::WriteLag> {
        Some(self.lag.clone())
    }

    fn shared_limits(&self) -> Option<Arc<dyn crate::llm::limits::Shared>> {
        self.limits()
            .map(|s| Arc::new(s) as Arc<dyn crate::llm::limits::Shared>)
    }

    fn sink(&self) -> Sink {
        Sink::writer(self.sender.as_ref())
    }

    fn resolve(&self, id: &str) -> Result<Lookup<String>, StoreError> {
        let text = id.to_owned();
        let found = self.read(move |client| async move { read::resolve(&**client, &text).await });
        match (&found, self.unwritten.resolve(id)) {
            (Err(_), Lookup::Found(id)) => Ok(Lookup::Found(id)),
            _ => found,
        }
    }

    fn run(&self, id: &str, with_requests: bool) -> Result<Option<StoredRun>, StoreError> {
        let text = id.to_owned();
        let found = self.read(move |client| async move {
            read::run(&**client, &text, with_requests, now_ms()).await
        });
        match (&found, self.unwritten.get(id)) {
            (Err(_), Some(run)) => Ok(Some(StoredRun::clone(&run))),
            _ => found,
        }
    }

    fn call(
        &self,
        run_id: &str,
        call_id: u32,
        with_request: bool,
    ) -> Result<CallLookup, StoreError> {
        let id = run_id.to_owned();
        let found = self.read(move |client| async move {
            read::call(&**client, &id, call_id, with_request, now_ms()).await
        });
        match (&found, self.unwritten.get(run_id)) {
            (Err(_), Some(run)) => Ok(CallLookup::in_run(&run, call_id)),
            _ => found,
        }
    }

    fn exchange(&self, id: &str) -> Result<Option<Exchange>, StoreError> {
        let id = id.to_owned();
        self.read(move |client| async move { read::exchange(&**client, &id).await })
    }

    fn call_starts(&self, id: &str) -> Result<Vec<(u32, i64)>, StoreError> {
        let id = id.to_owned();
        self.read(move |client| async move { read::call_starts(&**client, &id).await })
    }

    fn attachment_rows(
        &self,
        id: &str,
        with_bytes: bool,
    ) -> Result<Option<Vec<crate::store::attachments::Row>>, StoreError> {
        let id = id.to_owned();
        self.read(move |client| async move { attachments::rows(&**client, &id, with_bytes).await })
            .map(Some)
    }

    fn list(&self, query: &Query) -> Result<Page, StoreError> {
        let query = query.clone();
        self.read(move |client| async move { read::list(&**client, &query, now_ms()).await })
    }

    fn reserve(&self, ask: &Ask) -> Result<Verdict, StoreError> {
        let ask = ask.clone();
        self.read(move |mut client| async move { spend::reserve(&mut client, &ask).await })
    }

    fn settle(&self, id: &str, cost_usd: f64) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.read(move |client| async move { spend::settle(&**client, &id, cost_usd).await })
    }

    /// This instance's lease.
    fn task_owner(&self) -> String {
        self.instance.clone()
    }

    fn put_task(&self, row: &TaskRow) -> Result<bool, StoreError> {
        let row = row.clone();
        self.read(move |client| async move { tasks::put(&**client, &row).await })
    }

    fn task(&self, id: &str) -> Result<Option<StoredTask>, StoreError> {
        let id = id.to_owned();
        self.read(move |client| async move { tasks::get(&**client, &id).await })
    }

    /// Flags task `id` to be cancelled and tells every instance at once.
    fn request_task_cancel(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.read(move |client| async move { tasks::request_cancel(&**client, &id).await })
    }

    /// `LISTEN`ed cancel requests.
    fn task_cancels(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        Some(self.cancels.subscribe())
    }

    /// A database that is down answers no lookup (a miss, not an error).
    fn cache_entry(&self, key: &str, now: i64) -> Result<Option<CallRef>, StoreError> {
        if self.down().is_some() {
            return Ok(None);
        }
        let key = key.to_owned();
        self.read(move |client| async move { responses::entry(&**client, &key, now).await })
    }

    fn remember_answer(&self, entry: &CacheEntry) -> Result<(), StoreError> {
        let entry = entry.clone();
        self.read(move |client| async move { responses::put(&**client, &entry).await })
    }

    /// Applies `retention`, unless another instance is doing so.
    fn prune_at(&self, retention: &Retention, now: i64) -> Result<Pruned, StoreError> {
        let retention = retention.clone();
        let pruned = self.read(move |mut client| async move {
            retention::prune(&mut client, &retention, now).await
        })?;
        pruned.ok_or_else(|| StoreError::Database {
            at: self.shown.clone(),
            message: "another chorus is applying retention to it right now: try again in a moment"
                .into(),
        })
    }

    /// Stops renewing this instance's lease and gives it back.
    fn release(&self) {
        if let Some(heartbeat) = &self.heartbeat {
            heartbeat.abort();
        }
        let instance = self.instance.clone();
        let released = self.read(move |client| async move {
            client
                .execute("DELETE FROM instances WHERE id = $1", &[&instance])
                .await?;
            Ok(())
        });
        if let Err(e) = released {
            tracing::debug!("the run store's lease was not given back: {e}");
        }
    }

    fn flush(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(crate::store::event::flush(self.sender.as_ref()))
    }

    #[cfg(test)]
    fn attachment_bytes_kept(&self) -> (u64, u64) {
        let (count, size): (i64, i64) = self
            .read(|client| async move {
                let row = client
                    .query_one(
                        "SELECT COUNT(*)::BIGINT, COALESCE(SUM(size), 0)::BIGINT FROM attachment_bytes",
                        &[],
                    )
                    .await?;
                Ok((row.get(0), row.get(1)))
            })
            .unwrap();
        (count as u64, size as u64)
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
