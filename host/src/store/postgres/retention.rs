//! Retention in the PostgreSQL store (what it keeps: `store::retention`),
//! applied by one instance at a time: a pass that cannot take the advisory
//! lock leaves the work to the instance that holds it. A run's size counts
//! the attachment bytes it is the newest to refer to; bytes no kept run
//! refers to are freed.

use tokio_postgres::Client;
use tokio_postgres::Transaction;

use super::{Failure, LOCK_RETENTION, attachments};
use crate::store::retention::{Pruned, Retention};

/// A run is live while it is running and its deadline has not passed.
const NOT_LIVE: &str = "NOT (status = 'running' AND deadline_at > $1)";

/// Applies `retention` at `now`; `None` when another instance is applying
/// it at this moment.
pub async fn prune(
    client: &mut Client,
    retention: &Retention,
    now: i64,
) -> Result<Option<Pruned>, Failure> {
    let tx = client.transaction().await?;
    let locked: bool = tx
        .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&LOCK_RETENTION])
        .await?
        .get(0);
    if !locked {
        return Ok(None);
    }
    // Interrupted runs never reached the end that measures a run.
    tx.execute(
        &format!(
            "UPDATE runs SET bytes = {SIZE} WHERE status = 'running' AND deadline_at <= $1 AND bytes = 0"
        ),
        &[&now],
    )
    .await?;
    let max = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let age = retention
        .max_age
        .map(|a| i64::try_from(a.as_millis()).unwrap_or(i64::MAX));
    let doomed: Vec<i64> = tx
        .query(
            &format!(
                "SELECT seq FROM (SELECT seq, status, deadline_at FROM runs ORDER BY seq DESC OFFSET $2) t
                 WHERE {NOT_LIVE}
                 UNION
                 SELECT seq FROM runs
                 WHERE $3::BIGINT IS NOT NULL AND started_at < $1 - $3::BIGINT AND {NOT_LIVE}
                 UNION
                 SELECT seq FROM (SELECT r.seq, r.status, r.deadline_at,
                                         SUM(r.bytes + COALESCE(o.size, 0))
                                             OVER (ORDER BY r.seq DESC) AS newer
                                  FROM runs r LEFT JOIN ({owned}) o ON o.seq = r.seq) t
                 WHERE newer > $4::BIGINT AND {NOT_LIVE}",
                owned = attachments::OWNED_BYTES
            ),
            &[&now, &max(retention.max_runs), &age, &max(retention.max_bytes)],
        )
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let removed_bytes: i64 = tx
        .query_one(
            "WITH gone AS (DELETE FROM runs WHERE seq = ANY($1) RETURNING bytes)
             SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM gone",
            &[&doomed],
        )
        .await?
        .get(0);
    let freed = attachments::free(&tx).await?;
    let attachment_bytes = attachments::total(&tx).await?;
    super::responses::prune(&tx, now).await?;
    let kept = tx
        .query_one(
            "SELECT COUNT(*)::BIGINT, COALESCE(SUM(bytes), 0)::BIGINT FROM runs",
            &[],
        )
        .await?;
    tx.commit().await?;
    let unsigned = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(Some(Pruned {
        removed: doomed.len() as u64,
        removed_bytes: unsigned(removed_bytes) + unsigned(freed),
        kept: unsigned(kept.get(0)),
        kept_bytes: unsigned(kept.get(1)) + unsigned(attachment_bytes),
    }))
}

/// A run's size: its own text and its calls'.
const SIZE: &str = "octet_length(prompt) + octet_length(options) + octet_length(notes)
    + coalesce(octet_length(plan), 0) + coalesce(octet_length(summary), 0)
    + coalesce(octet_length(answer), 0) + coalesce(octet_length(details), 0)
    + coalesce(octet_length(error), 0)
    + coalesce((SELECT SUM(coalesce(octet_length(request), 0) + coalesce(octet_length(reply), 0)
                           + coalesce(octet_length(error_message), 0))
                FROM calls WHERE run_seq = runs.seq), 0)";

/// Sets a run's size, once it has ended.
pub async fn measure(tx: &Transaction<'_>, run_id: &str) -> Result<(), Failure> {
    tx.execute(
        &format!("UPDATE runs SET bytes = {SIZE} WHERE id = $1"),
        &[&run_id],
    )
    .await?;
    Ok(())
}
