//! Limits shared by the instances on one database (`llm::limits::Shared`):
//! a scope's (a provider's) concurrency slots and its requests and tokens
//! per minute, taken under an advisory lock per scope and kind, and its
//! backoff after a 429. Every time is the database's clock, so machines'
//! clocks need not agree. Slots held by an instance whose lease lapsed are
//! freed (deleted) by the next instance that takes some.

use std::time::Duration;

use futures::future::BoxFuture;
use tokio_postgres::GenericClient;

use super::{Failure, LEASE, NOW_MS};
use crate::llm::limits::{BATCH_LIFE, Kind, Shared, Taken};

/// The advisory locks' first key (`lim`); the second is the scope's hash.
const LOCK_LIMITS: i32 = 0x006c_696d;
/// How long a taken amount of requests or tokens counts: a minute after
/// the last moment it may be used (a batch is used within `BATCH_LIFE`).
pub const WINDOW: Duration = Duration::from_millis(60_000 + BATCH_LIFE.as_millis() as u64);

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn amount(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The one row of `instance`'s slots of `scope`.
fn slots_id(scope: &str, instance: &str) -> String {
    format!("concurrency/{scope}/{instance}")
}

/// Takes `want` of `kind` of `scope` for `instance`, and up to `extra`
/// more while they are free, within `limit`; none when `want` is not free.
pub async fn take(
    client: &mut deadpool_postgres::Object,
    instance: &str,
    scope: &str,
    kind: Kind,
    (want, extra, limit): (u64, u64, u64),
) -> Result<Taken, Failure> {
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2 || '/' || $3))",
        &[&LOCK_LIMITS, &scope, &kind.name()],
    )
    .await?;
    let (used, oldest): (i64, Option<i64>) = if kind == Kind::Concurrency {
        tx.execute(
            &format!(
                "DELETE FROM limit_holds WHERE scope = $1 AND kind = 'concurrency'
                   AND instance <> $2
                   AND NOT EXISTS (SELECT 1 FROM instances WHERE instances.id = limit_holds.instance
                                     AND instances.heartbeat_at > {NOW_MS} - {lease})",
                lease = LEASE.as_millis()
            ),
            &[&scope, &instance],
        )
        .await?;
        let row = tx
            .query_one(
                "SELECT COALESCE(SUM(amount), 0)::BIGINT FROM limit_holds
                 WHERE scope = $1 AND kind = 'concurrency'",
                &[&scope],
            )
            .await?;
        (row.get(0), None)
    } else {
        tx.execute(
            &format!(
                "DELETE FROM limit_holds WHERE scope = $1 AND kind = $2 AND at <= {NOW_MS} - $3"
            ),
            &[&scope, &kind.name(), &ms(WINDOW)],
        )
        .await?;
        let row = tx
            .query_one(
                "SELECT COALESCE(SUM(amount), 0)::BIGINT, MIN(at) FROM limit_holds
                 WHERE scope = $1 AND kind = $2",
                &[&scope, &kind.name()],
            )
            .await?;
        (row.get(0), row.get(1))
    };
    let free = amount(limit).saturating_sub(used).max(0);
    let want = amount(want);
    let granted = if free >= want {
        free.min(want.saturating_add(amount(extra)))
    } else {
        0
    };
    let mut hold = String::new();
    if granted > 0 {
        hold = if kind == Kind::Concurrency {
            slots_id(scope, instance)
        } else {
            uuid::Uuid::now_v7().to_string()
        };
        tx.execute(
            &format!(
                "INSERT INTO limit_holds (id, scope, kind, instance, amount, at)
                 VALUES ($1, $2, $3, $4, $5, {NOW_MS})
                 ON CONFLICT (id) DO UPDATE SET amount = limit_holds.amount + excluded.amount"
            ),
            &[&hold, &scope, &kind.name(), &instance, &granted],
        )
        .await?;
    }
    // Not granted: when the oldest amount stops counting (a window), or
    // a short poll (slots come back as requests end).
    let retry_in = match oldest {
        Some(at) if granted == 0 => {
            let now: i64 = tx.query_one(&format!("SELECT {NOW_MS}"), &[]).await?.get(0);
            Duration::from_millis(u64::try_from(at + ms(WINDOW) - now).unwrap_or(0))
        }
        _ => Duration::ZERO,
    };
    let backoff = backoff(&*tx, scope).await?;
    tx.commit().await?;
    Ok(Taken {
        hold,
        granted: u64::try_from(granted).unwrap_or(0),
        retry_in,
        backoff,
    })
}

