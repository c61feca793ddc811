//! Retention in the SQLite store (what it keeps: `store::retention`), and
//! the size of a run it is measured by (with the attachment bytes it is
//! the newest to refer to). Removing runs frees pages, and the bytes of
//! attachments no kept run refers to; an incremental vacuum gives them
//! back to the file system.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use rusqlite::{Connection, Transaction, TransactionBehavior, params};

use super::attachments;
use crate::store::retention::{Pruned, Retention};

/// A run is live while it is running and its deadline has not passed.
const NOT_LIVE: &str = "NOT (status = 'running' AND deadline_at > ?1)";

pub fn prune(conn: &mut Connection, retention: &Retention, now: i64) -> rusqlite::Result<Pruned> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Interrupted runs never reached the end that measures a run.
    let unmeasured: Vec<String> = tx
        .prepare(
            "SELECT id FROM runs WHERE status = 'running' AND deadline_at <= ?1 AND bytes = 0",
        )?
        .query_map([now], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for id in &unmeasured {
        measure(&tx, id)?;
    }

    let mut doomed: BTreeSet<i64> = BTreeSet::new();
    let mut collect = |sql: &str, limit: i64| -> rusqlite::Result<()> {
        let mut statement = tx.prepare(sql)?;
        let seqs = statement.query_map(params![now, limit], |row| row.get::<_, i64>(0))?;
        for seq in seqs {
            doomed.insert(seq?);
        }
        Ok(())
    };
    collect(
        &format!(
            "SELECT seq FROM (SELECT seq, status, deadline_at FROM runs ORDER BY seq DESC LIMIT -1 OFFSET ?2)
             WHERE {NOT_LIVE}"
        ),
        i64::try_from(retention.max_runs).unwrap_or(i64::MAX),
    )?;
    if let Some(age) = retention.max_age {
        let age = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        collect(
            &format!("SELECT seq FROM runs WHERE started_at < ?1 - ?2 AND {NOT_LIVE}"),
            age,
        )?;
    }
    // A run's size counts the attachment bytes it is the newest to refer to.
    collect(
        &format!(
            "SELECT seq FROM (SELECT r.seq, r.status, r.deadline_at,
                                     SUM(r.bytes + COALESCE(o.size, 0))
                                         OVER (ORDER BY r.seq DESC) AS newer
                              FROM runs r LEFT JOIN ({owned}) o ON o.seq = r.seq)
             WHERE newer > ?2 AND {NOT_LIVE}",
            owned = attachments::OWNED_BYTES
        ),
        i64::try_from(retention.max_bytes).unwrap_or(i64::MAX),
    )?;

    let mut removed_bytes = 0u64;
    for seq in &doomed {
        let bytes: i64 =
            tx.query_row("SELECT bytes FROM runs WHERE seq = ?1", [seq], |r| r.get(0))?;
        removed_bytes += u64::try_from(bytes).unwrap_or(0);
        tx.prepare_cached("DELETE FROM calls WHERE run_seq = ?1")?
            .execute([seq])?;
        tx.prepare_cached("DELETE FROM runs WHERE seq = ?1")?
            .execute([seq])?;
        attachments::unlink(&tx, *seq)?;
    }
    let freed = attachments::free(&tx)?;
    removed_bytes += freed;
    let attachment_bytes = attachments::total(&tx)?;
    super::responses::prune(&tx, now)?;
    let (kept, kept_bytes): (i64, i64) = tx.query_row(
        "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM runs",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    tx.commit()?;
    if !doomed.is_empty() || freed > 0 {
        vacuum(conn)?;
    }
    Ok(Pruned {
        removed: doomed.len() as u64,
        removed_bytes,
        kept: u64::try_from(kept).unwrap_or(0),
        kept_bytes: u64::try_from(kept_bytes).unwrap_or(0) + attachment_bytes,
    })
}

/// Returns the freed pages to the file system. `incremental_vacuum` frees
/// one page per step of its statement, so it is stepped to the end; the
/// file shrinks when a checkpoint has copied the WAL back (a passive one:
/// it never waits on readers, and a later one finishes the job).
fn vacuum(conn: &Connection) -> rusqlite::Result<()> {
    let mut statement = conn.prepare("PRAGMA incremental_vacuum")?;
    let mut steps = statement.query([])?;
    while steps.next()?.is_some() {}
    drop(steps);
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

/// Sets a run's size: its own text and its calls'.
pub fn measure(tx: &Transaction<'_>, run_id: &str) -> rusqlite::Result<()> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE runs SET bytes =
                 octet_length(prompt) + octet_length(options) + octet_length(notes)
                 + coalesce(octet_length(plan), 0) + coalesce(octet_length(summary), 0)
                 + coalesce(octet_length(answer), 0) + coalesce(octet_length(details), 0)
                 + coalesce(octet_length(error), 0) + {calls}
             WHERE id = ?1",
            calls = calls_bytes(),
        )
    });
    tx.prepare_cached(&SQL)?.execute([run_id])?;
    Ok(())
}

/// The SQL, in a statement on `runs`, for the bytes of the run's calls:
/// their requests, replies and errors, wherever the texts are kept.
pub fn calls_bytes() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "coalesce((SELECT SUM({request} + {reply} + coalesce(octet_length(error_message), 0))
                       FROM calls WHERE run_seq = runs.seq), 0)",
            request = super::texts::bytes("request"),
            reply = super::texts::bytes("reply"),
        )
    });
    &SQL
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20 finished runs of about 256 KiB each, straight into the tables.
    fn filled(path: &std::path::Path) -> Connection {
        let conn = crate::store::sqlite::schema::open(path).unwrap();
        for i in 0..20 {
            conn.execute(
                "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt, options, bytes)
                 VALUES (?1, 'ask', 'done', ?2, 0, ?3, '{}', 262144)",
                params![format!("run-{i}"), i, "x".repeat(256 * 1024)],
            )
            .unwrap();
        }
        conn
    }

    #[test]
    fn pruning_gives_the_space_back_to_the_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.sqlite3");
        let mut conn = filled(&path);
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        assert!(before > 20 * 256 * 1024, "{before}");
        let retention = Retention {
            max_runs: 1,
            max_age: None,
            max_bytes: u64::MAX,
        };
        let pruned = prune(&mut conn, &retention, 0).unwrap();
        assert_eq!((pruned.removed, pruned.kept), (19, 1));
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(
            after < before / 10,
            "the file went from {before} to {after} bytes"
        );
    }
}
