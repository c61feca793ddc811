//! Attachment bytes in the SQLite store (what is kept: `store::attachments`):
//! written with the run's first row, read back by run, and counted and
//! freed by retention.

use rusqlite::{OptionalExtension, Transaction, params};

use crate::store::attachments::{Row, to_keep};
use crate::store::event::Begin;

/// Version 12: each attachment's bytes once by content, and which runs
/// refer to which (and why the bytes were not kept, when they were not).
pub const MIGRATION: &str = r#"
CREATE TABLE attachment_bytes (
    sha256     TEXT PRIMARY KEY,              -- hex SHA-256 of data
    mime       TEXT NOT NULL,
    size       INTEGER NOT NULL,
    data       BLOB NOT NULL,
    created_at INTEGER NOT NULL               -- unix ms
);
CREATE TABLE run_attachments (
    run_seq  INTEGER NOT NULL,
    id       INTEGER NOT NULL,                -- the attachment's number in the run
    sha256   TEXT NOT NULL,
    size     INTEGER NOT NULL,
    not_kept TEXT,                            -- why the bytes were not kept; NULL: kept
    PRIMARY KEY (run_seq, id)
);
CREATE INDEX run_attachments_by_hash ON run_attachments (sha256);
"#;

/// Links the run `begin` starts to its attachments and keeps the bytes not
/// kept yet, within `max_bytes`.
pub fn keep(tx: &Transaction<'_>, begin: &Begin, max_bytes: u64) -> rusqlite::Result<()> {
    for item in to_keep(&begin.files, max_bytes, begin.bytes_let_go.as_deref()) {
        let a = item.attachment;
        tx.prepare_cached(
            "INSERT INTO run_attachments (run_seq, id, sha256, size, not_kept)
             SELECT seq, ?2, ?3, ?4, ?5 FROM runs WHERE id = ?1
             ON CONFLICT (run_seq, id) DO NOTHING",
        )?
        .execute(params![
            begin.request.run_id,
            a.id,
            a.sha256,
            i64::try_from(a.bytes).unwrap_or(i64::MAX),
            item.not_kept,
        ])?;
        if item.not_kept.is_some() {
            continue;
        }
        let kept = tx
            .prepare_cached("SELECT 1 FROM attachment_bytes WHERE sha256 = ?1")?
            .exists([&a.sha256])?;
        if kept {
            continue;
        }
        if let Some(bytes) = item.bytes() {
            tx.prepare_cached(
                "INSERT INTO attachment_bytes (sha256, mime, size, data, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (sha256) DO NOTHING",
            )?
            .execute(params![
                a.sha256,
                a.mime,
                i64::try_from(bytes.len()).unwrap_or(i64::MAX),
                bytes,
                begin.started_at,
            ])?;
        }
    }
    Ok(())
}

/// What the store holds of each attachment of run `run_id`; the bytes too
/// when `with_bytes`.
pub fn rows(
    conn: &rusqlite::Connection,
    run_id: &str,
    with_bytes: bool,
) -> rusqlite::Result<Vec<Row>> {
    conn.prepare_cached(
        "SELECT ra.id, ra.not_kept, b.sha256 IS NOT NULL, CASE WHEN ?2 THEN b.data END
         FROM runs r JOIN run_attachments ra ON ra.run_seq = r.seq
         LEFT JOIN attachment_bytes b ON b.sha256 = ra.sha256
         WHERE r.id = ?1 ORDER BY ra.id",
    )?
    .query_map(params![run_id, with_bytes], |row| {
        Ok(Row {
            id: row.get(0)?,
            not_kept: row.get(1)?,
            present: row.get(2)?,
            bytes: row.get(3)?,
        })
    })?
    .collect()
}

/// The bytes of each run's attachments that it is the newest run to refer
/// to, by run: what keeping the run keeps in bytes, beyond its own text.
/// A `(seq, bytes)` table for retention to join on.
pub const OWNED_BYTES: &str = "SELECT o.seq AS seq, SUM(b.size) AS size
    FROM (SELECT sha256, MAX(run_seq) AS seq FROM run_attachments GROUP BY sha256) o
    JOIN attachment_bytes b ON b.sha256 = o.sha256
    GROUP BY o.seq";

/// Forgets the attachments of run `seq`.
pub fn unlink(tx: &Transaction<'_>, seq: i64) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM run_attachments WHERE run_seq = ?1")?
        .execute([seq])?;
    Ok(())
}

/// Removes the bytes no kept run refers to; returns how many bytes that was.
pub fn free(tx: &Transaction<'_>) -> rusqlite::Result<u64> {
    let freed: Option<i64> = tx
        .query_row(
            "SELECT SUM(size) FROM attachment_bytes b
             WHERE NOT EXISTS (SELECT 1 FROM run_attachments ra WHERE ra.sha256 = b.sha256)",
            [],
            |row| row.get(0),
        )
        .optional()?
        .flatten();
    tx.execute(
        "DELETE FROM attachment_bytes
         WHERE NOT EXISTS (SELECT 1 FROM run_attachments ra
                           WHERE ra.sha256 = attachment_bytes.sha256)",
        [],
    )?;
    Ok(freed.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
}

/// The bytes of every attachment kept.
pub fn total(tx: &Transaction<'_>) -> rusqlite::Result<u64> {
    let total: i64 = tx.query_row(
        "SELECT COALESCE(SUM(size), 0) FROM attachment_bytes",
        [],
        |row| row.get(0),
    )?;
    Ok(u64::try_from(total).unwrap_or(0))
}