/// Moves hold `hold` by `by` (negative: gives back), never below zero.
pub async fn adjust(client: &impl GenericClient, hold: &str, by: i64) -> Result<(), Failure> {
    client
        .execute(
            "UPDATE limit_holds SET amount = GREATEST(amount + $2, 0) WHERE id = $1",
            &[&hold, &by],
        )
        .await?;
    Ok(())
}

/// How long `scope` is still backed off.
pub async fn backoff(client: &impl GenericClient, scope: &str) -> Result<Duration, Failure> {
    let row = client
        .query_opt(
            &format!("SELECT GREATEST(until - {NOW_MS}, 0) FROM limit_backoff WHERE scope = $1"),
            &[&scope],
        )
        .await?;
    let left: i64 = row.map_or(0, |r| r.get(0));
    Ok(Duration::from_millis(u64::try_from(left).unwrap_or(0)))
}

/// Backs `scope` off for `wait` from now, unless it already is for longer.
pub async fn back_off(
    client: &impl GenericClient,
    scope: &str,
    wait: Duration,
) -> Result<(), Failure> {
    client
        .execute(
            &format!(
                "INSERT INTO limit_backoff (scope, until) VALUES ($1, {NOW_MS} + $2)
                 ON CONFLICT (scope) DO UPDATE
                 SET until = GREATEST(limit_backoff.until, excluded.until)"
            ),
            &[&scope, &ms(wait)],
        )
        .await?;
    Ok(())
}

/// The instances' shared limits, on the store's runtime and pool.
pub struct SharedLimits {
    pub pool: deadpool_postgres::Pool,
    pub runtime: tokio::runtime::Handle,
    pub instance: String,
    pub shown: String,
}

impl SharedLimits {
    /// Runs `work` on a pooled connection on the store's runtime.
    fn on<T, F>(
        &self,
        work: impl FnOnce(deadpool_postgres::Object) -> F + Send + 'static,
    ) -> BoxFuture<'static, Result<T, String>>
    where
        F: Future<Output = Result<T, Failure>> + Send + 'static,
        T: Send + 'static,
    {
        let pool = self.pool.clone();
        let handle = self.runtime.spawn(async move {
            let client = pool.get().await.map_err(|e| Failure::Pool(e.to_string()))?;
            work(client).await
        });
        let shown = self.shown.clone();
        Box::pin(async move {
            match handle.await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(failure)) => Err(format!("{shown}: {failure}")),
                Err(e) => Err(format!("{shown}: {e}")),
            }
        })
    }
}

impl Shared for SharedLimits {
    fn take(
        &self,
        scope: &str,
        kind: Kind,
        want: u64,
        extra: u64,
        limit: u64,
    ) -> BoxFuture<'static, Result<Taken, String>> {
        let (scope, instance) = (scope.to_owned(), self.instance.clone());
        self.on(move |mut client| async move {
            take(&mut client, &instance, &scope, kind, (want, extra, limit)).await
        })
    }

    fn adjust(&self, hold: &str, by: i64) -> BoxFuture<'static, Result<(), String>> {
        let hold = hold.to_owned();
        self.on(move |client| async move { adjust(&**client, &hold, by).await })
    }

    fn backoff(&self, scope: &str) -> BoxFuture<'static, Result<Duration, String>> {
        let scope = scope.to_owned();
        self.on(move |client| async move { backoff(&**client, &scope).await })
    }

    fn back_off(&self, scope: &str, wait: Duration) -> BoxFuture<'static, Result<(), String>> {
        let scope = scope.to_owned();
        self.on(move |client| async move { back_off(&**client, &scope, wait).await })
    }

    fn describe(&self) -> String {
        self.shown.clone()
    }
}
