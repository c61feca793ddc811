//! `store::tasks` in the SQLite file: written on the budgets' connection
//! (a write of this process's own, beside the run writer), read on the
//! read pool; an owner is a process, lost when it has ended.

use rusqlite::{Connection, OptionalExtension, params};

use crate::store::event::now_ms;
use crate::store::owner;
use crate::store::tasks::{StoredTask, TaskRow};

pub fn put(conn: &Connection, row: &TaskRow) -> rusqlite::Result<bool> {
    let now = now_ms();
    conn.execute("DELETE FROM tasks WHERE expires_at < ?1", params![now])?;
    conn.query_row(
        "INSERT INTO tasks (id, client, owner, run_id, status, detail, updated_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, status = excluded.status,
             detail = excluded.detail, updated_at = excluded.updated_at,
             expires_at = excluded.expires_at
         RETURNING cancel_requested",
        params![
            row.id,
            row.client,
            row.owner,
            row.run_id,
            row.status,
            row.detail,
            now,
            row.expires_at
        ],
        |r| r.get::<_, bool>(0),
    )
}

pub fn get(conn: &Connection, id: &str) -> rusqlite::Result<Option<StoredTask>> {
    conn.query_row(
        "SELECT id, client, owner, run_id, status, detail, expires_at, cancel_requested
         FROM tasks WHERE id = ?1 AND expires_at >= ?2",
        params![id, now_ms()],
        |r| {
            let row = TaskRow {
                id: r.get(0)?,
                client: r.get(1)?,
                owner: r.get(2)?,
                run_id: r.get(3)?,
                status: r.get(4)?,
                detail: r.get(5)?,
                expires_at: r.get(6)?,
            };
            let lost = row.status == "working" && owner::is_gone(&row.owner);
            Ok(StoredTask {
                row,
                cancel_requested: r.get(7)?,
                lost,
            })
        },
    )
    .optional()
}

pub fn request_cancel(conn: &Connection, id: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE tasks SET cancel_requested = 1 WHERE id = ?1",
        params![id],
    )?;
    Ok(())
}
