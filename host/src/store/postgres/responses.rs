//! The response cache's index in the PostgreSQL store (schema version 8).

use tokio_postgres::GenericClient;

use super::Failure;
use crate::record::CallRef;
use crate::store::responses::CacheEntry;

/// The entry of `key` that has not expired at `now`.
pub async fn entry(
    client: &impl GenericClient,
    key: &str,
    now: i64,
) -> Result<Option<CallRef>, Failure> {
    let row = client
        .query_opt(
            "SELECT run_id, call_id FROM response_cache WHERE key = $1 AND expires_at > $2",
            &[&key, &now],
        )
        .await?;
    Ok(row.map(|row| CallRef {
        run_id: row.get(0),
        call: u32::try_from(row.get::<_, i64>(1)).unwrap_or(0),
    }))
}

pub async fn put(client: &impl GenericClient, entry: &CacheEntry) -> Result<(), Failure> {
    client
        .execute(
            "INSERT INTO response_cache (key, run_id, call_id, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (key) DO UPDATE SET run_id = excluded.run_id,
                 call_id = excluded.call_id, created_at = excluded.created_at,
                 expires_at = excluded.expires_at",
            &[
                &entry.key,
                &entry.from.run_id,
                &i64::from(entry.from.call),
                &entry.created_at,
                &entry.expires_at,
            ],
        )
        .await?;
    Ok(())
}

/// Removes the entries expired at `now`, and those whose run is gone.
pub async fn prune(client: &impl GenericClient, now: i64) -> Result<u64, Failure> {
    Ok(client
        .execute(
            "DELETE FROM response_cache WHERE expires_at <= $1
                 OR NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = response_cache.run_id)",
            &[&now],
        )
        .await?)
}
