//! SQLite as a store `Backend`: reads on the bounded pool of read
//! connections, budgets, tasks and the response cache's index on the one
//! connection that spends, retention on a connection of its own.

use std::path::Path;

use futures::future::BoxFuture;

use super::Sqlite;
use super::{attachments, read, responses, retention, schema, spend, tasks};
use crate::record::{CallRef, StoredRun};
use crate::store::backend::Backend;
use crate::store::event::now_ms;
use crate::store::recorder::Sink;
use crate::store::responses::CacheEntry;
use crate::store::retention::{Pruned, Retention};
use crate::store::spend::{Ask, Verdict};
use crate::store::tasks::{StoredTask, TaskRow};
use crate::store::{CallLookup, Exchange, Lookup, Page, Query, StoreError};

impl Backend for Sqlite {
    fn describe(&self) -> String {
        format!("the run store at {}", self.path.display())
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn write_lag(&self) -> Option<crate::store::WriteLag> {
        Some(self.lag.clone())
    }

    fn sink(&self) -> Sink {
        Sink::writer(self.sender.as_ref())
    }

    fn resolve(&self, id: &str) -> Result<Lookup<String>, StoreError> {
        self.read(|conn| read::resolve(conn, id))
    }

    fn run(&self, id: &str, with_requests: bool) -> Result<Option<StoredRun>, StoreError> {
        self.read(|conn| read::run(conn, id, with_requests, now_ms()))
    }

    fn call(
        &self,
        run_id: &str,
        call_id: u32,
        with_request: bool,
    ) -> Result<CallLookup, StoreError> {
        self.read(|conn| read::call(conn, run_id, call_id, with_request, now_ms()))
    }

    fn exchange(&self, id: &str) -> Result<Option<Exchange>, StoreError> {
        self.read(|conn| read::exchange(conn, id))
    }

    fn call_starts(&self, id: &str) -> Result<Vec<(u32, i64)>, StoreError> {
        self.read(|conn| read::call_starts(conn, id))
    }

    fn attachment_rows(
        &self,
        id: &str,
        with_bytes: bool,
    ) -> Result<Option<Vec<crate::store::attachments::Row>>, StoreError> {
        self.read(|conn| attachments::rows(conn, id, with_bytes))
            .map(Some)
    }

    fn list(&self, query: &Query) -> Result<Page, StoreError> {
        self.read(|conn| read::list(conn, query, now_ms()))
    }

    fn reserve(&self, ask: &Ask) -> Result<Verdict, StoreError> {
        self.spending(|conn| spend::reserve(conn, ask))
    }

    fn settle(&self, id: &str, cost_usd: f64) -> Result<(), StoreError> {
        self.spending(|conn| spend::settle(conn, id, cost_usd))
    }

    fn put_task(&self, row: &TaskRow) -> Result<bool, StoreError> {
        self.spending(|conn| tasks::put(conn, row))
    }

    fn task(&self, id: &str) -> Result<Option<StoredTask>, StoreError> {
        self.read(|conn| tasks::get(conn, id))
    }

    fn request_task_cancel(&self, id: &str) -> Result<(), StoreError> {
        self.spending(|conn| tasks::request_cancel(conn, id))
    }

    fn cache_entry(&self, key: &str, now: i64) -> Result<Option<CallRef>, StoreError> {
        self.read(|conn| responses::entry(conn, key, now))
    }

    fn remember_answer(&self, entry: &CacheEntry) -> Result<(), StoreError> {
        self.spending(|conn| responses::put(conn, entry))
    }

    /// Prunes on a connection of its own, as the writer's pass does.
    fn prune_at(&self, retention: &Retention, now: i64) -> Result<Pruned, StoreError> {
        let mut conn = schema::open(&self.path)?;
        retention::prune(&mut conn, retention, now).map_err(|source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    fn release(&self) {
        Sqlite::release(self);
    }

    fn flush(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(crate::store::event::flush(self.sender.as_ref()))
    }

    #[cfg(test)]
    fn attachment_bytes_kept(&self) -> (u64, u64) {
        let (count, size): (i64, i64) = self
            .read(|conn| {
                conn.query_row(
                    "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM attachment_bytes",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
            })
            .unwrap();
        (count as u64, size as u64)
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
