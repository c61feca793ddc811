//! `store::feedback` in PostgreSQL: a row per run, metric and client,
//! removed with its run (`ON DELETE CASCADE`), shared by every instance.

use tokio_postgres::GenericClient;

use super::{Failure, Postgres};
use crate::store::StoreError;
use crate::store::feedback::{Feedback, Feedbacks, Given, Rated};

/// Feedback on runs.
pub const MIGRATION: &str = r#"
CREATE TABLE feedback (
    run_seq BIGINT NOT NULL REFERENCES runs (seq) ON DELETE CASCADE,
    metric  TEXT NOT NULL,
    client  TEXT NOT NULL,
    value   DOUBLE PRECISION NOT NULL,
    comment TEXT,
    at      BIGINT NOT NULL,               -- unix ms
    PRIMARY KEY (run_seq, metric, client)
);
"#;

impl Feedbacks for Postgres {
    fn give(&self, feedback: &Feedback) -> Result<Given, StoreError> {
        let feedback = feedback.clone();
        self.read(move |mut client| async move { give(&mut client, &feedback).await })
    }

    fn feedback_of(&self, run_id: &str) -> Result<Vec<Feedback>, StoreError> {
        let id = run_id.to_owned();
        self.read(move |client| async move { of_run(&**client, &id).await })
    }

    fn rated(&self, metric: &str, since: i64, most: usize) -> Result<Vec<Rated>, StoreError> {
        let metric = metric.to_owned();
        let most = i64::try_from(most).unwrap_or(i64::MAX);
        self.read(move |client| async move {
            let rows = client
                .query(
                    "SELECT r.id, r.prompt, r.answer, AVG(f.value)
                     FROM feedback f JOIN runs r ON r.seq = f.run_seq
                     WHERE f.metric = $1 AND r.started_at >= $2 AND r.status = 'done'
                       AND r.answer IS NOT NULL
                     GROUP BY r.seq ORDER BY r.seq DESC LIMIT $3",
                    &[&metric, &since, &most],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| Rated {
                    run_id: row.get(0),
                    prompt: row.get(1),
                    answer: row.get(2),
                    mean: row.get(3),
                })
                .collect())
        })
    }
}

async fn give(
    client: &mut deadpool_postgres::Object,
    feedback: &Feedback,
) -> Result<Given, Failure> {
    let tx = client.transaction().await?;
    let Some(seq) = tx
        .query_opt("SELECT seq FROM runs WHERE id = $1", &[&feedback.run_id])
        .await?
        .map(|row| row.get::<_, i64>(0))
    else {
        return Ok(Given::UnknownRun);
    };
    // The row as it was, locked, so two instances' ratings of one run by
    // one client replace each other in order.
    let was: Option<f64> = tx
        .query_opt(
            "SELECT value FROM feedback WHERE run_seq = $1 AND metric = $2 AND client = $3 FOR UPDATE",
            &[&seq, &feedback.metric, &feedback.client],
        )
        .await?
        .map(|row| row.get(0));
    tx.execute(
        "INSERT INTO feedback (run_seq, metric, client, value, comment, at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (run_seq, metric, client)
         DO UPDATE SET value = excluded.value, comment = excluded.comment, at = excluded.at",
        &[
            &seq,
            &feedback.metric,
            &feedback.client,
            &feedback.value,
            &feedback.comment,
            &feedback.at,
        ],
    )
    .await?;
    tx.commit().await?;
    Ok(was.map_or(Given::New, |was| Given::Replaced { was }))
}

async fn of_run(client: &impl GenericClient, run_id: &str) -> Result<Vec<Feedback>, Failure> {
    let rows = client
        .query(
            "SELECT f.metric, f.value, f.client, f.comment, f.at
             FROM feedback f JOIN runs r ON r.seq = f.run_seq
             WHERE r.id = $1 ORDER BY f.at, f.metric, f.client",
            &[&run_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| Feedback {
            run_id: run_id.to_owned(),
            metric: row.get(0),
            value: row.get(1),
            client: row.get(2),
            comment: row.get(3),
            at: row.get(4),
        })
        .collect())
}
