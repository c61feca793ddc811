//! The response cache's index in the SQLite store (schema version 11).

use rusqlite::{Connection, OptionalExtension, params};

use crate::record::CallRef;
use crate::store::responses::CacheEntry;

/// The entry of `key` that has not expired at `now`: one read of the
/// table's primary key.
pub fn entry(conn: &Connection, key: &str, now: i64) -> rusqlite::Result<Option<CallRef>> {
    conn.prepare_cached(
        "SELECT run_id, call_id FROM response_cache WHERE key = ?1 AND expires_at > ?2",
    )?
    .query_row(params![key, now], |row| {
        Ok(CallRef {
            run_id: row.get(0)?,
            call: row.get(1)?,
        })
    })
    .optional()
}

pub fn put(conn: &Connection, entry: &CacheEntry) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO response_cache (key, run_id, call_id, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (key) DO UPDATE SET run_id = excluded.run_id, call_id = excluded.call_id,
             created_at = excluded.created_at, expires_at = excluded.expires_at",
    )?
    .execute(params![
        entry.key,
        entry.from.run_id,
        entry.from.call,
        entry.created_at,
        entry.expires_at
    ])?;
    Ok(())
}

/// Removes the entries expired at `now`, and those whose run is gone.
pub fn prune(conn: &Connection, now: i64) -> rusqlite::Result<usize> {
    conn.execute(
        "DELETE FROM response_cache WHERE expires_at <= ?1
             OR NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = response_cache.run_id)",
        [now],
    )
}
