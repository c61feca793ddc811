//! `store::feedback` in the SQLite file: a row per run, metric and client,
//! keyed by the run's `seq` (removed with it by retention), written on the
//! budgets' connection so every process sharing the file sees it at once.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Sqlite;
use crate::store::StoreError;
use crate::store::feedback::{Feedback, Feedbacks, Given, Rated};

/// Version 15: feedback on runs.
pub const MIGRATION: &str = r#"
CREATE TABLE feedback (
    run_seq INTEGER NOT NULL,
    metric  TEXT NOT NULL,
    client  TEXT NOT NULL,
    value   REAL NOT NULL,
    comment TEXT,
    at      INTEGER NOT NULL,             -- unix ms
    PRIMARY KEY (run_seq, metric, client)
) WITHOUT ROWID;
"#;

impl Feedbacks for Sqlite {
    fn give(&self, feedback: &Feedback) -> Result<Given, StoreError> {
        self.spending(|conn| give(conn, feedback))
    }

    fn feedback_of(&self, run_id: &str) -> Result<Vec<Feedback>, StoreError> {
        self.read(|conn| of_run(conn, run_id))
    }

    fn rated(&self, metric: &str, since: i64, most: usize) -> Result<Vec<Rated>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT r.id, r.prompt, r.answer, AVG(f.value)
                 FROM feedback f JOIN runs r ON r.seq = f.run_seq
                 WHERE f.metric = ?1 AND r.started_at >= ?2 AND r.status = 'done'
                   AND r.answer IS NOT NULL
                 GROUP BY r.seq ORDER BY r.seq DESC LIMIT ?3",
            )?
            .query_map(
                params![metric, since, i64::try_from(most).unwrap_or(i64::MAX)],
                |row| {
                    Ok(Rated {
                        run_id: row.get(0)?,
                        prompt: row.get(1)?,
                        answer: row.get(2)?,
                        mean: row.get(3)?,
                    })
                },
            )?
            .collect()
        })
    }
}

fn give(conn: &mut Connection, feedback: &Feedback) -> rusqlite::Result<Given> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let Some(seq) = tx
        .query_row(
            "SELECT seq FROM runs WHERE id = ?1",
            [&feedback.run_id],
            |row| row.get::<_, i64>(0),
        )
        .optional()?
    else {
        return Ok(Given::UnknownRun);
    };
    let was: Option<f64> = tx
        .query_row(
            "SELECT value FROM feedback WHERE run_seq = ?1 AND metric = ?2 AND client = ?3",
            params![seq, feedback.metric, feedback.client],
            |row| row.get(0),
        )
        .optional()?;
    tx.execute(
        "INSERT INTO feedback (run_seq, metric, client, value, comment, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (run_seq, metric, client)
         DO UPDATE SET value = excluded.value, comment = excluded.comment, at = excluded.at",
        params![
            seq,
            feedback.metric,
            feedback.client,
            feedback.value,
            feedback.comment,
            feedback.at
        ],
    )?;
    tx.commit()?;
    Ok(was.map_or(Given::New, |was| Given::Replaced { was }))
}

fn of_run(conn: &Connection, run_id: &str) -> rusqlite::Result<Vec<Feedback>> {
    conn.prepare_cached(
        "SELECT f.metric, f.value, f.client, f.comment, f.at
         FROM feedback f JOIN runs r ON r.seq = f.run_seq
         WHERE r.id = ?1 ORDER BY f.at, f.metric, f.client",
    )?
    .query_map([run_id], |row| {
        Ok(Feedback {
            run_id: run_id.to_owned(),
            metric: row.get(0)?,
            value: row.get(1)?,
            client: row.get(2)?,
            comment: row.get(3)?,
            at: row.get(4)?,
        })
    })?
    .collect()
}
