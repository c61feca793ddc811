//! Retention in the PostgreSQL store (what it keeps: `store::retention`),
//! as the SQLite store applies it: what to remove is decided by reads that
//! cost what is kept, not the whole history, then removed `SLICE` runs per
//! transaction, so no transaction holds many rows (or a new run with
//! attachments, which waits on the retention lock) for long. One instance
//! at a time: a pass that finds `LOCK_PRUNE` taken leaves the work to the
//! instance holding it. A run's size counts the attachment bytes it is the
//! newest to refer to; bytes no kept run refers to are freed.

use std::collections::HashMap;

use tokio_postgres::{Client, Transaction};

use super::{Failure, LOCK_PRUNE, LOCK_RETENTION, attachments};
use crate::store::retention::{Pruned, Retention};

/// A run is live while it is running and its deadline has not passed.
const NOT_LIVE: &str = "NOT (status = 'running' AND deadline_at > $1)";
/// Most runs removed in one transaction (with their calls: a few ms).
const SLICE: i64 = 500;
/// Runs read per step of the walk that finds the size bound.
const WALK: i64 = 2000;

/// Applies `retention` at `now`; `None` when another instance is applying
/// it at this moment. The pass holds `LOCK_PRUNE` on its session (given
/// back at its end whatever happened; a connection lost mid-pass loses it
/// with the session).
pub async fn prune(
    client: &mut Client,
    retention: &Retention,
    now: i64,
) -> Result<Option<Pruned>, Failure> {
    let locked: bool = client
        .query_one("SELECT pg_try_advisory_lock($1)", &[&LOCK_PRUNE])
        .await?
        .get(0);
    if !locked {
        return Ok(None);
    }
    let pruned = pass(client, retention, now).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_PRUNE])
        .await;
    let pruned = pruned?;
    unlocked?;
    Ok(Some(pruned))
}

async fn pass(client: &mut Client, retention: &Retention, now: i64) -> Result<Pruned, Failure> {
    let tx = client.transaction().await?;
    // Interrupted runs never reached the end that measures a run (found
    // through the index of running runs).
    tx.execute(
        &format!(
            "UPDATE runs SET bytes = {SIZE} WHERE status = 'running' AND deadline_at <= $1 AND bytes = 0"
        ),
        &[&now],
    )
    .await?;
    tx.commit().await?;
    let (cut, older_than) = cut(client, retention, now).await?;
    let (mut removed, mut removed_bytes) = (0u64, 0i64);
    // One rule at a time, each walking its own index from where the last
    // slice stopped (past the entries of the rows it removed).
    for (key, upto, bound) in [("seq", "<=", cut), ("started_at", "<", older_than)] {
        if bound == i64::MIN {
            continue;
        }
        let delete = format!(
            "WITH gone AS (DELETE FROM runs WHERE seq IN (
                               SELECT seq FROM runs
                               WHERE {NOT_LIVE} AND {key} >= $3 AND {key} {upto} $2
                               ORDER BY {key} LIMIT {SLICE})
                           RETURNING bytes, {key} AS key)
             SELECT COUNT(*)::BIGINT, COALESCE(SUM(bytes), 0)::BIGINT, MAX(key) FROM gone"
        );
        let mut from = i64::MIN;
        loop {
            let row = client.query_one(&delete, &[&now, &bound, &from]).await?;
            let n: i64 = row.get(0);
            removed += u64::try_from(n).unwrap_or(0);
            removed_bytes += row.get::<_, i64>(1);
            match row.get::<_, Option<i64>>(2) {
                Some(last) if n == SLICE => from = last,
                _ => break,
            }
        }
    }
    // Freeing bytes excludes keeping them (shared there): a new run's
    // attachments wait for this transaction alone.
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_RETENTION])
        .await?;
    let freed = attachments::free(&tx).await?;
    let attachment_bytes = attachments::total(&tx).await?;
    super::responses::prune(&tx, now).await?;
    tx.commit().await?;
    let kept = client
        .query_one(
            "SELECT COUNT(*)::BIGINT, COALESCE(SUM(bytes), 0)::BIGINT FROM runs",
            &[],
        )
        .await?;
    let unsigned = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(Pruned {
        removed,
        removed_bytes: unsigned(removed_bytes) + unsigned(freed),
        kept: unsigned(kept.get(0)),
        kept_bytes: unsigned(kept.get(1)) + unsigned(attachment_bytes),
    })
}

/// Which runs retention removes: those at or below the first value (past
/// `max_runs` newest, or past `max_bytes` counting from the newest), and
/// those started before the second (`max_age`); `i64::MIN` for none. Live
/// runs are never removed, though they count.
async fn cut(client: &Client, retention: &Retention, now: i64) -> Result<(i64, i64), Failure> {
    let max = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let past_count: Option<i64> = client
        .query_opt(
            "SELECT seq FROM runs ORDER BY seq DESC LIMIT 1 OFFSET $1",
            &[&max(retention.max_runs)],
        )
        .await?
        .map(|row| row.get(0));
    // Newest first until the sizes pass the bound, `WALK` runs a read:
    // the walk stops there, so it costs what is kept.
    let mut past_size = None;
    if retention.max_bytes < u64::MAX {
        let owned: HashMap<i64, i64> = client
            .query(attachments::OWNED_BYTES, &[])
            .await?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        let (mut newer, mut below) = (0u64, i64::MAX);
        'walk: loop {
            let rows = client
                .query(
                    &format!(
                        "SELECT seq, bytes FROM runs WHERE seq < $1 ORDER BY seq DESC LIMIT {WALK}"
                    ),
                    &[&below],
                )
                .await?;
            for row in &rows {
                let (seq, bytes): (i64, i64) = (row.get(0), row.get(1));
                let size = bytes + owned.get(&seq).copied().unwrap_or(0);
                newer = newer.saturating_add(u64::try_from(size).unwrap_or(0));
                if newer > retention.max_bytes {
                    past_size = Some(seq);
                    break 'walk;
                }
                below = seq;
            }
            if rows.len() < WALK as usize {
                break;
            }
        }
    }
    let cut = past_count.max(past_size).unwrap_or(i64::MIN);
    let older_than = retention.max_age.map_or(i64::MIN, |age| {
        now.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
    });
    Ok((cut, older_than))
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
