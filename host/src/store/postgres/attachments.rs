//! Attachment bytes in the PostgreSQL store, as the SQLite store keeps
//! them (`sqlite/attachments.rs`; what is kept: `store::attachments`).
//! Keeping bytes and retention's freeing them exclude each other through
//! the retention lock (shared here, exclusive there), so bytes another
//! instance is linking to at that moment are never freed under it.

use tokio_postgres::{GenericClient, Transaction};

use super::{Failure, LOCK_RETENTION};
use crate::store::attachments::{Row, to_keep};
use crate::store::event::Begin;

/// Version 9: as the SQLite store's version 12.
pub const MIGRATION: &str = r#"
CREATE TABLE attachment_bytes (
    sha256     TEXT PRIMARY KEY,
    mime       TEXT NOT NULL,
    size       BIGINT NOT NULL,
    data       BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE run_attachments (
    run_seq  BIGINT NOT NULL REFERENCES runs (seq) ON DELETE CASCADE,
    id       BIGINT NOT NULL,
    sha256   TEXT NOT NULL,
    size     BIGINT NOT NULL,
    not_kept TEXT,
    PRIMARY KEY (run_seq, id)
);
CREATE INDEX run_attachments_by_hash ON run_attachments (sha256);
"#;

/// Links the run `begin` starts to its attachments and keeps the bytes not
/// kept yet, within `max_bytes`.
pub async fn keep(tx: &Transaction<'_>, begin: &Begin, max_bytes: u64) -> Result<(), Failure> {
    tx.execute(
        "SELECT pg_advisory_xact_lock_shared($1)",
        &[&LOCK_RETENTION],
    )
    .await?;
    for item in to_keep(&begin.files, max_bytes, begin.bytes_let_go.as_deref()) {
        let a = item.attachment;
        tx.execute(
            "INSERT INTO run_attachments (run_seq, id, sha256, size, not_kept)
             SELECT seq, $2, $3, $4, $5 FROM runs WHERE id = $1
             ON CONFLICT (run_seq, id) DO NOTHING",
            &[
                &begin.request.run_id,
                &i64::from(a.id),
                &a.sha256,
                &i64::try_from(a.bytes).unwrap_or(i64::MAX),
                &item.not_kept,
            ],
        )
        .await?;
        if item.not_kept.is_some() {
            continue;
        }
        let kept = tx
            .query_opt(
                "SELECT 1 FROM attachment_bytes WHERE sha256 = $1",
                &[&a.sha256],
            )
            .await?
            .is_some();
        if kept {
            continue;
        }
        if let Some(bytes) = item.bytes() {
            tx.execute(
                "INSERT INTO attachment_bytes (sha256, mime, size, data, created_at)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING",
                &[
                    &a.sha256,
                    &a.mime,
                    &i64::try_from(bytes.len()).unwrap_or(i64::MAX),
                    &bytes,
                    &begin.started_at,
                ],
            )
            .await?;
        }
    }
    Ok(())
}

/// What the store holds of each attachment of run `run_id`; the bytes too
/// when `with_bytes`.
pub async fn rows(
    client: &impl GenericClient,
    run_id: &str,
    with_bytes: bool,
) -> Result<Vec<Row>, Failure> {
    let rows = client
        .query(
            "SELECT ra.id, ra.not_kept, b.sha256 IS NOT NULL, CASE WHEN $2 THEN b.data END
             FROM runs r JOIN run_attachments ra ON ra.run_seq = r.seq
             LEFT JOIN attachment_bytes b ON b.sha256 = ra.sha256
             WHERE r.id = $1 ORDER BY ra.id",
            &[&run_id, &with_bytes],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| Row {
            id: u32::try_from(row.get::<_, i64>(0)).unwrap_or(u32::MAX),
            not_kept: row.get(1),
            present: row.get(2),
            bytes: row.get(3),
        })
        .collect())
}

/// The attachment bytes each run is the newest to refer to, by run (see
/// the SQLite store's).
pub const OWNED_BYTES: &str = "SELECT o.seq AS seq, SUM(b.size)::BIGINT AS size
    FROM (SELECT sha256, MAX(run_seq) AS seq FROM run_attachments GROUP BY sha256) o
    JOIN attachment_bytes b ON b.sha256 = o.sha256
    GROUP BY o.seq";

/// Removes the bytes no kept run refers to (run by retention, under its
/// lock); returns how many bytes that was.
pub async fn free(tx: &Transaction<'_>) -> Result<i64, Failure> {
    Ok(tx
        .query_one(
            "WITH gone AS (DELETE FROM attachment_bytes b
                           WHERE NOT EXISTS (SELECT 1 FROM run_attachments ra
                                             WHERE ra.sha256 = b.sha256)
                           RETURNING size)
             SELECT COALESCE(SUM(size), 0)::BIGINT FROM gone",
            &[],
        )
        .await?
        .get(0))
}

/// The bytes of every attachment kept.
pub async fn total(tx: &Transaction<'_>) -> Result<i64, Failure> {
    Ok(tx
        .query_one(
            "SELECT COALESCE(SUM(size), 0)::BIGINT FROM attachment_bytes",
            &[],
        )
        .await?
        .get(0))
}
