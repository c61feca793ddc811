//! `store::spend` in PostgreSQL: a transaction holding an advisory lock
//! per client, so instances admit one client's runs one at a time (and
//! different clients' at once).

use tokio_postgres::GenericClient;

use super::Failure;
use crate::store::spend::{Ask, Verdict, sum_sql};

/// The advisory locks' first key (`chor`); the second is the client's hash.
const LOCK_SPEND: i32 = 0x6368_6f72;

pub async fn reserve(
    client: &mut deadpool_postgres::Object,
    ask: &Ask,
) -> Result<Verdict, Failure> {
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&LOCK_SPEND, &ask.client],
    )
    .await?;
    tx.execute(
        "DELETE FROM spend WHERE client = $1 AND at < $2",
        &[&ask.client, &ask.forget_before()],
    )
    .await?;
    let mut spent = Vec::with_capacity(ask.periods.len());
    for period in &ask.periods {
        let row = tx
            .query_one(&sum_sql('$'), &[&ask.client, &period.since])
            .await?;
        spent.push(row.get::<_, f64>(0));
    }
    let verdict = ask.judge(spent);
    if matches!(verdict, Verdict::Admitted { .. }) {
        tx.execute(
            "INSERT INTO spend (id, client, at, reserved_usd) VALUES ($1, $2, $3, $4)",
            &[&ask.id, &ask.client, &ask.at, &ask.worst_usd],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(verdict)
}

pub async fn settle(client: &impl GenericClient, id: &str, cost_usd: f64) -> Result<(), Failure> {
    client
        .execute(
            "UPDATE spend SET cost_usd = $2 WHERE id = $1",
            &[&id, &cost_usd],
        )
        .await?;
    Ok(())
}
